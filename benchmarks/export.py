"""Time of `irtrace export` vs `torch.onnx.export` alone, per example model, in one run, and how much of
irtrace's export is its gradient check (torch autograd on the module again, in float32 and on a float64
copy, to prove the recorded parameter gradients); then ResNet-50 (torchvision, random weights, eval,
2x3x112x112) against issue 33's targets: time <= 1.3x torch.onnx.export's and peak RSS <= 1.5x, each
measured in a fresh process of its own (the model built and a small export of the same kind run first,
so that imports and registries are not counted; the peak is the process's VmHWM, the whole process's
as a user sees it, and above the RSS it had before the export); then the same as each process's first
export (resnet50-first: what the first call pays counts too, such as torch.onnx's registry of translations,
which torch.onnx.export builds on every call and irtrace once per process). resnet50-steps (not by default):
where an export's seconds go, in this process, after a first ResNet-50 export: torch.onnx inside irtrace, the
recording (of which the value store's writes, with their bytes and rate, large and small apart), the proof of
the parameter gradients, the rest; beside torch.onnx.export alone, and the same bytes written by one loop of
os.pwrite into a fresh file and into the pages of the file before (the page cache's own rate here).

    .venv/bin/python benchmarks/export.py [--parts examples,resnet50,resnet50-first,resnet50-steps] [--repeat 3]
        [--baseline DIR]
"""
import argparse
import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import torch

import irtrace
from irtrace.examples import EXAMPLES


def time_torch_onnx_export(model, inputs):
    """Seconds of torch.onnx.export alone (dynamo, unoptimized: what irtrace export runs), quietly."""
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        t = time.perf_counter()
        torch.onnx.export(model, inputs, dynamo=True, optimize=False)
        return time.perf_counter() - t


class Timed:
    """Wraps a function and adds up the seconds spent in it."""

    def __init__(self, fn):
        self.fn, self.seconds = fn, 0.0

    def __call__(self, *a, **k):
        t = time.perf_counter()
        try:
            return self.fn(*a, **k)
        finally:
            self.seconds += time.perf_counter() - t


# One export in a fresh process: argv[1] "torch.onnx" or "irtrace", argv[2] a folder; prints JSON.
CHILD = """
import contextlib, io, json, sys, time, warnings
import torch
sys.path.insert(0, {here!r})
from fast_replay import resnet50
import irtrace

def status(key):
    return next(int(line.split()[1]) * 1024 for line in open("/proc/self/status") if line.startswith(key + ":"))

def run(kind, model, inputs, out):
    if kind != "torch.onnx":
        irtrace.export(model, inputs, out, force=True)
        return
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        torch.onnx.export(model, inputs, dynamo=True, optimize=False).model_proto

kind, folder, first = sys.argv[1], sys.argv[2], sys.argv[3] == "first"
torch.manual_seed(0)
if not first:
    run(kind, torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4)).eval(),
        (torch.randn(1, 3, 8, 8),), folder + "/warm.irt")
model, inputs = resnet50()
before = status("VmRSS")
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")
t = time.perf_counter()
run(kind, model, inputs, folder + "/resnet50.irt")
print(json.dumps({{"seconds": time.perf_counter() - t, "peak": status("VmHWM"), "before": before}}))
"""


def resnet50_targets(repeat, baseline=None, first=False):
    """ResNet-50's export against torch.onnx.export's, time and peak RSS, each in a fresh process, the kinds
    alternated `repeat` times: the best time and the lowest peak of each (this machine's load moves a
    single run's time by 10-30 %). `baseline`: another checkout's irtrace too, side by side. `first`: the
    process's first export (no small export before it: what set-up each export's first call pays counts,
    torch.onnx's registry of translations, which irtrace builds once per process, among it)."""
    here = str(Path(__file__).resolve().parent)
    runs = {"torch.onnx": [], "irtrace": [], **({"baseline": []} if baseline else {})}
    with tempfile.TemporaryDirectory() as d:
        for _ in range(repeat):
            for kind, done in runs.items():
                code = Path(baseline).resolve() if kind == "baseline" else Path(here).parent  # which irtrace
                env = {**os.environ, "PYTHONPATH": str(code)}
                child = subprocess.run([sys.executable, "-c", CHILD.format(here=here), kind, d,
                                        "first" if first else "warm"], capture_output=True, text=True, env=env,
                                       cwd=d)  # not this folder: `-c` imports from the cwd
                if child.returncode:
                    raise SystemExit(f"{kind} export failed:\n{child.stderr[-3000:]}")
                done.append(json.loads(child.stdout.strip().splitlines()[-1]))
    got = {kind: {k: min(r[k] for r in done) for k in ("seconds", "peak", "before")} for kind, done in runs.items()}
    a, b = got["torch.onnx"], got["irtrace"]
    gb = 1e9
    print(f"ResNet-50 (torchvision, eval, 2x3x112x112), each in a fresh process, "
          f"{'the process' + chr(39) + 's first export' if first else 'after a small export'}, best of {repeat}:")
    print(f"  {'':12} {'seconds':>8} {'peak RSS GB':>12} {'above start GB':>15}   seconds of each run")
    for kind, r in got.items():
        each = " ".join(f"{x['seconds']:.2f}" for x in runs[kind])
        print(f"  {kind:12} {r['seconds']:8.2f} {r['peak'] / gb:12.2f} {(r['peak'] - r['before']) / gb:15.2f}   {each}")
    if baseline:
        c = got["baseline"]
        print(f"  baseline {baseline}: {c['seconds'] / a['seconds']:.2f}x torch.onnx.export's time, "
              f"{c['peak'] / a['peak']:.2f}x its peak; this irtrace / the baseline's: "
              f"{b['seconds'] / c['seconds']:.2f}")
    t_ratio, m_ratio = b["seconds"] / a["seconds"], b["peak"] / a["peak"]
    print(f"  time {t_ratio:.2f}x torch.onnx.export's (target <= 1.3x: {'met' if t_ratio <= 1.3 else 'missed'}); "
          f"peak RSS {m_ratio:.2f}x (target <= 1.5x: {'met' if m_ratio <= 1.5 else 'missed'}); above the start "
          f"{(b['peak'] - b['before']) / max(a['peak'] - a['before'], 1):.2f}x")


