"""What several backends' op tables compute the same way: attribute and shape arithmetic on python
ints (numpy only), ONNX's Gemm scaling, and registration of op families whose only difference
between frameworks is the framework call each backend passes in.

Numpy and the standard library only: a worker imports this in its framework's environment. A repro
inlines what an op function uses from here (backends/_runtime/source.py), and the straight-line
script folds the arithmetic away (irtrace/repro/straight.py), so what it shows is the framework's
own calls."""
import numpy as np


def ints(t):
    """A shape-like input (a framework tensor, array or list) as python ints."""
    if t is None:
        return None
    a = t.numpy() if hasattr(t, "numpy") else np.asarray(t)
    return [int(v) for v in np.asarray(a).reshape(-1)]


def axis(a, rank):
    return a + rank if a < 0 else a


def pad_list(pads):
    """ONNX [b1..bn, e1..en] -> the last-dim-first [b_n, e_n, ..., b_1, e_1] of torch's and OneFlow's
    functional.pad."""
    r = len(pads) // 2
    out = []
    for i in reversed(range(r)):
        out += [pads[i], pads[i + r]]
    return out


def symmetric_pool_pads(pads, kernel):
    """Whether a pool's ONNX pads fit a framework pool that pads each side alike by at most half the
    kernel (torch's, OneFlow's and MegEngine's): otherwise the input is padded explicitly first."""
    r = len(kernel)
    return pads[:r] == pads[r:] and all(p <= k // 2 for p, k in zip(pads[:r], kernel))


def reduced_axes(axes, rank, noop_with_empty_axes):
    """The axes an ONNX Reduce* node reduces, as a tuple; no axes: every one, or with
    noop_with_empty_axes none (None: the input is returned as it is)."""
    a = ints(axes)
    if not a:
        return None if noop_with_empty_axes else tuple(range(rank))
    return tuple(a)


def register_reduce(table, name, fn, since=18, unchanged=None):
    """Register ONNX's `name` (a Reduce* op with its axes as an input) in `table` as
    `fn(x, axes, keepdims)`, axes a tuple of ints. `unchanged(x)`: what a reduction over no axes
    returns (default: x itself)."""
    @table.register(name, since=since)
    def op(x, axes=None, *, keepdims=1, noop_with_empty_axes=0):
        dims = reduced_axes(axes, len(x.shape), noop_with_empty_axes)
        if dims is None:
            return x if unchanged is None else unchanged(x)
        return fn(x, dims, bool(keepdims))
    op.__name__ = name.lower()
    return op


def register_variadic(table, name, binary):
    """Register ONNX's variadic `name` (Max, Min, Sum) in `table`: the framework's `binary` op folded
    over the inputs."""
    def op(*xs):
        out = xs[0]
        for x in xs[1:]:
            out = binary(out, x)
        return out
    op.__name__ = name.lower()
    table.register(name, since=8)(op)


def scaled(y, alpha):
    return y if alpha == 1.0 else alpha * y


def gemm_sum(y, c, alpha, beta):
    """Gemm's alpha * (A B) + beta * C from y = A B, without multiplying by a factor of 1 or adding a
    missing C."""
    return scaled(y, alpha) if c is None else scaled(y, alpha) + scaled(c, beta)


def full_pads(pads, axes, r):
    """ONNX Pad's pads (for `axes`, or all r axes) as [b1..br, e1..er] over every axis, python ints."""
    p = ints(pads)
    if axes is None:
        return p
    ax = [axis(a, r) for a in ints(axes)]
    full = [0] * (2 * r)
    for i, a in enumerate(ax):
        full[a], full[a + r] = p[i], p[i + len(ax)]
    return full


def trailing_pad_list(pads, axes, r):
    """ONNX Pad's pads as torch's and OneFlow's functional.pad list, which pads trailing dims only:
    the leading dims without padding left out, so reflect/replicate accept it."""
    p = full_pads(pads, axes, r)
    lead = 0
    while lead < r and p[lead] == 0 and p[lead + r] == 0:
        lead += 1
    return pad_list(p)[: 2 * (r - lead)] if lead < r else []


def reshape_shape(shape, in_shape, allowzero):
    """ONNX Reshape's target shape as python ints: a 0 copies the input's dimension unless allowzero."""
    s = ints(shape)
    return s if allowzero else [in_shape[i] if v == 0 else v for i, v in enumerate(s)]


def flatten_shape(in_shape, axis):
    """ONNX Flatten's 2-D output shape: the dimensions before `axis` as one, those from it as the other."""
    a = axis + len(in_shape) if axis < 0 else axis
    return [int(np.prod(in_shape[:a])), int(np.prod(in_shape[a:]))]


def split_sizes(n, num_outputs):
    """ONNX Split without `split`: equal chunks of ceil(n / num_outputs), the last one smaller."""
    chunk = -(-n // num_outputs)
    return [chunk] * (n // chunk) + ([n % chunk] if n % chunk else [])


def slice_bounds(in_shape, starts, ends, axes, steps):
    """ONNX Slice's inputs as (axis, start, end, step) per sliced axis, python ints, starts and ends
    clamped as ONNX clamps them (INT64_MAX / INT64_MIN mean "to the end"): into [0, n] for a positive
    step, into [-1, n - 1] for a negative one (-1: before the first element)."""
    starts, ends = ints(starts), ints(ends)
    axes = ints(axes) if axes is not None else list(range(len(starts)))
    steps = ints(steps) if steps is not None else [1] * len(starts)
    out = []
    for s, e, a, st in zip(starts, ends, axes, steps):
        a = axis(a, len(in_shape))
        n = in_shape[a]
        lo, hi = (0, n) if st > 0 else (-1, n - 1)
        out.append((a, min(max(s + n if s < 0 else s, lo), hi), min(max(e + n if e < 0 else e, lo), hi), st))
    return out


def slice_index(in_shape, starts, ends, axes, steps):
    """ONNX Slice as a numpy-style index: one python slice per dimension, negative steps included."""
    index = [slice(None)] * len(in_shape)
    for a, s, e, st in slice_bounds(in_shape, starts, ends, axes, steps):
        index[a] = slice(s, max(s, e), st) if st > 0 else slice(s, None if e < 0 else e, st)
    return tuple(index)
