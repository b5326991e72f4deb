import numpy as np
import paddle
from paddle.nn import functional

from backends._ops_common import (GRID_SAMPLE_MODES, axis, flatten_shape, full_pads, ints, nd_index, reshape_shape,
                                  resize_gap, slice_index, split_sizes)
from backends._table import Unsupported
from backends.paddle.ops import OPS


@OPS.register("Reshape", since=14)
def reshape(x, shape, *, allowzero=0):
    return paddle.reshape(x, reshape_shape(shape, x.shape, allowzero))  # Paddle's 0 copies too; written out


@OPS.register("Flatten", since=13)
def flatten(x, *, axis=1):
    return paddle.reshape(x, flatten_shape(x.shape, axis))


@OPS.register("Transpose", since=13)
def transpose(x, *, perm=None):
    return paddle.transpose(x, perm if perm is not None else list(reversed(range(x.ndim))))


@OPS.register("Squeeze", since=13)
def squeeze(x, axes=None):
    a = ints(axes)
    if a is None:
        return paddle.squeeze(x)
    return paddle.squeeze(x, axis=[axis(v, x.ndim) for v in a])


@OPS.register("Unsqueeze", since=13)
def unsqueeze(x, axes):
    rank = x.ndim + len(ints(axes))
    return paddle.unsqueeze(x, axis=sorted(axis(v, rank) for v in ints(axes)))


@OPS.register("Expand", since=13)
def expand(x, shape):
    # ONNX Expand broadcasts both ways; paddle.expand wants the result shape
    return paddle.expand(x, list(np.broadcast_shapes(tuple(x.shape), tuple(ints(shape)))))


@OPS.register("Shape", since=15)
def shape(x, *, start=0, end=None):
    return paddle.to_tensor(np.array(list(x.shape)[start:end], np.int64))


@OPS.register("Size", since=13)
def size(x):
    return paddle.numel(x)


@OPS.register("Concat", since=13)
def concat(*xs, axis):
    return paddle.concat(list(xs), axis=axis)


@OPS.register("Split", since=18)
def split(x, split=None, *, axis=0, num_outputs=None):
    sizes = ints(split) if split is not None else split_sizes(x.shape[axis], num_outputs)
    return tuple(paddle.split(x, sizes, axis=axis))


@OPS.register("Slice", since=13)
def slice_(x, starts, ends, axes=None, steps=None):
    return x[slice_index(x.shape, starts, ends, axes, steps)]


@OPS.register("Gather", since=13)
def gather(x, indices, *, axis=0):
    a = axis + x.ndim if axis < 0 else axis
    idx = paddle.where(indices < 0, indices + x.shape[a], indices)
    # paddle.gather takes a 1-D index: gather flat, then restore ONNX's shape
    y = paddle.gather(x, idx.reshape([-1]), axis=a)
    return paddle.reshape(y, list(x.shape[:a]) + list(indices.shape) + list(x.shape[a + 1:]))


@OPS.register("GatherElements", since=13)
def gather_elements(x, indices, *, axis=0):
    a = axis + x.ndim if axis < 0 else axis
    idx = paddle.where(indices < 0, indices + x.shape[a], indices)
    # ONNX's indices may be smaller than the data on the other axes; take_along_axis wants them equal
    x = x[tuple(slice(None) if d == a else slice(0, indices.shape[d]) for d in range(x.ndim))]
    return paddle.take_along_axis(x, idx, a)


@OPS.register("Tile", since=13)
def tile(x, repeats):
    return paddle.tile(x, ints(repeats))


@OPS.register("Range", since=11)
def range_(start, limit, delta):
    return paddle.arange(start.item(), limit.item(), delta.item(), dtype=start.dtype)


@OPS.register("ConstantOfShape", since=20)
def constant_of_shape(shape, *, value=None):
    v = np.asarray(value if value is not None else np.zeros(1, np.float32)).reshape(-1)
    return paddle.full(ints(shape), v[0].item(), dtype=str(v.dtype))


