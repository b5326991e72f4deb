"""Where onnx.reference (1.23) is wrong, or raises on a valid node that torch and onnxruntime run,
the oracle uses these float64 numpy implementations instead (found by auditing the ops real models
use with negative axes, indices shorter than the data, 0-size and 0-d tensors; each case is in
tests/op_cases.py and tests/test_oracle_fixes.py).

- GatherElements: onnx.reference requires indices as large as the data on every axis but `axis`
  (ONNX and torch.gather only bound them: DeBERTa-v2's relative attention gathers a smaller block),
  and its np.choose cannot pick among more than 32 (numpy 1) or 64 (numpy 2) positions along `axis`.
- Pad: negative pads (a crop, what F.pad does with negative widths) reach np.pad and raise; a 0-d
  input with no pads raises.
- Resize: negative entries of `axes` raise ("axes don't match array"), and cubic's coefficients are
  computed in float32 (numpy 2 keeps the float32 of the attribute cubic_coeff_a against a python float:
  2e-7 off on a 4 -> 7 upsampling with A = -0.5): backends/_ops_common.resize_plan, in float64.
- CumSum: a 0-d input comes back with shape (1,); a 1-element `axis` (onnxruntime and torch take
  it) raises.
- GridSample: the sampling locations are computed in float32 (every mode: the oracle's result had
  float32 error); mode cubic with padding_mode border (or reflection) clamps (reflects) the location
  into the image before taking the 4 taps around it, which moves their weights (by up to 14 % of the
  output's largest value for border, 1e-6 for reflection, on random 4x5 images), where torch's bicubic
  grid_sample and onnxruntime keep the location and clamp (reflect) each tap. Opset 16's mode names
  (bilinear, bicubic) raise.
- RNN: activations other than Tanh raise (Keras SimpleRNN's relu through tf2onnx).
- Erf: computed in float32 (np.vectorize(math.erf, otypes=["f"])) whatever the input: the oracle's Erf had
  float32 error, and its gradient check's difference quotient (a step of 1e-6 of the input's scale) was
  float32 noise, so the check failed and torch's Erf gradients were never judged.
- Gelu (opset 20): a function op, which onnx.reference runs through its body with its own (float32) Erf,
  whatever replaces Erf for the node: 0.5 x (1 + erf(x / sqrt 2)) with math.erf in float64 here, and the tanh
  form as ONNX defines it.
- MaxPool's Indices output: wrong for a 1x1 window (torch.onnx's max_pool2d_with_indices uses one to
  make each plane's offsets: 0 where torch and onnxruntime give (n C + c) H W).
"""
import itertools
import math

import numpy as np
from onnx.reference.op_run import OpRun
from onnx.reference.ops.op_grid_sample import GridSample as RefGridSample

from backends._ops_common import ResizeAttrs, resize_plan


def gather_elements(data, indices, axis):
    """out[i...] = data[i with i[axis] replaced by indices[i...]]: out has the shape of `indices`,
    which may be smaller than `data` on every axis (not larger, except along `axis`); negative
    indices count from the end."""
    axis = axis + data.ndim if axis < 0 else axis
    if indices.ndim != data.ndim:
        raise ValueError(f"GatherElements: indices have rank {indices.ndim}, data {data.ndim}")
    too_big = [d for d in range(data.ndim) if d != axis and indices.shape[d] > data.shape[d]]
    if too_big:
        raise ValueError(f"GatherElements: indices {list(indices.shape)} are larger than data {list(data.shape)} "
                         f"on axes {too_big} (only axis {axis} may be)")
    n = data.shape[axis]
    idx = np.asarray(indices, np.int64)
    if idx.size and (idx.min() < -n or idx.max() >= n):
        raise IndexError(f"GatherElements: an index is outside [-{n}, {n - 1}] along axis {axis}")
    idx = np.where(idx < 0, idx + n, idx)
    block = data[tuple(slice(None) if d == axis else slice(0, indices.shape[d]) for d in range(data.ndim))]
    return np.take_along_axis(block, idx, axis=axis)


class GatherElements(OpRun):
    def _run(self, data, indices, axis=None):
        return (gather_elements(data, indices, axis if axis is not None else 0),)


