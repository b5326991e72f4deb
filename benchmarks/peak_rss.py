"""Issue 12's P4, measured: peak RSS of the host and of its workers stays flat in depth (target: < 1.3x
when the recorded values grow 8x). A generated deep net, N residual blocks x + ReLU(BN(Conv3x3(x))) at a
fixed width and size (random weights, seeded; eval mode: BatchNormalization with its running statistics,
so every block records the same values and the bundle grows exactly with N), exported at 25 and 200 blocks
and replayed with the real CLI in a subprocess:

    python -m irtrace replay BUNDLE --backend torch --modes fwd,vjp,vjp2     (first run: uncached)
    the same again                                                           (reference and oracle cached)
    python -m irtrace replay BUNDLE --backend onnxruntime --modes fwd        (reference and oracle cached)

The replay runs in-process under a small wrapper (only the standard library imported before the CLI, so the
host's RSS is irtrace's) that samples every 50 ms each process's /proc/PID/status: VmHWM (the peak RSS of
that process image), RssAnon (its own allocations) and RssFile (pages of mapped files resident in it), and
/proc/PID/smaps for which files those are (the bundle's values.safetensors, cache entries, libraries).
The host's figure is its VmHWM at the end; the workers' the largest VmHWM sampled before they exit
(they idle until the replay ends, then WorkerPool.close asks them to exit and waits for each).
getrusage's ru_maxrss is printed beside them but not used: a process that Python's subprocess starts
(vfork + exec) begins with its parent's peak as its own, so RUSAGE_SELF of the wrapper is the peak of
this script (which exported the bundles) and RUSAGE_CHILDREN includes helper processes the host starts
late, which begin with the host's peak.

    .venv/bin/python benchmarks/peak_rss.py [--blocks 25,200] [--channels 16] [--size 32] [--batch 2]
"""
import argparse
import contextlib
import io
import json
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # export with the irtrace of this tree, as the replays run it
TARGET = 1.3

# Runs `python -m irtrace ARGS` in this process, then writes what it measured as JSON to argv[1]. Only the
# standard library is imported before the CLI: the host's RSS is irtrace's.
WRAPPER = r"""
import json, os, resource, runpy, sys, threading, time
out, argv = sys.argv[1], sys.argv[2:]
me = os.getpid()
seen = {}   # pid -> {"name", "hwm", "anon", "file"} (kB, the largest seen)
stop = threading.Event()

def status(pid):
    d = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                k, _, v = line.partition(":")
                if k in ("VmHWM", "RssAnon", "RssFile"):
                    d[k] = int(v.split()[0])
    except OSError:
        return None
    return d

def name(pid):
    if pid == me:
        return "host"
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read().split(b"\0")
    except OSError:
        return "?"
    cmd = [c.decode(errors="replace") for c in cmd if c]
    if "backends._runtime.worker" in cmd:
        return "worker " + cmd[cmd.index("backends._runtime.worker") + 1]
    return " ".join(cmd)[:80]

def mapped(pid):  # resident kB of mapped files by what the file is (every 5th sample: smaps is long)
    kinds, kind = {}, None
    try:
        with open(f"/proc/{pid}/smaps") as f:
            for line in f:
                if line[0] in "0123456789abcdef" and "-" in line.split(" ", 1)[0]:
                    path = line.split(None, 5)[5].strip() if len(line.split(None, 5)) > 5 else ""
                    kind = (None if not path.startswith("/") else "bundle values" if path.endswith("values.safetensors")
                            else "cache entries" if ".cache/" in path else "other files")
                elif kind and line.startswith("Rss:"):
                    kinds[kind] = kinds.get(kind, 0) + int(line.split()[1])
    except OSError:
        pass
    return kinds

def children():
    pids = set()
    for tid in os.listdir(f"/proc/{me}/task"):
        try:
            with open(f"/proc/{me}/task/{tid}/children") as f:
                pids.update(int(p) for p in f.read().split())
        except OSError:
            pass
    return pids

ticks = [0]

def sample(smaps=False):
    ticks[0] += 1
    for pid in [me, *children()]:
        d = status(pid)
        if not d:
            continue
        s = seen.setdefault(pid, {"name": name(pid), "hwm": 0, "anon": 0, "file": 0})
        s["hwm"] = max(s["hwm"], d.get("VmHWM", 0))
        s["anon"] = max(s["anon"], d.get("RssAnon", 0))
        s["file"] = max(s["file"], d.get("RssFile", 0))
        if smaps or ticks[0] % 5 == 0:
            m = s.setdefault("mapped", {})
            for k, v in mapped(pid).items():
                m[k] = max(m.get(k, 0), v)

def sampler():
    while not stop.is_set():
        sample()
        time.sleep(0.05)

threading.Thread(target=sampler, daemon=True).start()
sys.argv = ["irtrace", *argv]
t = time.perf_counter()
rc = 0
try:
    runpy.run_module("irtrace", run_name="__main__", alter_sys=True)
except SystemExit as e:
    rc = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
seconds = time.perf_counter() - t
stop.set()
sample(smaps=True)
with open(out, "w") as f:
    json.dump({"rc": rc, "seconds": seconds, "processes": list(seen.values()),
               "self_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
               "children_kb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}, f)
"""

