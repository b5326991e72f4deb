"""Alternative formulations of MegEngine ops, beside its op table (backends/megengine/ops/): what a
porter writes instead of the call that fails (F.pad's second derivative w.r.t. the incoming gradient
is silently 0; F.leaky_relu, F.gelu, F.softplus, F.hswish have no double backward; batched
F.matmul's double backward crashes; F.conv1d, and so module.Conv1d, refuses a grouped weight). Each has
the signature of the op-table function it stands in for and uses MegEngine's public API only; irtrace
runs each on a finding's recorded inputs, in every mode, and reports those that match torch
(docs/report.md, "Workarounds")."""
import math

import numpy as np
from megengine import functional

from backends._ops_common import full_pads
from backends._table import Alternatives, Unsupported
from backends.megengine.ops import OPS
from backends.megengine.ops.conv import conv


WORKAROUNDS = Alternatives(OPS)


def _take(x, ax, start, stop):
    """x[..., start:stop, ...] along axis `ax`."""
    return x[(slice(None),) * ax + (slice(start, stop),)]


@WORKAROUNDS.register("Pad", since=19)
def pad_concat(x, pads, constant_value=None, axes=None, *, mode="constant"):
    """F.concat of constant blocks (constant mode) or of slices of x (reflect, edge) instead of F.pad."""
    r = x.ndim
    p = full_pads(pads, axes, r)
    if any(v < 0 for v in p):
        raise Unsupported("negative pads (ONNX crops with them)")
    if mode not in ("constant", "reflect", "edge"):
        raise Unsupported(f"mode {mode!r}")
    value = float(constant_value.item()) if constant_value is not None and constant_value.size else 0.0
    for a in range(r):
        begin, end, n = p[a], p[a + r], x.shape[a]
        if not begin and not end:
            continue
        if mode == "constant":
            shape = list(x.shape)
            before = [functional.full(shape[:a] + [begin] + shape[a + 1:], value, dtype=x.dtype)] if begin else []
            after = [functional.full(shape[:a] + [end] + shape[a + 1:], value, dtype=x.dtype)] if end else []
        elif mode == "edge":
            before = [_take(x, a, 0, 1)] * begin
            after = [_take(x, a, n - 1, n)] * end
        else:  # reflect: the edge element itself is not repeated
            if begin >= n or end >= n:
                raise Unsupported(f"reflect pads {begin}, {end} on an axis of size {n}")
            before = [_take(x, a, i, i + 1) for i in range(begin, 0, -1)]
            after = [_take(x, a, n - 1 - i, n - i) for i in range(1, end + 1)]
        x = functional.concat(before + [x] + after, axis=a)
    return x


@WORKAROUNDS.register("LeakyRelu", since=6)
def leaky_relu_where(x, *, alpha=0.01):
    """F.where(x > 0, x, alpha * x) instead of F.leaky_relu."""
    return functional.where(x > 0, x, x * alpha)


@WORKAROUNDS.register("LeakyRelu", since=6)
def leaky_relu_mask(x, *, alpha=0.01):
    """x * (1 where x > 0, alpha elsewhere) instead of F.leaky_relu."""
    positive = (x > 0).astype(x.dtype)
    return x * (positive * (1.0 - alpha) + alpha)


@WORKAROUNDS.register("PRelu", since=9)
def prelu_where(x, slope):
    """F.where(x > 0, x, slope * x) instead of F.prelu."""
    return functional.where(x > 0, x, x * slope)


# (node, weight) of 24-point Gauss-Legendre quadrature on [0, 1], as Python floats
_GAUSS_LEGENDRE = [(float(t + 1) / 2, float(w) / 2) for t, w in zip(*np.polynomial.legendre.leggauss(24))]


def _erf(z):
    """erf(z) = 2/sqrt(pi) * z * integral_0^1 exp(-(z t)^2) dt by 24-point Gauss-Legendre quadrature
    (exact to float64 rounding for |z| <= 4.5, beyond which erf is +-1 in float32): MegEngine's
    public API has no erf, and this form's derivatives are as accurate as its value."""
    z = functional.clip(z, -4.5, 4.5)
    z2 = z * z
    total = 0.0
    for t, w in _GAUSS_LEGENDRE:
        total = total + w * functional.exp(z2 * (-t * t))
    return (2.0 / math.sqrt(math.pi)) * z * total


@WORKAROUNDS.register("Gelu", since=20)
def gelu_composed(x, *, approximate="none"):
    """0.5 x (1 + erf(x / sqrt 2)), erf by quadrature (or the tanh form), instead of F.gelu."""
    if approximate == "tanh":
        return 0.5 * x * (1.0 + functional.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x * x)))
    if approximate != "none":
        raise Unsupported(f"approximate={approximate!r}")
    return 0.5 * x * (1.0 + _erf(x * (1.0 / math.sqrt(2.0))))


