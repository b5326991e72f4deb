"""Indexing ops torch.onnx.export emits for advanced indexing and index assignment (timm's
EfficientFormerV2 / LeViT attention-bias tables: GatherND; `x[idx] = v`: ScatterND)."""
import torch

from backends._table import Unsupported
from backends.torch.ops import OPS


def _nd_index(x, indices, batch_dims):
    """ONNX GatherND/ScatterND indices (..., k) as a tuple for torch's advanced indexing of `x`
    (no batch dims) with negative indices wrapped."""
    k = indices.shape[-1]
    idx = indices.to(torch.int64)
    sizes = torch.tensor(x.shape[batch_dims:batch_dims + k], dtype=torch.int64)
    idx = torch.where(idx < 0, idx + sizes, idx)
    return tuple(idx[..., j] for j in range(k))


@OPS.register("GatherND", since=13, nondiff=(1,))
def gather_nd(x, indices, *, batch_dims=0):
    if batch_dims == 0:
        return x[_nd_index(x, indices, 0)]
    # batch_dims > 0: fold the batch dims into one and gather per batch with an arange index
    b = x.shape[:batch_dims]
    nb = 1
    for d in b:
        nb *= int(d)
    xf = x.reshape((nb,) + tuple(x.shape[batch_dims:]))
    idx = indices.reshape((nb,) + tuple(indices.shape[batch_dims:]))
    parts = _nd_index(xf, idx, 1)
    batch = torch.arange(nb).reshape((nb,) + (1,) * (idx.dim() - 2)).expand(idx.shape[:-1])
    out = xf[(batch,) + parts]
    return out.reshape(tuple(b) + tuple(out.shape[1:]))


@OPS.register("ScatterND", since=18, nondiff=(1,))
def scatter_nd(x, indices, updates, *, reduction="none"):
    index = _nd_index(x, indices, 0)
    if reduction == "none":
        return x.index_put(index, updates)
    if reduction == "add":
        return x.index_put(index, updates, accumulate=True)
    if reduction not in _REDUCE:
        raise Unsupported(f"ScatterND reduction={reduction!r}")
    # mul/max/min must combine every update aimed at one place (x[idx] = x[idx] * u keeps only the
    # last of duplicate indices): index_reduce over the first k dims flattened
    k = indices.shape[-1]
    lead = [int(d) for d in x.shape[:k]]
    strides = torch.tensor([_prod(lead[j + 1:]) for j in range(k)], dtype=torch.int64)
    flat = (torch.stack(index, dim=-1) * strides).sum(-1).reshape(-1)
    rest = tuple(x.shape[k:])
    out = x.reshape((-1,) + rest).index_reduce(0, flat, updates.reshape((-1,) + rest), _REDUCE[reduction],
                                                include_self=True)
    return out.reshape(x.shape)


_REDUCE = {"mul": "prod", "max": "amax", "min": "amin"}


def _prod(xs):
    out = 1
    for v in xs:
        out *= v
    return out


@OPS.register("ScatterElements", since=18, nondiff=(1,))
def scatter_elements(x, indices, updates, *, axis=0, reduction="none"):
    a = axis + x.dim() if axis < 0 else axis
    idx = torch.where(indices < 0, indices + x.shape[a], indices).to(torch.int64)
    if reduction == "none":
        return torch.scatter(x, a, idx, updates)
    return torch.scatter_reduce(x, a, idx, updates, reduce={"add": "sum", "mul": "prod", "max": "amax",
                                                             "min": "amin"}[reduction], include_self=True)


@OPS.register("NonZero", since=13)
def non_zero(x):
    return torch.nonzero(x).t().contiguous()  # ONNX: (rank, count); torch: (count, rank)


@OPS.register("Unique", since=11)
def unique(x, *, axis=None, sorted=1):
    """Y, the index of each value's first occurrence, the inverse indices and the counts; with
    sorted=0 in the order of first occurrence (torch.unique sorts)."""
    flat = x.reshape(-1) if axis is None else x
    dim = 0 if axis is None else (axis + x.dim() if axis < 0 else axis)
    _, inverse, counts = torch.unique(flat, sorted=True, return_inverse=True, return_counts=True, dim=dim)
    n = flat.shape[dim]
    first = torch.full((counts.shape[0],), n, dtype=torch.int64).scatter_reduce(
        0, inverse, torch.arange(n), "amin", include_self=True)
    if not sorted:
        order = torch.argsort(first)
        rank = torch.empty_like(order)
        rank[order] = torch.arange(order.numel())
        first, counts, inverse = first[order], counts[order], rank[inverse]
    # the values read at their first occurrence: the same numbers as torch.unique's, with a gradient
    # (torch.unique has none)
    return torch.index_select(flat, dim, first), first, inverse, counts
