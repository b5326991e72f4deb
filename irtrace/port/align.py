"""Aligning a user's port with a bundle: its parameters by state_dict key (with the map file's renames
and layout transforms, and the layouts its framework stores unambiguously), its modules by path (a
module's output is the value its last node makes)."""
import re
import tomllib
from dataclasses import dataclass, field

import numpy as np

from irtrace.errors import IrtraceError

TRANSFORMS = ("transpose", "reshape", "hwio")


@dataclass(frozen=True)
class PortMap:
    """A map file (TOML): `[[rename]]` tables with `from` (a regex on the port's names: parameters and
    module paths) and `to` (its replacement, re.sub syntax), applied in order; `[transpose]` port name ->
    the axes of the bundle value's transpose (numpy order); `[reshape]` port name -> true (reshape the
    bundle's value to the port parameter's shape, same size)."""
    renames: tuple = ()
    transpose: dict = field(default_factory=dict)
    reshape: dict = field(default_factory=dict)

    def bundle_name(self, port_name):
        """The bundle's name for a port name (parameter or module path)."""
        for rx, to in self.renames:
            port_name = rx.sub(to, port_name)
        return port_name


def read_map(path):
    """The PortMap of a TOML file; IrtraceError (one line) for anything it cannot use."""
    if path is None:
        return PortMap()
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except OSError as e:
        raise IrtraceError(f"--map {path}: cannot read it ({e.strerror})") from None
    except tomllib.TOMLDecodeError as e:
        raise IrtraceError(f"--map {path}: not TOML: {e}") from None
    unknown = set(data) - {"rename", "transpose", "reshape"}
    if unknown:
        raise IrtraceError(f"--map {path}: unknown section(s) {sorted(unknown)}; it has [[rename]], [transpose], "
                           f"[reshape]")
    renames = []
    for k, r in enumerate(data.get("rename", [])):
        if not isinstance(r, dict) or not isinstance(r.get("from"), str) or not isinstance(r.get("to"), str):
            raise IrtraceError(f"--map {path}: rename[{k}] needs a string `from` (a regex) and a string `to`")
        try:
            renames.append((re.compile(r["from"]), r["to"]))
        except re.error as e:
            raise IrtraceError(f"--map {path}: rename[{k}].from {r['from']!r}: {e}") from None
    transpose = data.get("transpose", {})
    if not isinstance(transpose, dict) or not all(isinstance(v, list) and all(isinstance(i, int) for i in v)
                                                 for v in transpose.values()):
        raise IrtraceError(f"--map {path}: [transpose] maps a port parameter name to a list of axes")
    reshape = data.get("reshape", {})
    if not isinstance(reshape, dict) or not all(v is True for v in reshape.values()):
        raise IrtraceError(f"--map {path}: [reshape] maps a port parameter name to true")
    return PortMap(tuple(renames), dict(transpose), dict(reshape))


def _squeezed(shape):
    return [d for d in shape if d != 1]


def reshapes_cleanly(src, dst):
    """Whether reshaping `src` to `dst` keeps every axis's meaning: the same axes up to size-1 ones
    (BatchNorm's (C,) as (1, C, 1, 1)), or the leading axis split in two (a grouped conv's (O, I, kh, kw)
    as (G, O/G, I, kh, kw))."""
    src, dst = list(src), list(dst)
    if int(np.prod(src)) != int(np.prod(dst)):
        return False
    if _squeezed(src) == _squeezed(dst):
        return True
    return len(dst) == len(src) + 1 and dst[0] * dst[1] == src[0] and dst[2:] == src[1:]


def transform(array, how, shape):
    """The bundle's `array` in the port's layout: how is None (as is), "transpose" (2-D), a list of axes,
    "reshape" or "hwio" (a conv filter (O, I, kh, kw) as (kh, kw, I, O))."""
    a = np.asarray(array)
    if how is None:
        return a
    if how == "transpose":
        return np.ascontiguousarray(a.T)
    if how == "hwio":
        return np.ascontiguousarray(np.transpose(a, list(range(2, a.ndim)) + [1, 0]))
    if how == "reshape":
        return a.reshape(shape)
    return np.ascontiguousarray(np.transpose(a, how))


def untransform(array, how, shape):
    """The port's `array` (a gradient) back in the bundle's layout `shape`."""
    a = np.asarray(array)
    if how is None:
        return a
    if how == "transpose":
        return np.ascontiguousarray(a.T)
    if how == "hwio":
        n = a.ndim
        return np.ascontiguousarray(np.transpose(a, [n - 1, n - 2] + list(range(n - 2))))
    if how == "reshape":
        return a.reshape(shape)
    return np.ascontiguousarray(np.transpose(a, np.argsort(how)))


