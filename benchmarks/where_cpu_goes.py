"""Where the CPU of a first (uncached) all-modes replay goes, process by process and function by function: issue 33's
"say where every remaining second goes", and the floor its "<= 10x the model's own fwd+bwd+double bwd" is measured
against.

One `irtrace replay BUNDLE --backend torch --modes fwd,vjp,vjp2` (default: ResNet-50, torchvision, random weights,
2x3x112x112; --jobs auto) from an empty cache, in a fresh process, with a sitecustomize.py on PYTHONPATH (written to
a temporary folder; nothing of irtrace's is changed) that times the named functions in every process of the replay
(the host, the fork server, every worker) by their thread's own CPU time, each second counted once: a timed
function's time less that of the timed functions it calls (where the rounding model runs the op again, those runs
are its own). Each process's whole CPU is read from /proc while it runs. Before it, the model's own forward +
backward + double backward in float32 and float64 (this machine's threads), as benchmarks/first_run.py measures it.

The floor the design's rules leave (every node alone, in a process of its own, judged against float64): the
frameworks' own compute that no replay can skip -- the reference's fwd, vjp and vjp2 of each node, the float64
oracle's (its forward by onnx.reference, its gradients by torch autograd, the finite-difference checks that keep
the arbiter independent of torch, the rounding model where a result needs it) and the imports of the processes that
run them -- spread over the machine's cores.

--baseline DIR: the same, by the irtrace of another checkout (`git worktree add DIR <commit>`) on the same bundle
right after, its figures in a column beside this one's (a function it does not have: 0).

    .venv/bin/python benchmarks/where_cpu_goes.py [--model resnet50] [--modes fwd,vjp,vjp2] [--baseline DIR]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import torch

from fast_replay import MODELS, export_quietly, own_double_backward  # benchmarks/fast_replay.py, beside this script
from first_run import machine_busy  # the whole machine's CPU seconds, from /proc/stat

ROOT = Path(__file__).resolve().parents[1]

# (module, qualified name, what it is, tags...): "whole": the function takes the time of the timed functions it calls;
# "floor": a framework's own compute, which the design's rules leave to every replay
TIMED = {
    "host": [
        ("irtrace.replay.cache", "ResultCache._put", "cache: an answer encoded, signed and written"),
        ("irtrace.replay.entry", "delta", "cache: the oracle's differences from the reference"),
        ("irtrace.replay.entry", "digest", "cache: the reference's results' digest"),
        ("irtrace.replay.entry", "signer", "cache: the entry's signature"),
        ("irtrace.replay.entry", "narrow", "cache: float64 kept in float32 where it is one"),
        ("irtrace.store.writer", "ValueWriter.__init__", "cache: files made"),
        ("irtrace.store.writer", "ValueWriter.__setitem__", "cache: files written"),
        ("backends._runtime.wire", "read", "frames received from the workers"),
        ("backends._runtime.wire", "write", "frames sent to the workers"),
        ("irtrace.compare", "judge", "judging: the backend against the reference and float64"),
        ("irtrace.compare", "judge_reference", "judging: the reference against float64"),
        ("irtrace.replay.judge", "judge_node", "judging: the rest"),
        ("irtrace.report.journal", "Journal.append", "journal lines"),
        ("irtrace.store", "load", "the bundle opened and checked"),
        ("irtrace.report.write", "write", "report.json and report.html"),
    ],
    "worker": [
        ("backends._runtime.wire", "read", "frames received (inputs read from the bundle's file)"),
        ("backends._runtime.wire", "write", "frames sent (results through the pipe)"),
        ("backends._runtime.adapter", "AutodiffAdapter.fwd", "fwd (torch)", "floor"),
        ("backends._runtime.adapter", "AutodiffAdapter.vjp", "vjp (torch autograd)", "floor"),
        ("backends._runtime.adapter", "AutodiffAdapter.vjp2", "vjp2 (torch autograd)", "floor"),
        ("backends._onnx_native", "NativeAdapter.fwd", "fwd (onnx.reference, float64)", "floor"),
        ("backends.oracle.worker", "OracleAdapter.vjp", "vjp: its direction drawn, the rest"),
        ("backends.oracle.worker", "OracleAdapter.vjp2", "vjp2: the rest"),
        ("backends.oracle.worker", "OracleAdapter._check_along", "finite-difference checks (their forwards apart)"),
        ("backends.oracle.worker", "OracleAdapter._directional", "finite-difference checks: onnx.reference forwards",
         "whole", "floor"),
        ("backends.oracle.worker", "_checkable", "finite-difference checks: the kinks left out"),
        ("backends.oracle.worker", "OracleAdapter.magnitude", "rounding model", "whole", "floor"),
        ("backends.oracle.worker", "OracleAdapter.rounding", "rounding model", "whole", "floor"),
    ],
}

SITE = r'''
import os
if os.environ.get("IRTRACE_CPU_PROFILE"):
    def _install():
        import functools, importlib, json, threading, time
        out = os.environ["IRTRACE_CPU_PROFILE"]
        cmd = open("/proc/self/cmdline").read()
        kind = "host" if "irtrace\0replay" in cmd else "worker" if "backends._runtime.zygote" in cmd else None
        if kind is None:
            return
        spent, calls, local, last = {}, {}, threading.local(), [0.0]

        def dump(force=False):
            now = time.monotonic()
            if force or now - last[0] > 0.2:
                last[0] = now
                with open(f"{out}/{os.getpid()}.json", "w") as f:  # a forked worker's own pid
                    json.dump({"kind": kind, "spent": spent, "calls": calls}, f)

        def timed(fn, key, whole):
            @functools.wraps(fn)
            def run(*a, **k):
                stack = local.__dict__.setdefault("stack", [])
                if stack and stack[-1][2]:  # inside a function that takes its callees' time
                    return fn(*a, **k)
                frame = [time.thread_time(), 0.0, whole]
                stack.append(frame)
                try:
                    return fn(*a, **k)
                finally:
                    stack.pop()
                    inclusive = time.thread_time() - frame[0]
                    spent[key] = spent.get(key, 0.0) + inclusive - frame[1]
                    calls[key] = calls.get(key, 0) + 1
                    if stack:
                        stack[-1][1] += inclusive
                    dump()
            return run
        for module, qual, *rest in TIMED[kind]:
            try:  # a function another irtrace (--baseline) does not have is not timed
                obj = importlib.import_module(module)
                *path, name = qual.split(".")
                for p in path:
                    obj = getattr(obj, p)
                setattr(obj, name, timed(getattr(obj, name), f"{module}:{qual}", "whole" in rest))
            except (ImportError, AttributeError):
                pass
        import atexit
        atexit.register(dump, True)
    TIMED = %s
    _install()
'''


def processes(out, stop):
    """{pid: (CPU seconds, command line)} of irtrace's processes, read from /proc every 20 ms until `stop` is set."""
    tick = os.sysconf("SC_CLK_TCK")
    while not stop.is_set():
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                cmd = open(f"/proc/{d}/cmdline").read().replace("\0", " ")
                fields = open(f"/proc/{d}/stat").read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if "irtrace replay" in cmd or "backends._runtime" in cmd:
                out[int(d)] = ((int(fields[11]) + int(fields[12])) / tick, cmd)
        time.sleep(0.02)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="resnet50", choices=sorted(MODELS))
    p.add_argument("--modes", default="fwd,vjp,vjp2")
    p.add_argument("--baseline", metavar="DIR", help="another checkout (git worktree add DIR <commit>), profiled too")
    args = p.parse_args()
    model, inputs = MODELS[args.model]()
    threads = torch.get_num_threads()
    own32 = own_double_backward(model, inputs)
    own64 = own_double_backward(model.double(), tuple(x.double() if x.is_floating_point() else x for x in inputs))
    model.float()
    torch.set_num_threads(1)
    codes = {"this": ROOT, **({"baseline": Path(args.baseline).resolve()} if args.baseline else {})}
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        bundle = export_quietly(model, inputs, d / f"{args.model}.irt")
        (d / "site").mkdir()
        (d / "site" / "sitecustomize.py").write_text(SITE % repr(TIMED))
        runs = {name: profile(bundle.path, args.modes, code, d / name) for name, code in codes.items()}
    report(args, runs, (own32, own64, threads))


