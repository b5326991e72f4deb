from megengine import functional

from backends._ops_common import symmetric_pool_pads
from backends._table import Unsupported
from backends.megengine.ops import OPS
from backends.megengine.ops._util import need_2d, spatial_only


@OPS.register("MaxPool", since=12)
def max_pool(x, *, auto_pad="NOTSET", ceil_mode=0, dilations, kernel_shape, pads, storage_order=0, strides):
    need_2d("max_pool2d", kernel_shape)
    if ceil_mode:
        raise Unsupported("MegEngine's max_pool2d has no ceil_mode")
    if any(d != 1 for d in dilations):
        raise Unsupported("MegEngine's max_pool2d has no dilation")
    if symmetric_pool_pads(pads, kernel_shape):
        return functional.max_pool2d(x, tuple(kernel_shape), tuple(strides), tuple(pads[:2]))
    x = functional.pad(x, spatial_only(pads, 2), constant_value=float("-inf"))  # symmetric padding only: pad first
    return functional.max_pool2d(x, tuple(kernel_shape), tuple(strides), 0)


@OPS.register("AveragePool", since=19)
def average_pool(x, *, auto_pad="NOTSET", ceil_mode=0, count_include_pad=0, dilations=None, kernel_shape, pads,
                 strides):
    need_2d("avg_pool2d", kernel_shape)
    if ceil_mode:
        raise Unsupported("MegEngine's avg_pool2d has no ceil_mode")
    if dilations and any(d != 1 for d in dilations):
        raise Unsupported("MegEngine's avg_pool2d has no dilation")
    # ONNX count_include_pad=1 is MegEngine's mode='average'; 0 is 'average_count_exclude_padding'
    mode = "average" if count_include_pad else "average_count_exclude_padding"
    if symmetric_pool_pads(pads, kernel_shape):
        return functional.avg_pool2d(x, tuple(kernel_shape), tuple(strides), tuple(pads[:2]), mode=mode)
    # symmetric padding only: pad explicitly; excluded pad cells are then divided out by a porter's
    # count map, the average of ones over the same padded window
    xp = functional.pad(x, spatial_only(pads, 2))
    y = functional.avg_pool2d(xp, tuple(kernel_shape), tuple(strides), 0, mode="average")
    if count_include_pad:
        return y
    ones = functional.pad(functional.ones((1, 1) + tuple(x.shape[2:]), dtype=x.dtype), spatial_only(pads, 2))
    return y / functional.avg_pool2d(ones, tuple(kernel_shape), tuple(strides), 0, mode="average")


@OPS.register("GlobalAveragePool", since=1)
def global_average_pool(x):
    if x.ndim == 4:
        return functional.adaptive_avg_pool2d(x, (1, 1))
    return functional.mean(x, axis=tuple(range(2, x.ndim)), keepdims=True)


@OPS.register("GlobalMaxPool", since=1)
def global_max_pool(x):
    if x.ndim == 4:
        return functional.adaptive_max_pool2d(x, (1, 1))
    return functional.max(x, axis=tuple(range(2, x.ndim)), keepdims=True)
