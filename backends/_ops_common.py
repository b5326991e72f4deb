"""What several backends' op tables compute the same way: attribute and shape arithmetic on python
ints (numpy only), ONNX's Gemm scaling, and registration of op families whose only difference
between frameworks is the framework call each backend passes in.

Numpy and the standard library only: a worker imports this in its framework's environment. A repro
inlines what an op function uses from here (backends/_runtime/source.py), and the straight-line
script folds the arithmetic away (irtrace/repro/straight.py), so what it shows is the framework's
own calls."""
from dataclasses import dataclass, fields

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


def _resize_source(y, n_in, scale, out_width, ctm, roi):
    """ONNX Resize's source coordinate of each output index `y` along one axis (float64), and which
    outputs lie outside the input (tf_crop_and_resize only, else None). `out_width` is scale * n_in,
    not rounded: align_corners and tf_crop_and_resize divide by it (onnx.reference does the same)."""
    if ctm == "align_corners":
        return (np.zeros_like(y) if out_width == 1 else y * (n_in - 1) / (out_width - 1)), None
    if ctm == "asymmetric":
        return y / scale, None
    if ctm == "pytorch_half_pixel":  # one output: the spec's 0 (onnx.reference's -0.5 differs for cubic only)
        return (np.zeros_like(y) if out_width == 1 else (y + 0.5) / scale - 0.5), None
    if ctm == "half_pixel":
        return (y + 0.5) / scale - 0.5, None
    if ctm == "half_pixel_symmetric":
        return n_in / 2 * (1 - len(y) / out_width) + (y + 0.5) / scale - 0.5, None
    if ctm == "tf_crop_and_resize":
        lo, hi = roi
        x = (np.full_like(y, (hi - lo) * (n_in - 1) / 2) if out_width == 1
             else y * (hi - lo) * (n_in - 1) / (out_width - 1)) + lo * (n_in - 1)
        return x, (x < 0) | (x > n_in - 1)
    raise ValueError(f"Resize: coordinate_transformation_mode {ctm!r}")


def _cubic(d, a):
    """Keys' cubic convolution kernel at distance d (ONNX Resize's cubic, coefficient a)."""
    d = abs(d)
    if d <= 1:
        return ((a + 2) * d - (a + 3)) * d * d + 1
    return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a if d < 2 else 0.0


def _resize_coeffs(ratio, scale, attrs):
    """The interpolation weights of one output given `ratio` in (0, 1] (the source coordinate minus
    the neighbour before it; 1 on an exact integer), for the n neighbours around it."""
    mode, a, antialias = attrs.mode, float(attrs.cubic_coeff_a), attrs.antialias
    if mode == "nearest":
        if ratio == 1:
            return np.array([0.0, 1.0])
        up = {"round_prefer_floor": ratio > 0.5, "round_prefer_ceil": ratio >= 0.5, "floor": False,
              "ceil": True}[attrs.nearest_mode]
        return np.array([0.0, 1.0] if up else [1.0, 0.0])
    if mode == "linear" and not antialias:
        return np.array([1 - ratio, ratio])
    if mode == "cubic" and not antialias:
        return np.array([_cubic(ratio + 1, a), _cubic(ratio, a), _cubic(1 - ratio, a), _cubic(2 - ratio, a)])
    # antialias: the kernel stretched by 1 / scale when downsampling, normalised to sum 1
    s = min(scale, 1.0)
    start = int(np.floor(-(1 if mode == "linear" else 2) / s) + 1)
    d = np.abs((np.arange(start, 2 - start) - ratio) * s)
    c = np.clip(1 - d, 0, 1) if mode == "linear" else np.array([_cubic(v, a) for v in d])
    return c / c.sum()


@dataclass(frozen=True)
class ResizeAttrs:
    """ONNX Resize's attributes (opset 19), with the spec's defaults."""
    mode: str = "nearest"
    coordinate_transformation_mode: str = "half_pixel"
    nearest_mode: str = "round_prefer_floor"
    cubic_coeff_a: float = -0.75
    exclude_outside: int = 0
    antialias: int = 0
    keep_aspect_ratio_policy: str = "stretch"
    extrapolation_value: float = 0.0

    @classmethod
    def of(cls, attrs):
        """From a node's attributes as keywords (None or absent: the default; unknown ones ignored)."""
        return cls(**{f.name: attrs[f.name] for f in fields(cls) if attrs.get(f.name) is not None})