@dataclass(frozen=True)
class Loaded:
    """One port parameter or buffer and the bundle value loaded into it."""
    port: str
    bundle: str
    kind: str          # "parameter" | "buffer"
    how: object        # None, "transpose", "reshape", "hwio" or a list of axes
    port_shape: tuple
    bundle_shape: tuple


def match(bundle_values, port_params, layouts, mapping):
    """[Loaded] for every port parameter and buffer; IrtraceError listing every bundle parameter or buffer
    with no port parameter, every port parameter with no bundle value, and every shape no transform
    reconciles: a half-loaded port is never compared. `bundle_values`: state_dict key -> (kind, shape);
    `port_params`: the worker's [{"name", "shape", "kind"}]; `layouts`: port name -> automatic transforms
    its framework allows; `mapping`: a PortMap."""
    loaded, missing, problems = [], [], []
    seen = set()
    for p in port_params:
        name = mapping.bundle_name(p["name"])
        if name not in bundle_values:
            if p["kind"] == "parameter":
                missing.append(p["name"] + (f" (as {name})" if name != p["name"] else ""))
            continue  # a buffer the bundle does not have (num_batches_tracked's cousins): left as the port made it
        seen.add(name)
        kind, shape = bundle_values[name]
        want = tuple(p["shape"])
        how = None
        if p["name"] in mapping.transpose:
            how = list(mapping.transpose[p["name"]])
            if sorted(how) != list(range(len(shape))):
                problems.append(f"{p['name']}: the map's transpose {how} does not fit the bundle's shape {list(shape)}")
                continue
        elif p["name"] in mapping.reshape:
            how = "reshape"
        else:
            # a layout its framework declares is how the port stores the value wherever it fits, also where the
            # bundle's shape is the port's too (a square Dense kernel is [in, out] all the same); a reshape only
            # where the shapes differ (it is the identity otherwise)
            for candidate in layouts.get(p["name"], ()):
                if candidate == "reshape" and tuple(shape) != want and reshapes_cleanly(shape, want) or \
                        candidate == "transpose" and len(shape) == 2 and tuple(shape[::-1]) == want or \
                        candidate == "hwio" and len(shape) >= 3 and tuple(shape[2:]) + (shape[1], shape[0]) == want:
                    how = candidate
                    break
        got = tuple(transform(np.zeros(shape, np.float32), how, want).shape) if how != "reshape" else \
            (want if int(np.prod(shape)) == int(np.prod(want)) else None)
        if got != want:
            problems.append(f"{p['name']}: the port's shape {list(want)}, the bundle's {name} {list(shape)}"
                            + (f" (after {how})" if how is not None else "") + "; add a [transpose] or [reshape] for "
                            "it in --map")
            continue
        loaded.append(Loaded(p["name"], name, p["kind"], how, want, tuple(shape)))
    unused = [n for n, (kind, _) in bundle_values.items() if n not in seen and kind == "parameter"]
    lines = []
    if unused:
        lines.append(f"{len(unused)} bundle parameter(s) with no port parameter: {', '.join(unused[:8])}"
                     + (", ..." if len(unused) > 8 else ""))
    if missing:
        missing.sort()  # the port's own order is its framework's (definition or alphabetical): one message for all
        lines.append(f"{len(missing)} port parameter(s) with no bundle value: {', '.join(missing[:8])}"
                     + (", ..." if len(missing) > 8 else ""))
    if problems:
        lines.append(f"{len(problems)} shape(s) that do not match: {'; '.join(problems[:4])}")
    if lines:
        raise IrtraceError("the port's parameters do not match the bundle's (nothing was run): " + "; ".join(lines)
                           + " — rename them with --map ([[rename]] from/to regexes)")
    return loaded


def module_values(model, sources, state_values=()):
    """Module path -> the value its last node makes (its first output, never an updated running stat), for
    every module scope of the bundle and every enclosing scope, in topological order of those values."""
    last = {}
    for n in model.graph.node:
        path = (sources.get(n.name) or {}).get("module") or ""
        outs = [o for o in n.output if o and o not in state_values]
        if not path or not outs:
            continue
        parts = path.split(".")
        for k in range(1, len(parts) + 1):
            last[".".join(parts[:k])] = outs[0]
    order = {o: i for i, n in enumerate(model.graph.node) for o in n.output}
    return dict(sorted(last.items(), key=lambda kv: order.get(kv[1], 0)))


def nodes_in(model, sources, path):
    """The names of the bundle's nodes inside module `path` (its scope and every scope below it)."""
    return [n.name for n in model.graph.node
            if ((sources.get(n.name) or {}).get("module") or "") == path
            or ((sources.get(n.name) or {}).get("module") or "").startswith(path + ".")]
