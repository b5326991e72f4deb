import megengine as mge
from megengine import functional
import numpy as np

from backends._ops_common import (axis, flatten_shape, full_pads, ints, nd_index, reshape_shape, resize_gap,
                                  slice_index, split_sizes)
from backends._table import Unsupported
from backends.megengine.ops import OPS
from backends.megengine.ops._util import pad_width


@OPS.register("Reshape", since=14)
def reshape(x, shape, *, allowzero=0):
    return functional.reshape(x, reshape_shape(shape, x.shape, allowzero))


@OPS.register("Flatten", since=13)
def flatten(x, *, axis=1):
    return functional.reshape(x, flatten_shape(x.shape, axis))


@OPS.register("Transpose", since=13)
def transpose(x, *, perm=None):
    return functional.transpose(x, perm if perm is not None else list(reversed(range(x.ndim))))


@OPS.register("Squeeze", since=13)
def squeeze(x, axes=None):
    a = ints(axes)
    return functional.squeeze(x) if a is None else functional.squeeze(x, tuple(axis(v, x.ndim) for v in a))


@OPS.register("Unsqueeze", since=13)
def unsqueeze(x, axes):
    rank = x.ndim + len(ints(axes))
    return functional.expand_dims(x, sorted(axis(v, rank) for v in ints(axes)))


@OPS.register("Expand", since=13)
def expand(x, shape):
    return functional.broadcast_to(x, np.broadcast_shapes(tuple(x.shape), tuple(ints(shape))))  # ONNX broadcasts both ways


@OPS.register("Shape", since=15)
def shape(x, *, start=0, end=None):
    return np.array(list(x.shape)[start:end], np.int64)


@OPS.register("Size", since=13)
def size(x):
    return np.array(x.size, np.int64)


@OPS.register("Concat", since=13)
def concat(*xs, axis):
    return functional.concat(list(xs), axis=axis)


@OPS.register("Split", since=18)
def split(x, split=None, *, axis=0, num_outputs=None):
    sizes = ints(split) if split is not None else split_sizes(x.shape[axis], num_outputs)
    cuts = list(np.cumsum(sizes)[:-1])  # functional.split takes the cut points
    return tuple(functional.split(x, [int(c) for c in cuts], axis=axis)) if cuts else (x,)


@OPS.register("Slice", since=13)
def slice_(x, starts, ends, axes=None, steps=None):
    return x[slice_index(x.shape, starts, ends, axes, steps)]


@OPS.register("Gather", since=13)
def gather(x, indices, *, axis=0):
    a = axis + x.ndim if axis < 0 else axis
    idx = indices.numpy() if hasattr(indices, "numpy") else np.asarray(indices)
    idx = np.where(idx < 0, idx + x.shape[a], idx)
    flat = mge.tensor(idx.reshape(-1).astype(np.int32))
    if a == 0:
        y = x[flat]  # a porter indexes: x[idx]
    else:
        y = functional.transpose(functional.transpose(x, [a] + [i for i in range(x.ndim) if i != a])[flat],
                        list(range(1, a + 1)) + [0] + list(range(a + 1, x.ndim)))
    return functional.reshape(y, tuple(x.shape[:a]) + idx.shape + tuple(x.shape[a + 1:]))


@OPS.register("GatherElements", since=13)
def gather_elements(x, indices, *, axis=0):
    return functional.gather(x, axis, indices)


@OPS.register("Tile", since=13)
def tile(x, repeats):
    return functional.tile(x, ints(repeats))


@OPS.register("Range", since=11)
def range_(start, limit, delta):
    dtype = start.dtype
    return functional.arange(start.item(), limit.item(), delta.item(), dtype=dtype)


@OPS.register("ConstantOfShape", since=20)
def constant_of_shape(shape, *, value=None):
    v = np.asarray(value if value is not None else np.zeros(1, np.float32)).reshape(-1)
    if v.dtype in (np.float64, np.int64):
        v = v.astype(np.float32 if v.dtype == np.float64 else np.int32)
    return functional.full(tuple(ints(shape)), v[0].item(), dtype=v.dtype)


@OPS.register("Pad", since=19)
def pad(x, pads, constant_value=None, axes=None, *, mode="constant"):
    p = full_pads(pads, axes, x.ndim)
    if any(v < 0 for v in p):
        raise Unsupported("MegEngine's F.pad takes no negative widths (ONNX crops with them)")
    mge_mode = {"constant": "constant", "reflect": "reflect", "edge": "replicate"}.get(mode)
    if mge_mode is None:
        raise Unsupported(f"MegEngine's F.pad has no mode {mode!r}")
    value = float(constant_value.item()) if constant_value is not None and constant_value.size else 0.0
    return functional.pad(x, pad_width(p), mode=mge_mode, constant_value=value)


