"""The backends irtrace knows: where each one's worker runs and how to make it available."""
import importlib.util
import os
import sys
from dataclasses import dataclass, field

from irtrace.errors import IrtraceError, suggest


@dataclass(frozen=True)
class BackendInfo:
    name: str
    worker: str                 # module with make_adapter(), e.g. backends.torch.worker
    needs: tuple = ()           # modules that must import in its environment
    install: str = ""           # the exact command that makes it available
    description: str = ""
    python: object = None       # callable -> interpreter path; None: this interpreter
    extra_path: tuple = ()      # folders prepended to the worker's PYTHONPATH
    env: dict = field(default_factory=dict)

    def interpreter(self):
        return self.python() if self.python is not None else sys.executable

    def unavailable(self):
        """None when available, else the reason."""
        if self.python is not None:
            try:
                exe = self.python()
            except IrtraceError as e:
                return str(e)
            return None if os.path.exists(exe) else f"{exe} does not exist"
        missing = [m for m in self.needs if importlib.util.find_spec(m) is None]
        return f"cannot import {', '.join(missing)}" if missing else None


_HOST = "make env  (or: pip install -r requirements-host.txt)"
BACKENDS = {}


def register(info):
    """Add a backend (a test may register a planted-bug one). Re-registering a name replaces it."""
    BACKENDS[info.name] = info
    return info


register(BackendInfo("torch", "backends.torch.worker", ("torch",), _HOST,
                     "PyTorch eager, fwd/vjp/vjp2 through torch.autograd (the reference)"))
register(BackendInfo("onnxruntime", "backends.onnxruntime.worker", ("onnxruntime", "onnx"), _HOST,
                     "onnxruntime CPU, one-node sessions, graph optimizations off, fwd only"))
register(BackendInfo("oracle", "backends.oracle.worker", ("torch", "onnx"), _HOST,
                     "float64: onnx.reference forward (fixed where it is wrong), torch float64 gradients "
                     "cross-checked by finite differences"))
register(BackendInfo("onnxref", "backends.onnxref.worker", ("onnx",), _HOST,
                     "onnx.reference as shipped, float32, fwd only (a backend under test)"))


def get(name):
    if name not in BACKENDS:
        raise IrtraceError(f"unknown backend {name!r}; known: {', '.join(BACKENDS)}.{suggest(name, BACKENDS)}")
    return BACKENDS[name]


def parse_list(text):
    names = [b.strip() for b in text.split(",") if b.strip()]
    for n in names:
        get(n)
    return names


def _megengine_python():
    from irtrace import envs
    return envs.get("megengine").python()


register(BackendInfo("megengine", "backends.megengine.worker", (), "irtrace setup megengine",
                     "MegEngine 1.13 (Python 3.10 env), fwd/vjp/vjp2 through GradManager", python=_megengine_python,
                     env={"MEGENGINE_LOGGING_LEVEL": "ERROR"}))
