"""Op functions written once for the frameworks whose API is torch's (torch, OneFlow): each
`register_*` defines the ops over the modules it is given (`framework`, the top-level module;
`functional`, its nn.functional) and registers them in that backend's table. No framework is
imported here: each backend passes its own modules.

A repro inlines the op function as it is written here, with the backend's own modules: `functional`
imported as `import oneflow.nn.functional as functional`, and `framework` written as the module's
own name (backends/_runtime/source.py), so a script shows `oneflow.matmul(a, b)`."""
from functools import partial

from backends._ops_common import (GRID_SAMPLE_MODES, axis, flatten_shape, gemm_sum, ints, pad_list, register_reduce,
                                  register_variadic, reshape_shape, slice_bounds)


def register_conv(table, functional):
    """Conv and ConvTranspose (1-D to 3-D) with `functional`'s conv{r}d / conv_transpose{r}d."""
    @table.register("Conv", since=11)
    def conv(x, w, b=None, *, auto_pad="NOTSET", dilations, group=1, kernel_shape, pads, strides):
        r = len(kernel_shape)
        begins, ends = pads[:r], pads[r:]
        conv_nd = getattr(functional, f"conv{r}d")
        if begins == ends:
            return conv_nd(x, w, b, stride=strides, padding=begins, dilation=dilations, groups=group)
        # the conv only takes symmetric padding: pad explicitly first, as a porter would
        x = functional.pad(x, pad_list(pads))
        return conv_nd(x, w, b, stride=strides, padding=0, dilation=dilations, groups=group)

    @table.register("ConvTranspose", since=11)
    def conv_transpose(x, w, b=None, *, dilations, group=1, output_padding, pads, strides, **canonical):
        # `canonical`: auto_pad (NOTSET: the canonical node's pads are explicit) and kernel_shape (the weight's)
        r = w.dim() - 2
        begins, ends = pads[:r], pads[r:]
        conv_t = getattr(functional, f"conv_transpose{r}d")
        if begins == ends:
            return conv_t(x, w, b, stride=strides, padding=begins, output_padding=output_padding, groups=group,
                          dilation=dilations)
        # asymmetric pads: the full transposed conv, then crop begins/ends (pads remove output)
        y = conv_t(x, w, b, stride=strides, padding=0, output_padding=output_padding, groups=group,
                   dilation=dilations)
        index = [slice(None), slice(None)] + [slice(bg, y.shape[2 + i] - e) for i, (bg, e) in
                                              enumerate(zip(begins, ends))]
        return y[tuple(index)]


