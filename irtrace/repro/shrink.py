"""Shrink a failing node while the same verdict persists on the same backend.

The shape of Hypothesis' shrinker: one predicate, ordered passes that propose smaller
candidates, a seen-set, a call budget, a fixpoint loop. Candidates are never checked for
validity by hand: the reference (torch) runs each one, and a candidate torch rejects
(e.g. channels no longer divisible by the group) is simply not smaller-and-failing."""
import hashlib
import time
from dataclasses import dataclass, replace

import numpy as np

from backends._runtime.wire import is_float


@dataclass(frozen=True)
class Case:
    inputs: tuple          # arrays or None (an omitted optional input)
    us: tuple              # vjp2 directions, shaped like the float inputs
    cot_style: str = "slice"   # "slice": the recorded cotangent's leading block; "ones"
    attrs: tuple = ()          # ((name, value), ...): attributes that replace the node's own

    def key(self):
        h = hashlib.sha1((self.cot_style + repr(self.attrs)).encode())
        for group in (self.inputs, self.us):
            for a in group:
                if a is None:
                    h.update(b"none")
                else:
                    a = np.ascontiguousarray(a)
                    h.update(f"{a.dtype.str}{a.shape}".encode())
                    h.update(a.tobytes())
        return h.hexdigest()

    def shapes(self):
        return [None if a is None else list(np.shape(a)) for a in self.inputs]

    def size(self):
        return sum(int(np.size(a)) for a in self.inputs if a is not None)


def _take(a, axis, n):
    index = [slice(None)] * a.ndim
    index[axis] = slice(0, n)
    return np.ascontiguousarray(a[tuple(index)])


