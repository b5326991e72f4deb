"""Issue 33's fixed cost per node per backend, measured: a chain of N tiny nodes (one-element
Neg / Abs / Relu, so the frameworks' compute is nothing) replayed forward on one backend by
`irtrace replay` in a fresh process; (the N-node replay's time - the 1-node replay's) / (N - 1), with the
reference and oracle served from the cache (each bundle is replayed once first to fill it); the best of
--repeat. Target: <= 0.2 ms.

--baseline DIR: the same replays by the irtrace of another checkout (`git worktree add DIR <commit>`),
alternating with this one's (this machine's speed drifts by 20-30 % within minutes), and their ratio.

    .venv/bin/python benchmarks/fixed_cost.py [--nodes 3000] [--backends onnxruntime,torch] [--baseline DIR]
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


def replay_seconds(path, backend, out, code=None):
    """Seconds of one `irtrace replay PATH --backend B --modes fwd` in a fresh process, by the irtrace in `code`
    (a checkout; default this one), run from the bundle's folder so that PYTHONPATH decides which irtrace."""
    cmd = [sys.executable, "-m", "irtrace", "replay", str(path), "--backend", backend, "--modes", "fwd", "-o", str(out),
           "--format", "json"]
    t = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=Path(path).parent,
                          env=dict(os.environ, PYTHONPATH=str(code or ROOT)))
    seconds = time.perf_counter() - t
    if done.returncode not in (0, 1):
        sys.exit(f"{' '.join(cmd)} exited {done.returncode}: {done.stderr.strip()[-2000:]}")
    return seconds


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=3000)
    ap.add_argument("--backends", default="onnxruntime,torch")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--baseline", metavar="DIR", help="a checkout of another commit, replayed side by side")
    args = ap.parse_args()
    x = {"x": np.array([0.5], np.float32)}
    codes = ([("baseline", Path(args.baseline).resolve())] if args.baseline else []) + [("this", None)]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        bundles = {1: bundle_from_onnx(chain(1), x, tmp / "one.irt", name="one").path,
                   args.nodes: bundle_from_onnx(chain(args.nodes), x, tmp / "many.irt", name="many").path}
        print(f"fixed cost per node, {args.nodes} one-element nodes, fwd, reference and oracle cached, best of "
              f"{args.repeat} (target <= {TARGET_MS} ms):")
        for b in args.backends.split(","):
            best = {}
            for name, code in codes:  # fills BUNDLE.cache/ for this code's keys
                for n, path in bundles.items():
                    replay_seconds(path, b, tmp / f"{name}-{n}-{b}", code)
            for _ in range(args.repeat):
                for name, code in codes:
                    for n, path in bundles.items():
                        t = replay_seconds(path, b, tmp / f"{name}-{n}-{b}", code)
                        best[name, n] = min(best.get((name, n), t), t)
            per = {name: (best[name, args.nodes] - best[name, 1]) / (args.nodes - 1) * 1000 for name, _ in codes}
            for name, _ in codes:
                verdict = "met" if per[name] <= TARGET_MS else f"missed by {per[name] / TARGET_MS:.1f}x"
                print(f"  {b:12s} {name:8s} {best[name, args.nodes]:6.2f} s for {args.nodes} nodes, "
                      f"{best[name, 1]:5.2f} s for 1: {per[name]:.3f} ms per node ({verdict})")
            if args.baseline:
                print(f"  {b:12s} this / baseline: {per['this'] / per['baseline']:.2f}")


if __name__ == "__main__":
    main()
