from functools import partial

import paddle
from paddle.nn import functional

from backends._ops_common import ints, register_reduce
from backends.paddle.ops import OPS


_reduce = partial(register_reduce, OPS)

_reduce("ReduceMean", lambda x, a, k: paddle.mean(x, axis=a, keepdim=k))
_reduce("ReduceSum", lambda x, a, k: paddle.sum(x, axis=a, keepdim=k), since=13)
_reduce("ReduceMax", lambda x, a, k: paddle.amax(x, axis=a, keepdim=k))
_reduce("ReduceMin", lambda x, a, k: paddle.amin(x, axis=a, keepdim=k))
_reduce("ReduceProd", lambda x, a, k: paddle.prod(x, axis=a, keepdim=k))
_reduce("ReduceSumSquare", lambda x, a, k: paddle.sum(paddle.square(x), axis=a, keepdim=k))
_reduce("ReduceL1", lambda x, a, k: paddle.sum(paddle.abs(x), axis=a, keepdim=k))
_reduce("ReduceL2", lambda x, a, k: paddle.sqrt(paddle.sum(paddle.square(x), axis=a, keepdim=k)))
_reduce("ReduceLogSumExp", lambda x, a, k: paddle.logsumexp(x, axis=a, keepdim=k))


def _last_index(fn, x, axis, keepdims):
    """ONNX select_last_index=1: the last of equal extremes; Paddle's arg ops take the first."""
    return x.shape[axis] - 1 - fn(paddle.flip(x, [axis]), axis=axis, keepdim=keepdims)


@OPS.register("ArgMax", since=13)
def arg_max(x, *, axis=0, keepdims=1, select_last_index=0):
    if select_last_index:
        return _last_index(paddle.argmax, x, axis, bool(keepdims))
    return paddle.argmax(x, axis=axis, keepdim=bool(keepdims))


@OPS.register("ArgMin", since=13)
def arg_min(x, *, axis=0, keepdims=1, select_last_index=0):
    if select_last_index:
        return _last_index(paddle.argmin, x, axis, bool(keepdims))
    return paddle.argmin(x, axis=axis, keepdim=bool(keepdims))


@OPS.register("Softmax", since=13)
def softmax(x, *, axis=-1):
    return functional.softmax(x, axis=axis)


@OPS.register("LogSoftmax", since=13)
def log_softmax(x, *, axis=-1):
    return functional.log_softmax(x, axis=axis)


@OPS.register("CumSum", since=14)
def cumsum(x, axis, *, exclusive=0, reverse=0):
    a = ints(axis)[0]
    # Paddle's cumsum has no exclusive/reverse: a porter flips and subtracts
    y = paddle.flip(x, [a]) if reverse else x
    y = paddle.cumsum(y, axis=a)
    if exclusive:
        y = y - (paddle.flip(x, [a]) if reverse else x)
    return paddle.flip(y, [a]) if reverse else y


@OPS.register("TopK", since=11)
def top_k(x, k, *, axis=-1, largest=1, sorted=1):
    return paddle.topk(x, ints(k)[0], axis=axis, largest=bool(largest), sorted=bool(sorted))
