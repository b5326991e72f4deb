import numpy as np
import torch
from torch.nn import functional

from backends._ops_common import axis, flatten_shape, full_pads, pad_list, reshape_shape, slice_bounds
from backends._table import Unsupported
from backends.torch.ops import OPS
from backends.torch.ops._util import ONNX_TO_TORCH, ints


@OPS.register("Reshape", since=14)
def reshape(x, shape, *, allowzero=0):
    return torch.reshape(x, reshape_shape(shape, x.shape, allowzero))


@OPS.register("Flatten", since=13)
def flatten(x, *, axis=1):
    return torch.reshape(x, flatten_shape(x.shape, axis))


@OPS.register("Transpose", since=13)
def transpose(x, *, perm=None):
    return x.permute(perm if perm is not None else list(reversed(range(x.dim()))))


@OPS.register("Squeeze", since=13)
def squeeze(x, axes=None):
    a = ints(axes)
    if a is None:
        return torch.squeeze(x)
    return torch.squeeze(x, dim=tuple(axis(v, x.dim()) for v in a))


@OPS.register("Unsqueeze", since=13)
def unsqueeze(x, axes):
    rank = x.dim() + len(ints(axes))
    for a in sorted(axis(v, rank) for v in ints(axes)):
        x = torch.unsqueeze(x, a)
    return x


@OPS.register("Expand", since=13)
def expand(x, shape):
    s = ints(shape)
    target = torch.broadcast_shapes(tuple(x.shape), tuple(s))  # ONNX Expand broadcasts both ways
    return x.expand(target)


@OPS.register("Shape", since=15)
def shape(x, *, start=0, end=None):
    return torch.tensor(list(x.shape)[start:end], dtype=torch.int64)


@OPS.register("Size", since=13)
def size(x):
    return torch.tensor(x.numel(), dtype=torch.int64)


@OPS.register("Concat", since=13)
def concat(*xs, axis):
    return torch.cat(xs, dim=axis)


@OPS.register("Split", since=18)
def split(x, split=None, *, axis=0, num_outputs=None):
    if split is not None:
        return tuple(torch.split(x, ints(split), dim=axis))
    n = x.shape[axis]
    chunk = -(-n // num_outputs)
    return tuple(torch.split(x, chunk, dim=axis))


@OPS.register("Slice", since=13)
def slice_(x, starts, ends, axes=None, steps=None):
    index = [slice(None)] * x.dim()
    flips = []
    for a, s, e, st in slice_bounds(x.shape, starts, ends, axes, steps):
        if st > 0:
            index[a] = slice(s, max(e, s), st)
        else:  # torch slicing has no negative steps: flip, then slice forward
            n = x.shape[a]
            flips.append(a)
            index[a] = slice(n - 1 - s, n - 1 - e if e < s else n - 1 - s, -st)
    if flips:
        x = torch.flip(x, flips)
    return x[tuple(index)]


@OPS.register("Gather", since=13)
def gather(x, indices, *, axis=0):
    a = axis + x.dim() if axis < 0 else axis
    idx = torch.where(indices < 0, indices + x.shape[a], indices)
    return torch.index_select(x, a, idx.reshape(-1).to(torch.int64)).reshape(
        x.shape[:a] + idx.shape + x.shape[a + 1:])


@OPS.register("GatherElements", since=13)
def gather_elements(x, indices, *, axis=0):
    idx = torch.where(indices < 0, indices + x.shape[axis], indices)
    return torch.gather(x, axis, idx.to(torch.int64))


@OPS.register("Tile", since=13)
def tile(x, repeats):
    return x.repeat(ints(repeats))


@OPS.register("Range", since=11)
def range_(start, limit, delta):
    return torch.arange(start.item(), limit.item(), delta.item(), dtype=start.dtype)


@OPS.register("ConstantOfShape", since=20)
def constant_of_shape(shape, *, value=None):
    v = value if value is not None else np.zeros(1, np.float32)
    return torch.full(ints(shape), v.reshape(-1)[0].item(), dtype=torch.from_numpy(np.asarray(v)).dtype)


@OPS.register("Pad", since=19)
def pad(x, pads, constant_value=None, axes=None, *, mode="constant"):
    r = x.dim()
    p = full_pads(pads, axes, r)
    # functional.pad pads trailing dims only: drop leading all-zero dims so reflect/replicate accept it
    lead = 0
    while lead < r and p[lead] == 0 and p[lead + r] == 0:
        lead += 1
    tp = pad_list(p)[: 2 * (r - lead)] if lead < r else []
    torch_mode = {"constant": "constant", "reflect": "reflect", "edge": "replicate", "wrap": "circular"}[mode]
    if mode == "constant":
        value = constant_value.item() if constant_value is not None and constant_value.numel() else 0.0
        return functional.pad(x, tp, mode="constant", value=value)
    return functional.pad(x, tp, mode=torch_mode)


@OPS.register("DepthToSpace", since=13)
def depth_to_space(x, *, blocksize, mode="DCR"):
    n, c, h, w = x.shape
    b = blocksize
    if mode == "DCR":
        y = x.reshape(n, b, b, c // (b * b), h, w).permute(0, 3, 4, 1, 5, 2)
    else:
        y = x.reshape(n, c // (b * b), b, b, h, w).permute(0, 1, 4, 2, 5, 3)
    return y.reshape(n, c // (b * b), h * b, w * b)


@OPS.register("SpaceToDepth", since=13)
def space_to_depth(x, *, blocksize):
    n, c, h, w = x.shape
    b = blocksize
    y = x.reshape(n, c, h // b, b, w // b, b).permute(0, 3, 5, 1, 2, 4)
    return y.reshape(n, c * b * b, h // b, w // b)


@OPS.register("EyeLike", since=9)
def eye_like(x, *, dtype=None, k=0):
    n, m = x.shape
    out = torch.arange(m).reshape(1, m) - torch.arange(n).reshape(n, 1) == k
    return out.to(ONNX_TO_TORCH[dtype] if dtype is not None else x.dtype)


@OPS.register("Trilu", since=14)
def trilu(x, k=None, *, upper=1):
    kk = ints(k)[0] if k is not None else 0
    return torch.triu(x, kk) if upper else torch.tril(x, kk)


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