def pad(data, pads, mode="constant", value=0.0, axes=None):
    """ONNX Pad: pads = [begins..., ends...] over `axes` (all by default, negative counted from the
    end); a negative width removes that many elements first, as torch's F.pad does."""
    r = data.ndim
    axes = list(range(r)) if axes is None else [int(a) + r if a < 0 else int(a) for a in np.ravel(axes)]
    pads = [int(p) for p in np.ravel(pads)]
    if len(pads) != 2 * len(axes):
        raise ValueError(f"Pad: {len(pads)} pads for {len(axes)} axes")
    if r == 0:
        return data.copy()
    width = [[0, 0] for _ in range(r)]
    for i, a in enumerate(axes):
        width[a] = [pads[i], pads[i + len(axes)]]
    crop = tuple(slice(max(-b, 0), data.shape[d] - max(-e, 0)) for d, (b, e) in enumerate(width))
    x = data[crop]
    grow = [(max(b, 0), max(e, 0)) for b, e in width]
    if mode == "constant":
        return np.pad(x, grow, mode="constant", constant_values=value).astype(data.dtype)
    return np.pad(x, grow, mode=mode).astype(data.dtype)


class Pad(OpRun):
    # opset >= 11 (pads, constant_value and axes are inputs); the oracle uses it from there on
    def _run(self, data, pads, constant_value=None, axes=None, mode=None):
        value = constant_value if constant_value is not None else 0
        return (pad(data, pads, mode if mode is not None else "constant", value, axes),)


class Resize(OpRun):
    def _run(self, X, roi=None, scales=None, sizes=None, axes=None, **attributes):
        attrs = ResizeAttrs.of(attributes)
        steps, _ = resize_plan(list(X.shape), scales, sizes, axes, roi, attrs)
        y = X.astype(np.float64)
        for d, index, weight, outside in steps:
            if attrs.mode == "nearest":  # the chosen neighbour itself: an inf beside it stays out
                y = np.take(y, index[np.arange(len(index)), weight.argmax(1)], axis=d)
                continue
            shape = (1,) * d + weight.shape + (1,) * (y.ndim - d - 1)
            y = (np.take(y, index, axis=d) * weight.reshape(shape)).sum(axis=d + 1)
            if outside is not None:
                y[(slice(None),) * d + (outside,)] = attrs.extrapolation_value
        if X.dtype.kind in "iu":  # onnx.reference's saturating cast
            y = np.clip(y, np.iinfo(X.dtype).min, np.iinfo(X.dtype).max)
        return (y.astype(X.dtype),)


def cumsum(x, axis, exclusive=0, reverse=0):
    """ONNX CumSum; `axis` a 0-d or 1-element tensor; a 0-d x is its own sum (exclusive: 0)."""
    axis = np.asarray(axis).reshape(-1)
    if axis.size != 1:
        raise ValueError(f"CumSum: axis must hold one value, got {axis.tolist()}")
    if x.ndim == 0:
        return np.zeros_like(x) if exclusive else x.copy()
    a = int(axis[0]) + x.ndim if int(axis[0]) < 0 else int(axis[0])
    y = np.flip(x, a) if reverse else x
    out = np.cumsum(y, axis=a, dtype=x.dtype)
    if exclusive:  # shifted by one, not out - y: the sums themselves, as the op defines them
        head = [slice(None)] * x.ndim
        head[a] = slice(0, 1)
        out = np.concatenate([np.zeros_like(y[tuple(head)]), np.delete(out, -1, axis=a)], axis=a) \
            if x.shape[a] else out
    return np.ascontiguousarray(np.flip(out, a) if reverse else out)


class CumSum(OpRun):
    def _run(self, x, axis, exclusive=None, reverse=None):
        return (cumsum(x, axis, exclusive if exclusive is not None else 0, reverse if reverse is not None else 0),)


def _cubic_weights(t, a=-0.75):
    """Weights of the taps floor(x) - 1 .. floor(x) + 2 at t = x - floor(x) (cubic convolution, A = -0.75
    as torch's bicubic and ONNX's GridSample use)."""
    def near(s):
        return ((a + 2) * s - (a + 3)) * s * s + 1

    def far(s):
        return ((a * s - 5 * a) * s + 8 * a) * s - 4 * a
    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


def _reflect(v, twice_low, twice_high):
    """torch's reflect_coordinates: v folded into [low, high] by reflection, as often as needed."""
    if twice_low == twice_high:
        return np.zeros_like(v)
    low, span = twice_low / 2, (twice_high - twice_low) / 2
    v = np.abs(v - low)
    extra, flips = np.fmod(v, span), np.floor(v / span)
    return np.where(flips % 2 == 0, extra + low, span - extra + low)


def _inside_image(v, size, padding_mode, align_corners):
    """torch's compute_coordinates: border clamps, reflection reflects (then clamps), zeros keeps."""
    if padding_mode == "border":
        return np.clip(v, 0, size - 1)
    if padding_mode == "reflection":
        v = _reflect(v, 0, 2 * (size - 1)) if align_corners else _reflect(v, -1, 2 * size - 1)
        return np.clip(v, 0, size - 1)
    return v


