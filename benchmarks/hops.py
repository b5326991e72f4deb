"""How many hops a node call takes, from `irtrace replay` on the command line to a backend worker and
back to its verdict. A hop is a frame of irtrace's or backends' own code on the call stack (library
frames, torch's and numpy's, do not count). Counted, not estimated:

- host, out: the stack when the call's request frame is written to the worker's pipe (cli.main ... wire.write);
- worker: the stack when the op-table function runs, inside the worker's request loop (serve, which reads the
  frame with wire.read, ... the op's function);
- host, back: the reader thread's stack when it reads the reply frame (wire.read), the proxy's hand-over
  (WorkerProxy.receive) and the stack when the reply is made an Answer (answer_of), and when the backend's
  result is judged (compare.judge), below the replay loop they share with the way out.

The total is out + worker + (back frames not already on the way out). One node (a Conv), fwd, on torch
and onnxruntime (the reference, the float64 oracle and a backend under test).

    PYTHONPATH=. .venv/bin/python benchmarks/hops.py
"""
import sys
import tempfile
import traceback
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
OURS = (str(ROOT / "irtrace"), str(ROOT / "backends"))


def own(stack):
    """The frames of irtrace's and backends' code in an extracted stack, outermost first."""
    return [f"{Path(f.filename).relative_to(ROOT)}:{f.name}" for f in stack if f.filename.startswith(OURS)]


def where(module):
    path = module.__file__ if hasattr(module, "__file__") else sys.modules[module.__module__].__file__
    return str(Path(path).resolve().relative_to(ROOT))


def host_stacks(bundle, out):
    """(way out, way back to the Answer, way to the judge) of one replay from the CLI."""
    from backends._runtime import wire
    from irtrace import compare
    from irtrace.cli import main
    from irtrace.replay import execute, judge
    seen = {}

    def watch(module, name, key, when=lambda *a, **k: True):
        original = getattr(module, name)

        def wrapper(*a, **k):
            if key not in seen and when(*a, **k):
                seen[key] = own(traceback.extract_stack()[:-1]) + [f"{where(module)}:{name}"]
            return original(*a, **k)
        setattr(module, name, wrapper)
        return original

    from irtrace.replay import worker
    import threading
    watch(wire, "write", "out", lambda stream, msg, *a, **k: msg.get("kind") == "run")
    watch(wire, "read", "reader", lambda *a, **k: threading.current_thread() is not threading.main_thread())
    watch(worker.WorkerProxy, "receive", "receive")
    watch(execute, "answer_of", "back")
    watch(judge.compare, "judge", "judge")
    assert judge.compare is compare
    node = bundle.model.graph.node[0].name
    code = main(["replay", str(bundle.path), "--backend", "torch,onnxruntime", "--modes", "fwd", "--nodes",
                 f"^{node}$", "--no-cache", "--no-batch", "-o", str(out)])
    assert code in (0, 1), code
    # the reply's way back: the reader thread reads its frame, the proxy hands it over, execute makes the Answer
    return seen["out"], (seen["reader"] + seen["receive"][-1:], seen["back"]), seen["judge"]


def worker_stack(bundle):
    """The worker's stack when the op-table function runs (the torch backend, in this process)."""
    from backends._runtime import wire, worker
    from backends.torch.worker import make_adapter
    from irtrace.ir.spec import node_specs
    from irtrace.replay.call import from_bundle, proto_text
    adapter = make_adapter()
    spec = node_specs(bundle.model)[0]
    call = from_bundle(bundle, spec, "fwd", proto_text(bundle.model.graph.node[0]))
    entry = adapter.lookup(spec)
    seen = []
    original = entry.fn

    def op(*a, **k):
        seen.append(own(traceback.extract_stack()[:-1]))
        return original(*a, **k)
    object.__setattr__(entry, "fn", op) if hasattr(entry, "__dataclass_fields__") else setattr(entry, "fn", op)
    msg = call.message()
    reply, _ = worker.answer(adapter, msg["kind"], msg, [np.asarray(a) if a is not None else None
                                                         for a in call.arrays()])
    assert reply["status"] == wire.Status.OK, reply
    # the request loop (serve: read a frame, answer it, write the reply) sits above answer(); the op's own
    # function is the last hop
    return (["backends/_runtime/worker.py:serve", "backends/_runtime/wire.py:read"] + seen[0][_outer(seen[0]):]
            + [f"{original.__module__.replace('.', '/')}.py:{original.__name__}"])


def _outer(frames):
    """Where the worker's own frames start in a stack taken in this process (above them: this script)."""
    return next(k for k, f in enumerate(frames) if f.startswith("backends/_runtime/worker.py"))


def main():
    import torch

    import irtrace
    with tempfile.TemporaryDirectory() as d:
        model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.ReLU())
        bundle = irtrace.export(model, (torch.randn(1, 3, 8, 8),), Path(d) / "m.irt")
        out, back, judged = host_stacks(bundle, Path(d) / "r")
        inside = worker_stack(bundle)
    handed, back = back
    shared = 0
    while shared < min(len(out), len(back)) and out[shared] == back[shared]:
        shared += 1
    back = handed + back[shared:]
    shared_j = 0
    while shared_j < min(len(out), len(judged)) and out[shared_j] == judged[shared_j]:
        shared_j += 1
    rows = [("host, CLI to the worker's pipe", out), ("worker, request loop to the op", inside),
            ("host, the reply read into its Answer (below the shared loop)", back),
            ("host, to the judge (below the shared loop)", judged[shared_j:])]
    for what, frames in rows:
        print(f"{what}: {len(frames)}")
        for f in frames:
            print(f"    {f}")
    total = sum(len(f) for _, f in rows)
    files = {f.split(":")[0] for _, frames in rows for f in frames}
    print(f"total: {total} hops through {len(files)} files")


if __name__ == "__main__":
    main()
