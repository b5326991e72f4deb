import paddle
from paddle.nn import functional

from backends._table import Unsupported
from backends.paddle.ops import OPS
from backends.paddle.ops._util import paired

_MAX = {1: functional.max_pool1d, 2: functional.max_pool2d, 3: functional.max_pool3d}
_AVG = {1: functional.avg_pool1d, 2: functional.avg_pool2d, 3: functional.avg_pool3d}


@OPS.register("MaxPool", since=12)
def max_pool(x, *, auto_pad="NOTSET", ceil_mode=0, dilations, kernel_shape, pads, storage_order=0, strides):
    r = len(kernel_shape)
    if r not in _MAX:
        raise Unsupported(f"Paddle has no {r}-D max_pool")
    if dilations and any(d != 1 for d in dilations):
        raise Unsupported("Paddle's max_pool has no dilation")
    return _MAX[r](x, list(kernel_shape), list(strides), paired(pads), ceil_mode=bool(ceil_mode))


@OPS.register("AveragePool", since=19)
def average_pool(x, *, auto_pad="NOTSET", ceil_mode=0, count_include_pad=0, dilations=None, kernel_shape, pads,
                 strides):
    r = len(kernel_shape)
    if r not in _AVG:
        raise Unsupported(f"Paddle has no {r}-D avg_pool")
    if dilations and any(d != 1 for d in dilations):
        raise Unsupported("Paddle's avg_pool has no dilation")
    # Paddle's exclusive=True is ONNX's count_include_pad=0
    return _AVG[r](x, list(kernel_shape), list(strides), paired(pads), ceil_mode=bool(ceil_mode),
                   exclusive=not count_include_pad)


@OPS.register("GlobalAveragePool", since=1)
def global_average_pool(x):
    return paddle.mean(x, axis=list(range(2, x.ndim)), keepdim=True)


@OPS.register("GlobalMaxPool", since=1)
def global_max_pool(x):
    return paddle.amax(x, axis=list(range(2, x.ndim)), keepdim=True)