def grid_sample(x, grid, mode, padding_mode, align_corners):
    """GridSample in float64, any number of spatial dims, as torch's grid_sample and onnxruntime compute
    it: nearest and linear move the location into the image (border, reflection) and read 1 or 2 taps
    per axis; cubic keeps the location and moves each of its 4 taps per axis. A tap outside reads 0."""
    dims = x.shape[2:]
    r = len(dims)
    loc = grid[..., ::-1].astype(np.float64)  # the grid lists coordinates innermost axis first
    size = np.array(dims, np.float64)
    pos = (loc + 1) / 2 * (size - 1) if align_corners else ((loc + 1) * size - 1) / 2
    if mode != "cubic":
        pos = np.stack([_inside_image(pos[..., i], dims[i], padding_mode, align_corners) for i in range(r)], -1)
    if mode == "nearest":
        base, weights = np.rint(pos), [[np.ones(pos.shape[:-1])] for _ in range(r)]  # half to even, as torch
    elif mode == "linear":
        base = np.floor(pos)
        weights = [[1 - (pos[..., i] - base[..., i]), pos[..., i] - base[..., i]] for i in range(r)]
    else:
        base = np.floor(pos)
        weights = [_cubic_weights(pos[..., i] - base[..., i]) for i in range(r)]
        base = base - 1
    out = np.zeros(x.shape[:2] + grid.shape[1:-1], np.float64)
    for taps in itertools.product(range(len(weights[0])), repeat=r):
        idx, inside = [], np.ones(base.shape[:-1], bool)
        for i in range(r):
            t = base[..., i] + taps[i]
            if mode == "cubic":
                t = _inside_image(t, dims[i], padding_mode, align_corners)
            inside &= (t >= 0) & (t <= dims[i] - 1)
            idx.append(np.clip(t, 0, dims[i] - 1).astype(np.int64))
        w = np.prod([weights[i][taps[i]] for i in range(r)], axis=0) * inside
        for n in range(x.shape[0]):
            out[n] += w[n] * x[n][(slice(None),) + tuple(i[n] for i in idx)]
    return out.astype(x.dtype)


class GridSample(RefGridSample):
    def _run(self, X, grid, align_corners=None, mode=None, padding_mode=None):
        align_corners = align_corners if align_corners is not None else self.align_corners
        mode = mode if mode is not None else self.mode
        mode = {"bilinear": "linear", "bicubic": "cubic"}.get(mode, mode)  # opset 16's names
        padding_mode = padding_mode if padding_mode is not None else self.padding_mode
        return (grid_sample(X, grid, mode, padding_mode, align_corners),)


def max_pool_with_indices(x, kernel, strides, pads, dilations, ceil_mode, storage_order):
    """MaxPool's Y and Indices (ONNX: flat over the whole unpadded input, N and C included; row-major,
    column-major over the spatial dims with storage_order=1); the first maximum of a window in row-major
    order, as torch and onnxruntime take it."""
    from numpy.lib.stride_tricks import sliding_window_view
    r = len(kernel)
    spatial = list(x.shape[2:])
    eff = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
    out = []
    for i in range(r):
        o = (spatial[i] + pads[i] + pads[i + r] - eff[i]) / strides[i] + 1
        o = math.ceil(o) if ceil_mode else math.floor(o)
        if ceil_mode and (o - 1) * strides[i] >= spatial[i] + pads[i]:
            o -= 1
        out.append(int(o))
    n = int(np.prod(spatial))
    plane = np.arange(n).reshape(spatial[::-1]).T if storage_order else np.arange(n).reshape(spatial)
    extra = [max(0, (out[i] - 1) * strides[i] + eff[i] - spatial[i] - pads[i] - pads[i + r]) for i in range(r)]
    width = [(pads[i], pads[i + r] + extra[i]) for i in range(r)]
    fill = -np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).min
    xp = np.pad(x, [(0, 0), (0, 0)] + width, constant_values=fill)
    pp = np.pad(plane, width, constant_values=-1)
    pick = tuple(slice(0, (out[i] - 1) * strides[i] + 1, strides[i]) for i in range(r)) + \
        tuple(slice(None, None, dilations[i]) for i in range(r))
    win = sliding_window_view(xp, eff, axis=tuple(range(2, 2 + r)))[(slice(None),) * 2 + pick]
    win = win.reshape(win.shape[:2 + r] + (-1,))
    pos = sliding_window_view(pp, eff)[pick]
    pos = np.broadcast_to(pos.reshape(pos.shape[:r] + (-1,)), win.shape)
    k = np.argmax(win, axis=-1)[..., None]
    base = (np.arange(x.shape[0] * x.shape[1]) * n).reshape(x.shape[:2] + (1,) * r)
    return (np.take_along_axis(win, k, -1)[..., 0].astype(x.dtype),
            (np.take_along_axis(pos, k, -1)[..., 0] + base).astype(np.int64))


