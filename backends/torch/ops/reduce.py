from functools import partial

import torch

from backends._ops_common import register_reduce
from backends._torch_like import register_reductions
from backends.torch.ops import OPS
from backends.torch.ops._util import ints

_reduce = partial(register_reduce, OPS)

_reduce("ReduceProd", lambda x, d, k: _prod(x, d, k))


def _prod(x, dims, keep):
    for d in sorted(dims, reverse=True):
        x = torch.prod(x, dim=d, keepdim=keep)
    return x


@OPS.register("Softmax", since=13)
def softmax(x, *, axis=-1):
    return torch.softmax(x, dim=axis)


@OPS.register("LogSoftmax", since=13)
def log_softmax(x, *, axis=-1):
    return torch.log_softmax(x, dim=axis)


@OPS.register("TopK", since=11)
def top_k(x, k, *, axis=-1, largest=1, sorted=1):
    # ONNX: of equal values the lower index comes first, in either direction (a stable sort);
    # torch.topk leaves the order of ties to the kernel
    v, i = torch.sort(x, dim=axis, descending=bool(largest), stable=True)
    n = ints(k)[0]
    return v.narrow(axis, 0, n), i.narrow(axis, 0, n)


register_reductions(OPS, torch)
