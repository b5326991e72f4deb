"""A worker's large results crossing the pipe to the host, side by side in one run: the frame reader
before (bytes read in the pipe's 64 KB chunks, joined, then copied into the array) and now (read into the
array's own memory; the pipe's buffer widened to 1 MB by the worker). A child process writes FRAMES frames
of one float64 array with backends._runtime.wire.write, as a worker does; the host reads them. Prints
wall seconds and CPU seconds (host + child) of each, and their ratios.

    .venv/bin/python benchmarks/wire.py [--mb 128] [--frames 8]
"""
import argparse
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from backends._runtime import wire  # noqa: E402

CHILD = """
import sys, numpy as np
from backends._runtime import wire
mb, frames, widen = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "1"
out = sys.stdout.buffer
if widen:
    wire.widen_pipes(out)
a = np.random.default_rng(0).random(mb * (1 << 20) // 8)
for _ in range(frames):
    wire.write(out, {"status": "ok"}, [a])
"""


def read_before(stream):
    """The frame reader as it was: each array's bytes joined from the pipe's chunks, then copied."""
    import json
    (n,) = wire._LEN.unpack(wire._read_exact(stream, wire._LEN.size))
    msg = json.loads(wire._read_exact(stream, n))
    arrays = []
    for s in msg.pop("arrays", []):
        buf = wire._read_exact(stream, s["nbytes"])
        arrays.append(np.frombuffer(buf, dtype=wire.dtype_of(s["dtype"])).reshape(s["shape"]).copy())
    return msg, arrays


def run(reader, widen, mb, frames):
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(mb), str(frames), "1" if widen else "0"],
                             stdout=subprocess.PIPE, cwd=str(ROOT))
    c0, h0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.process_time()
    t = time.perf_counter()
    for _ in range(frames):
        msg, (a,) = reader(child.stdout)
        assert a.nbytes == mb << 20
    wall = time.perf_counter() - t
    child.wait()
    c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, time.process_time() - h0 + (c1.ru_utime - c0.ru_utime) + (c1.ru_stime - c0.ru_stime)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=128)
    ap.add_argument("--frames", type=int, default=8)
    args = ap.parse_args()
    run(wire.read, True, 8, 1)  # warm the imports and the page cache of the interpreter
    before = min((run(read_before, False, args.mb, args.frames) for _ in range(3)), key=lambda r: r[0])
    now = min((run(wire.read, True, args.mb, args.frames) for _ in range(3)), key=lambda r: r[0])
    total = args.mb * args.frames
    print(f"{args.frames} frames of {args.mb} MB through a pipe from a child process (best of 3 each; CPU includes "
          f"the child's start and its array's making):")
    print(f"  before: {before[0]:6.2f} s wall ({total / before[0]:6.0f} MB/s), {before[1]:6.2f} s CPU")
    print(f"  now:    {now[0]:6.2f} s wall ({total / now[0]:6.0f} MB/s), {now[1]:6.2f} s CPU")
    print(f"  ratio now / before: wall {now[0] / before[0]:.2f}, CPU {now[1] / before[1]:.2f}")


if __name__ == "__main__":
    main()