_RNN_ACTIVATIONS = {"tanh": np.tanh, "relu": lambda v: np.maximum(v, 0), "sigmoid": lambda v: 1 / (1 + np.exp(-v))}


def _rnn_activations(attrs, n_dirs):
    """The activation of each direction (Tanh by default), or NotImplementedError for any other than
    Tanh, Relu and Sigmoid or one with alpha/beta."""
    names = [a.lower() for a in attrs.get("activations") or ["tanh"] * n_dirs]
    if any(n not in _RNN_ACTIVATIONS for n in names) or attrs.get("activation_alpha") or attrs.get("activation_beta"):
        raise NotImplementedError(f"RNN with activations {attrs.get('activations')}: Tanh, Relu and Sigmoid only")
    return [_RNN_ACTIVATIONS[names[min(d, len(names) - 1)]] for d in range(n_dirs)]


def _rnn_direction(x, w, r, bias, h, f, clip, backwards):
    """One direction over time: the hidden state of every step [seq, batch, hidden] and the last one."""
    out = [None] * x.shape[0]
    for t in (reversed(range(x.shape[0])) if backwards else range(x.shape[0])):
        pre = x[t] @ w.T + h @ r.T + bias
        h = f(np.clip(pre, -clip, clip) if clip is not None else pre)
        out[t] = h
    return np.stack(out), h


class RNN(OpRun):
    """ONNX's simple RNN with any of Tanh, Relu, Sigmoid per direction (onnx.reference knows Tanh only),
    in float64: H_t = f(X_t W^T + H_{t-1} R^T + Wb + Rb)."""
    def _run(self, X, W, R, B=None, sequence_lens=None, initial_h=None, **attrs):
        direction = attrs.get("direction") or "forward"
        dirs = {"forward": [False], "reverse": [True], "bidirectional": [False, True]}[direction]
        fns = _rnn_activations(attrs, len(dirs))
        layout = attrs.get("layout") or 0
        x = np.swapaxes(X, 0, 1) if layout else X  # [seq, batch, input]
        if sequence_lens is not None and np.any(np.asarray(sequence_lens) != x.shape[0]):
            raise NotImplementedError("RNN with sequences shorter than the input")
        h = int(attrs.get("hidden_size") or W.shape[1])
        h0 = (np.swapaxes(initial_h, 0, 1) if layout else initial_h) if initial_h is not None else \
            np.zeros((len(dirs), x.shape[1], h), X.dtype)
        runs = [_rnn_direction(x, W[d], R[d], B[d, :h] + B[d, h:] if B is not None else 0.0, h0[d], fns[d],
                               attrs.get("clip"), backwards) for d, backwards in enumerate(dirs)]
        y = np.stack([ys for ys, _ in runs], axis=1).astype(X.dtype)  # [seq, dirs, batch, hidden]
        last = np.stack([hn for _, hn in runs]).astype(X.dtype)
        return (y.transpose(2, 0, 1, 3), np.swapaxes(last, 0, 1)) if layout else (y, last)


class Erf(OpRun):
    def _run(self, x):
        return (np.vectorize(math.erf, otypes=[np.float64])(x).astype(x.dtype),)


class Gelu(OpRun):
    def _run(self, x, approximate=None):
        x64 = np.asarray(x, np.float64)
        if (approximate or "none") == "tanh":
            y = 0.5 * x64 * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x64 + 0.044715 * x64 ** 3)))
        else:
            y = 0.5 * x64 * (1.0 + np.vectorize(math.erf, otypes=[np.float64])(x64 / math.sqrt(2.0)))
        return (y.astype(x.dtype),)


# every class stands in for its op from opset 11 on (inputs, not attributes, carry pads, axes, roi),
# GridSample from its first opset, 16
for _fix in (GatherElements, Pad, Resize, CumSum):
    _fix.oracle_since = 11
GridSample.oracle_since = 16
RNN.oracle_since = 7
Erf.oracle_since = 9
Gelu.oracle_since = 20
FIXES = (GatherElements, Pad, Resize, CumSum, GridSample, RNN, Erf, Gelu)
