"""The first (uncached) replay (default: torch in fwd+vjp+vjp2) with --jobs 1 and --jobs 2, side by side in one run,
on ResNet-50 (torchvision, random weights, 2x3x112x112) and the StyleGAN2 example: the float64
oracle's compute, spread over one or two worker sets; and what --jobs auto picks for each. Also the
same first run with --no-cache: what keeping the answers costs it (written behind, by a thread of
the cache's own); and the model's own forward + backward + double backward in float32 and in float64
(the oracle's precision; this machine's threads), the floor issue 33's "<= 10x" is measured against.

--baseline DIR: instead, the default first replay (`irtrace replay`, --jobs auto) by this irtrace and by the one of
another checkout (e.g. `git worktree add DIR <commit>`), each in a fresh process from an empty cache, alternating
--repeat times: the fastest of each, its CPU seconds (the whole machine's, read from /proc/stat: a worker forked
by a server is no child the host waits for) and the ratio, with the verdicts of both.

--keep-warm: instead, this irtrace's default first replay with `--keep-warm` (the servers kept warm by a replay
before, not timed: the reference's and the oracle's torch imported) against the same without it, alternating.

    .venv/bin/python benchmarks/first_run.py [--models resnet50,stylegan2] [--backend torch] [--modes fwd,vjp,vjp2]
                                             [--baseline DIR [--repeat 3]] [--keep-warm [--repeat 3]]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from fast_replay import MODELS, export_quietly, own_double_backward  # benchmarks/fast_replay.py, beside this script
from irtrace.replay import ReplayOptions
from irtrace.replay.api import auto_jobs
from irtrace.report.folder import replay_into


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--models", default="resnet50,stylegan2")
    p.add_argument("--backend", default="torch")
    p.add_argument("--modes", default="fwd,vjp,vjp2")
    p.add_argument("--baseline", metavar="DIR", help="a checkout of another commit, replayed side by side")
    p.add_argument("--repeat", type=int, default=3, help="with --baseline: runs of each (the fastest is shown)")
    p.add_argument("--keep-warm", action="store_true", help="this irtrace with --keep-warm's servers against without")
    args = p.parse_args()
    if args.baseline or args.keep_warm:
        return side_by_side(args)
    print(f"--backend {args.backend} --modes {args.modes}, nothing cached:")
    threads = torch.get_num_threads()
    print(f"{'model':10} {'--jobs 1 s':>11} {'--jobs 2 s':>11} {'ratio':>6} {'auto picks':>11} "
          f"{'--no-cache s':>13} {'cache costs':>12} {'own f32 s':>10} {'own f64 s':>10} {'best/own f32':>13}")
    for name in args.models.split(","):
        model, inputs = MODELS[name]()
        torch.set_num_threads(threads)
        own32 = own_double_backward(model, inputs)
        own64 = own_double_backward(model.double(), tuple(x.double() if x.is_floating_point() else x for x in inputs))
        model.float()
        torch.set_num_threads(1)
        with tempfile.TemporaryDirectory() as d:
            bundle = export_quietly(model, inputs, Path(d) / f"{name}.irt")
            times = []
            for jobs in (1, 2):
                shutil.rmtree(f"{bundle.path}.cache", ignore_errors=True)  # uncached: a first run
                t = time.perf_counter()
                replay_into(bundle.path, ReplayOptions.parse(args.backend, args.modes, jobs=jobs),
                            out=Path(d) / f"jobs{jobs}")
                times.append(time.perf_counter() - t)
            auto = auto_jobs(bundle, (args.backend,), cache=False, modes=args.modes.split(","))  # for this first run
            t = time.perf_counter()
            replay_into(bundle.path, ReplayOptions.parse(args.backend, args.modes, cache=False, jobs=1),
                        out=Path(d) / "nocache")
            bare = time.perf_counter() - t
        print(f"{name:10} {times[0]:11.2f} {times[1]:11.2f} {times[1] / times[0]:6.2f} {auto:11d} "
              f"{bare:13.2f} {times[0] / bare:11.2f}x {own32:10.3f} {own64:10.3f} {min(times) / own32:13.1f}")


def machine_busy():
    """CPU seconds this machine has spent (every process; the machine otherwise idle)."""
    v = [int(x) for x in open("/proc/stat").readline().split()[1:]]
    return (sum(v) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")


def cli_replay(bundle, args, out, code, extra=()):
    """(seconds, CPU seconds, summary) of one `irtrace replay` of `bundle` by the irtrace in `code`, in a fresh process
    run outside the checkout (`python -m` would import the working directory's irtrace first)."""
    cmd = [sys.executable, "-m", "irtrace", "replay", str(bundle), "--backend", args.backend, "--modes", args.modes,
           "-o", str(out), "--format", "json", *extra]
    busy, t = machine_busy(), time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(code)),
                          cwd=Path(bundle).parent)
    seconds, cpu = time.perf_counter() - t, machine_busy() - busy
    if done.returncode not in (0, 1):
        sys.exit(f"{' '.join(cmd)} exited {done.returncode}: {done.stderr.strip()[-2000:]}")
    return seconds, cpu, json.loads(done.stdout)["summary"]


def side_by_side(args):
    this = Path(__file__).resolve().parents[1]
    kept = ("--keep-warm", "10m")
    codes = {"baseline": (Path(args.baseline).resolve(), ()) if args.baseline else (this, kept), "this": (this, ())}
    if args.keep_warm:  # this run's own servers, stopped at its end
        os.environ["IRTRACE_SERVERS"] = tempfile.mkdtemp(prefix="irtrace-servers-")
    try:
        _side_by_side(args, codes)
    finally:
        from irtrace.replay import forkserver
        for path, pid in forkserver.running() if args.keep_warm else ():
            forkserver.stop(path, pid)


def _side_by_side(args, codes):
    base = "kept" if args.keep_warm else "baseline"
    print(f"--backend {args.backend} --modes {args.modes} (--jobs auto), nothing cached, fastest of {args.repeat}"
          + (" (kept: with --keep-warm, its servers started by a replay before)" if args.keep_warm else "") + ":")
    print(f"{'model':10} {'this s':>7} {'CPU s':>6} {base + ' s':>11} {'CPU s':>6} {'ratio':>6}  verdicts")
    for name in args.models.split(","):
        model, inputs = MODELS[name]()
        torch.set_num_threads(1)
        with tempfile.TemporaryDirectory() as d:
            bundle = export_quietly(model, inputs, Path(d) / f"{name}.irt")
            best = {}
            if args.keep_warm:  # the servers started (not timed)
                cli_replay(bundle.path, args, Path(d) / "warming", *codes["baseline"])
            for _ in range(args.repeat):
                for which, (code, extra) in codes.items():
                    shutil.rmtree(f"{bundle.path}.cache", ignore_errors=True)  # uncached: a first run
                    run = cli_replay(bundle.path, args, Path(d) / which, code, extra)
                    best[which] = min(best.get(which, run), run, key=lambda r: r[0])
        (s, c, mine), (bs, bc, theirs) = best["this"], best["baseline"]
        same = "the same" if mine == theirs else f"DIFFER: {mine} / {theirs}"
        print(f"{name:10} {s:7.2f} {c:6.1f} {bs:11.2f} {bc:6.1f} {s / bs:6.2f}  {same}")


if __name__ == "__main__":
    main()