RUNS = (("torch fwd,vjp,vjp2, uncached", ["--backend", "torch", "--modes", "fwd,vjp,vjp2"]),
        ("torch fwd,vjp,vjp2, cached", ["--backend", "torch", "--modes", "fwd,vjp,vjp2"]),
        ("onnxruntime fwd, cached", ["--backend", "onnxruntime", "--modes", "fwd"]))


def deep_net(blocks, channels):
    import torch
    from torch import nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(channels, channels, 3, padding=1)
            self.bn = nn.BatchNorm2d(channels)

        def forward(self, x):
            return x + torch.relu(self.bn(self.conv(x)))

    torch.manual_seed(0)
    model = nn.Sequential(*[Block() for _ in range(blocks)])
    with torch.no_grad():  # running statistics that are not the identity
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.normal_(0, 0.1)
                m.running_var.uniform_(0.5, 1.5)
    return model.eval()


def export(blocks, args, path):
    import torch
    import irtrace
    x = torch.randn(args.batch, args.channels, args.size, args.size, generator=torch.Generator().manual_seed(0))
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        return irtrace.export(deep_net(blocks, args.channels), (x,), path)


def measured(bundle, flags, out, tmp):
    """What the wrapper saw of one `irtrace replay` run (a fresh process): the host's and each worker's
    peak RSS (VmHWM), and of what it is made (RssAnon, RssFile, and the file pages by file)."""
    result = Path(tmp) / "rss.json"
    cmd = [sys.executable, "-c", WRAPPER, str(result), "replay", str(bundle), *flags, "-o", str(out)]
    done = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if done.returncode or not result.exists():
        raise SystemExit(f"replay failed (rc {done.returncode}):\n{done.stdout[-3000:]}")
    got = json.loads(result.read_text())
    if got["rc"] not in (0, 1):  # 1: findings, still a complete run
        raise SystemExit(f"irtrace replay exited {got['rc']}:\n{done.stdout[-3000:]}")
    host = next(p for p in got["processes"] if p["name"] == "host")
    workers = sorted((p for p in got["processes"] if p["name"].startswith("worker ")), key=lambda p: -p["hwm"])
    return {"seconds": got["seconds"], "host": host, "workers": workers,
            "ru_self": got["self_kb"], "ru_children": got["children_kb"]}


def mb(kb):
    return kb / 1024


def verdict(ratio):
    return "met" if ratio < TARGET else f"MISSED by {ratio / TARGET:.2f}x"