def _sizes(v):
    """Smaller sizes to try for a dimension of size v, most aggressive first."""
    return sorted({s for s in (1, 2, 3, v // 2, v - 1) if 0 < s < v})


def shared_dims(case):
    """Shrink one size value everywhere it occurs (keeps linked dims linked: channels of x and w)."""
    values = sorted({d for a in case.inputs if a is not None and is_float(a.dtype) for d in a.shape if d > 1},
                    reverse=True)
    for v in values:
        for n in _sizes(v):
            def cut(a):
                if a is None or not is_float(a.dtype):
                    return a
                for ax, d in enumerate(a.shape):
                    if d == v:
                        a = _take(a, ax, n)
                return a
            yield replace(case, inputs=tuple(cut(a) for a in case.inputs), us=tuple(cut(u) for u in case.us))


def each_axis(case):
    """Shrink one axis of one input."""
    for i, a in enumerate(case.inputs):
        if a is None or a.dtype.kind not in "fiub" or a.ndim == 0:
            continue
        for ax, d in enumerate(a.shape):
            for n in _sizes(d):
                inputs = list(case.inputs)
                us = list(case.us)
                inputs[i] = _take(a, ax, n)
                if i < len(us) and us[i] is not None and us[i].shape == a.shape:
                    us[i] = _take(us[i], ax, n)
                yield replace(case, inputs=tuple(inputs), us=tuple(us))


def drop_optional(case, optional):
    """Omit trailing optional inputs (a bias)."""
    for i in sorted(optional, reverse=True):
        if i < len(case.inputs) and case.inputs[i] is not None:
            inputs = list(case.inputs)
            inputs[i] = None
            yield replace(case, inputs=tuple(inputs))


def simpler_values(case):
    """Fewer distinct values: small integers, then zeros, one float input at a time."""
    for transform in (lambda a: np.round(a).astype(a.dtype), lambda a: np.clip(np.round(a), -2, 2).astype(a.dtype),
                      lambda a: np.zeros_like(a)):
        for i, a in enumerate(case.inputs):
            if a is None or not is_float(a.dtype):
                continue
            b = transform(a)
            if not np.array_equal(a, b):
                inputs = list(case.inputs)
                inputs[i] = b
                yield replace(case, inputs=tuple(inputs))


def lower_rank(case, floor=1):
    """One size-1 axis fewer in every float input of the highest rank (with its direction u), and its
    entries out of integer inputs that describe each axis (Pad's pads: begin and end per axis, a
    shape: one per axis). Only offered for ops without axis attributes (see shrink())."""
    floats = [a for a in case.inputs if a is not None and is_float(a.dtype)]
    if not floats:
        return
    r = max(a.ndim for a in floats)
    if r <= max(floor, 1):
        return
    for ax in range(r):
        if any(a.ndim == r and a.shape[ax] != 1 for a in floats):
            continue

        def cut(a):
            if a is None:
                return a
            if is_float(a.dtype):
                return np.ascontiguousarray(a.reshape(a.shape[:ax] + a.shape[ax + 1:])) if a.ndim == r else a
            if a.ndim == 1 and a.size == 2 * r:
                return np.ascontiguousarray(np.delete(a, [ax, ax + r]))
            if a.ndim == 1 and a.size == r:
                return np.ascontiguousarray(np.delete(a, [ax]))
            return a
        yield replace(case, inputs=tuple(cut(a) for a in case.inputs), us=tuple(cut(u) for u in case.us))


def nondegenerate(case):
    """An all-zero per-axis integer input (Pad's pads: a no-op a maintainer might dismiss) made one
    on the last two axes (a one-pixel pad of the spatial dims), kept when the verdict persists."""
    floats = [a for a in case.inputs if a is not None and is_float(a.dtype)]
    if not floats:
        return
    r = max(a.ndim for a in floats)
    for i, a in enumerate(case.inputs):
        if a is not None and a.dtype.kind in "iu" and a.ndim == 1 and a.size == 2 * r and r >= 1 and not a.any():
            b = a.copy()
            for ax in range(max(r - 2, 0), r):
                b[ax] = b[ax + r] = 1
            inputs = list(case.inputs)
            inputs[i] = b
            yield replace(case, inputs=tuple(inputs))


def simpler_attrs(case, attrs, op_type):
    """Plainer attributes: strides and dilations of 1, no padding, and for a grouped Conv one group
    (its input cut to the channels one group reads, so the weight still fits)."""
    current = {**attrs, **dict(case.attrs)}
    plain = {"strides": 1, "dilations": 1, "pads": 0}
    for name, v in sorted(current.items()):
        if name in plain and isinstance(v, (list, tuple)) and any(int(x) != plain[name] for x in v):
            yield replace(case, attrs=tuple(sorted({**dict(case.attrs), name: [plain[name]] * len(v)}.items())))
    g = current.get("group", 1)
    x, w = (case.inputs + (None, None))[:2]
    if op_type == "Conv" and isinstance(g, int) and g > 1 and x is not None and w is not None and x.ndim >= 3:
        inputs, us = list(case.inputs), list(case.us)
        inputs[0] = _take(x, 1, w.shape[1])
        if us and us[0] is not None and us[0].shape == x.shape:
            us[0] = _take(us[0], 1, w.shape[1])
        yield replace(case, inputs=tuple(inputs), us=tuple(us), attrs=tuple(sorted({**dict(case.attrs), "group": 1}.items())))


def ones_cotangent(case):
    if case.cot_style != "ones":
        yield replace(case, cot_style="ones")


@dataclass
class Stats:
    calls: int = 0
    accepted: int = 0
    seconds: float = 0.0
    stopped: str = "fixpoint"


def shrink(case, predicate, optional=(), budget=300, seconds=90.0, rank=False, attrs=None, op_type=""):
    """The smallest case found for which predicate(case) holds (the original holds). `rank`: also try
    fewer axes (for ops whose attributes name no axis)."""
    passes = [shared_dims, each_axis, lambda c: drop_optional(c, optional), simpler_values, ones_cotangent]
    if attrs:
        passes.append(lambda c: simpler_attrs(c, attrs, op_type))
    if rank:  # fewer axes, down to 4 (the NCHW a maintainer reads at a glance) or the original rank
        floor = min(4, max((a.ndim for a in case.inputs if a is not None and is_float(a.dtype)), default=1))
        passes.insert(2, lambda c: lower_rank(c, floor))
        passes.append(nondegenerate)
    seen = {case.key()}
    stats = Stats()
    t0 = time.perf_counter()
    improved = True
    while improved:
        improved = False
        for p in passes:
            for cand in p(case):
                if stats.calls >= budget or time.perf_counter() - t0 > seconds:
                    stats.stopped = "budget"
                    stats.seconds = time.perf_counter() - t0
                    return case, stats
                k = cand.key()
                if k in seen:
                    continue
                seen.add(k)
                stats.calls += 1
                if predicate(cand):
                    case = cand
                    stats.accepted += 1
                    improved = True
                    break
            if improved:
                break
    stats.seconds = time.perf_counter() - t0
    return case, stats
