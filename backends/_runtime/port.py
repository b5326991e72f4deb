"""The user's own port, run in its framework's worker (`irtrace port`): build it from its factory,
describe it, load the bundle's weights into it, run one training step with every submodule's output,
the gradients and the buffers captured. Requests "port-describe" and "port-run".

The framework's part is its backend's port module (the adapter's `port`, e.g. backends/megengine/port.py),
numpy and that framework only, with:
  parameters(module)  -> [(name, value, "parameter" | "buffer")]
  layouts(module)     -> {name: [automatic layout transforms, in order of preference]}
  modules(module)     -> [(path, class name, {attribute: value})]   attributes in ONNX's words (pads, strides,
                         dilations, group, epsilon, momentum, running_var_estimator, approximate): what the host
                         compares with the bundle's nodes
  load(module, {name: numpy array in the port's layout})
  not_ready(module)   -> None, or why the module cannot be described yet (optional: a Keras model not built)
  run(module, inputs, seeds, loss, train) -> {"outputs": [...], "modules": {path: array},
                         "grads": {path: array}, "params": {name: array}, "buffers": {name: array},
                         optionally "notes": [str] and "attributes": {path: {attribute: value}} (what the step
                         showed, e.g. the pads a 'same' padding took at the input's size)}
A factory that takes a `recorded` keyword gets the bundle's recorded random values (dropout masks by
`<module>.dropout_mask`, draws by `<module>.random_<op>`): a port that uses them draws what torch drew.
"""
import importlib
import inspect
import os
import sys
import traceback

import numpy as np

from backends._runtime import wire
from backends._runtime.adapter import error_text


def handle(adapter, kind, msg, arrays):
    """(reply, arrays) of one port request."""
    driver = importlib.import_module(adapter.port)
    try:
        module = _built(adapter, msg, arrays)
        if not driver.is_module(module):
            raise _FactoryFailed(f"the port factory {msg['factory']!r} returned a {type(module).__name__}, not a "
                                 f"{adapter.framework} module")
        why = driver.not_ready(module) if hasattr(driver, "not_ready") else None
        if why:
            raise _FactoryFailed(f"the port factory {msg['factory']!r}: {why}")
    except _FactoryFailed as e:
        return {"status": wire.Status.ERROR, "message": str(e), "stage": "factory"}, []
    try:
        return _answer(driver, module, kind, msg, arrays)
    except OutputsDiffer as e:
        return {"status": wire.Status.ERROR, "message": str(e), "stage": "outputs"}, []
    except Exception as e:  # noqa: BLE001 - the framework or the user's code raised: its words, one reply
        # the framework's words without its C++ stack (MegEngine's "backtrace:", OneFlow's '  File "...cpp"' lines)
        said = error_text(e).split('\n  File "')[0].strip()
        lines = [line.strip() for line in said.splitlines() if line.strip()]
        # the framework's first line (Paddle's "[Hint: ...]" and C++ context follow it), with the next where it
        # ends at a colon
        said = " ".join(lines[:2] if lines and lines[0].endswith(":") else lines[:1])
        return {"status": wire.Status.ERROR, "message": said[:2000], "stage": kind[5:], "at": _user_frame(e, driver)}, []


def _user_frame(e, driver):
    """Where in the user's code the exception was raised ("ports/resnet.py:41: x = paddle.flatten(x, 1)"), or
    None where it was raised in the framework's backward, which the driver calls (no line of the port's is
    on the stack then): the innermost frame outside the Python installation, the framework and this runtime."""
    skip = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, os.path.dirname(__file__),
                                          os.path.dirname(driver.__file__))}
    frames = [f for f in traceback.extract_tb(e.__traceback__)
              if not any(os.path.realpath(f.filename).startswith(s + os.sep) for s in skip)
              and "-packages" + os.sep not in f.filename]
    if not frames:
        return None
    f = frames[-1]
    return f"{os.path.relpath(f.filename) if not f.filename.startswith('..') else f.filename}:{f.lineno}" + \
        (f": {f.line.strip()}" if f.line else "")


def _answer(driver, module, kind, msg, arrays):
    if kind == "port-describe":
        params = driver.parameters(module)
        return {"status": wire.Status.OK,
                "parameters": [{"name": n, "shape": list(np.shape(v)), "dtype": str(np.asarray(v).dtype), "kind": k}
                               for n, v, k in params],
                "layouts": driver.layouts(module),
                "modules": [{"path": p, "class": c, "attributes": a} for p, c, a in driver.modules(module)],
                "took_recorded": module in _TOOK_RECORDED}, []
    counts = msg["counts"]
    parts, at = [], 0
    for n in counts:
        parts.append(arrays[at:at + n])
        at += n
    weights, inputs, seeds = parts[0], parts[1], parts[2]
    driver.load(module, dict(zip(msg["weights"], weights)))
    got = driver.run(module, inputs, seeds, msg["loss"], bool(msg.get("train")))
    names, out = [], []
    for section in ("modules", "grads", "params", "buffers"):
        for k, v in got.get(section, {}).items():
            if v is not None:
                names.append([section, k])
                out.append(np.asarray(v))
    for k, v in enumerate(got.get("outputs", [])):
        names.append(["outputs", str(k)])
        out.append(np.asarray(v))
    return {"status": wire.Status.OK, "names": names, "notes": got.get("notes", []),
            "attributes": got.get("attributes", {})}, out


class _FactoryFailed(Exception):
    pass


_TOOK_RECORDED = []  # the modules whose factory took the recorded random values


class OutputsDiffer(Exception):
    """The port's outputs are not the bundle's model's (their number or shapes): a usage error."""


def check_outputs(shapes, seeds):
    """Raise OutputsDiffer unless the port's output `shapes` are those of the loss seeds (one per output)."""
    want = [list(np.shape(c)) for c in seeds]
    got = [list(s) for s in shapes]
    if got != want:
        raise OutputsDiffer(f"the port returned {len(got)} output(s) of shape(s) {got}; the bundle's model returns "
                            f"{len(want)} of shape(s) {want}")


def _built(adapter, msg, arrays):
    """The port module of `msg["factory"]` ("pkg.module:callable"), built once per worker (a run reuses the
    module its describe built: the same weights are loaded into it)."""
    key = (msg["factory"], tuple(msg.get("path") or ()))
    cache = adapter.__dict__.setdefault("_ports", {})
    if key in cache:
        return cache[key]
    for p in reversed(msg.get("path") or ()):
        if p not in sys.path:
            sys.path.insert(0, p)
    mod_name, _, fn_name = msg["factory"].partition(":")
    try:
        factory = getattr(importlib.import_module(mod_name), fn_name or "factory")
    except Exception as e:  # noqa: BLE001 - the user's code: its error, one line
        raise _FactoryFailed(f"cannot import the port factory {msg['factory']!r}: {type(e).__name__}: {e}") from e
    kw = {}
    try:
        takes = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        takes = {}
    if "recorded" in takes:
        kw["recorded"] = dict(zip(msg.get("recorded", []), arrays[:len(msg.get("recorded", []))]))
    try:
        module = factory(**kw)
    except Exception as e:  # noqa: BLE001 - the user's code: its error, one line
        raise _FactoryFailed(f"the port factory {msg['factory']!r} raised {type(e).__name__}: {e}") from e
    cache[key] = module
    if kw:
        _TOOK_RECORDED.append(module)
    return module