def anatomy(p):
    mapped = p.get("mapped", {})
    files = ", ".join(f"{k} {mb(v):.1f}" for k, v in sorted(mapped.items()))
    return (f"VmHWM {mb(p['hwm']):6.1f} MB = anon {mb(p['anon']):6.1f} + file {mb(p['file']):6.1f} MB "
            f"({files})")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--blocks", default="25,200", help="two depths, shallow then deep")
    p.add_argument("--channels", type=int, default=16)
    p.add_argument("--size", type=int, default=32)
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--keep", help="export and replay in this folder and keep it (default: a temporary one)")
    args = p.parse_args()
    depths = [int(b) for b in args.blocks.split(",")]
    if len(depths) != 2:
        raise SystemExit("--blocks: two depths, e.g. 25,200")
    figures, sizes = {}, {}
    with contextlib.ExitStack() as stack:
        tmp = Path(args.keep) if args.keep else Path(stack.enter_context(tempfile.TemporaryDirectory()))
        tmp.mkdir(parents=True, exist_ok=True)
        for n in depths:
            t = time.perf_counter()
            bundle = export(n, args, tmp / f"deep{n}.irt")
            sizes[n] = (len(bundle.model.graph.node), (Path(bundle.path) / "values.safetensors").stat().st_size,
                        time.perf_counter() - t)
            for k, (label, flags) in enumerate(RUNS):
                f = figures[n, label] = measured(bundle.path, flags, tmp / f"out{n}-{k}", tmp)
                print(f"  {n:4d} blocks, {label:30s} {f['seconds']:5.1f} s: host {mb(f['host']['hwm']):6.1f} MB; "
                      + (", ".join(f"{w['name']} {mb(w['hwm']):.1f} MB" for w in f["workers"]) or "no worker")
                      + f" (getrusage: self {mb(f['ru_self']):.0f} MB, children {mb(f['ru_children']):.0f} MB)",
                      flush=True)
    a, b = depths
    print(f"\nP4 peak RSS in depth: {a} -> {b} residual blocks (Conv3x3+BatchNorm+ReLU+add, eval), "
          f"input {args.batch}x{args.channels}x{args.size}x{args.size}")
    for n in depths:
        nodes, size, secs = sizes[n]
        print(f"  {n:4d} blocks: {nodes:5d} nodes, values.safetensors {size / 1e6:6.1f} MB (export {secs:.1f} s)")
    print(f"  recorded values grow {sizes[b][1] / sizes[a][1]:.2f}x, nodes {sizes[b][0] / sizes[a][0]:.2f}x")
    print(f"\n{'':50s} {'at ' + str(a):>9s} {'at ' + str(b):>9s}  ratio  target < {TARGET}")
    for label, _ in RUNS:
        small, big = figures[a, label], figures[b, label]
        for who in ("host", "largest worker"):
            x, y = ((small["host"], big["host"]) if who == "host" else
                    (small["workers"][0] if small["workers"] else None, big["workers"][0] if big["workers"] else None))
            if x is None or y is None:
                print(f"P4 {label:30s} {who:15s}  no worker started (the reference's answers are cached)")
                continue
            r = y["hwm"] / x["hwm"]
            print(f"P4 {label:30s} {who:15s} {mb(x['hwm']):6.1f} MB {mb(y['hwm']):6.1f} MB {r:6.2f}  {verdict(r)}")
            r = y["anon"] / x["anon"]
            print(f"   {'':30s} {'  its anon part':15s} {mb(x['anon']):6.1f} MB {mb(y['anon']):6.1f} MB {r:6.2f}  "
                  f"(without mapped file pages)")
    print("\nwhat the peak is made of (largest seen in /proc/PID/status and smaps; anon: the process's own "
          "allocations, file: pages of mapped files)")
    for label, _ in RUNS:
        for n in depths:
            f = figures[n, label]
            print(f"  {label:30s} {n:4d} blocks  host: {anatomy(f['host'])}")
            for w in f["workers"]:
                print(f"  {'':30s} {'':11s} {w['name'][7:]}: {anatomy(w)}")


if __name__ == "__main__":
    main()
