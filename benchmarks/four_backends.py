"""Issue 33's four-framework target, measured side by side in one run: a ~300-node model (torchvision's
EfficientNet-B0, random weights, train mode, 2x3x64x64) replayed in fwd, vjp and vjp2 on MegEngine,
Paddle, OneFlow and TensorFlow together, through the real CLI (what a user waits for after each change
of a port): the first replay (nothing cached: torch's answers and the float64 oracle's computed too)
against its target of 60 s, and the second (the reference's and oracle's answers read from
BUNDLE.cache/) against 20 s. Also each backend alone, cached, to say where the second replay's time goes.

    .venv/bin/python benchmarks/four_backends.py [--jobs 1] [--backends megengine,paddle,oneflow,tensorflow]
"""
import argparse
import contextlib
import io
import json
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import torch

import irtrace

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
TARGETS = {"first": 60.0, "second": 20.0}


def efficientnet_b0():
    from irtrace.export.thirdparty import make_torchvision_importable  # torchvision's CUDA-only C ops
    make_torchvision_importable()
    import torchvision
    torch.manual_seed(0)
    model = torchvision.models.efficientnet_b0(weights=None, num_classes=10).train()
    return model, (torch.randn(2, 3, 64, 64, generator=torch.Generator().manual_seed(0)),)


def replay(bundle, backends, out, jobs):
    """Seconds of one `irtrace replay` in a fresh process, and its summary (the counts per verdict)."""
    cmd = [sys.executable, "-m", "irtrace", "replay", str(bundle), "--backend", backends, "--modes", "fwd,vjp,vjp2",
           "-o", str(out), "--jobs", str(jobs), "--format", "json"]
    t = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True)
    seconds = time.perf_counter() - t
    if done.returncode not in (0, 1):
        sys.exit(f"{' '.join(cmd)} exited {done.returncode}: {done.stderr.strip()[-2000:]}")
    return seconds, json.loads(done.stdout).get("summary")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--backends", default="megengine,paddle,oneflow,tensorflow")
    p.add_argument("--jobs", default="1")
    p.add_argument("--alone", action=argparse.BooleanOptionalAction, default=True,
                   help="also each backend alone, cached")
    args = p.parse_args()
    model, inputs = efficientnet_b0()
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "efficientnet_b0.irt"
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            bundle = irtrace.export(model, inputs, path, train=True)
        print(f"EfficientNet-B0, train, 2x3x64x64: {len(bundle.model.graph.node)} nodes; "
              f"--backend {args.backends} --modes fwd,vjp,vjp2 --jobs {args.jobs}")
        shutil.rmtree(f"{path}.cache", ignore_errors=True)
        first, summary = replay(path, args.backends, Path(d) / "first", args.jobs)
        second, again = replay(path, args.backends, Path(d) / "second", args.jobs)
        same = "same verdicts" if summary == again else f"verdicts differ: {summary} vs {again}"
        print(f"{'replay':8} {'seconds':>8} {'target':>7} {'ratio':>6}")
        for name, s in (("first", first), ("second", second)):
            print(f"{name:8} {s:8.1f} {TARGETS[name]:7.0f} {s / TARGETS[name]:6.2f}")
        print(f"({same})")
        if args.alone:
            print("each backend alone, cached:")
            for b in args.backends.split(","):
                s, _ = replay(path, b, Path(d) / b, args.jobs)
                print(f"  {b:11} {s:6.1f} s")


if __name__ == "__main__":
    main()