@WORKAROUNDS.register("Softplus", since=1)
def softplus_composed(x):
    """relu(x) + log1p(exp(-|x|)) instead of F.softplus."""
    return functional.relu(x) + functional.log1p(functional.exp(-functional.abs(x)))


@WORKAROUNDS.register("HardSwish", since=14)
def hard_swish_composed(x):
    """x * min(max(x + 3, 0), 6) / 6 instead of F.hswish."""
    return x * functional.minimum(functional.maximum(x + 3.0, 0.0), 6.0) / 6.0


@WORKAROUNDS.register("HardSigmoid", since=6)
def hard_sigmoid_composed(x, *, alpha=0.2, beta=0.5):
    """min(max(alpha x + beta, 0), 1) instead of F.hsigmoid / F.clip."""
    return functional.minimum(functional.maximum(x * alpha + beta, 0.0), 1.0)


@WORKAROUNDS.register("Softmax", since=13)
def softmax_composed(x, *, axis=-1):
    """exp(x - max) / sum(exp(x - max)) instead of F.softmax."""
    e = functional.exp(x - functional.max(x, axis=axis, keepdims=True).detach())  # the max only keeps exp in range
    return e / functional.sum(e, axis=axis, keepdims=True)


@WORKAROUNDS.register("LogSoftmax", since=13)
def log_softmax_composed(x, *, axis=-1):
    """(x - max) - log(sum(exp(x - max))) instead of F.logsoftmax."""
    z = x - functional.max(x, axis=axis, keepdims=True).detach()
    return z - functional.log(functional.sum(functional.exp(z), axis=axis, keepdims=True))


@WORKAROUNDS.register("LayerNormalization", since=17)
def layer_norm_composed(x, scale, b=None, *, axis=-1, epsilon=1e-5, stash_type=1):
    """(x - mean) / sqrt(var + eps) * scale + b from F.mean instead of F.nn.layer_norm."""
    if stash_type != 1:
        raise Unsupported(f"LayerNormalization stash_type={stash_type}")
    axes = list(range(axis + x.ndim if axis < 0 else axis, x.ndim))  # normalized over axis..last
    d = x - functional.mean(x, axis=axes, keepdims=True)
    var = functional.mean(d * d, axis=axes, keepdims=True)
    y = d / functional.sqrt(var + epsilon) * scale
    return y + b if b is not None else y


@WORKAROUNDS.register("MatMul", since=13)
def matmul_broadcast_sum(a, b):
    """A broadcasting multiply and F.sum over the shared axis instead of F.matmul."""
    if a.ndim == 1 and b.ndim == 1:
        return functional.sum(a * b)
    if a.ndim == 1:
        return functional.sum(functional.expand_dims(a, -1) * b, axis=-2)
    if b.ndim == 1:
        return functional.sum(a * b, axis=-1)
    return functional.sum(functional.expand_dims(a, -1) * functional.expand_dims(b, -3), axis=-2)


@WORKAROUNDS.register("Conv", since=11)
def conv_concat_pads(x, w, b=None, *, auto_pad="NOTSET", dilations, group=1, kernel_shape, pads, strides):
    """The op table's conv with uneven pads made by pad_concat (F.concat, not F.pad, whose second derivative is
    silently 0), and a 1-D one run as 2-D over a unit last axis: F.conv1d asserts a 3-D weight where its docstring
    asks a grouped one to be 4-D (G, O/G, I/G, k), so module.Conv1d(groups > 1) raises on its first call."""
    r = len(kernel_shape)
    if r > 2:  # F.conv3d's own second derivative is wrong, whatever the pads (op case conv3d_strided)
        raise Unsupported("MegEngine's conv3d differentiates twice wrongly in itself: no form of its pads mends it")
    if pads[:r] != pads[r:]:
        x = pad_concat(x, [0, 0, *pads[:r], 0, 0, *pads[r:]])
        pads = [0] * (2 * r)
    if r != 1:
        return conv(x, w, b, auto_pad=auto_pad, dilations=dilations, group=group, kernel_shape=kernel_shape,
                    pads=pads, strides=strides)
    y = conv(functional.expand_dims(x, -1), functional.expand_dims(w, -1), b, auto_pad=auto_pad,
             dilations=[*dilations, 1], group=group, kernel_shape=[*kernel_shape, 1], pads=[pads[0], 0, pads[1], 0],
             strides=[*strides, 1])
    return functional.squeeze(y, -1)
