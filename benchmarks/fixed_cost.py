"""Issue 33's fixed cost per node per backend, measured: a chain of N tiny nodes (one-element
Neg / Abs / Relu, so the frameworks' compute is nothing) replayed forward on one backend by
`irtrace replay` in a fresh process; (the N-node replay's time - the 1-node replay's) / (N - 1), with the
reference and oracle served from the cache (each bundle is replayed once first to fill it); the best of
--repeat. Target: <= 0.2 ms.

--baseline DIR: the same replays by the irtrace of another checkout (`git worktree add DIR <commit>`),
alternating with this one's (this machine's speed drifts by 20-30 % within minutes), and their ratio.

--without journal,reports,collector: where the fixed cost goes, as ceilings: the same replays again with one part
of the host's work left out by a sitecustomize.py on PYTHONPATH (in a temporary folder; irtrace is not changed):
"journal", no journal line appended (Journal.append does nothing); "reports", no report.json, timings.json nor
report.html written (the report is still built); "collector", Python's cyclic garbage collector off (gc.disable).
What a part's absence saves is the most that making it faster could. Every replay also reports the seconds its
host spent in the collector (gc.callbacks), printed per node.

    .venv/bin/python benchmarks/fixed_cost.py [--nodes 3000] [--backends onnxruntime,torch] [--baseline DIR]
        [--without journal,reports,collector]
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from onnx import TensorProto, helper

from irtrace.export.onnx_bundle import bundle_from_onnx

ROOT = Path(__file__).resolve().parents[1]
TARGET_MS = 0.2


def chain(n):
    ops = ("Neg", "Abs", "Relu")
    names = ["x"] + [f"v{k}" for k in range(n)]
    nodes = [helper.make_node(ops[k % 3], [names[k]], [names[k + 1]], name=f"n{k}") for k in range(n)]
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                              [helper.make_tensor_value_info(names[-1], TensorProto.FLOAT, [1])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])


# In the replay's host process only (the workers import it too: their command lines differ): the collector's time,
# written at exit to $IRTRACE_BENCH_GC, and the parts named in $IRTRACE_BENCH_WITHOUT left out.
SITE = r'''
import os
if "irtrace\0replay" in open("/proc/self/cmdline").read() and os.environ.get("IRTRACE_BENCH_GC"):
    def _install():
        import atexit, gc, time
        spent, started = [0.0], [0.0]

        def collecting(phase, info):
            if phase == "start":
                started[0] = time.perf_counter()
            else:
                spent[0] += time.perf_counter() - started[0]
        gc.callbacks.append(collecting)
        from irtrace.report import html, journal, json_report  # in every replay here, whatever it leaves out
        without = set(os.environ.get("IRTRACE_BENCH_WITHOUT", "").split(","))
        if "collector" in without:
            gc.disable()
        if "journal" in without:
            journal.Journal.append = lambda self, node: None
        if "reports" in without:
            json_report.write = html.write = lambda *a, **k: None

        def written():
            with open(os.environ["IRTRACE_BENCH_GC"], "w") as f:
                f.write(str(spent[0]))
        atexit.register(written)
    _install()
'''
PARTS = ("journal", "reports", "collector")


def replay_seconds(path, backend, out, code=None, site=None, without=""):
    """(seconds, seconds in the collector) of one `irtrace replay PATH --backend B --modes fwd` in a fresh process, by
    the irtrace in `code` (a checkout; default this one), run from the bundle's folder so that PYTHONPATH decides
    which irtrace; `site`: the folder of SITE's sitecustomize.py, `without` the parts it leaves out."""
    cmd = [sys.executable, "-m", "irtrace", "replay", str(path), "--backend", backend, "--modes", "fwd", "-o", str(out),
           "--format", "json"]
    env = dict(os.environ, PYTHONPATH=str(code or ROOT))
    gc_file = Path(out).with_name(Path(out).name + ".gc")
    if site is not None:
        env.update(PYTHONPATH=f"{site}{os.pathsep}{env['PYTHONPATH']}", IRTRACE_BENCH_GC=str(gc_file),
                   IRTRACE_BENCH_WITHOUT=without)
    t = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=Path(path).parent, env=env)
    seconds = time.perf_counter() - t
    if done.returncode not in (0, 1):
        sys.exit(f"{' '.join(cmd)} exited {done.returncode}: {done.stderr.strip()[-2000:]}")
    return seconds, float(gc_file.read_text()) if site is not None else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=3000)
    ap.add_argument("--backends", default="onnxruntime,torch")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--baseline", metavar="DIR", help="a checkout of another commit, replayed side by side")
    ap.add_argument("--without", default="", help=f"parts left out, each in a replay of its own: {','.join(PARTS)}")
    args = ap.parse_args()
    without = [p for p in args.without.split(",") if p]
    if set(without) - set(PARTS):
        ap.error(f"--without: {', '.join(sorted(set(without) - set(PARTS)))} is not one of {', '.join(PARTS)}")
    x = {"x": np.array([0.5], np.float32)}
    # (label, checkout, the part left out): each replayed in turn, alternating
    runs = ([("baseline", Path(args.baseline).resolve(), "")] if args.baseline else []) + [("this", None, "")] + \
        [(f"without {part}", None, part) for part in without]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        site = None
        if without:
            site = tmp / "site"
            site.mkdir()
            (site / "sitecustomize.py").write_text(SITE)
        bundles = {1: bundle_from_onnx(chain(1), x, tmp / "one.irt", name="one").path,
                   args.nodes: bundle_from_onnx(chain(args.nodes), x, tmp / "many.irt", name="many").path}
        print(f"fixed cost per node, {args.nodes} one-element nodes, fwd, reference and oracle cached, best of "
              f"{args.repeat} (target <= {TARGET_MS} ms):")
        for b in args.backends.split(","):
            best, collected = {}, {}
            for label, code, _ in [r for r in runs if not r[2]]:  # fills BUNDLE.cache/ for each code's keys
                for n, path in bundles.items():
                    replay_seconds(path, b, tmp / f"{label}-{n}-{b}", code)
            for _ in range(args.repeat):
                for label, code, part in runs:
                    for n, path in bundles.items():
                        t, gc_s = replay_seconds(path, b, tmp / f"{label}-{n}-{b}".replace(" ", "-"), code, site, part)
                        if t < best.get((label, n), float("inf")):
                            best[label, n], collected[label, n] = t, gc_s
            per = {label: (best[label, args.nodes] - best[label, 1]) / (args.nodes - 1) * 1000 for label, _, _ in runs}
            for label, _, part in runs:
                verdict = "met" if per[label] <= TARGET_MS else f"missed by {per[label] / TARGET_MS:.1f}x"
                line = (f"  {b:12s} {label:18s} {best[label, args.nodes]:6.2f} s for {args.nodes} nodes, "
                        f"{best[label, 1]:5.2f} s for 1: {per[label]:.3f} ms per node ({verdict})")
                if site is not None:
                    gc_us = (collected[label, args.nodes] - collected[label, 1]) / (args.nodes - 1) * 1e6
                    line += f"; collector {round(gc_us)} us per node"
                if part:
                    saved = per["this"] - per[label]
                    line += f"; its absence saves {saved:.3f} ms ({saved / per['this']:.0%})"
                print(line)
            if args.baseline:
                print(f"  {b:12s} this / baseline: {per['this'] / per['baseline']:.2f}")


if __name__ == "__main__":
    main()