def resize_plan(in_shape, scales=None, sizes=None, axes=None, roi=None, attrs=ResizeAttrs()):
    """ONNX Resize (opset 19) as separable steps, numpy only, every attribute the spec defines (`attrs`:
    ResizeAttrs): [(axis, index [n_out, n] into that axis, weight [n_out, n] float64, outside [n_out] bool
    or None)], and the output shape. Output i along an axis is sum_k weight[i, k] * x[index[i, k]], or the
    extrapolation value where `outside` is set (tf_crop_and_resize) - onnx.reference's own scheme (its
    n nearest neighbours, edge padding as clamped indices, exclude_outside renormalising), so a
    framework applying it with a gather and a weighted sum computes what the spec defines, infinities
    in far-away inputs included (a dense interpolation matrix would make them 0 * inf = NaN)."""
    r = len(in_shape)
    axes = list(range(r)) if axes is None else [axis(int(v), r) for v in ints(axes)]
    roi_v = [float(v) for v in ints_or_floats(roi)] if roi is not None else None
    roi_v = roi_v or None  # an empty roi: none (np.size of a torch tensor is its bound .size method: truthy)
    full_roi = [(0.0, 1.0)] * r
    if roi_v is not None:
        for i, d in enumerate(axes):
            full_roi[d] = (roi_v[i], roi_v[len(axes) + i])
    scale, out = resize_target(in_shape, scales, sizes, axes, attrs.keep_aspect_ratio_policy)
    steps = []
    for d in axes:
        n_in, n_out = in_shape[d], out[d]
        if n_out == n_in and scale[d] == 1.0 and full_roi[d] == (0.0, 1.0):
            continue  # identity along this axis
        y = np.arange(n_out, dtype=np.float64)
        x, outside = _resize_source(y, n_in, scale[d], scale[d] * n_in, attrs.coordinate_transformation_mode,
                                    full_roi[d])
        base = np.floor(x)
        ratio = np.where(x == base, 1.0, x - base)
        weight = np.array([_resize_coeffs(float(q), scale[d], attrs) for q in ratio]).reshape(n_out, -1)
        n = weight.shape[1]  # even for every mode and antialias footprint
        # the n nearest integers to x, ties to the smaller: they start n // 2 - 1 below floor(x), one
        # lower on an exact integer (where ratio is 1)
        first = base - (n // 2) + np.where(x == base, 0, 1)
        index = first[:, None].astype(np.int64) + np.arange(n)[None, :]
        if attrs.exclude_outside:
            weight = np.where((index < 0) | (index >= n_in), 0.0, weight)
            total = weight.sum(axis=1, keepdims=True)
            weight = weight / np.where(total == 0, 1.0, total)
        steps.append((d, np.clip(index, 0, n_in - 1), weight, outside))
    return steps, out


def resize_target(in_shape, scales, sizes, axes, keep_aspect_ratio_policy="stretch"):
    """ONNX Resize's scale and output size of every dim (python floats and ints): from sizes, out / in
    (one scale for the resized dims under not_larger / not_smaller, the size rounded half up), from
    scales, floor(in * scale)."""
    r = len(in_shape)
    axes = list(range(r)) if axes is None else [axis(int(v), r) for v in ints(axes)]
    sizes_v = (ints(sizes) or None) if sizes is not None else None
    scale, out = [1.0] * r, list(in_shape)
    if sizes_v is not None:
        for d, s in zip(axes, sizes_v):
            out[d] = s
            scale[d] = s / in_shape[d]
        if keep_aspect_ratio_policy != "stretch":
            one = {"not_larger": min, "not_smaller": max}[keep_aspect_ratio_policy](scale[d] for d in axes)
            for d in axes:
                scale[d] = one
                out[d] = int(one * in_shape[d] + 0.5)
    else:
        for d, s in zip(axes, ints_or_floats(scales)):
            # floor(in * scale) in float64, as ONNX's shape inference and onnx.reference take it; onnxruntime
            # multiplies in float32: Keras' Resizing(9, 7) of 20 columns comes out of tf2onnx as scale 0.35f,
            # 6.99999988 in float64 (ONNX: 6 columns) and 7.0 in float32 (onnxruntime and TensorFlow: 7)
            scale[d] = float(s)
            out[d] = int(np.floor(in_shape[d] * float(s)))
    return scale, out


def ints_or_floats(t):
    """A 1-D input that may hold floats (Resize's scales, roi) as python numbers (a float tensor a gradient
    pass marked as requiring grad: detached)."""
    if not hasattr(t, "numpy"):
        return np.asarray(t).reshape(-1).tolist()
    try:
        a = t.numpy()
    except RuntimeError:  # torch: a tensor that requires grad
        a = t.detach().numpy()
    return np.asarray(a).reshape(-1).tolist()


def resize_gap(in_shape, scales, sizes, axes, ctm, policy, derives_scale=False):
    """Why a framework's interpolate - spatial dims only, the output size from the sizes or floor(in *
    scale), coordinates from the scale it is given - does not compute this Resize as ONNX defines it,
    or None. `derives_scale`: the framework takes sizes only and derives its scale from them (in / out),
    which is ONNX's 1 / scale only where in * scale is whole."""
    if policy != "stretch":
        return f"keep_aspect_ratio_policy {policy} (interpolate stretches)"
    scale, out = resize_target(list(in_shape), scales, sizes, axes, policy)
    if out[:2] != list(in_shape[:2]) or scale[:2] != [1.0, 1.0]:
        return "a resize of the batch or channel dim"
    by_scales = not (sizes is not None and ints(sizes))
    # whole up to the float32 rounding of the scale (5 * 0.8f is 4.00000006): there the two mappings differ by
    # a rounding of the coordinates, not a pixel
    whole = all(abs(s * n - o) <= 1e-6 * max(o, 1) for s, n, o in zip(scale[2:], in_shape[2:], out[2:]))
    if by_scales and not whole and ctm == "align_corners":
        return ("align_corners with a scale whose product with the input size is not whole (ONNX divides by "
                "in * scale - 1, interpolate by the output size - 1)")
    if by_scales and not whole and derives_scale:
        return "a scale whose product with the input size is not whole (the framework's scale is in / out)"
    if ctm == "pytorch_half_pixel" and 1 in out[2:]:
        return "pytorch_half_pixel to an output of size 1 (ONNX samples at 0, interpolate at the half-pixel point)"
    return None


def nd_index(indices, shape, batch_dims=0):
    """ONNX GatherND/ScatterND `indices` (..., k) as full coordinates into data of `shape`: each index's batch
    position on the first `batch_dims` axes, then its k values with negative ones wrapped; int64 (..., batch_dims
    + k). With them every framework's gather_nd (none of which takes negatives, few batch dims) is ONNX's."""
    idx, shape = np.asarray(indices).astype(np.int64), tuple(int(d) for d in shape)
    k = idx.shape[-1]
    idx = np.where(idx < 0, idx + np.array(shape[batch_dims:batch_dims + k], np.int64), idx)
    if not batch_dims:
        return idx
    lead = np.indices(idx.shape[:-1])[:batch_dims]  # each index's own position on the batch axes
    return np.concatenate([np.stack(list(lead), axis=-1), idx], axis=-1)


# GridSample's mode as torch-like grid_sample names it (opset 16 says bilinear/bicubic, opset 20 linear/cubic)
GRID_SAMPLE_MODES = {"linear": "bilinear", "bilinear": "bilinear", "cubic": "bicubic", "bicubic": "bicubic",
                     "nearest": "nearest"}


# ONNX's recurrent layers (LSTM: gates i, o, f, c; GRU: z, r, h) on a framework of torch's family, whose fused layer
# keeps its gates as torch does (LSTM i, f, g, o; GRU r, z, n: Paddle's and OneFlow's too): ONNX's gate indices in
# that order. Their GRU resets the recurrent term after its matmul and bias: ONNX's linear_before_reset=1.
RNN_GATES = {"LSTM": (0, 2, 3, 1), "GRU": (1, 0, 2), "RNN": (0,)}
RNN_DEFAULTS = {"LSTM": ["sigmoid", "tanh", "tanh"], "GRU": ["sigmoid", "tanh"]}
RNN_ACTIVATIONS = ("tanh", "relu", "sigmoid")


@dataclass(frozen=True)
class RnnAttrs:
    """ONNX LSTM's, GRU's and RNN's attributes (opset 14), with the spec's defaults: a node's, as its op function
    receives them (register_rnn). input_forget is LSTM's, linear_before_reset GRU's."""
    hidden_size: int
    direction: str = "forward"
    layout: int = 0
    activations: list = None
    activation_alpha: list = None
    activation_beta: list = None
    clip: float = None
    input_forget: int = 0
    linear_before_reset: int = 0


def rnn_unsupported(layer, kind, lens, seq_len, attrs, cannot=(), per_direction=False):
    """Why `layer` (a framework's layer, "Paddle's LSTM") cannot compute the ONNX `kind` node, or None. `lens`: its
    sequence_lens as numpy (or None); `attrs`: its RnnAttrs; `cannot`:
    (what, whether the node asks for it) of the rest the layer lacks. `per_direction`: a layer a direction (Keras's:
    each runs either way, with an RNN activation and a GRU reset of its own), not a fused layer of torch's family
    (forward or both ways, one RNN activation, the reset after the recurrent matmul)."""
    direction, activations = attrs.direction, attrs.activations
    if not per_direction and direction not in ("forward", "bidirectional"):
        return f"{layer} runs forward or both ways, not {direction} only"
    if attrs.clip is not None:
        return f"{layer} has no cell clip"
    if lens is not None and bool((np.asarray(lens) != seq_len).any()):
        return f"{kind} with sequences shorter than the input (sequence_lens {np.asarray(lens).tolist()})"
    defaults = RNN_DEFAULTS.get(kind)
    if defaults and activations is not None and \
            [a.lower() for a in activations] != defaults * (len(activations) // len(defaults)):
        return f"{layer} has the activations {defaults} only, not {activations}"
    if kind == "RNN":
        names = {a.lower() for a in activations} if activations is not None else {"tanh"}
        if not names <= set(RNN_ACTIVATIONS if per_direction else RNN_ACTIVATIONS[:2]) or \
                (len(names) != 1 and not per_direction) or attrs.activation_alpha is not None:
            return f"{layer} has one activation, Tanh or Relu, for every direction, not {activations}" \
                if not per_direction else f"{layer} has the activations Tanh, Relu and Sigmoid only, not {activations}"
    if kind == "GRU" and not attrs.linear_before_reset and not per_direction:
        return f"{layer} applies its reset gate after the recurrent matmul only (linear_before_reset=1)"
    return next((f"{layer} has no {what}" for what, asked in cannot if asked), None)


def rnn_activation(activations, direction=0):
    """The activation ("tanh", "relu" or "sigmoid") of an RNN node's `direction` rnn_unsupported accepted."""
    return activations[min(direction, len(activations) - 1)].lower() if activations else "tanh"


def weighted_reduction(losses, w, reduction, total):
    """ONNX's reduction of per-element `losses` weighted by `w` (their class's weight, 0 for an ignored class):
    "mean" divides by the weights' sum, as ONNX and torch do; `total` sums a framework's tensor."""
    losses = losses * w
    if reduction == "none":
        return losses
    s = total(losses)
    return s if reduction == "sum" else s / total(w)


def register_rnn(table, rnn_compute, rnn_layer, kinds=("LSTM", "GRU", "RNN"), per_direction=False):
    """ONNX's LSTM, GRU and RNN (those of `kinds`) on `table`, their inputs written once and their attributes one
    RnnAttrs (an attribute the spec does not define is a TypeError, as a keyword the function lacks was): what the
    framework's layer cannot say is Unsupported (rnn_unsupported: `rnn_layer(kind)` names the layer,
    `per_direction` as there, or the kinds it holds for), the rest is `rnn_compute(kind, x, w, r, b, states,
    attrs)`, `states` the node's initial states (None where absent). (A repro script inlines these by their
    names, beside its own `run`: they are named apart from it.)"""
    from backends._table import Unsupported

    def rnn_checked(kind, x, w, r, b, sequence_lens, states, attrs, cannot=()):
        why = rnn_unsupported(rnn_layer(kind), kind, None if sequence_lens is None else sequence_lens.numpy(),
                              x.shape[1 if attrs.layout else 0], attrs, cannot,
                              per_direction if isinstance(per_direction, bool) else kind in per_direction)
        if why:
            raise Unsupported(why)
        return rnn_compute(kind, x, w, r, b, states, attrs)

    def lstm(x, w, r, b=None, sequence_lens=None, initial_h=None, initial_c=None, p=None, **attrs):
        attrs = RnnAttrs(**attrs)
        return rnn_checked("LSTM", x, w, r, b, sequence_lens, [initial_h, initial_c], attrs,
                           [("peepholes", p is not None), ("coupled input and forget gate", attrs.input_forget)])

    def gru(x, w, r, b=None, sequence_lens=None, initial_h=None, **attrs):
        return rnn_checked("GRU", x, w, r, b, sequence_lens, [initial_h], RnnAttrs(**attrs))

    def rnn(x, w, r, b=None, sequence_lens=None, initial_h=None, **attrs):
        return rnn_checked("RNN", x, w, r, b, sequence_lens, [initial_h], RnnAttrs(**attrs))
    for kind, fn in (("LSTM", lstm), ("GRU", gru), ("RNN", rnn)):
        if kind in kinds:
            table.register(kind, since=7)(fn)
