"""A worker's large results crossing the pipe to the host, side by side in one run: the frame reader
before (bytes read in the pipe's 64 KB chunks, joined, then copied into the array) and now (read into the
array's own memory; the pipe's buffer widened to 1 MB by the worker). A child process writes FRAMES frames
of one float64 array with backends._runtime.wire.write, as a worker does; the host reads them. Prints
wall seconds and CPU seconds (host + child) of each, and their ratios.

Then a value the host sends by where it lies in a memory-mapped file (a bundle's value store; wire.write(...,
by_reference=True)), as the worker reads it, each read followed by one pass over its elements (a sum: what the
framework does with an input): mapped, copied out and let go (the first way), one pread into an array of its own
(wire._read_region, the second) and wire._region now (a value of wire.MAPPED_MIN bytes or more viewed in the file
mapped copy-on-write and kept, a smaller one read by pread); small, middling and large values, thread CPU per read
of each, side by side.

    .venv/bin/python benchmarks/wire.py [--mb 128] [--frames 8]
"""
import argparse
import os
import resource
import tempfile
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


def mapped_before(s):
    """A value read by where it lies, as the worker read it before: the file mapped, the bytes copied out."""
    return np.array(np.memmap(s["file"], dtype=wire.dtype_of(s["dtype"]), mode="r", offset=int(s["offset"]),
                              shape=tuple(s["shape"])))


def regions():
    """Thread CPU per read (and one pass over the value) of values sent by where they lie: mapped and copied out,
    read by pread, and as wire._region reads them now."""
    print("values read from the host's file by where they lie, then summed (thread CPU per read, best of 3 each):")
    def pread(s):
        return wire._read_region(s["file"], wire.dtype_of(s["dtype"]), tuple(s["shape"]), int(s["offset"]))
    ways = (("mapped", mapped_before), ("pread", pread), ("now", wire._region))
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "values.bin")
        sizes = {"1 kB x 2000": (1 << 10, 2000), "256 kB x 200": (256 << 10, 200), "16 MB x 16": (16 << 20, 16)}
        with open(path, "wb") as f:
            f.write(b"\0" * 8)  # the values start at an offset, as after a safetensors header
            for nbytes, n in sizes.values():
                f.write(np.random.default_rng(0).random(nbytes * n // 8).tobytes())
        offset = 8
        for label, (nbytes, n) in sizes.items():
            specs = [{"file": path, "dtype": "<f8", "shape": [nbytes // 8], "offset": offset + k * nbytes}
                     for k in range(n)]
            offset += nbytes * n
            best = {}
            for _ in range(3):
                for name, read in ways:
                    t = time.thread_time()
                    for s in specs:
                        float(read(s).sum())
                    best[name] = min(best.get(name, float("inf")), (time.thread_time() - t) / n)
                    assert np.array_equal(read(specs[-1]), mapped_before(specs[-1]))
            print(f"  {label:14} " + "   ".join(f"{name} {best[name] * 1e6:8.1f} us" for name, _ in ways) +
                  f"   now / pread {best['now'] / best['pread']:.2f}")


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
    regions()


if __name__ == "__main__":
    main()