def examples():
    from irtrace.export import torch_export
    check = torch_export.check_gradients = Timed(torch_export.check_gradients)
    print(f"{'model':18} {'torch.onnx.export s':>20} {'irtrace export s':>17} {'ratio':>6} {'gradient check s':>17} "
          f"{'share':>6}")
    with tempfile.TemporaryDirectory() as d:
        warm = EXAMPLES["resnet"]  # first calls pay for imports and registry set-up: not measured
        irtrace.export(warm.build(), warm.inputs(), Path(d) / "warm.irt", train=True)
        for name, e in EXAMPLES.items():
            model, inputs = e.build().train(e.train), e.inputs()
            t_onnx = time_torch_onnx_export(model, inputs)
            check.seconds = 0.0
            t = time.perf_counter()
            irtrace.export(e.build(), inputs, Path(d) / f"{name}.irt", train=e.train)
            t_irt = time.perf_counter() - t
            print(f"{name:18} {t_onnx:20.2f} {t_irt:17.2f} {t_irt / t_onnx:6.2f} {check.seconds:17.2f} "
                  f"{check.seconds / t_irt:6.1%}")


def resnet50_steps(repeat):
    """Where the export's seconds go (see the module's docstring), the best of `repeat` exports for each step."""
    import importlib

    import numpy as np
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from fast_replay import resnet50

    from irtrace.store import writer
    te = importlib.import_module("irtrace.export.torch_export")
    steps = {"torch.onnx inside irtrace": (te, "_torch_onnx_export"), "recording": (te, "record"),
             "gradient proof": (te, "check_gradients")}
    timers = {k: Timed(getattr(mod, name)) for k, (mod, name) in steps.items()}
    for k, (mod, name) in steps.items():
        setattr(mod, name, timers[k])
    written = {"large (> 1 MB)": [0, 0.0], "small": [0, 0.0]}
    write_at = writer.ValueWriter._write_at

    def counted(self, offset, data):
        t = time.perf_counter()
        write_at(self, offset, data)
        n = memoryview(data).nbytes
        kind = written["large (> 1 MB)" if n > 1 << 20 else "small"]
        kind[0], kind[1] = kind[0] + n, kind[1] + time.perf_counter() - t
    writer.ValueWriter._write_at = counted
    model, inputs = resnet50()
    best = {}
    with tempfile.TemporaryDirectory() as d:
        irtrace.export(model, inputs, Path(d) / "first.irt")
        for _ in range(repeat):
            for timer in timers.values():
                timer.seconds = 0.0
            for kind in written.values():
                kind[:] = [0, 0.0]
            t = time.perf_counter()
            irtrace.export(model, inputs, Path(d) / "r.irt", force=True)
            got = {"irtrace export": time.perf_counter() - t, **{k: v.seconds for k, v in timers.items()},
                   **{f"writes, {k}": v[1] for k, v in written.items()},
                   "torch.onnx.export alone": time_torch_onnx_export(model, inputs)}
            for k, v in got.items():
                best[k] = min(best.get(k, v), v)
        nbytes = {k: v[0] for k, v in written.items()}
        data = np.random.default_rng(0).integers(0, 255, sum(nbytes.values()), np.uint8)
        for where in ("a fresh file", "the file before's pages"):
            path = Path(d) / "raw.bin"
            if where == "a fresh file":
                path.unlink(missing_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
            t = time.perf_counter()
            for offset in range(0, data.size, 4 << 20):
                os.pwrite(fd, data[offset:offset + (4 << 20)], offset)
            best[f"the same bytes by os.pwrite into {where}"] = time.perf_counter() - t
            os.close(fd)
    print(f"ResNet-50, this process, after a first export, best of {repeat} (seconds):")
    for k, v in best.items():
        n = nbytes.get(k.removeprefix("writes, "), sum(nbytes.values()) if "os.pwrite" in k else None)
        rate = f"   {n / 1e6:6.0f} MB at {n / v / 1e9:.2f} GB/s" if n else ""
        print(f"  {k:52} {v:6.2f}{rate}")
    rest = best["irtrace export"] - sum(best[k] for k in steps)
    print(f"  {'the rest (the module run, the canonical graph, ...)':52} {rest:6.2f}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--parts", default="examples,resnet50,resnet50-first")
    p.add_argument("--repeat", type=int, default=3, help="fresh-process exports of each kind, alternated")
    p.add_argument("--baseline", help="another checkout (git worktree add DIR <commit>): its export too")
    args = p.parse_args()
    parts = args.parts.split(",")
    if "examples" in parts:
        examples()
    if "resnet50" in parts:
        resnet50_targets(args.repeat, args.baseline)
    if "resnet50-first" in parts:
        resnet50_targets(args.repeat, args.baseline, first=True)
    if "resnet50-steps" in parts:
        resnet50_steps(args.repeat)


if __name__ == "__main__":
    main()
