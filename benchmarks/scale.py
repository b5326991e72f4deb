"""Replay beyond one process, measured side by side in one run (docs/scale.md reads it):
(a) the fixed cost per node of the Ray executor against the local one: a chain of N one-element nodes
    replayed forward on onnxruntime, the reference and oracle served from the cache, (t(N) - t(1)) / (N-1);
(b) ResNet-50 (torchvision, random weights, 2x3x112x112) replayed uncached on torch + onnxruntime in
    fwd, vjp and vjp2 by 1 and by 2 Ray workers (target: 2 workers >= 1.7x as fast as 1), with the
    inputs as regions of the shared bundle file and through Ray's object store, and locally.

    .venv/bin/python benchmarks/scale.py [--parts a,b] [--nodes 10000]
"""
import argparse
import contextlib
import io
import shutil
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import ray

import irtrace
from fast_replay import MODELS  # benchmarks/fast_replay.py, beside this script
from fixed_cost import chain    # benchmarks/fixed_cost.py
from irtrace.export.onnx_bundle import bundle_from_onnx
from irtrace.replay import ReplayOptions
from irtrace.replay.ray_executor import RayExecutor
from irtrace.report.folder import replay_into


def seconds(path, out, executor=None, cached=True, **kw):
    """Seconds of one replay of `path` (the cache emptied first unless `cached`)."""
    if not cached:
        shutil.rmtree(f"{path}.cache", ignore_errors=True)
    t = time.perf_counter()
    replay_into(path, ReplayOptions(executor=executor, cache=cached or False, **kw), out=out)
    return time.perf_counter() - t


def fixed_cost(tmp, n):
    x = {"x": np.array([0.5], np.float32)}
    small = bundle_from_onnx(chain(1), x, tmp / "one.irt", name="one").path
    big = bundle_from_onnx(chain(n), x, tmp / "many.irt", name="many").path
    kw = dict(backends=("onnxruntime",), modes=("fwd",))
    for path in (small, big):
        seconds(path, tmp / "fill", **kw)  # the reference's and oracle's answers cached
    print(f"(a) fixed cost per node, {n} one-element nodes, onnxruntime fwd, reference and oracle cached:")
    per = {}
    for name, make in [("local", lambda: None), ("ray, 1 worker", lambda: RayExecutor(workers=1)),
                       ("ray, 2 workers", lambda: RayExecutor(workers=2))]:
        t1 = seconds(small, tmp / "a1", make(), **kw)
        tn = seconds(big, tmp / "an", make(), **kw)
        per[name] = (tn - t1) / (n - 1) * 1000
        print(f"    {name:15s} {tn:7.2f} s for {n} nodes, {t1:5.2f} s for 1: {per[name]:.3f} ms per node "
              f"({per[name] / per['local']:.2f}x local)")


def speedup(tmp):
    model, inputs = MODELS["resnet50"]()
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        path = irtrace.export(model, inputs, tmp / "resnet50.irt", train=model.training).path
    kw = dict(backends=("torch", "onnxruntime"), modes=("fwd", "vjp", "vjp2"), cached=False)
    print("(b) ResNet-50 2x3x112x112, torch + onnxruntime, fwd+vjp+vjp2, uncached (first run):")
    runs = {"local, --jobs 1": seconds(path, tmp / "b0", **kw),
            "ray, 1 worker": seconds(path, tmp / "b1", RayExecutor(workers=1), **kw),
            "ray, 2 workers": seconds(path, tmp / "b2", RayExecutor(workers=2), **kw),
            "ray, 2 workers, object store": seconds(path, tmp / "b3", RayExecutor(workers=2, shared=False), **kw)}
    for name, t in runs.items():
        print(f"    {name:30s} {t:7.2f} s")
    ratio = runs["ray, 1 worker"] / runs["ray, 2 workers"]
    print(f"    2 Ray workers vs 1: {ratio:.2f}x as fast (target >= 1.7x: {'met' if ratio >= 1.7 else 'missed'}); "
          f"object store vs shared file: {runs['ray, 2 workers, object store'] / runs['ray, 2 workers']:.2f}x the time")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--parts", default="a,b")
    p.add_argument("--nodes", type=int, default=10000)
    args = p.parse_args()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        with tempfile.TemporaryDirectory() as d:
            if "a" in args.parts:
                fixed_cost(Path(d), args.nodes)
            if "b" in args.parts:
                speedup(Path(d))
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()