@OPS.register("DepthToSpace", since=13)
def depth_to_space(x, *, blocksize, mode="DCR"):
    if mode == "CRD":
        return functional.pixel_shuffle(x, blocksize)  # pixel_shuffle is ONNX's CRD order
    n, c, h, w = x.shape
    b = blocksize
    y = functional.transpose(functional.reshape(x, (n, b, b, c // (b * b), h, w)), (0, 3, 4, 1, 5, 2))
    return functional.reshape(y, (n, c // (b * b), h * b, w * b))


@OPS.register("SpaceToDepth", since=13)
def space_to_depth(x, *, blocksize):
    n, c, h, w = x.shape
    b = blocksize
    y = functional.transpose(functional.reshape(x, (n, c, h // b, b, w // b, b)), (0, 3, 5, 1, 2, 4))
    return functional.reshape(y, (n, c * b * b, h // b, w // b))


@OPS.register("Trilu", since=14)
def trilu(x, k=None, *, upper=1):
    # MegEngine has no tril/triu: x times the triangle's 0/1 mask, as a porter writes it
    shift = int(k.item()) if k is not None else 0
    ones = np.ones(tuple(x.shape[-2:]), np.float32)
    mask = np.triu(ones, shift) if upper else np.tril(ones, shift)
    return functional.where(mge.tensor(mask.astype(bool)), x, functional.zeros_like(x))


@OPS.register("Resize", since=19)
def resize(x, roi=None, scales=None, sizes=None, *, antialias=0, axes=None, coordinate_transformation_mode="half_pixel",
           cubic_coeff_a=-0.75, exclude_outside=0, extrapolation_value=0.0, keep_aspect_ratio_policy="stretch",
           mode="nearest", nearest_mode="round_prefer_floor"):
    # axes naming H and W (in order) is the default layout of sizes/scales' last two entries
    if x.ndim != 4 or antialias or (axes is not None and [a + 4 if a < 0 else a for a in axes] != [2, 3]):
        raise Unsupported("MegEngine's interpolate: 4-D NCHW, no antialias, axes only H and W")
    gap = resize_gap(list(x.shape), scales, sizes, axes, coordinate_transformation_mode, keep_aspect_ratio_policy)
    if gap:
        raise Unsupported(f"MegEngine's interpolate: {gap}")
    kw = {}
    if sizes is not None and sizes.size:
        kw["size"] = tuple(ints(sizes)[-2:])
    else:
        s = [float(v) for v in (scales.numpy() if hasattr(scales, "numpy") else np.asarray(scales)).reshape(-1)][-2:]
        kw["scale_factor"] = tuple(s)
    if mode == "nearest":
        if coordinate_transformation_mode == "asymmetric" and nearest_mode == "floor":
            return functional.vision.interpolate(x, mode="nearest", **kw)
        raise Unsupported(f"MegEngine's nearest interpolate is asymmetric/floor only, not "
                          f"{coordinate_transformation_mode}/{nearest_mode}")
    if mode == "linear" and coordinate_transformation_mode in ("align_corners", "half_pixel", "pytorch_half_pixel"):
        return functional.vision.interpolate(x, mode="bilinear", align_corners=coordinate_transformation_mode == "align_corners",
                                    **kw)
    raise Unsupported(f"MegEngine's interpolate has no {mode}/{coordinate_transformation_mode}")


def _nd_flat(x, indices, batch_dims):
    """ONNX GatherND/ScatterND indices as one int32 index into x with its first batch_dims + k dims made one
    (nd_index's coordinates, raveled), that x's shape, and the indices' leading shape. A porter indexes with one flat
    index as Gather does here (MegEngine has no gather_nd)."""
    at = nd_index(indices.numpy() if hasattr(indices, "numpy") else indices, x.shape, batch_dims)
    dims = tuple(int(d) for d in x.shape[:at.shape[-1]])
    flat = np.ravel_multi_index(tuple(np.moveaxis(at, -1, 0)), dims)
    return mge.tensor(flat.reshape(-1).astype(np.int32)), (int(np.prod(dims)),) + tuple(x.shape[len(dims):]), \
        at.shape[:-1]


@OPS.register("GatherND", since=13)
def gather_nd(x, indices, *, batch_dims=0):
    flat, shape, lead = _nd_flat(x, indices, batch_dims)
    return functional.reshape(functional.reshape(x, shape)[flat], tuple(lead) + shape[1:])


@OPS.register("ScatterND", since=18)
def scatter_nd(x, indices, updates, *, reduction="none"):
    flat, shape, _ = _nd_flat(x, indices, 0)
    if reduction not in ("none", "add"):
        raise Unsupported(f"ScatterND reduction={reduction!r}")
    if reduction == "add" and len(np.unique(flat.numpy())) < flat.shape[0]:
        raise Unsupported("ScatterND reduction='add' with an index repeated: MegEngine's indexing assignment keeps "
                          "one update of a place, it has no scatter-add")
    y = functional.reshape(x, shape)
    u = functional.reshape(updates, (flat.shape[0],) + shape[1:])
    y[flat] = y[flat] + u if reduction == "add" else u  # x[idx] = v, as a porter writes it
    return functional.reshape(y, x.shape)


@OPS.register("ScatterElements", since=18)
def scatter_elements(x, indices, updates, *, axis=0, reduction="none"):
    a = axis + x.ndim if axis < 0 else axis
    idx = indices.numpy() if hasattr(indices, "numpy") else np.asarray(indices)
    idx = np.where(idx < 0, idx + x.shape[a], idx).astype(np.int32)
    if reduction == "add":  # F.scatter writes: an add is the values there plus the updates, where no place repeats
        at = np.moveaxis(idx, a, 0).reshape(idx.shape[a], -1)
        if any(len(np.unique(col)) < len(col) for col in at.T):
            raise Unsupported("ScatterElements reduction='add' with an index repeated: MegEngine's scatter keeps one "
                              "update a place, it has no scatter-add")
        updates = functional.gather(x, a, mge.tensor(idx)) + updates
    elif reduction != "none":
        raise Unsupported(f"ScatterElements reduction={reduction!r}")
    return functional.scatter(x, a, mge.tensor(idx), updates)
