"""Issue 12's targets, measured side by side in one run on torchvision's ResNet-50 (random weights,
eval mode, 2x3x112x112) and the StyleGAN2 example; prints each figure against its target.

P1  irtrace torch fwd+vjp+vjp2 replay of every node / the model's own forward + backward + double
    backward (target <= 1.5, with the reference and oracle cached; the uncached first run too). torch
    is the reference: cached, its rows (judged against float64) are read too; the row "judged again"
    has only the answers cached (what every other backend's cached replay pays for its comparisons)
P2  irtrace onnxruntime forward replay of every node / one plain onnxruntime run of the model
    (target <= 2, reference and oracle cached); also without the start-up: (the replay of every
    node - the replay of one node) / the plain run
P3  irtrace export / torch.onnx.export alone (target <= 1.5); bundle size / (weights + recorded
    values) (target <= 1.1)
Every irtrace time includes starting its worker processes.

    .venv/bin/python benchmarks/fast_replay.py [--models resnet50,stylegan2]
"""
import argparse
import contextlib
import io
import re
import shutil
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import torch

import irtrace
from irtrace.replay import ReplayOptions
from irtrace.report.folder import replay_into
from export import time_torch_onnx_export  # benchmarks/export.py, beside this script

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))


def resnet50():
    from irtrace.export.thirdparty import make_torchvision_importable  # torchvision's CUDA-only C ops
    make_torchvision_importable()
    import torchvision
    torch.manual_seed(0)
    return torchvision.models.resnet50(weights=None).eval(), (torch.randn(2, 3, 112, 112,
                                                                          generator=torch.Generator().manual_seed(0)),)


def stylegan2():
    from irtrace.examples import EXAMPLES
    e = EXAMPLES["stylegan2"]
    return e.build().train(e.train), e.inputs()


MODELS = {"resnet50": resnet50, "stylegan2": stylegan2}


def export_quietly(model, inputs, path):
    """irtrace.export of a benchmark model, its warnings and progress lines left out."""
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        return irtrace.export(model, inputs, path, train=model.training)


def best(fn, repeat=3):
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def own_double_backward(model, inputs):
    """The model's own forward + backward + double backward (a gradient penalty on the inputs)."""
    xs = [x.detach().clone().requires_grad_(x.is_floating_point()) for x in inputs]
    diff = [x for x in xs if x.requires_grad]

    def run():
        y = model(*xs)
        ys = [t for t in (y if isinstance(y, (tuple, list)) else (y,)) if t.is_floating_point()]
        loss = sum((t * torch.ones_like(t)).sum() for t in ys)
        grads = torch.autograd.grad(loss, diff, create_graph=True)
        penalty = sum((g * g).sum() for g in grads)
        penalty.backward()
    run()  # warm-up
    return best(run)


def plain_onnxruntime(bundle, inputs):
    import onnxruntime as ort
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # as irtrace runs each node
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(str(Path(bundle.path) / "graph.onnx"), options, providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    feed = {n: np.asarray(bundle.values[n]) for n in names}
    session.run(None, feed)
    return best(lambda: session.run(None, feed))


def replay_time(bundle, backends, modes, out, nodes=None):
    t = time.perf_counter()
    replay_into(bundle.path, ReplayOptions.parse(backends, modes, nodes=nodes), out=out)
    return time.perf_counter() - t


def row(figure, what, value, target):
    verdict = "met" if value <= target else f"MISSED by {value / target:.1f}x"
    print(f"{figure:3} {what:58} {value:9.2f}  target <= {target:<4g} {verdict}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--models", default="resnet50,stylegan2")
    args = p.parse_args()
    torch.set_num_threads(1)  # the workers run one thread each
    for name in args.models.split(","):
        model, inputs = MODELS[name]()
        with tempfile.TemporaryDirectory() as d:
            t_onnx = time_torch_onnx_export(model, inputs)
            with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
                warnings.simplefilter("ignore")
                t = time.perf_counter()
                bundle = irtrace.export(model, inputs, Path(d) / f"{name}.irt", train=model.training)
                t_export = time.perf_counter() - t
            size = sum(f.stat().st_size for f in Path(bundle.path).iterdir())
            state = model.state_dict()
            weights = sum(p.numel() * p.element_size() for p in state.values())
            # recorded values other than the weights (the value store holds both)
            recorded = sum(np.asarray(bundle.values[k]).nbytes for k in bundle.values if k not in state)
            own = own_double_backward(model, inputs)
            cold = replay_time(bundle, "torch", "fwd,vjp,vjp2", Path(d) / "cold")
            warm = replay_time(bundle, "torch", "fwd,vjp,vjp2", Path(d) / "warm")
            for judged in Path(f"{bundle.path}.cache").glob("*.json"):
                judged.unlink()
            rejudged = replay_time(bundle, "torch", "fwd,vjp,vjp2", Path(d) / "rejudged")
            ort_plain = plain_onnxruntime(bundle, inputs)
            ort_replay = replay_time(bundle, "onnxruntime", "fwd", Path(d) / "ort")
            first = bundle.model.graph.node[0].name
            ort_one = replay_time(bundle, "onnxruntime", "fwd", Path(d) / "ort1", nodes=f"^{re.escape(first)}$")
            shutil.rmtree(Path(d) / f"{name}.irt.cache", ignore_errors=True)
        nodes = len(bundle.model.graph.node)
        print(f"\n{name}: {nodes} nodes; own fwd+bwd+bwd2 {own:.3f} s; irtrace torch replay {cold:.2f} s uncached, "
              f"{warm:.2f} s cached ({rejudged:.2f} s judged again); plain onnxruntime run {ort_plain:.4f} s, irtrace onnxruntime replay "
              f"{ort_replay:.2f} s ({ort_one:.2f} s for one node); torch.onnx.export {t_onnx:.2f} s, irtrace "
              f"export {t_export:.2f} s; bundle "
              f"{size / 1e6:.1f} MB, weights {weights / 1e6:.1f} MB + recorded values {recorded / 1e6:.1f} MB")
        row("P1", f"{name} torch replay (cached, rows too) / own fwd+bwd+bwd2", warm / own, 1.5)
        row("P1", f"{name} torch replay (answers cached, judged again) / own", rejudged / own, 1.5)
        row("P1", f"{name} torch replay (first run, uncached) / own", cold / own, 1.5)
        row("P2", f"{name} onnxruntime replay / one plain onnxruntime run", ort_replay / ort_plain, 2)
        row("P2", f"{name} (onnxruntime replay - 1-node replay) / plain run", (ort_replay - ort_one) / ort_plain, 2)
        row("P3", f"{name} irtrace export / torch.onnx.export", t_export / t_onnx, 1.5)
        row("P3", f"{name} bundle size / (weights + recorded values)", size / (weights + recorded), 1.1)


if __name__ == "__main__":
    main()
