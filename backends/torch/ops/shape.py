import numpy as np
import torch
from torch.nn import functional

from backends._ops_common import axis, trailing_pad_list
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
    return torch.full(ints(shape), v.reshape(-1)[0].item(), dtype=torch.from_numpy(np.asarray(v)).dtype)


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
    if antialias:  # torch's antialias filter is not ONNX's (irtrace/export/translations.py)
        raise Unsupported("Resize with antialias=1: torch's antialiasing filter differs from ONNX's "
                          "(up to 0.15 on a 7x11 -> 3x5 image), so torch cannot be the reference for it")
    spatial = x.dim() - 2
    kwargs = {}
    given = ints(sizes) if sizes is not None and sizes.numel() else [float(s) for s in scales.reshape(-1).tolist()]
    if axes is not None:  # sizes/scales name only these dims: the others keep their size (scale 1)
        full = list(x.shape) if sizes is not None and sizes.numel() else [1.0] * x.dim()
        for a, v in zip(axes, given):
            full[axis(a, x.dim())] = v
        if full[:2] != (list(x.shape[:2]) if sizes is not None and sizes.numel() else [1.0, 1.0]):
            raise NotImplementedError(f"Resize of the batch or channel dim (axes {axes})")
        given = full
    if sizes is not None and sizes.numel():
        kwargs["size"] = given[-spatial:]
    else:
        kwargs["scale_factor"] = given[-spatial:]
    if mode == "nearest":
        if coordinate_transformation_mode == "asymmetric" and nearest_mode == "floor":
            return functional.interpolate(x, mode="nearest", **kwargs)
        if coordinate_transformation_mode in ("half_pixel", "pytorch_half_pixel") and nearest_mode in (
                "round_prefer_ceil", "round_prefer_floor"):
            return functional.interpolate(x, mode="nearest-exact", **kwargs)
        raise NotImplementedError(f"nearest Resize with {coordinate_transformation_mode}/{nearest_mode}")
    torch_mode = {"linear": {1: "linear", 2: "bilinear", 3: "trilinear"}[spatial], "cubic": "bicubic"}[mode]
    if coordinate_transformation_mode == "align_corners":
        return functional.interpolate(x, mode=torch_mode, align_corners=True, **kwargs)
    if coordinate_transformation_mode in ("half_pixel", "pytorch_half_pixel"):
        return functional.interpolate(x, mode=torch_mode, align_corners=False, **kwargs)
    raise NotImplementedError(f"linear Resize with coordinate_transformation_mode={coordinate_transformation_mode}")


register_shape(OPS, torch)