def profile(bundle, modes, code, folder):
    """(seconds, the machine's CPU seconds, the summary, {pid: (CPU s, command line)}, {pid: timed functions}) of
    one replay of `bundle` from an empty cache by the irtrace in `code`, timed by the sitecustomize beside it."""
    shutil.rmtree(f"{bundle}.cache", ignore_errors=True)  # a first replay
    (folder / "spent").mkdir(parents=True)
    site = folder.parent / "site"
    env = dict(os.environ, PYTHONPATH=f"{site}{os.pathsep}{code}", IRTRACE_CPU_PROFILE=str(folder / "spent"))
    cmd = [sys.executable, "-m", "irtrace", "replay", str(bundle), "--backend", "torch", "--modes", modes,
           "-o", str(folder / "out"), "--format", "json"]
    seen, stop = {}, threading.Event()
    poller = threading.Thread(target=processes, args=(seen, stop), daemon=True)
    busy, t = machine_busy(), time.perf_counter()
    poller.start()
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=folder)  # not the checkout: -m
    seconds, cpu = time.perf_counter() - t, machine_busy() - busy
    stop.set()
    poller.join()
    if done.returncode not in (0, 1):
        sys.exit(f"{' '.join(cmd)} exited {done.returncode}: {done.stderr.strip()[-2000:]}")
    profiles = {int(f.stem): json.loads(f.read_text()) for f in (folder / "spent").glob("*.json")}
    return seconds, cpu, json.loads(done.stdout)["summary"], seen, profiles


