from functools import partial

import oneflow
from oneflow.nn import functional

from backends._ops_common import ints, register_reduce
from backends.oneflow.ops import OPS


_reduce = partial(register_reduce, OPS)

_reduce("ReduceMean", lambda x, d, k: oneflow.mean(x, dim=d, keepdim=k))
_reduce("ReduceSum", lambda x, d, k: oneflow.sum(x, dim=d, keepdim=k), since=13)
_reduce("ReduceMax", lambda x, d, k: oneflow.amax(x, dim=d, keepdim=k))
_reduce("ReduceMin", lambda x, d, k: oneflow.amin(x, dim=d, keepdim=k))
_reduce("ReduceSumSquare", lambda x, d, k: oneflow.sum(x * x, dim=d, keepdim=k))
_reduce("ReduceL1", lambda x, d, k: oneflow.sum(oneflow.abs(x), dim=d, keepdim=k))
_reduce("ReduceL2", lambda x, d, k: oneflow.linalg.vector_norm(x, 2, dim=d, keepdim=k))
_reduce("ReduceProd", lambda x, d, k: _prod(x, d, k))


def _prod(x, dims, keep):
    for d in sorted(dims, reverse=True):  # oneflow.prod reduces one dim at a time
        x = oneflow.prod(x, dim=d, keepdim=keep)
    return x
_reduce("ReduceLogSumExp", lambda x, d, k: oneflow.logsumexp(x, dim=d, keepdim=k))


@OPS.register("ArgMax", since=13)
def arg_max(x, *, axis=0, keepdims=1, select_last_index=0):
    if select_last_index:
        return x.shape[axis] - 1 - oneflow.argmax(oneflow.flip(x, [axis]), dim=axis, keepdim=bool(keepdims))
    return oneflow.argmax(x, dim=axis, keepdim=bool(keepdims))


@OPS.register("ArgMin", since=13)
def arg_min(x, *, axis=0, keepdims=1, select_last_index=0):
    if select_last_index:
        return x.shape[axis] - 1 - oneflow.argmin(oneflow.flip(x, [axis]), dim=axis, keepdim=bool(keepdims))
    return oneflow.argmin(x, dim=axis, keepdim=bool(keepdims))


@OPS.register("Softmax", since=13)
def softmax(x, *, axis=-1):
    return functional.softmax(x, dim=axis)


@OPS.register("LogSoftmax", since=13)
def log_softmax(x, *, axis=-1):
    return functional.log_softmax(x, dim=axis)


@OPS.register("CumSum", since=14)
def cumsum(x, axis, *, exclusive=0, reverse=0):
    a = ints(axis)[0]
    y = oneflow.flip(x, [a]) if reverse else x
    y = oneflow.cumsum(y, dim=a)
    if exclusive:
        y = y - (oneflow.flip(x, [a]) if reverse else x)
    return oneflow.flip(y, [a]) if reverse else y


@OPS.register("TopK", since=11)
def top_k(x, k, *, axis=-1, largest=1, sorted=1):
    v, i = oneflow.topk(x, ints(k)[0], dim=axis, largest=bool(largest), sorted=bool(sorted))
    return v, i
