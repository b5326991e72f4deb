from functools import partial

import torch

from backends._ops_common import register_reduce
from backends.torch.ops import OPS
from backends.torch.ops._util import ints

_reduce = partial(register_reduce, OPS)

_reduce("ReduceMean", lambda x, d, k: torch.mean(x, dim=d, keepdim=k))
_reduce("ReduceSum", lambda x, d, k: torch.sum(x, dim=d, keepdim=k), since=13)
_reduce("ReduceMax", lambda x, d, k: torch.amax(x, dim=d, keepdim=k))
_reduce("ReduceMin", lambda x, d, k: torch.amin(x, dim=d, keepdim=k))
_reduce("ReduceProd", lambda x, d, k: _prod(x, d, k))
_reduce("ReduceSumSquare", lambda x, d, k: torch.sum(x * x, dim=d, keepdim=k))
_reduce("ReduceL2", lambda x, d, k: torch.linalg.vector_norm(x, 2, dim=d, keepdim=k))
_reduce("ReduceL1", lambda x, d, k: torch.sum(torch.abs(x), dim=d, keepdim=k))
_reduce("ReduceLogSumExp", lambda x, d, k: torch.logsumexp(x, dim=d, keepdim=k))


def _prod(x, dims, keep):
    for d in sorted(dims, reverse=True):
        x = torch.prod(x, dim=d, keepdim=keep)
    return x


@OPS.register("ArgMax", since=13)
def arg_max(x, *, axis=0, keepdims=1, select_last_index=0):
    if select_last_index:
        return x.shape[axis] - 1 - torch.argmax(torch.flip(x, [axis]), dim=axis, keepdim=bool(keepdims))
    return torch.argmax(x, dim=axis, keepdim=bool(keepdims))


@OPS.register("ArgMin", since=13)
def arg_min(x, *, axis=0, keepdims=1, select_last_index=0):
    if select_last_index:
        return x.shape[axis] - 1 - torch.argmin(torch.flip(x, [axis]), dim=axis, keepdim=bool(keepdims))
    return torch.argmin(x, dim=axis, keepdim=bool(keepdims))


@OPS.register("Softmax", since=13)
def softmax(x, *, axis=-1):
    return torch.softmax(x, dim=axis)


@OPS.register("LogSoftmax", since=13)
def log_softmax(x, *, axis=-1):
    return torch.log_softmax(x, dim=axis)


@OPS.register("CumSum", since=14)
def cumsum(x, axis, *, exclusive=0, reverse=0):
    a = ints(axis)[0]
    y = torch.flip(x, [a]) if reverse else x
    y = torch.cumsum(y, dim=a)
    if exclusive:
        y = y - (torch.flip(x, [a]) if reverse else x)
    return torch.flip(y, [a]) if reverse else y


@OPS.register("TopK", since=11)
def top_k(x, k, *, axis=-1, largest=1, sorted=1):
    # ONNX: of equal values the lower index comes first, in either direction (a stable sort);
    # torch.topk leaves the order of ties to the kernel
    v, i = torch.sort(x, dim=axis, descending=bool(largest), stable=True)
    n = ints(k)[0]
    return v.narrow(axis, 0, n), i.narrow(axis, 0, n)
