"""irtrace's own torch.onnx translations of aten ops that torch.onnx (2.13, onnxscript 0.7) cannot
export, written with ONNX ops every backend has (tests/test_export.py exports each and replays it
clean on torch and onnxruntime):

- `aten.sort.stable` (torch.sort(..., stable=True), torch.argsort(..., stable=True)): TopK over the
  whole axis. ONNX's TopK puts the lower index first among equal values, in either direction: a
  stable sort.
- `aten.adaptive_max_pool{1,2,3}d` with an input size the output size does not divide: every output
  cell's window (start floor(i*n/o), end ceil((i+1)*n/o)) gathered along each spatial axis, the
  shorter windows padded by repeating their last position (a repeat cannot change a max, and its
  gradient lands on the same element), then ReduceMax; the indices (torch's: the first maximum in
  row-major order of the window, as a flat index into the input's spatial size) by ArgMax over the
  same windows (nodes the export prunes when the model does not read the indices). Divisible sizes
  keep one MaxPool for the values, as torch's own decomposition makes them.
- BatchNorm without affine parameters in training mode: constant scale 1 and bias 0 (per_channel).
- `aten._upsample_{bilinear,bicubic}2d_aa` (F.interpolate(antialias=True)): torch.onnx emits
  Resize(antialias=1), whose filter is not torch's (onnxruntime and onnx.reference agree with each other
  and are up to 0.15 away from torch on a 7x11 -> 3x5 image). The resize is linear and separable: two
  MatMuls with the constant matrices torch's own kernel gives for the unit vectors of each axis.

Each function takes the aten op's arguments by name (torch.onnx calls it with the FX node's
arguments) and static shapes (irtrace exports with the example inputs' shapes).
"""
import math

import numpy as np


def _op():
    from onnxscript import opset20
    return opset20


def _one_output(op_type, *inputs, **attrs):
    """The node's first output only (opset20.MaxPool would declare its optional indices too)."""
    import onnx
    from onnxscript import values
    op = values.Op(values.Opset("", 20), op_type, onnx.defs.get_schema(op_type, 20, ""))
    out = op(*inputs, _outputs=1, **attrs)
    return out[0] if isinstance(out, (tuple, list)) else out


def _const(name, array):
    import onnx
    return _op().Constant(value=onnx.numpy_helper.from_array(np.asarray(array), name))


def _ints(name, values):
    return _const(name, np.asarray(values, np.int64))


def per_channel(input, value, name):
    """A constant (C,) tensor of `value` for input (N, C, ...): BatchNorm's scale or bias where the
    module has none (affine=False), as an initializer rather than an empty optional input, which
    onnx.checker refuses ("input 1 is marked single but has an empty string")."""
    return _const(name, np.full(int(input.shape[1]), value, dtype=input.dtype.numpy()))


def sort_stable(self, stable=None, dim: int = -1, descending: bool = False):
    op = _op()
    shape = list(self.shape)
    if not shape:  # a 0-d tensor sorts to itself
        return op.Identity(self), _ints("zero", 0)
    n = shape[dim]
    values, indices = op.TopK(self, _ints("k", [n]), axis=dim, largest=1 if descending else 0, sorted=1)
    return values, indices


def _windows(n, o):
    """(o, k) positions of the adaptive windows over n inputs for o outputs, each row padded to the
    longest window k by repeating its last position."""
    starts = [(i * n) // o for i in range(o)]
    ends = [math.ceil((i + 1) * n / o) for i in range(o)]
    k = max(e - s for s, e in zip(starts, ends))
    return np.array([[min(s + j, e - 1) for j in range(k)] for s, e in zip(starts, ends)], np.int64)


def adaptive_max_pool(self, output_size):
    op = _op()
    shape = list(self.shape)
    r = len(output_size)
    lead = len(shape) - r  # (N, C) or (C,) before the spatial axes
    spatial = shape[lead:]
    out_size = [int(o) for o in output_size]
    if any(not isinstance(d, int) for d in spatial):
        raise NotImplementedError(f"adaptive_max_pool with a dynamic spatial size {spatial}")
    tables = [_windows(n, o) for n, o in zip(spatial, out_size)]
    ks = [t.shape[1] for t in tables]
    x = self
    for a, t in enumerate(tables):  # axis lead + 2a holds that axis' (o, k) after the earlier gathers
        x = op.Gather(x, _ints(f"window{a}", t), axis=lead + 2 * a)
    # (..., o1, k1, ..., or, kr) -> (..., o1..or, k1*...*kr): each output cell's window, row-major
    perm = list(range(lead)) + [lead + 2 * a for a in range(r)] + [lead + 2 * a + 1 for a in range(r)]
    win = op.Reshape(op.Transpose(x, perm=perm), _ints("window_shape", [0] * lead + out_size + [-1]))
    if lead == 2 and all(n % o == 0 for n, o in zip(spatial, out_size)):
        kernel = [n // o for n, o in zip(spatial, out_size)]
        values = _one_output("MaxPool", self, kernel_shape=kernel, strides=kernel, pads=[0] * 2 * r)
    else:
        values = op.ReduceMax(win, _ints("last", [-1]), keepdims=0)
    # flat index into the spatial input of every window position, per output cell
    strides = [int(np.prod(spatial[a + 1:])) for a in range(r)]
    grids = np.meshgrid(*[np.arange(o) for o in out_size], *[np.arange(k) for k in ks], indexing="ij")
    flat = sum(tables[a][grids[a], grids[r + a]] * strides[a] for a in range(r)).reshape(-1)
    cell = (np.arange(int(np.prod(out_size))) * int(np.prod(ks))).reshape(out_size)
    pos = op.ArgMax(win, axis=-1, keepdims=0, select_last_index=0)
    indices = op.Gather(_ints("window_flat", flat), op.Add(pos, _ints("cell_base", cell)), axis=0)
    return values, indices


def _resize_matrix(kernel, n, o, align_corners, scale):
    """(o, n): row k holds the weights of output k over the n inputs, from torch's kernel in float64."""
    import torch
    eye = torch.eye(n, dtype=torch.float64).reshape(n, 1, 1, n)  # n images of 1 x n, each a unit vector
    return kernel(eye, [1, o], align_corners, None, scale).reshape(n, o).T.numpy()


def upsample_antialiased(kernel):
    def translate(self, output_size, align_corners, scales_h=None, scales_w=None):
        op = _op()
        (h, w), (oh, ow) = list(self.shape)[2:], [int(s) for s in output_size]
        dtype = self.dtype.numpy()
        rows = _resize_matrix(kernel, h, oh, align_corners, scales_h).astype(dtype)
        cols = _resize_matrix(kernel, w, ow, align_corners, scales_w).T.astype(dtype)
        return op.MatMul(op.MatMul(_const("resize_rows", rows), self), _const("resize_cols", cols))
    return translate


def table():
    """aten op -> translation, for torch.onnx.export's custom_translation_table."""
    import torch
    aten = torch.ops.aten
    return {aten._upsample_bilinear2d_aa.default: upsample_antialiased(aten._upsample_bilinear2d_aa.default),
            aten._upsample_bicubic2d_aa.default: upsample_antialiased(aten._upsample_bicubic2d_aa.default),
            aten.sort.stable: sort_stable,
            aten.adaptive_max_pool1d.default: adaptive_max_pool,
            aten.adaptive_max_pool2d.default: adaptive_max_pool,
            aten.adaptive_max_pool3d.default: adaptive_max_pool}
