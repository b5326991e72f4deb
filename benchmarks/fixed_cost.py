"""Issue 12's fixed cost per node per backend, measured: a chain of N tiny nodes (one-element
Neg / Abs / Relu, so the frameworks' compute is nothing) replayed forward on one backend;
(time of the N-node replay - time of a 1-node replay) / N, with the reference and oracle served
from the cache (each bundle is replayed once first to fill it). Target: <= 0.5 ms.

    .venv/bin/python benchmarks/fixed_cost.py [--nodes 10000] [--backends onnxruntime,torch]
"""
import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
from onnx import TensorProto, helper

from irtrace.export.onnx_bundle import bundle_from_onnx
from irtrace.replay import ReplayOptions
from irtrace.report.folder import replay_into


def chain(n):
    ops = ("Neg", "Abs", "Relu")
    names = ["x"] + [f"v{k}" for k in range(n)]
    nodes = [helper.make_node(ops[k % 3], [names[k]], [names[k + 1]], name=f"n{k}") for k in range(n)]
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                              [helper.make_tensor_value_info(names[-1], TensorProto.FLOAT, [1])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])


def replay_seconds(path, backend, out):
    replay_into(path, ReplayOptions.parse(backend, "fwd"), out=out)  # fills BUNDLE.cache/ (reference and oracle)
    t = time.perf_counter()
    replay_into(path, ReplayOptions.parse(backend, "fwd"), out=out)
    return time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=10000)
    ap.add_argument("--backends", default="onnxruntime,torch")
    args = ap.parse_args()
    x = {"x": np.array([0.5], np.float32)}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        small = bundle_from_onnx(chain(1), x, tmp / "one.irt", name="one")
        big = bundle_from_onnx(chain(args.nodes), x, tmp / "many.irt", name="many")
        print(f"fixed cost per node, {args.nodes} one-element nodes, fwd, reference and oracle cached:")
        for b in args.backends.split(","):
            t1 = replay_seconds(small.path, b, tmp / f"one-{b}")
            tn = replay_seconds(big.path, b, tmp / f"many-{b}")
            per = (tn - t1) / (args.nodes - 1) * 1000
            print(f"  {b:12s} {tn:7.2f} s for {args.nodes} nodes, {t1:5.2f} s for 1: {per:.3f} ms per node "
                  f"(target <= 0.5 ms: {'met' if per <= 0.5 else f'missed by {per / 0.5:.1f}x'})")


if __name__ == "__main__":
    main()