def _pad_list(p, r):
    """ONNX [b1..bn, e1..en] -> the last-dimension-first [b_n, e_n, ..., b_k, e_k] that Paddle's
    reflect/replicate/circular pad takes for the trailing (spatial) dimensions."""
    out = []
    for i in reversed(range(r)):
        out += [p[i], p[i + r]]
    return out


@OPS.register("Pad", since=19)
def pad(x, pads, constant_value=None, axes=None, *, mode="constant"):
    r = x.ndim
    p = full_pads(pads, axes, r)
    if any(v < 0 for v in p):  # a negative width crops (ONNX, torch); Paddle's pad takes none: slice first
        x = x[tuple(slice(max(-p[i], 0), x.shape[i] - max(-p[i + r], 0)) for i in range(r))]
        p = [max(v, 0) for v in p]
    if mode == "constant":
        value = constant_value.item() if constant_value is not None and constant_value.size else 0.0
        # a pad list as long as 2 * rank is read first dimension first: [b1, e1, b2, e2, ...]
        return functional.pad(x, [v for i in range(r) for v in (p[i], p[i + r])], mode="constant", value=value)
    paddle_mode = {"reflect": "reflect", "edge": "replicate", "wrap": "circular"}.get(mode)
    if paddle_mode is None:
        raise Unsupported(f"Paddle's pad has no mode {mode!r}")
    if r not in (3, 4, 5) or any(p[i] or p[i + r] for i in range(2)):
        raise Unsupported(f"Paddle's {paddle_mode} pad takes the spatial dimensions of a 3-D to 5-D NC... tensor "
                          f"only (rank {r}, pads {p})")
    return functional.pad(x, _pad_list(p, r)[: 2 * (r - 2)], mode=paddle_mode)