def _role(cmd, profile):
    if "irtrace replay" in cmd:
        return "host"
    spent = (profile or {}).get("spent", {})
    if any("OracleAdapter" in k for k in spent):
        return "oracle (float64)"
    if spent:
        return "reference (torch)"
    return "fork server (imports)"


def _parts(seen, profiles):
    """({role: CPU s}, {role: {what: thread CPU s}}, {role: how many processes}) of one profiled replay."""
    names = {kind: {f"{m}:{q}": what for m, q, what, *_ in timed} for kind, timed in TIMED.items()}
    roles, parts, count = Counter(), {}, Counter()
    for pid, (used, cmd) in seen.items():
        role = _role(cmd, profiles.get(pid))
        roles[role] += used
        count[role] += 1
        for key, s in (profiles.get(pid) or {}).get("spent", {}).items():
            parts.setdefault(role, Counter())[names["host" if role == "host" else "worker"][key]] += s
    return roles, parts, count


def report(args, runs, own):
    own32, own64, threads = own
    floors = {what for kind in TIMED.values() for m, q, what, *tags in kind if "floor" in tags}
    cores, split = os.cpu_count(), {}
    for name, (seconds, cpu, summary, seen, profiles) in runs.items():
        split[name] = _parts(seen, profiles)
        print(f"{name}: {args.model}, torch in {args.modes}, nothing cached (--jobs auto): {seconds:.2f} s, {cpu:.1f} "
              f"CPU s (the machine's), {sum(split[name][0].values()):.1f} CPU s in irtrace's processes; "
              + ", ".join(f"{k} {v}" for k, v in summary.items() if type(v) is int and (v or k == "findings")))
    print(f"the model's own fwd+bwd+double bwd: {own32:.3f} s in float32, {own64:.3f} s in float64 ({threads} threads)")
    columns = list(runs)
    print(f"\n{'process':26} " + " ".join(f"{c + ' CPU s':>14}" for c in columns)
          + "   of which (thread CPU s of the functions named; * the floor's)")
    roles, parts, count = split["this"]
    compute = {c: 0.0 for c in columns}
    for role in sorted(set().union(*(split[c][0] for c in columns)), key=lambda r: -roles.get(r, 0.0)):
        print(f"{role + f' x{count[role]}':26} " + " ".join(f"{split[c][0].get(role, 0.0):14.2f}" for c in columns))
        whats = set().union(*(split[c][1].get(role, {}) for c in columns))
        for what in sorted(whats, key=lambda w: -parts.get(role, {}).get(w, 0.0)):
            mark = "*" if role != "host" and what in floors else " "
            print(f"{'':26} " + " ".join(f"{split[c][1].get(role, {}).get(what, 0.0):14.2f}" for c in columns)
                  + f" {mark} {what}")
            for c in columns:
                compute[c] += split[c][1].get(role, {}).get(what, 0.0) if mark == "*" else 0.0
        rest = [split[c][0].get(role, 0.0) - sum(split[c][1].get(role, {}).values()) for c in columns]
        fork = role.startswith("fork")
        print(f"{'':26} " + " ".join(f"{r:14.2f}" for r in rest)
              + f" {'*' if fork else ' '} the rest ({'imports' if fork else 'imports, loops, judging, ...'})")
    for c in columns:
        seconds, roles_c = runs[c][0], split[c][0]
        imports = roles_c.get("fork server (imports)", 0.0)
        floor = (compute[c] + imports) / cores
        print(f"\n{c}: {seconds / own32:.1f}x the model's own float32 run. The floor under the design's rules: the "
              f"reference's and the oracle's compute above ({compute[c]:.1f} CPU s) and the fork server's imports "
              f"({imports:.1f}) on {cores} cores: {floor:.2f} s = {floor / own32:.1f}x; measured "
              f"{seconds / floor:.2f}x "
              f"the floor; the other {sum(roles_c.values()) - compute[c] - imports:.1f} CPU s are irtrace's own "
              f"(frames, cache, judging, the workers' loops, the checks' directions)")


if __name__ == "__main__":
    main()
