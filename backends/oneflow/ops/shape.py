import numpy as np
import oneflow
from oneflow.nn import functional

from backends._ops_common import axis, flatten_shape, full_pads, ints, pad_list, reshape_shape, slice_bounds
from backends._table import Unsupported
from backends.oneflow.ops import OPS


@OPS.register("Reshape", since=14)
def reshape(x, shape, *, allowzero=0):
    return oneflow.reshape(x, reshape_shape(shape, x.shape, allowzero))


@OPS.register("Flatten", since=13)
def flatten(x, *, axis=1):
    return oneflow.reshape(x, flatten_shape(x.shape, axis))


@OPS.register("Transpose", since=13)
def transpose(x, *, perm=None):
    return x.permute(*(perm if perm is not None else list(reversed(range(x.dim())))))


@OPS.register("Squeeze", since=13)
def squeeze(x, axes=None):
    a = ints(axes)
    if a is None:
        return oneflow.squeeze(x)
    for d in sorted((axis(v, x.dim()) for v in a), reverse=True):
        x = oneflow.squeeze(x, dim=d)
    return x


@OPS.register("Unsqueeze", since=13)
def unsqueeze(x, axes):
    rank = x.dim() + len(ints(axes))
    for a in sorted(axis(v, rank) for v in ints(axes)):
        x = oneflow.unsqueeze(x, a)
    return x


@OPS.register("Expand", since=13)
def expand(x, shape):
    target = np.broadcast_shapes(tuple(x.shape), tuple(ints(shape)))  # ONNX Expand broadcasts both ways
    return x.expand(*target)


@OPS.register("Shape", since=15)
def shape(x, *, start=0, end=None):
    return oneflow.tensor(list(x.shape)[start:end], dtype=oneflow.int64)


@OPS.register("Size", since=13)
def size(x):
    return oneflow.tensor(x.numel(), dtype=oneflow.int64)


@OPS.register("Concat", since=13)
def concat(*xs, axis):
    return oneflow.cat(list(xs), dim=axis)


@OPS.register("Split", since=18)
def split(x, split=None, *, axis=0, num_outputs=None):
    if split is not None:
        return tuple(oneflow.split(x, ints(split), dim=axis))
    n = x.shape[axis]
    chunk = -(-n // num_outputs)
    return tuple(oneflow.split(x, chunk, dim=axis))


@OPS.register("Slice", since=13)
def slice_(x, starts, ends, axes=None, steps=None):
    index = [slice(None)] * x.dim()
    flips = []
    for a, s, e, st in slice_bounds(x.shape, starts, ends, axes, steps):
        if st > 0:
            index[a] = slice(s, max(e, s), st)
        else:  # OneFlow slicing has no negative steps: flip, then slice forward
            n = x.shape[a]
            flips.append(a)
            index[a] = slice(n - 1 - s, n - 1 - e if e < s else n - 1 - s, -st)
    if flips:
        x = oneflow.flip(x, flips)
    return x[tuple(index)]


@OPS.register("Gather", since=13)
def gather(x, indices, *, axis=0):
    a = axis + x.dim() if axis < 0 else axis
    if indices.dim() == 0:  # one literal index: the porter's x[:, i]
        i = int(indices.item())
        return oneflow.select(x, a, i + x.shape[a] if i < 0 else i)
    idx = oneflow.where(indices < 0, indices + x.shape[a], indices)
    return oneflow.index_select(x, a, idx.reshape(-1).to(oneflow.int64)).reshape(
        tuple(x.shape[:a]) + tuple(idx.shape) + tuple(x.shape[a + 1:]))


@OPS.register("GatherElements", since=13)
def gather_elements(x, indices, *, axis=0):
    idx = oneflow.where(indices < 0, indices + x.shape[axis], indices)
    return oneflow.gather(x, axis, idx.to(oneflow.int64))


@OPS.register("Tile", since=13)
def tile(x, repeats):
    return x.repeat(*ints(repeats))


@OPS.register("Range", since=11)
def range_(start, limit, delta):
    return oneflow.arange(start.item(), limit.item(), delta.item(), dtype=start.dtype)


@OPS.register("ConstantOfShape", since=20)
def constant_of_shape(shape, *, value=None):
    v = np.asarray(value if value is not None else np.zeros(1, np.float32))
    return oneflow.tensor(np.full(ints(shape), v.reshape(-1)[0], dtype=v.dtype))  # a constant: built as numpy


@OPS.register("Pad", since=19)
def pad(x, pads, constant_value=None, axes=None, *, mode="constant"):
    r = x.dim()
    p = full_pads(pads, axes, r)
    # functional.pad pads trailing dims only: drop leading all-zero dims so reflect/replicate accept it
    lead = 0
    while lead < r and p[lead] == 0 and p[lead + r] == 0:
        lead += 1
    tp = pad_list(p)[: 2 * (r - lead)] if lead < r else []
    if mode not in ("constant", "reflect", "edge"):
        raise Unsupported(f"OneFlow's functional.pad has no {mode!r} mode")
    if mode == "constant":
        value = constant_value.item() if constant_value is not None and constant_value.numel() else 0.0
        return functional.pad(x, tp, mode="constant", value=value)
    return functional.pad(x, tp, mode={"reflect": "reflect", "edge": "replicate"}[mode])


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


@OPS.register("Trilu", since=14)
def trilu(x, k=None, *, upper=1):
    kk = ints(k)[0] if k is not None else 0
    return oneflow.triu(x, kk) if upper else oneflow.tril(x, kk)


@OPS.register("Resize", since=19)
def resize(x, roi=None, scales=None, sizes=None, *, antialias=0, axes=None, coordinate_transformation_mode="half_pixel",
           cubic_coeff_a=-0.75, exclude_outside=0, extrapolation_value=0.0, keep_aspect_ratio_policy="stretch",
           mode="nearest", nearest_mode="round_prefer_floor"):
    spatial = x.dim() - 2
    kwargs = {}
    if sizes is not None and sizes.numel():
        kwargs["size"] = tuple(ints(sizes)[-spatial:])  # interpolate takes tuples, not lists
    else:
        kwargs["scale_factor"] = tuple(float(s) for s in scales.reshape(-1).tolist()[-spatial:])
    if mode == "nearest":
        if coordinate_transformation_mode == "asymmetric" and nearest_mode == "floor":
            return functional.interpolate(x, mode="nearest", **kwargs)
        raise Unsupported(f"OneFlow's interpolate has no nearest mode for "
                          f"{coordinate_transformation_mode}/{nearest_mode}")
    flow_mode = {"linear": {1: "linear", 2: "bilinear", 3: "trilinear"}[spatial], "cubic": "bicubic"}[mode]
    if coordinate_transformation_mode == "align_corners":
        return functional.interpolate(x, mode=flow_mode, align_corners=True, **kwargs)
    if coordinate_transformation_mode in ("half_pixel", "pytorch_half_pixel"):
        return functional.interpolate(x, mode=flow_mode, align_corners=False, **kwargs)
    raise Unsupported(f"OneFlow's interpolate has no coordinate_transformation_mode={coordinate_transformation_mode}")
