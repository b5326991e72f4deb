"""Starting a backend's worker, as a plain process (the framework imported each time) and forked from a
server that imported it once (irtrace.replay.forkserver, used where workers are kept warm: the test
session, irtrace fuzz), side by side in one run: the mean of N starts after the first of each, up to
the worker's hello, per backend, and their ratio. Then `irtrace fuzz` for the same time both ways (its
crashing and erroring cases restart workers): the cases each drew.

    .venv/bin/python benchmarks/worker_start.py [--backends torch,oracle,megengine,...] [--starts 5]
        [--fuzz megengine,paddle] [--fuzz-time 1m]
"""
import argparse
import contextlib
import io
import json
import tempfile
import time
from pathlib import Path

from irtrace.replay import backends as registry
from irtrace.replay import forkserver, worker


def _starts(info, n, forked):
    """Seconds of each of `n` starts of `info`'s worker, after one not counted (a server's imports)."""
    real = forkserver.fork
    if not forked:
        forkserver.fork = lambda *a, **k: None
    try:
        took = []
        for k in range(n + 1):
            t = time.perf_counter()
            w = worker.WorkerProxy(info)
            w.start()
            took.append(time.perf_counter() - t)
            kind = type(w.proc).__name__
            w.close()
        return took[1:], kind
    finally:
        forkserver.fork = real


def _fuzz(backends, duration, forked):
    from irtrace.cli import main
    real = forkserver.fork
    if not forked:
        forkserver.fork = lambda *a, **k: None
    try:
        with tempfile.TemporaryDirectory() as d, contextlib.redirect_stdout(io.StringIO()), \
                contextlib.redirect_stderr(io.StringIO()):
            main(["fuzz", "--backend", backends, "--time", duration, "--seed", "7", "-o", f"{d}/fz"])
            state = json.loads(Path(f"{d}/fz/state.json").read_text())
        return state["next_case"], len(state["bugs"])
    finally:
        forkserver.fork = real
        worker.close_warm()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backends", default="torch,oracle,onnxruntime,megengine,paddle,tensorflow,oneflow")
    ap.add_argument("--starts", type=int, default=5)
    ap.add_argument("--fuzz", default="megengine,paddle", help="backends of the fuzz comparison ('' for none)")
    ap.add_argument("--fuzz-time", default="1m")
    args = ap.parse_args()
    worker.keep_warm()
    print(f"{'backend':<12} {'plain s':>8} {'forked s':>9} {'ratio':>6}  (mean of {args.starts} starts each)")
    for name in args.backends.split(","):
        info = registry.get(name)
        if info.unavailable():
            print(f"{name:<12} unavailable: {info.unavailable()}")
            continue
        plain, _ = _starts(info, args.starts, False)
        forked, kind = _starts(info, args.starts, True)
        p, f = sum(plain) / len(plain), sum(forked) / len(forked)
        note = "" if kind == "Forked" else f"  (its server refused: started as {kind})"
        print(f"{name:<12} {p:8.3f} {f:9.3f} {f / p:6.2f}{note}")
    worker.close_warm()
    if args.fuzz:
        print(f"\nirtrace fuzz --backend {args.fuzz} --time {args.fuzz_time} --seed 7:")
        for forked in (False, True):
            worker.keep_warm()
            cases, bugs = _fuzz(args.fuzz, args.fuzz_time, forked)
            print(f"  {'forked' if forked else 'plain ':<6} workers: {cases:5d} cases drawn, {bugs:4d} distinct bugs")


if __name__ == "__main__":
    main()
