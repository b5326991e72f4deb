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
        return _dilated_max_pool2d(x, kernel_shape, strides, pads, dilations, ceil_mode)
    return _MAX[r](x, list(kernel_shape), list(strides), paired(pads), ceil_mode=bool(ceil_mode))


def _dilated_max_pool2d(x, kernel_shape, strides, pads, dilations, ceil_mode):
    """Paddle's max_pool has no dilation: a porter pads with -inf, takes the dilated windows with
    functional.unfold and their max, with ONNX's output size (a ceil_mode window must start
    inside the input or its begin padding)."""
    if len(kernel_shape) != 2:
        raise Unsupported(f"Paddle's max_pool has no dilation and functional.unfold is 2-D only "
                          f"(kernel_shape {list(kernel_shape)})")
    n, c = x.shape[0], x.shape[1]
    out, need = [], []
    for i in range(2):
        span = (kernel_shape[i] - 1) * dilations[i] + 1
        room = x.shape[2 + i] + pads[i] + pads[i + 2] - span
        o = (-(-room // strides[i]) if ceil_mode else room // strides[i]) + 1
        if ceil_mode and (o - 1) * strides[i] >= x.shape[2 + i] + pads[i]:
            o -= 1
        out.append(o)
        need.append((o - 1) * strides[i] + span)  # the padded extent the windows cover
    ends = [max(pads[i + 2], need[i] - x.shape[2 + i] - pads[i]) for i in range(2)]
    # functional.pad's 4-entry list is [left, right, top, bottom] for NCHW
    xp = functional.pad(x, [pads[1], ends[1], pads[0], ends[0]], value=float("-inf"))[:, :, : need[0], : need[1]]
    cols = functional.unfold(xp, list(kernel_shape), list(strides), 0, list(dilations))
    y = paddle.max(paddle.reshape(cols, [n, c, kernel_shape[0] * kernel_shape[1], out[0] * out[1]]), axis=2)
    return paddle.reshape(y, [n, c, out[0], out[1]])


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
