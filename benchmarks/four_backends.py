"""Issue 33's four-framework target, measured side by side in one run: a ~300-node model (torchvision's
EfficientNet-B0, random weights, train mode, 2x3x64x64) replayed in fwd, vjp and vjp2 on MegEngine,
Paddle, OneFlow and TensorFlow together, through the real CLI (what a user waits for after each change
of a port): the first replay (nothing cached: torch's answers and the float64 oracle's computed too)
against its target of 60 s, and the second (the reference's and oracle's answers read from
BUNDLE.cache/) against 20 s; each with the CPU seconds of every process it ran (host and workers). Also
each backend alone, cached, to say where the second replay's time goes.

--baseline DIR: the same replays by the irtrace of another checkout (e.g. `git worktree add DIR <commit>`),
alternating with this one's, each first replay from an empty cache: the ratio of the two side by side.

--keep-warm: this irtrace's first and second replays again, from an empty cache, each with `--keep-warm` (what a
user with IRTRACE_KEEP_WARM set waits for): the first starts each backend's fork server (its framework imported
once, kept running), the second forks its workers from them. Their CPU seconds include the servers' and their
workers' (read from /proc: the servers are not this script's children).

    .venv/bin/python benchmarks/four_backends.py [--baseline DIR] [--repeat 2] [--jobs 1] [--no-alone] [--keep-warm]
"""
import argparse
import contextlib
import io
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import torch

import irtrace
import worker_start  # benchmarks/worker_start.py, beside this script
from irtrace.replay import backends as registry

ROOT = Path(__file__).resolve().parents[1]
TARGETS = {"first": 60.0, "second": 20.0}
KEPT = " kept"  # a replay's name with --keep-warm


def efficientnet_b0():
    from irtrace.export.thirdparty import make_torchvision_importable  # torchvision's CUDA-only C ops
    make_torchvision_importable()
    import torchvision
    torch.manual_seed(0)
    model = torchvision.models.efficientnet_b0(weights=None, num_classes=10).train()
    return model, (torch.randn(2, 3, 64, 64, generator=torch.Generator().manual_seed(0)),)


def servers_cpu():
    """CPU seconds of the kept fork servers running now (IRTRACE_SERVERS), and of their workers that have ended."""
    from irtrace.replay import forkserver
    total = 0.0
    for _, pid in forkserver.running():
        try:
            fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += sum(int(v) for v in fields[11:15]) / os.sysconf("SC_CLK_TCK")  # utime stime cutime cstime
    return total


def replay(bundle, backends, out, jobs, code=None, keep=False):
    """(seconds, CPU seconds of it and its children, summary) of one `irtrace replay` in a fresh process,
    by the irtrace in `code` (a checkout; default this one); `keep`: with --keep-warm (the CPU seconds of the
    kept servers too)."""
    cmd = [sys.executable, "-m", "irtrace", "replay", str(bundle), "--backend", backends, "--modes", "fwd,vjp,vjp2",
           "-o", str(out), "--jobs", str(jobs), "--format", "json"] + (["--keep-warm", "10m"] if keep else [])
    # PYTHONPATH comes before the editable install; run from the bundle's folder: `python -m` puts the working
    # directory first on sys.path, and from a checkout it would import that checkout's irtrace whatever PYTHONPATH says
    env = dict(os.environ, PYTHONPATH=str(code or ROOT))
    before, kept = resource.getrusage(resource.RUSAGE_CHILDREN), servers_cpu() if keep else 0.0
    t = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=Path(bundle).parent)
    seconds = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0, 1):
        sys.exit(f"{' '.join(cmd)} exited {done.returncode}: {done.stderr.strip()[-2000:]}")
    if keep:
        time.sleep(0.1)  # the servers reap the workers that ended (their exit is told within 10 ms)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime + (servers_cpu() - kept if keep else 0)
    return seconds, cpu, json.loads(done.stdout).get("summary")


