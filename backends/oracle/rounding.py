"""How much float32 rounding can move a result: Monte Carlo arithmetic (D. S. Parker, "Monte Carlo
Arithmetic", 1997; the method of Verificarlo) on torch in float64.

The op (fwd, vjp or vjp2) runs in float64 again, with every intermediate result torch computes
multiplied by (1 + u * r), r uniform in [-1, 1], u = 2^-24 the unit roundoff of float32: each
rounding a float32 implementation makes (round to nearest errs by at most u, relative), emulated. Fused kernels are first
broken into torch's own decompositions (softmax, batch and layer norm, their backward formulas...),
so the cancellation inside them (x - mean over few values, 1 - 2 sigmoid(x) near 0) is rounded too.
The spread of a few such runs around the exact result is what float32 rounding of this op's formula
can do at these inputs: the host's verdict allows a multiple of it (docs/report.md). Ops that move
or select values exactly (views, copies, concatenation, max, where, ...) are not perturbed, nor are
constants (an op without a float64 tensor operand).

Where frameworks compute an op by another formula as legitimate as torch's, whose float32 rounding
torch's never shows (`_formulas`: ReduceProd's grad * y / x), the estimate of a gradient is the larger of
the two formulas' spreads.
"""
import functools

import numpy as np
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map_only

UNIT_ROUNDOFF = float(np.finfo(np.float32).eps) / 2

# Exact in float32: they move, select or negate values, they never round.
_EXACT = frozenset({
    "abs", "neg", "relu", "clone", "_to_copy", "copy", "copy_", "cat", "stack", "where", "constant_pad_nd",
    "index", "index_select", "gather", "scatter", "scatter_add", "index_put", "masked_fill", "sign",
    "floor", "ceil", "round", "trunc", "max", "min", "amax", "amin", "maximum", "minimum", "clamp", "clamp_min",
    "clamp_max", "max_pool2d_with_indices", "max_pool3d_with_indices", "max_pool2d_with_indices_backward",
    "max_pool3d_with_indices_backward", "sort", "topk", "flip", "roll", "repeat", "permute", "slice_scatter",
    "select_scatter", "diagonal_scatter", "as_strided_scatter", "zeros_like", "ones_like", "full_like",
    "empty_like", "new_zeros", "new_ones", "new_full", "new_empty", "fill", "zero", "lift_fresh", "detach",
    "alias", "split", "split_with_sizes", "unbind", "narrow", "reflection_pad1d", "reflection_pad2d",
    "reflection_pad3d", "replication_pad1d", "replication_pad2d", "replication_pad3d", "tril", "triu",
    "threshold_backward", "le", "lt", "ge", "gt", "eq", "ne", "logical_not", "logical_and", "logical_or",
    "bitwise_and", "bitwise_or", "masked_scatter", "expand", "view", "reshape", "_unsafe_view", "unsqueeze",
    "squeeze", "t", "transpose", "select", "slice", "unfold", "embedding", "embedding_dense_backward",
    # torch's primitives (what the decompositions reach)
    "convert_element_type", "broadcast_in_dim", "view_of", "collapse_view", "split_dim", "slice_in_dim",
    "squeeze", "transpose", "reshape", "select", "where", "maximum", "minimum", "neg", "abs", "cat", "pad",
    "rev", "as_strided", "iota", "full", "scalar_tensor", "empty_strided", "copy_to", "copy_strided"})


@functools.lru_cache(maxsize=1)
def _decompositions():
    # every decomposition torch registers, not only the "core ATen" set: native_batch_norm and the
    # norms' backward formulas are core ops there, and their inner cancellation is what matters
    from torch._decomp import decomposition_table
    return dict(decomposition_table)


class _ProdByDivision(torch.autograd.Function):
    """prod over one dim whose gradient is grad * y / x at every length of that dim, differentiable again
    (double backward through y/x): torch's own formula for a slice without zeros, but for a dim of length 1,
    where torch returns grad as it is and its second derivative is exactly 0. OneFlow and others divide
    there too, so their second derivative is the rounding of y/x² against 1/x (eps·|g u / x|)."""

    @staticmethod
    def forward(ctx, x, dim, keep):
        y = torch.prod(x, dim=dim, keepdim=keep)
        ctx.save_for_backward(x, y)
        ctx.dim, ctx.keep = dim, keep
        return y

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        if not ctx.keep:
            g, y = g.unsqueeze(ctx.dim), y.unsqueeze(ctx.dim)
        return g * (y / x), None, None


def _prod_by_division(x, dims, keep):
    # with a zero in x, torch's (and everyone's) zero-safe formula
    prod = torch.prod if bool((x == 0).any()) else _ProdByDivision.apply
    for d in sorted(dims, reverse=True):
        x = prod(x, d, keep)
    return x


@functools.lru_cache(maxsize=1)
def _formulas():
    from backends._ops_common import register_reduce
    from backends._table import OpTable
    table = OpTable("rounding")
    register_reduce(table, "ReduceProd", _prod_by_division)
    return table


def formula(spec):
    """The other formula (`_formulas`) of this node's op's gradients (an entry like the torch table's), or None."""
    from backends._table import Unsupported
    try:
        return _formulas().lookup(spec.domain, spec.op_type, spec.opset)
    except Unsupported:
        return None


class Float32Rounding(TorchDispatchMode):
    """While active, every rounding result of a float64 torch op is perturbed as float32 would round
    it (Monte Carlo arithmetic, see the module doc). Deterministic for a seed."""

    def __init__(self, seed):
        super().__init__()
        self.gen = torch.Generator().manual_seed(seed)
        self.table = _decompositions()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        decomposition = self.table.get(func)
        if decomposition is not None:
            try:
                with self:  # the decomposition's own ops are rounded one by one
                    out = decomposition(*args, **kwargs)
            except Exception:  # noqa: BLE001 - a decomposition that does not take these arguments: the op whole
                out = NotImplemented
            if out is not NotImplemented:
                return out
        out = func(*args, **kwargs)
        if func.is_view or func._schema.is_mutable or func.overloadpacket.__name__ in _EXACT:
            return out
        operands = [a for a in list(args) + list(kwargs.values()) if isinstance(a, torch.Tensor)]
        if not any(a.dtype == torch.float64 for a in operands):
            return out
        return tree_map_only(torch.Tensor, self._round, out)

    def _round(self, t):
        if t.dtype != torch.float64 or t.numel() == 0:
            return t
        r = torch.rand(t.shape, generator=self.gen, dtype=torch.float64)
        return t * (1.0 + UNIT_ROUNDOFF * (2.0 * r - 1.0))


def spread(run, samples=4, exact=None):
    """Per result of `run()` (a list of arrays or None, computed by torch in float64): the largest
    deviation from the exact result (`exact`, or run() once more) over `samples` Monte Carlo
    arithmetic runs."""
    exact = run() if exact is None else exact
    worst = [None if e is None else np.zeros(np.shape(e)) for e in exact]
    for seed in range(samples):
        with Float32Rounding(seed):
            got = run()
        for k, (e, g) in enumerate(zip(exact, got)):
            if e is None or g is None or np.asarray(e).dtype.kind != "f":
                worst[k] = None
                continue
            with np.errstate(invalid="ignore"):
                d = np.abs(np.asarray(g, np.float64) - np.asarray(e, np.float64))
            worst[k] = np.maximum(worst[k], np.where(np.isfinite(d), d, 0.0))
    return worst
