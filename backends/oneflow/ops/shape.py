import numpy as np
import oneflow
from oneflow.nn import functional

from backends._ops_common import axis, ints, nd_index, resize_gap, trailing_pad_list
from backends._table import Unsupported
from backends._torch_like import register_sampling, register_shape
from backends.oneflow.ops import OPS


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


@OPS.register("Expand", since=13)
def expand(x, shape):
    target = np.broadcast_shapes(tuple(x.shape), tuple(ints(shape)))  # ONNX Expand broadcasts both ways
    return x.expand(*target)


@OPS.register("Concat", since=13)
def concat(*xs, axis):
    return oneflow.cat(list(xs), dim=axis)


@OPS.register("Gather", since=13)
def gather(x, indices, *, axis=0):
    a = axis + x.dim() if axis < 0 else axis
    if indices.dim() == 0:  # one literal index: the porter's x[:, i]
        i = int(indices.item())
        return oneflow.select(x, a, i + x.shape[a] if i < 0 else i)
    idx = oneflow.where(indices < 0, indices + x.shape[a], indices)
    return oneflow.index_select(x, a, idx.reshape(-1).to(oneflow.int64)).reshape(
        tuple(x.shape[:a]) + tuple(idx.shape) + tuple(x.shape[a + 1:]))


@OPS.register("Tile", since=13)
def tile(x, repeats):
    return x.repeat(*ints(repeats))


@OPS.register("ConstantOfShape", since=20)
def constant_of_shape(shape, *, value=None):
    v = np.asarray(value if value is not None else np.zeros(1, np.float32))
    return oneflow.tensor(np.full(ints(shape), v.reshape(-1)[0], dtype=v.dtype))  # a constant: built as numpy


@OPS.register("Pad", since=19)
def pad(x, pads, constant_value=None, axes=None, *, mode="constant"):
    tp = trailing_pad_list(pads, axes, x.dim())
    if mode not in ("constant", "reflect", "edge"):
        raise Unsupported(f"OneFlow's functional.pad has no {mode!r} mode")
    if mode == "constant":
        value = constant_value.item() if constant_value is not None and constant_value.numel() else 0.0
        return functional.pad(x, tp, mode="constant", value=value)
    return functional.pad(x, tp, mode={"reflect": "reflect", "edge": "replicate"}[mode])


@OPS.register("Resize", since=19)
def resize(x, roi=None, scales=None, sizes=None, *, antialias=0, axes=None, coordinate_transformation_mode="half_pixel",
           cubic_coeff_a=-0.75, exclude_outside=0, extrapolation_value=0.0, keep_aspect_ratio_policy="stretch",
           mode="nearest", nearest_mode="round_prefer_floor"):
    spatial = x.dim() - 2
    gap = resize_gap(list(x.shape), scales, sizes, axes, coordinate_transformation_mode, keep_aspect_ratio_policy)
    if gap or antialias or (mode == "cubic" and (cubic_coeff_a != -0.75 or exclude_outside)):
        raise Unsupported(f"OneFlow's interpolate: {gap or 'no antialias, and bicubic with a = -0.75 only'}")
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


register_shape(OPS, oneflow)


@OPS.register("GatherND", since=13)
def gather_nd(x, indices, *, batch_dims=0):
    return oneflow.gather_nd(x, oneflow.tensor(nd_index(indices.numpy(), x.shape, batch_dims)))


@OPS.register("ScatterND", since=18)
def scatter_nd(x, indices, updates, *, reduction="none"):
    idx = oneflow.tensor(nd_index(indices.numpy(), x.shape))
    if reduction == "none":
        return oneflow.tensor_scatter_nd_update(x, idx, updates)
    if reduction == "add":
        return x + oneflow.scatter_nd(idx, updates, list(x.shape))
    raise Unsupported(f"ScatterND reduction={reduction!r}")


register_sampling(OPS, functional)


@OPS.register("ScatterElements", since=18)
def scatter_elements(x, indices, updates, *, axis=0, reduction="none"):
    a = axis + x.dim() if axis < 0 else axis
    idx = oneflow.where(indices < 0, indices + x.shape[a], indices)
    if reduction == "none":
        return oneflow.scatter(x, a, idx, updates)
    if reduction == "add":
        return oneflow.scatter_add(x, a, idx, updates)
    raise Unsupported(f"ScatterElements reduction={reduction!r}")