def start(backend):
    """(seconds, CPU seconds) of starting `backend`'s worker as a replay does, a plain process importing its
    framework up to its hello (benchmarks/worker_start.py's start, the one after a first not counted)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    (seconds,), _ = worker_start._starts(registry.get(backend), 1, forked=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return seconds, (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) / 2  # two starts ran


def both(path, args, d):
    """{(replay, code): (seconds, cpu, summary)}, the fastest of --repeat: the first replay from an empty cache
    and the second, by the baseline's irtrace (with --baseline) and this one, alternating (their cached answers
    are keyed by their code; this machine's speed drifts by 20-30 % within minutes)."""
    # the baseline first: the cache this irtrace filled is the one the replays of each backend alone read after
    codes = ([("baseline", Path(args.baseline).resolve())] if args.baseline else []) + [("this", None)]
    got = {}
    for _ in range(args.repeat):
        for name, code in codes:
            for keep in (False, True) if args.keep_warm and code is None else (False,):
                shutil.rmtree(f"{path}.cache", ignore_errors=True)
                for which in ("first", "second"):
                    label = which + (KEPT if keep else "")
                    run = replay(path, args.backends, Path(d) / f"{which}-{name}-{keep}", args.jobs, code, keep)
                    if (label, name) not in got or run[0] < got[label, name][0]:
                        got[label, name] = run
                stop_servers()  # the next round's first replay starts them again
    order = ("first", "second", "first" + KEPT, "second" + KEPT)
    return {k: got[k] for k in sorted(got, key=lambda k: (order.index(k[0]), k[1] != "this"))}


def stop_servers():
    from irtrace.replay import forkserver
    for path, pid in forkserver.running():
        forkserver.stop(path, pid)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--backends", default="megengine,paddle,oneflow,tensorflow")
    p.add_argument("--jobs", default="1")
    p.add_argument("--baseline", metavar="DIR", help="a checkout of another commit, replayed side by side")
    p.add_argument("--repeat", type=int, default=2, help="runs of each replay (the fastest is shown)")
    p.add_argument("--alone", action=argparse.BooleanOptionalAction, default=True,
                   help="also each backend alone, cached")
    p.add_argument("--keep-warm", action="store_true",
                   help="also this irtrace's first and second replays with --keep-warm, from an empty cache")
    args = p.parse_args()
    model, inputs = efficientnet_b0()
    with tempfile.TemporaryDirectory() as d:
        os.environ["IRTRACE_SERVERS"] = str(Path(d) / "servers")  # this run's own kept servers (stopped at its end)
        path = Path(d) / "efficientnet_b0.irt"
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            bundle = irtrace.export(model, inputs, path, train=True)
        print(f"EfficientNet-B0, train, 2x3x64x64: {len(bundle.model.graph.node)} nodes; "
              f"--backend {args.backends} --modes fwd,vjp,vjp2 --jobs {args.jobs}")
        try:
            got = both(path, args, d)
        finally:
            stop_servers()
        print(f"{'replay':12} {'code':9} {'seconds':>8} {'CPU s':>6} {'target':>7} {'ratio':>6}"
              + (f" {'/ baseline':>10}" if args.baseline else ""))
        for (which, name), (s, cpu, summary) in got.items():
            versus = f" {s / got[which, 'baseline'][0]:10.2f}" if args.baseline and (which, "baseline") in got else ""
            target = TARGETS[which.removesuffix(KEPT)]
            print(f"{which:12} {name:9} {s:8.1f} {cpu:6.1f} {target:7.0f} {s / target:6.2f}{versus}")
        summaries = {json.dumps(v[2], sort_keys=True) for v in got.values()}
        print("(the same verdicts in every replay)" if len(summaries) == 1 else f"(verdicts differ: {summaries})")
        if args.alone:
            print("each backend alone, cached (seconds, CPU seconds), and its worker's start alone (importing "
                  "the framework; seconds, CPU seconds):")
            for b in args.backends.split(","):
                s, cpu, _ = replay(path, b, Path(d) / b, args.jobs)
                print(f"  {b:11} {s:6.1f} {cpu:6.1f}   start {' '.join(f'{v:5.1f}' for v in start(b))}")


if __name__ == "__main__":
    main()
