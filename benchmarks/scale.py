"""Replay beyond one process, measured side by side in one run (docs/scale.md reads it):
(a) the fixed cost per node of the Ray executor against the local one: a chain of N one-element nodes
    replayed forward on onnxruntime, the reference and oracle served from the cache, (t(N) - t(1)) / (N-1);
(b) ResNet-50 (torchvision, random weights, 2x3x112x112) replayed uncached on torch + onnxruntime in
    fwd, vjp and vjp2 by 1 and by 2 Ray workers (target: 2 workers >= 1.7x as fast as 1), with the
    inputs as regions of the shared bundle file and through Ray's object store, and locally;
(c) a Llama-style model of 1.1B parameters (benchmarks/llama_1b.py; 16 tokens) exported and replayed on
    torch + onnxruntime in fwd, vjp and vjp2 (uncached: its cache would be several times the bundle),
    at a few depths (--full: and at its full 22 layers): the time of each step, the peak RSS of the host
    and of each worker (sampled from /proc, benchmarks/peak_rss.py's wrapper), time and export memory
    fitted linearly in layers and extrapolated to 22 layers (against the full model's, with --full).

    .venv/bin/python benchmarks/scale.py [--parts a,b,c] [--nodes 10000] [--depths 1,2,3] [--full]
"""
import argparse
import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import ray

import irtrace
from fast_replay import MODELS  # benchmarks/fast_replay.py, beside this script
from fixed_cost import chain    # benchmarks/fixed_cost.py
from peak_rss import WRAPPER    # benchmarks/peak_rss.py: runs the CLI sampling every process's peak RSS
from irtrace.export.onnx_bundle import bundle_from_onnx
from irtrace.replay import ReplayOptions
from irtrace.replay.ray_executor import RayExecutor
from irtrace.report.folder import replay_into


def busy():
    """(busy, total) jiffies of this machine's CPUs so far (/proc/stat): every process's, Ray's too."""
    fields = [int(v) for v in open("/proc/stat").readline().split()[1:]]
    return sum(fields) - fields[3] - fields[4], sum(fields)  # idle and iowait are not busy


def seconds(path, out, executor=None, cached=True, **kw):
    """(seconds, the share of the machine's CPUs busy meanwhile) of one replay of `path` (the cache
    emptied first unless `cached`)."""
    if not cached:
        shutil.rmtree(f"{path}.cache", ignore_errors=True)
    b0, t0 = busy()
    t = time.perf_counter()
    replay_into(path, ReplayOptions(executor=executor, cache=cached, **kw), out=out)
    b1, t1 = busy()
    return time.perf_counter() - t, (b1 - b0) / max(1, t1 - t0)


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
        t1, _ = seconds(small, tmp / "a1", make(), **kw)
        tn, _ = seconds(big, tmp / "an", make(), **kw)
        per[name] = (tn - t1) / (n - 1) * 1000
        print(f"    {name:15s} {tn:7.2f} s for {n} nodes, {t1:5.2f} s for 1: {per[name]:.3f} ms per node "
              f"({per[name] / per['local']:.2f}x local)")


def speedup(tmp):
    model, inputs = MODELS["resnet50"]()
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        path = irtrace.export(model, inputs, tmp / "resnet50.irt", train=model.training).path
    kw = dict(backends=("torch", "onnxruntime"), modes=("fwd", "vjp", "vjp2"), cached=False)
    print("(b) ResNet-50 2x3x112x112, torch + onnxruntime, fwd+vjp+vjp2, uncached (first run), on 2 CPUs:")
    runs = {"local, --jobs 1": (None, {}),
            "ray, 1 worker, 1 node in flight": (1, dict(in_flight=1)),
            "ray, 2 workers, 1 node in flight each": (2, dict(in_flight=1)),
            "ray, 1 worker (2 in flight)": (1, {}),
            "ray, 2 workers (2 in flight each)": (2, {}),
            "ray, 2 workers, object store": (2, dict(shared=False))}
    took = {}
    for k, (name, (workers, ray_kw)) in enumerate(runs.items()):
        executor = RayExecutor(workers=workers, **ray_kw) if workers else None
        took[name], cpu = seconds(path, tmp / f"b{k}", executor, **kw)
        print(f"    {name:40s} {took[name]:7.2f} s, CPUs {cpu:4.0%} busy")
    for one, two in [("ray, 1 worker, 1 node in flight", "ray, 2 workers, 1 node in flight each"),
                     ("ray, 1 worker (2 in flight)", "ray, 2 workers (2 in flight each)")]:
        ratio = took[one] / took[two]
        print(f"    {two} vs {one}: {ratio:.2f}x as fast (target >= 1.7x: {'met' if ratio >= 1.7 else 'missed'})")
    print(f"    object store vs shared file: "
          f"{took['ray, 2 workers, object store'] / took['ray, 2 workers (2 in flight each)']:.2f}x the time")