@OPS.register("DepthToSpace", since=13)
def depth_to_space(x, *, blocksize, mode="DCR"):
    if mode == "CRD":
        return functional.pixel_shuffle(x, blocksize)  # pixel_shuffle is ONNX's CRD order
    n, c, h, w = x.shape
    b = blocksize
    y = paddle.transpose(paddle.reshape(x, [n, b, b, c // (b * b), h, w]), [0, 3, 4, 1, 5, 2])
    return paddle.reshape(y, [n, c // (b * b), h * b, w * b])


@OPS.register("SpaceToDepth", since=13)
def space_to_depth(x, *, blocksize, mode="DCR"):  # mode: opset 28
    n, c, h, w = x.shape
    b = blocksize
    y = paddle.transpose(paddle.reshape(x, [n, c, h // b, b, w // b, b]),
                         [0, 3, 5, 1, 2, 4] if mode == "DCR" else [0, 1, 3, 5, 2, 4])
    return paddle.reshape(y, [n, c * b * b, h // b, w // b])


@OPS.register("Trilu", since=14)
def trilu(x, k=None, *, upper=1):
    kk = ints(k)[0] if k is not None else 0
    return paddle.triu(x, kk) if upper else paddle.tril(x, kk)


@OPS.register("Resize", since=19)
def resize(x, roi=None, scales=None, sizes=None, *, antialias=0, axes=None, coordinate_transformation_mode="half_pixel",
           cubic_coeff_a=-0.75, exclude_outside=0, extrapolation_value=0.0, keep_aspect_ratio_policy="stretch",
           mode="nearest", nearest_mode="round_prefer_floor"):
    spatial = x.ndim - 2
    # axes naming the spatial dims in order is the default layout of sizes/scales' last entries
    other_axes = axes is not None and [a + x.ndim if a < 0 else a for a in axes] != list(range(2, x.ndim))
    if antialias or other_axes or spatial not in (1, 2, 3):
        raise Unsupported("Paddle's interpolate: 3-D to 5-D NC... input, no antialias, axes only the spatial ones")
    gap = resize_gap(list(x.shape), scales, sizes, axes, coordinate_transformation_mode, keep_aspect_ratio_policy)
    if gap:
        raise Unsupported(f"Paddle's interpolate: {gap}")
    kw = {}
    if sizes is not None and sizes.size:
        kw["size"] = ints(sizes)[-spatial:]
    else:
        kw["scale_factor"] = [float(v) for v in scales.numpy().reshape(-1)][-spatial:]
    ctm = coordinate_transformation_mode
    if mode == "nearest":
        if ctm == "asymmetric" and nearest_mode == "floor":
            return functional.interpolate(x, mode="nearest", **kw)  # Paddle's nearest is asymmetric + floor
        raise Unsupported(f"Paddle's nearest interpolate is asymmetric/floor only, not {ctm}/{nearest_mode}")
    paddle_mode = {"linear": {1: "linear", 2: "bilinear", 3: "trilinear"}[spatial], "cubic": "bicubic"}[mode]
    if mode == "cubic" and (cubic_coeff_a != -0.75 or exclude_outside):
        raise Unsupported(f"Paddle's bicubic interpolate has a fixed a=-0.75 (asked: {cubic_coeff_a}, "
                          f"exclude_outside={exclude_outside})")
    if ctm == "align_corners":
        return functional.interpolate(x, mode=paddle_mode, align_corners=True, **kw)
    if ctm in ("half_pixel", "pytorch_half_pixel"):
        return functional.interpolate(x, mode=paddle_mode, align_corners=False, align_mode=0, **kw)
    if ctm == "asymmetric" and mode == "linear":
        return functional.interpolate(x, mode=paddle_mode, align_corners=False, align_mode=1, **kw)
    raise Unsupported(f"Paddle's interpolate has no {mode}/{ctm}")


@OPS.register("GatherND", since=13)
def gather_nd(x, indices, *, batch_dims=0):
    return paddle.gather_nd(x, paddle.to_tensor(nd_index(indices.numpy(), x.shape, batch_dims)))


@OPS.register("ScatterND", since=18)
def scatter_nd(x, indices, updates, *, reduction="none"):
    idx = paddle.to_tensor(nd_index(indices.numpy(), x.shape))
    if reduction == "add":
        return paddle.scatter_nd_add(x, idx, updates)
    if reduction != "none":
        raise Unsupported(f"ScatterND reduction={reduction!r}")
    # x where no index points, the update where one does (ONNX's indices are distinct): scatter_nd_add into zeros
    hit = paddle.scatter_nd_add(paddle.zeros_like(x), idx, paddle.ones_like(updates))
    return paddle.where(hit > 0, paddle.scatter_nd_add(paddle.zeros_like(x), idx, updates), x)


@OPS.register("GridSample", since=16)
def grid_sample(x, grid, *, align_corners=0, mode="linear", padding_mode="zeros"):
    paddle_mode = GRID_SAMPLE_MODES[mode]
    if paddle_mode == "bicubic" or x.ndim != 4:  # Paddle's grid_sample has no bicubic
        raise Unsupported(f"Paddle's grid_sample is 4-D bilinear or nearest only (GridSample mode={mode!r}, "
                          f"{x.ndim}-D input)")
    return functional.grid_sample(x, grid, mode=paddle_mode, padding_mode=padding_mode,
                                  align_corners=bool(align_corners))


@OPS.register("ScatterElements", since=18)
def scatter_elements(x, indices, updates, *, axis=0, reduction="none"):
    a = axis + x.ndim if axis < 0 else axis
    if reduction not in ("none", "add"):  # those the op-case table checks
        raise Unsupported(f"ScatterElements reduction={reduction!r}")
    idx = paddle.where(indices < 0, indices + x.shape[a], indices)
    # ONNX's indices may be smaller than the data on the other axes: not broadcast
    return paddle.put_along_axis(x, idx, updates, a, reduce={"none": "assign", "add": "add"}[reduction],
                                 broadcast=False)
