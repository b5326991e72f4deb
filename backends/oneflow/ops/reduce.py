from functools import partial

import oneflow
from oneflow.nn import functional

from backends._ops_common import ints, register_reduce
from backends._torch_like import register_reductions
from backends.oneflow.ops import OPS


_reduce = partial(register_reduce, OPS)

_reduce("ReduceProd", lambda x, d, k: _prod(x, d, k))


def _prod(x, dims, keep):
    for d in sorted(dims, reverse=True):  # oneflow.prod reduces one dim at a time
        x = oneflow.prod(x, dim=d, keepdim=keep)
    return x


@OPS.register("Softmax", since=13)
def softmax(x, *, axis=-1):
    return functional.softmax(x, dim=axis)


@OPS.register("LogSoftmax", since=13)
def log_softmax(x, *, axis=-1):
    return functional.log_softmax(x, dim=axis)


@OPS.register("TopK", since=11)
def top_k(x, k, *, axis=-1, largest=1, sorted=1):
    v, i = oneflow.topk(x, ints(k)[0], dim=axis, largest=bool(largest), sorted=bool(sorted))
    return v, i


register_reductions(OPS, oneflow)
