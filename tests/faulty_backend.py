"""A test-only worker: a real backend's worker with faults injected (tests/test_faults.py).

IRTRACE_FAULT_BASE: the worker module wrapped (e.g. backends.oracle.worker).
IRTRACE_FAULT: comma-separated KIND:OP[:MODE] (the fault fires when OP runs in MODE, default every
mode; MODE "many": when a batch with OP is computed in one go, run_many) or a start-up fault KIND alone:
  segv      a real segmentation fault inside the op
  kill      SIGKILL of the worker mid-call
  hang      the op never returns
  memory    MemoryError inside the op
  garbage   bytes that are not a frame on the worker's output stream, then the real answer
  import    the op imports a module that does not exist
  startkill SIGKILL while starting, once (IRTRACE_FAULT_ONCE: a file that marks it done)
  startimport  the worker's own import fails, every time
  slow      the op takes IRTRACE_FAULT_DELAY seconds (default 0.1) more; OP "*": every op
  starthang SIGKILL-free hang while starting (its hello never comes), once (IRTRACE_FAULT_ONCE)
"""
import ctypes
import importlib
import os
import signal
import time

BASE = os.environ["IRTRACE_FAULT_BASE"]
FAULTS = [f.split(":") for f in os.environ.get("IRTRACE_FAULT", "").split(",") if f]


def fire(kind):
    if kind == "segv":
        ctypes.string_at(0)
    elif kind == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    elif kind == "hang":
        time.sleep(3600)
    elif kind == "memory":
        raise MemoryError("planted: cannot allocate 17179869184 bytes")
    elif kind == "garbage":
        os.write(1, b"Warning: not a frame at all\n")
    elif kind == "slow":
        time.sleep(float(os.environ.get("IRTRACE_FAULT_DELAY", "0.1")))
    elif kind == "import":
        importlib.import_module("irtrace_planted_missing_module")


def _wrap(adapter, mode):
    inner = getattr(adapter, mode)

    def faulty(entry, inputs, spec, *rest, **kw):
        for kind, op, *when in (f for f in FAULTS if len(f) > 1):
            if op in (spec.op_type, "*") and (not when or when[0] == mode):
                fire(kind)
        return inner(entry, inputs, spec, *rest, **kw)
    setattr(adapter, mode, faulty)


def _wrap_many(adapter):
    """A batch computed in one go (onnxruntime's one session): KIND:OP:many fires there when OP is in
    the batch; nodes with another fault planted are left to run one by one, where it fires."""
    inner = adapter.run_many

    def faulty(mode, items):
        for kind, op, *when in (f for f in FAULTS if len(f) > 1):
            if when == ["many"] and any(op == spec.op_type for spec, _ in items):
                fire(kind)
        planted = {op for kind, op, *when in (f for f in FAULTS if len(f) > 1) if not when or when[0] == mode}
        keep = [k for k, (spec, _) in enumerate(items) if spec.op_type not in planted]
        got = inner(mode, [items[k] for k in keep])
        return {keep[j]: v for j, v in got.items()}
    adapter.run_many = faulty


def make_adapter():
    kinds = [f[0] for f in FAULTS if len(f) == 1]
    if "startimport" in kinds:
        importlib.import_module("irtrace_planted_missing_framework")
    once = os.environ.get("IRTRACE_FAULT_ONCE")
    if "startkill" in kinds and once and not os.path.exists(once):
        open(once, "w").close()
        os.kill(os.getpid(), signal.SIGKILL)
    if "starthang" in kinds and once and not os.path.exists(once):
        open(once, "w").close()
        time.sleep(3600)
    adapter = importlib.import_module(BASE).make_adapter()
    for mode in ("fwd", "vjp", "vjp2"):
        if hasattr(adapter, mode):
            _wrap(adapter, mode)
    _wrap_many(adapter)
    return adapter
