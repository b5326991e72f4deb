from functools import partial

from megengine import functional

from backends._ops_common import ints, register_reduce
from backends._table import Unsupported
from backends.megengine.ops import OPS


_reduce = partial(register_reduce, OPS)

_reduce("ReduceMean", lambda x, a, k: functional.mean(x, axis=a, keepdims=k))
_reduce("ReduceSum", lambda x, a, k: functional.sum(x, axis=a, keepdims=k), since=13)
_reduce("ReduceMax", lambda x, a, k: functional.max(x, axis=a, keepdims=k))
_reduce("ReduceMin", lambda x, a, k: functional.min(x, axis=a, keepdims=k))
_reduce("ReduceProd", lambda x, a, k: functional.prod(x, axis=a, keepdims=k))
_reduce("ReduceSumSquare", lambda x, a, k: functional.sum(functional.square(x), axis=a, keepdims=k))
_reduce("ReduceL1", lambda x, a, k: functional.sum(functional.abs(x), axis=a, keepdims=k))
# weight_norm's norm (wav2vec2's positional conv): F.norm takes one axis, a porter writes the sum out
_reduce("ReduceL2", lambda x, a, k: functional.sqrt(functional.sum(functional.square(x), axis=a, keepdims=k)))
_reduce("ReduceLogSumExp", lambda x, a, k: functional.logsumexp(x, axis=a, keepdims=k))


@OPS.register("ArgMax", since=13)
def arg_max(x, *, axis=0, keepdims=1, select_last_index=0):
    if select_last_index:
        raise Unsupported("MegEngine's argmax has no select_last_index")
    return functional.argmax(x, axis=axis, keepdims=bool(keepdims))


@OPS.register("ArgMin", since=13)
def arg_min(x, *, axis=0, keepdims=1, select_last_index=0):
    if select_last_index:
        raise Unsupported("MegEngine's argmin has no select_last_index")
    return functional.argmin(x, axis=axis, keepdims=bool(keepdims))


@OPS.register("Softmax", since=13)
def softmax(x, *, axis=-1):
    return functional.softmax(x, axis=axis)  # always pass the axis: without it MegEngine uses a legacy rule


@OPS.register("LogSoftmax", since=13)
def log_softmax(x, *, axis=-1):
    return functional.logsoftmax(x, axis=axis)


@OPS.register("CumSum", since=14)
def cumsum(x, axis, *, exclusive=0, reverse=0):
    if exclusive or reverse:
        raise Unsupported("MegEngine's cumsum has no exclusive/reverse")
    return functional.cumsum(x, ints(axis)[0])


@OPS.register("TopK", since=11)
def top_k(x, k, *, axis=-1, largest=1, sorted=1):
    a = axis + x.ndim if axis < 0 else axis
    last = a == x.ndim - 1
    if not last:  # MegEngine's topk works on the last axis
        perm = [i for i in range(x.ndim) if i != a] + [a]
        x = functional.transpose(x, perm)
    v, i = functional.topk(x, ints(k)[0], descending=bool(largest), no_sort=not sorted)
    if not last:  # perm's inverse, one comprehension of known ints (a repro script writes it as a literal)
        inv = [perm.index(j) for j in range(len(perm))]
        v, i = functional.transpose(v, inv), functional.transpose(i, inv)
    return v, i