HERE = Path(__file__).resolve().parent


def sampled(argv, tmp, layers=None):
    """(seconds, the host's peak RSS, backend -> its worker's peak RSS, in GB) of `irtrace ARGV` run in a
    fresh process (in benchmarks/, so that llama_1b:build imports), $LLAMA_LAYERS set to `layers`."""
    result = tmp / "rss.json"
    env = {**os.environ, "PYTHONPATH": str(HERE.parent), **({"LLAMA_LAYERS": str(layers)} if layers else {})}
    done = subprocess.run([sys.executable, "-c", WRAPPER, str(result), *map(str, argv)], cwd=HERE, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    got = json.loads(result.read_text()) if result.exists() else {"rc": done.returncode}
    if got["rc"] not in (0, 1):  # 1: a replay with findings, still complete
        raise SystemExit(f"irtrace {argv[0]} failed (rc {got['rc']}):\n{done.stdout[-3000:]}")
    gb = 1024 * 1024
    workers = {}
    for p in got["processes"]:
        if p["name"].startswith("worker "):
            name = p["name"].split()[1].removeprefix("backends.").removesuffix(".worker")
            workers[name] = max(workers.get(name, 0), p["hwm"] / gb)
    host = next(p["hwm"] for p in got["processes"] if p["name"] == "host") / gb
    return got["seconds"], host, workers


def large(tmp, depths, full):
    import llama_1b
    tokens = tmp / "tokens.npz"
    llama_1b.save_tokens(tokens)
    print("(c) Llama-style, hidden 2048, 16 tokens; torch + onnxruntime, fwd+vjp+vjp2, uncached; peak RSS in GB:")
    print(f"    {'layers':>6} {'params':>7} {'nodes':>6} {'bundle':>8} {'export s':>9} {'host':>5} "
          f"{'replay s':>9} {'host':>5}  workers")
    times, peaks = {}, {}
    for layers in [*depths, *([llama_1b.LAYERS] if full else [])]:
        bundle, out = tmp / f"llama{layers}.irt", tmp / f"llama{layers}.replay"
        t_export, host_export, _ = sampled(["export", "llama_1b:build", "--input-file", tokens, "-o", bundle],
                                           tmp, layers)
        size = sum(f.stat().st_size for f in bundle.rglob("*") if f.is_file()) / 1e9
        nodes = len(irtrace.load(bundle).model.graph.node)
        t_replay, host, workers = sampled(["replay", bundle, "--backend", "torch,onnxruntime", "--no-cache",
                                           "-o", out], tmp)
        times[layers], peaks[layers] = t_replay, host_export
        shown = ", ".join(f"{n} {v:.2f}" for n, v in sorted(workers.items()))
        print(f"    {layers:6d} {llama_1b.parameters(layers) / 1e9:6.2f}B {nodes:6d} {size:6.2f}GB {t_export:9.1f} "
              f"{host_export:5.2f} {t_replay:9.1f} {host:5.2f}  {shown}", flush=True)
        shutil.rmtree(bundle)
        shutil.rmtree(out)
    n = llama_1b.LAYERS
    for what, got, unit in (("replay time", times, "s"), ("export peak RSS", peaks, "GB")):
        slope, intercept = np.polyfit(depths, [got[d] for d in depths], 1)
        print(f"    {what} fitted on {','.join(map(str, depths))} layers: {intercept:.1f} {unit} + {slope:.2f} {unit} "
              f"per layer; predicts {intercept + slope * n:.0f} {unit} at {n}"
              + (f", measured {got[n]:.0f} {unit}" if n in got else ""))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--parts", default="a,b,c")
    p.add_argument("--nodes", type=int, default=10000)
    p.add_argument("--depths", default="1,2,3", help="(c): the depths the time is fitted on")
    p.add_argument("--full", action="store_true", help="(c): also the full 22 layers (1.1B parameters)")
    args = p.parse_args()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        with tempfile.TemporaryDirectory() as d:
            if "a" in args.parts:
                fixed_cost(Path(d), args.nodes)
            if "b" in args.parts:
                speedup(Path(d))
            if "c" in args.parts:
                large(Path(d), [int(n) for n in args.depths.split(",")], args.full)
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()