def register_shape(table, framework):
    """Reshape, Flatten, Unsqueeze, Shape, Size, Split, Slice, GatherElements, Range, DepthToSpace,
    SpaceToDepth, Trilu with the top-level module `framework`."""
    @table.register("Reshape", since=14)
    def reshape(x, shape, *, allowzero=0):
        return framework.reshape(x, reshape_shape(shape, x.shape, allowzero))

    @table.register("Flatten", since=13)
    def flatten(x, *, axis=1):
        return framework.reshape(x, flatten_shape(x.shape, axis))

    @table.register("Unsqueeze", since=13)
    def unsqueeze(x, axes):
        rank = x.dim() + len(ints(axes))
        for a in sorted(axis(v, rank) for v in ints(axes)):
            x = framework.unsqueeze(x, a)
        return x

    @table.register("Shape", since=15)
    def shape(x, *, start=0, end=None):
        return framework.tensor(list(x.shape)[start:end], dtype=framework.int64)

    @table.register("Size", since=13)
    def size(x):
        return framework.tensor(x.numel(), dtype=framework.int64)

    @table.register("Split", since=18)
    def split(x, split=None, *, axis=0, num_outputs=None):
        if split is not None:
            return tuple(framework.split(x, ints(split), dim=axis))
        n = x.shape[axis]
        chunk = -(-n // num_outputs)
        return tuple(framework.split(x, chunk, dim=axis))

    @table.register("Slice", since=13)
    def slice_(x, starts, ends, axes=None, steps=None):
        index = [slice(None)] * x.dim()
        flips = []
        for a, s, e, st in slice_bounds(x.shape, starts, ends, axes, steps):
            if st > 0:
                index[a] = slice(s, max(e, s), st)
            else:  # no negative slicing steps: flip, then slice forward
                n = x.shape[a]
                flips.append(a)
                index[a] = slice(n - 1 - s, n - 1 - e if e < s else n - 1 - s, -st)
        if flips:
            x = framework.flip(x, flips)
        return x[tuple(index)]

    @table.register("GatherElements", since=13)
    def gather_elements(x, indices, *, axis=0):
        idx = framework.where(indices < 0, indices + x.shape[axis], indices)
        return framework.gather(x, axis, idx.to(framework.int64))

    @table.register("Range", since=11)
    def range_(start, limit, delta):
        return framework.arange(start.item(), limit.item(), delta.item(), dtype=start.dtype)

    @table.register("Range", since=27)
    def range_stashed(start, limit, delta, *, stash_type=1):
        """float16 and bfloat16 ranges computed in `stash_type` (float32 by default), then cast."""
        if start.dtype not in (framework.float16, framework.bfloat16):
            return range_(start, limit, delta)
        stash = {1: framework.float32, 11: framework.float64}.get(stash_type, start.dtype)
        return framework.arange(start.to(stash).item(), limit.to(stash).item(), delta.to(stash).item(),
                                dtype=stash).to(start.dtype)

    @table.register("DepthToSpace", since=13)
    def depth_to_space(x, *, blocksize, mode="DCR"):
        n, c, h, w = x.shape
        b = blocksize
        if mode == "DCR":
            y = x.reshape(n, b, b, c // (b * b), h, w).permute(0, 3, 4, 1, 5, 2)
        else:
            y = x.reshape(n, c // (b * b), b, b, h, w).permute(0, 1, 4, 2, 5, 3)
        return y.reshape(n, c // (b * b), h * b, w * b)

    @table.register("SpaceToDepth", since=13)
    def space_to_depth(x, *, blocksize, mode="DCR"):  # mode: opset 28
        n, c, h, w = x.shape
        b = blocksize
        y = x.reshape(n, c, h // b, b, w // b, b).permute((0, 3, 5, 1, 2, 4) if mode == "DCR" else (0, 1, 3, 5, 2, 4))
        return y.reshape(n, c * b * b, h // b, w // b)

    @table.register("Trilu", since=14)
    def trilu(x, k=None, *, upper=1):
        kk = ints(k)[0] if k is not None else 0
        return framework.triu(x, kk) if upper else framework.tril(x, kk)



def register_linalg(table, framework):
    """MatMul, Gemm, Einsum."""
    @table.register("MatMul", since=13)
    def matmul(a, b):
        return framework.matmul(a, b)

    @table.register("Gemm", since=13)
    def gemm(a, b, c=None, *, alpha=1.0, beta=1.0, transA=0, transB=0):
        a = a.t() if transA else a
        b = b.t() if transB else b
        y = framework.matmul(a, b)
        return gemm_sum(y, c, alpha, beta)

    @table.register("Einsum", since=12)
    def einsum(*xs, equation):
        return framework.einsum(equation, *xs)



def register_reductions(table, framework):
    """The reductions but ReduceProd, ArgMax, ArgMin, CumSum."""
    reduce = partial(register_reduce, table)
    reduce("ReduceMean", lambda x, d, k: framework.mean(x, dim=d, keepdim=k))
    reduce("ReduceSum", lambda x, d, k: framework.sum(x, dim=d, keepdim=k), since=13)
    def extreme(x, dims, keep, largest):
        """amax/amin; over an empty set ONNX's identity (the lowest value for max, the highest for min,
        bool's False/True) where the framework raises."""
        if all(x.shape[d] for d in dims):
            return (framework.amax if largest else framework.amin)(x, dim=dims, keepdim=keep)
        shape = [1 if d in dims else n for d, n in enumerate(x.shape) if keep or d not in dims]
        if x.dtype == framework.bool:
            fill = not largest
        elif x.dtype.is_floating_point:
            fill = -float("inf") if largest else float("inf")
        else:
            fill = framework.iinfo(x.dtype).min if largest else framework.iinfo(x.dtype).max
        return framework.full(shape, fill, dtype=x.dtype)

    reduce("ReduceMax", lambda x, d, k: extreme(x, d, k, True))
    reduce("ReduceMin", lambda x, d, k: extreme(x, d, k, False))
    reduce("ReduceSumSquare", lambda x, d, k: framework.sum(x * x, dim=d, keepdim=k))
    reduce("ReduceL2", lambda x, d, k: framework.linalg.vector_norm(x, 2, dim=d, keepdim=k))
    reduce("ReduceL1", lambda x, d, k: framework.sum(framework.abs(x), dim=d, keepdim=k))
    reduce("ReduceLogSumExp", lambda x, d, k: framework.logsumexp(x, dim=d, keepdim=k))

    @table.register("ArgMax", since=13)
    def arg_max(x, *, axis=0, keepdims=1, select_last_index=0):
        if select_last_index:
            return x.shape[axis] - 1 - framework.argmax(framework.flip(x, [axis]), dim=axis, keepdim=bool(keepdims))
        return framework.argmax(x, dim=axis, keepdim=bool(keepdims))

    @table.register("ArgMin", since=13)
    def arg_min(x, *, axis=0, keepdims=1, select_last_index=0):
        if select_last_index:
            return x.shape[axis] - 1 - framework.argmin(framework.flip(x, [axis]), dim=axis, keepdim=bool(keepdims))
        return framework.argmin(x, dim=axis, keepdim=bool(keepdims))

    @table.register("CumSum", since=14)
    def cumsum(x, axis, *, exclusive=0, reverse=0):
        a = ints(axis)[0]
        y = framework.flip(x, [a]) if reverse else x
        y = framework.cumsum(y, dim=a)
        if exclusive:
            y = y - (framework.flip(x, [a]) if reverse else x)
        return framework.flip(y, [a]) if reverse else y



def register_global_pools(table, framework):
    """GlobalAveragePool, GlobalMaxPool."""
    @table.register("GlobalAveragePool", since=1)
    def global_average_pool(x):
        return framework.mean(x, dim=tuple(range(2, x.dim())), keepdim=True)

    @table.register("GlobalMaxPool", since=1)
    def global_max_pool(x):
        return framework.amax(x, dim=tuple(range(2, x.dim())), keepdim=True)



def register_elementwise(table, framework, functional):
    """The binary and variadic ops, Div, Pow, LeakyRelu, Elu, Selu, Softplus, HardSwish, Where, CastLike, the inverse
    and hyperbolic trigonometry (torch.onnx's Atan of torch.atan2 among them), Mish, Celu."""
    def binary(name, fn):
        table.register(name, since=7)(fn)

    binary("Add", lambda a, b: framework.add(a, b))
    binary("Sub", lambda a, b: framework.sub(a, b))
    binary("Mul", lambda a, b: framework.mul(a, b))
    binary("Equal", lambda a, b: framework.eq(a, b))
    binary("Less", lambda a, b: framework.lt(a, b))
    binary("LessOrEqual", lambda a, b: framework.le(a, b))
    binary("Greater", lambda a, b: framework.gt(a, b))
    binary("GreaterOrEqual", lambda a, b: framework.ge(a, b))
    binary("And", lambda a, b: framework.logical_and(a, b))
    binary("Or", lambda a, b: framework.logical_or(a, b))
    binary("Xor", lambda a, b: framework.logical_xor(a, b))
    register_variadic(table, "Max", framework.maximum)
    register_variadic(table, "Min", framework.minimum)
    register_variadic(table, "Sum", framework.add)

    @table.register("Div", since=7)
    def div(a, b):
        if a.dtype.is_floating_point:
            return framework.div(a, b)
        return framework.div(a, b, rounding_mode="trunc")  # ONNX integer Div truncates

    @table.register("Pow", since=7)
    def pow_(x, y):
        return framework.pow(x, y.to(x.dtype) if y.dtype != x.dtype and not y.dtype.is_floating_point else y)

    @table.register("LeakyRelu", since=6)
    def leaky_relu(x, *, alpha=0.01):
        return functional.leaky_relu(x, alpha)

    @table.register("Elu", since=6)
    def elu(x, *, alpha=1.0):
        return functional.elu(x, alpha)

    @table.register("Selu", since=6)
    def selu(x, *, alpha=1.67326319217681884765625, gamma=1.05070102214813232421875):
        # expm1, not exp(x) - 1 (cancels near 0), of x where x <= 0 and 0 elsewhere: no exp overflow in the
        # branch `where` drops, whose gradient would be 0 * inf = NaN (irtrace fuzz reported OneFlow's as a
        # NaN mismatch); a `where`, not clamp or minimum, which OneFlow cannot differentiate twice
        negative = framework.where(x > 0, framework.zeros_like(x), x)
        return gamma * framework.where(x > 0, x, alpha * framework.expm1(negative))

    @table.register("Softplus", since=1)
    def softplus(x):
        return functional.softplus(x)

    @table.register("HardSwish", since=14)
    def hard_swish(x):
        return functional.hardswish(x)

    table.register("Atan", since=7)(lambda x: framework.atan(x))
    table.register("Asin", since=7)(lambda x: framework.asin(x))
    table.register("Acos", since=7)(lambda x: framework.acos(x))
    table.register("Sinh", since=9)(lambda x: framework.sinh(x))
    table.register("Cosh", since=9)(lambda x: framework.cosh(x))
    table.register("Asinh", since=9)(lambda x: framework.asinh(x))
    table.register("Acosh", since=9)(lambda x: framework.acosh(x))
    table.register("Atanh", since=9)(lambda x: framework.atanh(x))
    table.register("Mish", since=18)(lambda x: functional.mish(x))

    @table.register("Celu", since=12)
    def celu(x, *, alpha=1.0):
        return functional.celu(x, alpha=alpha)  # OneFlow's takes alpha by keyword only

    @table.register("Where", since=9)
    def where(c, x, y):
        return framework.where(c, x, y)

    @table.register("CastLike", since=15)
    def cast_like(x, like, *, saturate=1, round_mode="up"):
        return x.to(like.dtype)


def register_sampling(table, functional):
    """GridSample with `functional`'s grid_sample."""
    @table.register("GridSample", since=16)
    def grid_sample(x, grid, *, align_corners=0, mode="linear", padding_mode="zeros"):
        return functional.grid_sample(x, grid, mode=GRID_SAMPLE_MODES[mode], padding_mode=padding_mode,
                                      align_corners=bool(align_corners))
