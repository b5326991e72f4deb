"""Model targets and input specs as the CLI takes them."""
import importlib
import re
import sys
from pathlib import Path

import numpy as np

from irtrace.errors import IrtraceError, suggest

_SPEC = re.compile(r"^(?P<name>[A-Za-z_][\w.]*)=(?P<shape>\d+(?:x\d+)*|scalar)(?::(?P<dtype>\w+))?$")
_DTYPES = ("float32", "float64", "float16", "int64", "int32", "bool")


def parse_input_spec(spec):
    """'x=2x3x32x32[:float32]' -> (name, shape, dtype)."""
    m = _SPEC.match(spec.strip())
    if not m:
        raise IrtraceError(f"bad --input {spec!r}: expected NAME=DIMxDIM...[:DTYPE], e.g. x=2x3x32x32:float32")
    dtype = m.group("dtype") or "float32"
    if dtype not in _DTYPES:
        raise IrtraceError(f"bad --input {spec!r}: dtype {dtype!r} is not one of {', '.join(_DTYPES)}.{suggest(dtype, _DTYPES)}")
    shape = () if m.group("shape") == "scalar" else tuple(int(d) for d in m.group("shape").split("x"))
    return m.group("name"), shape, dtype


def make_inputs(specs, seed=0):
    """Seeded arrays for parsed specs: N(0, 1) floats, integers in [0, 10), random bools."""
    rng = np.random.default_rng(seed)
    out = {}
    for name, shape, dtype in specs:
        if dtype.startswith("float"):
            out[name] = rng.standard_normal(shape).astype(dtype)
        elif dtype == "bool":
            out[name] = rng.random(shape) < 0.5
        else:
            out[name] = rng.integers(0, 10, shape).astype(dtype)
    return out


def load_input_file(path):
    path = Path(path)
    if not path.is_file():
        raise IrtraceError(f"--input-file {path}: no such file")
    try:
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except (ValueError, OSError) as e:
        raise IrtraceError(f"--input-file {path}: not a numpy .npz file ({e})") from e


def resolve_target(target):
    """'pkg.module:factory' -> (the module object, default inputs or None).

    factory: a callable returning an nn.Module, or an nn.Module attribute. A callable
    `<factory>_inputs` beside it, if any, gives default example inputs."""
    import torch
    if ":" not in target:
        raise IrtraceError(f"bad model {target!r}: expected pkg.module:factory (or a .onnx file)")
    mod_name, attr = target.split(":", 1)
    if "" not in sys.path and "." not in sys.path:
        sys.path.insert(0, "")  # like `python -m`: the user's current folder is importable
    from irtrace.export.thirdparty import make_torchvision_importable
    make_torchvision_importable()
    try:
        mod = importlib.import_module(mod_name)
    except ModuleNotFoundError as e:
        raise IrtraceError(f"cannot import module {mod_name!r} (from {target!r}): {e}") from e
    except Exception as e:
        raise IrtraceError(f"importing module {mod_name!r} raised {type(e).__name__}: {e}") from e
    if not hasattr(mod, attr):
        names = [n for n in dir(mod) if not n.startswith("_")]
        raise IrtraceError(f"module {mod_name!r} has no attribute {attr!r}.{suggest(attr, names)}")
    obj = getattr(mod, attr)
    if not isinstance(obj, torch.nn.Module):
        if not callable(obj):
            raise IrtraceError(f"{target} is a {type(obj).__name__}, not an nn.Module or a factory returning one")
        try:
            obj = obj()
        except Exception as e:
            raise IrtraceError(f"factory {target} raised {type(e).__name__}: {e}") from e
        if not isinstance(obj, torch.nn.Module):
            raise IrtraceError(f"factory {target} returned a {type(obj).__name__}, not an nn.Module")
    defaults = getattr(mod, attr + "_inputs", None)
    return obj, (defaults() if callable(defaults) else None)
