import numpy as np
import torch
from torch.nn import functional

from backends._ops_common import ResizeAttrs, axis, resize_plan, resize_target, trailing_pad_list
from backends._table import Unsupported
from backends._torch_like import register_shape
from backends.torch.ops import OPS
from backends.torch.ops._util import ONNX_TO_TORCH, ints


@OPS.register("Transpose", since=13)
def transpose(x, *, perm=None):
    return x.permute(perm if perm is not None else list(reversed(range(x.dim()))))


@OPS.register("Squeeze", since=13)
def squeeze(x, axes=None):
    a = ints(axes)
    if a is None:
        return torch.squeeze(x)
    return torch.squeeze(x, dim=tuple(axis(v, x.dim()) for v in a))


@OPS.register("Expand", since=13)
def expand(x, shape):
    s = ints(shape)
    target = torch.broadcast_shapes(tuple(x.shape), tuple(s))  # ONNX Expand broadcasts both ways
    return x.expand(target)


@OPS.register("Concat", since=13)
def concat(*xs, axis):
    return torch.cat(xs, dim=axis)


@OPS.register("Gather", since=13)
def gather(x, indices, *, axis=0):
    a = axis + x.dim() if axis < 0 else axis
    idx = torch.where(indices < 0, indices + x.shape[a], indices)
    return torch.index_select(x, a, idx.reshape(-1).to(torch.int64)).reshape(
        x.shape[:a] + idx.shape + x.shape[a + 1:])


@OPS.register("Tile", since=13)
def tile(x, repeats):
    return x.repeat(ints(repeats))


@OPS.register("ConstantOfShape", since=20)
def constant_of_shape(shape, *, value=None):
    v = value if value is not None else np.zeros(1, np.float32)
    # the dtype through an empty array of it: torch.from_numpy warns on `v` itself, read-only when it is a view
    # of the bundle
    dtype = torch.from_numpy(np.empty(0, np.asarray(v).dtype)).dtype
    return torch.full(ints(shape), v.reshape(-1)[0].item(), dtype=dtype)


@OPS.register("Pad", since=19)
def pad(x, pads, constant_value=None, axes=None, *, mode="constant"):
    tp = trailing_pad_list(pads, axes, x.dim())
    torch_mode = {"constant": "constant", "reflect": "reflect", "edge": "replicate", "wrap": "circular"}[mode]
    if mode == "constant":
        value = constant_value.item() if constant_value is not None and constant_value.numel() else 0.0
        return functional.pad(x, tp, mode="constant", value=value)
    return functional.pad(x, tp, mode=torch_mode)


@OPS.register("EyeLike", since=9)
def eye_like(x, *, dtype=None, k=0):
    n, m = x.shape
    out = torch.arange(m).reshape(1, m) - torch.arange(n).reshape(n, 1) == k
    return out.to(ONNX_TO_TORCH[dtype] if dtype is not None else x.dtype)


@OPS.register("Resize", since=19)
def resize(x, roi=None, scales=None, sizes=None, *, antialias=0, axes=None, coordinate_transformation_mode="half_pixel",
           cubic_coeff_a=-0.75, exclude_outside=0, extrapolation_value=0.0, keep_aspect_ratio_policy="stretch",
           mode="nearest", nearest_mode="round_prefer_floor"):
    """torch's own interpolate where it computes exactly ONNX's Resize (what torch.onnx exports), ONNX's
    separable definition by gathers and weighted sums (backends/_ops_common.resize_plan) everywhere else:
    interpolate has no round_prefer_floor or ceil nearest, no cubic A other than -0.75, no exclude_outside,
    crop or half_pixel_symmetric, and with scales its align_corners divides by the rounded output size
    where ONNX divides by in * scale."""
    ctm = coordinate_transformation_mode
    scale, out = resize_target(list(x.shape), scales, sizes, axes, keep_aspect_ratio_policy)
    by_size = sizes is not None and sizes.numel() > 0
    kwargs = {"size": out[2:]} if by_size else {"scale_factor": scale[2:]}
    spatial = x.dim() - 2
    if 1 <= spatial <= 3 and out[:2] == list(x.shape[:2]) and scale[:2] == [1.0, 1.0] and not antialias \
            and not exclude_outside and keep_aspect_ratio_policy == "stretch":
        if mode == "nearest" and ctm == "asymmetric" and nearest_mode == "floor":
            return functional.interpolate(x, mode="nearest", **kwargs)
        if mode == "nearest" and ctm == "half_pixel" and nearest_mode == "round_prefer_ceil":
            return functional.interpolate(x, mode="nearest-exact", **kwargs)  # floor(src + 0.5): ties up
        torch_mode = {"linear": {1: "linear", 2: "bilinear", 3: "trilinear"}[spatial], "cubic": "bicubic"}.get(mode)
        native = mode == "linear" or (mode == "cubic" and cubic_coeff_a == -0.75 and spatial == 2)
        if native and (ctm == "half_pixel" or (ctm == "pytorch_half_pixel" and min(out[2:]) > 1)):
            return functional.interpolate(x, mode=torch_mode, align_corners=False, **kwargs)
        # ONNX's align_corners divides by in * scale, interpolate's by the output size: the same where equal
        if native and ctm == "align_corners" and (by_size or all(s * n == o for s, n, o in zip(scale, x.shape, out))):
            return functional.interpolate(x, mode=torch_mode, align_corners=True, **kwargs)
    attrs = ResizeAttrs(mode=mode, coordinate_transformation_mode=ctm, nearest_mode=nearest_mode,
                        cubic_coeff_a=cubic_coeff_a, exclude_outside=exclude_outside, antialias=antialias,
                        keep_aspect_ratio_policy=keep_aspect_ratio_policy)
    steps, _ = resize_plan(list(x.shape), scales, sizes, axes, roi, attrs)
    y = x if x.is_floating_point() else x.to(torch.float64)
    for d, index, weight, outside in steps:
        if mode == "nearest":  # a copy of the chosen neighbour (a weighted sum would turn an inf beside it to NaN)
            y = torch.index_select(y, d, torch.from_numpy(index[np.arange(len(index)), weight.argmax(1)]))
            continue
        n_out, n = index.shape
        g = torch.index_select(y, d, torch.from_numpy(index.reshape(-1))).unflatten(d, (n_out, n))
        w = torch.from_numpy(weight).to(y.dtype).reshape((n_out, n) + (1,) * (y.dim() - d - 1))
        y = (g * w).sum(d + 1)
        if outside is not None:
            mask = torch.from_numpy(outside).reshape((n_out,) + (1,) * (y.dim() - d - 1))
            y = torch.where(mask, torch.tensor(extrapolation_value, dtype=y.dtype), y)
    if y.dtype != x.dtype:  # an integer input: onnx.reference's saturating cast
        y = y.clamp(torch.iinfo(x.dtype).min, torch.iinfo(x.dtype).max).to(x.dtype)
    return y


register_shape(OPS, torch)
