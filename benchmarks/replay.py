"""Replay cost, side by side in one run, on the ResNet-style and StyleGAN2 examples:

1. irtrace forward-only onnxruntime replay (every node alone) vs torch.onnx's
   verify_onnx_program(compare_intermediates=True) (its VerificationInterpreter) on the same model;
2. irtrace torch fwd+vjp+vjp2 replay vs the model's own torch forward + backward + double backward;
3. irtrace megengine fwd+vjp+vjp2 replay of the ResNet-style example vs the same network written
   directly in MegEngine (benchmarks/mge_resnet_native.py) running forward + backward + double backward;
4. peak RSS of this process and of the largest worker.

    .venv/bin/python benchmarks/replay.py
"""
import contextlib
import io
import resource
import tempfile
import time
import warnings
from pathlib import Path

import torch
import torch.onnx.verification

import irtrace
from irtrace.examples import EXAMPLES
from irtrace.replay import ReplayOptions, run


def model_fwd_bwd_double(model, inputs):
    """The model's own forward, backward and double backward (a gradient penalty on the inputs)."""
    xs = [x.detach().clone().requires_grad_(x.dtype.is_floating_point) for x in inputs]
    params = [p for p in model.parameters() if p.requires_grad]
    t = time.perf_counter()
    y = model(*xs)
    c = torch.randn_like(y)
    loss = (y * c).sum()
    grads = torch.autograd.grad(loss, [x for x in xs if x.requires_grad] + params, create_graph=True)
    penalty = sum((g * g).sum() for g in grads)
    penalty.backward()
    return time.perf_counter() - t


def verification_interpreter(model, inputs):
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        program = torch.onnx.export(model, inputs, dynamo=True, optimize=False)
        t = time.perf_counter()
        torch.onnx.verification.verify_onnx_program(program, compare_intermediates=True)
        return time.perf_counter() - t


def main():
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for name in ("resnet", "stylegan2"):
            e = EXAMPLES[name]
            bundle = irtrace.export(e.build(), e.inputs(), Path(d) / f"{name}.irt", train=e.train)
            run(bundle, ReplayOptions(["onnxruntime"], modes=["fwd"], verify_workarounds=False)).replay  # warm: worker start, imports
            t = time.perf_counter()
            run(bundle, ReplayOptions(["onnxruntime"], modes=["fwd"], verify_workarounds=False)).replay
            t_ort = time.perf_counter() - t
            t_verify = verification_interpreter(e.build(), e.inputs())
            t = time.perf_counter()
            run(bundle, ReplayOptions(["torch"], modes=["fwd", "vjp", "vjp2"], verify_workarounds=False)).replay
            t_torch = time.perf_counter() - t
            model = e.build()
            model_fwd_bwd_double(model, e.inputs())  # warm
            t_model = min(model_fwd_bwd_double(model, e.inputs()) for _ in range(3))
            rows.append((name, len(bundle.model.graph.node), t_ort, t_verify, t_torch, t_model))
    print(f"{'model':10} {'nodes':>5} {'ORT fwd replay s':>17} {'verify_onnx_program s':>22} {'ratio':>6}   "
          f"{'torch fwd+vjp+vjp2 replay s':>28} {'model fwd+bwd+2nd s':>20} {'ratio':>7}")
    for name, n, t_ort, t_verify, t_torch, t_model in rows:
        print(f"{name:10} {n:5d} {t_ort:17.2f} {t_verify:22.2f} {t_ort / t_verify:6.2f}   "
              f"{t_torch:28.2f} {t_model:20.4f} {t_torch / t_model:7.0f}")
    from irtrace.replay import backends
    if backends.get("megengine").unavailable() is None:
        import subprocess
        with tempfile.TemporaryDirectory() as d:
            e = EXAMPLES["resnet"]
            bundle = irtrace.export(e.build(), e.inputs(), Path(d) / "resnet.irt", train=True)
            t = time.perf_counter()
            run(bundle, ReplayOptions(["megengine"], modes=["fwd", "vjp", "vjp2"], verify_workarounds=False)).replay
            t_mge = time.perf_counter() - t
            t = time.perf_counter()  # again: torch's and float64's answers now come from the cache
            run(bundle, ReplayOptions(["megengine"], modes=["fwd", "vjp", "vjp2"], verify_workarounds=False)).replay
            t_mge_cached = time.perf_counter() - t
        exe = backends.get("megengine").interpreter()
        r = subprocess.run([exe, str(Path(__file__).with_name("mge_resnet_native.py"))], capture_output=True,
                           text=True, env={**__import__("os").environ, "MEGENGINE_LOGGING_LEVEL": "ERROR"})
        t_native = float(r.stdout.strip().splitlines()[-1])
        print(f"resnet on megengine: irtrace fwd+vjp+vjp2 replay {t_mge:.2f} s (first run; {t_mge_cached:.2f} s "
              f"with torch's and float64's answers cached), native MegEngine fwd+bwd+double-bwd {t_native:.4f} s, "
              f"ratio {t_mge / t_native:.0f} ({t_mge_cached / t_native:.0f} cached)")
    else:
        print(f"megengine unavailable: {backends.get('megengine').unavailable()}")
    self_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    child_rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"peak RSS: host {self_rss:.0f} MB, largest worker {child_rss:.0f} MB")


if __name__ == "__main__":
    main()
