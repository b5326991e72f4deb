from megengine import functional
import numpy as np

from backends._ops_common import register_variadic
from backends._table import Unsupported
from backends.megengine.ops import OPS
from backends.megengine.ops._util import ONNX_TO_MGE

OPS.register("Add", since=7)(lambda a, b: functional.add(a, b))
OPS.register("Sub", since=7)(lambda a, b: functional.sub(a, b))
OPS.register("Mul", since=7)(lambda a, b: functional.mul(a, b))
OPS.register("Equal", since=7)(lambda a, b: functional.equal(a, b))
OPS.register("Less", since=7)(lambda a, b: functional.less(a, b))
OPS.register("LessOrEqual", since=7)(lambda a, b: functional.less_equal(a, b))
OPS.register("Greater", since=7)(lambda a, b: functional.greater(a, b))
OPS.register("GreaterOrEqual", since=7)(lambda a, b: functional.greater_equal(a, b))
OPS.register("And", since=7)(lambda a, b: functional.logical_and(a, b))
OPS.register("Or", since=7)(lambda a, b: functional.logical_or(a, b))
OPS.register("Xor", since=7)(lambda a, b: functional.logical_xor(a, b))


@OPS.register("Div", since=7)
def div(a, b):
    if np.dtype(a.dtype).kind in "fV":  # "V": bfloat16 (MegEngine's own numpy type, and ml_dtypes' in a repro)
        return functional.div(a, b)
    q = functional.floor_div(a, b)  # ONNX integer Div truncates; MegEngine has floor division only
    return functional.where(functional.logical_and(functional.not_equal(functional.mod(a, b), 0), functional.less(functional.mul(a, b), 0)), q + 1, q)


@OPS.register("Pow", since=7)
def pow_(x, y):
    return functional.pow(x, y.astype(x.dtype))


@OPS.register("Mod", since=10)
def mod(a, b, *, fmod=0):
    if fmod:
        raise Unsupported("MegEngine's % is C fmod only for floats; ONNX fmod=1 semantics are not exposed")
    return functional.mod(a, b)


OPS.register("Sqrt", since=6)(lambda x: functional.sqrt(x))
OPS.register("Reciprocal", since=6)(lambda x: 1.0 / x)  # MegEngine has no reciprocal: a porter writes 1 / x
OPS.register("Neg", since=6)(lambda x: functional.neg(x))
OPS.register("Abs", since=6)(lambda x: functional.abs(x))
OPS.register("Exp", since=6)(lambda x: functional.exp(x))
OPS.register("Log", since=6)(lambda x: functional.log(x))
OPS.register("Sin", since=7)(lambda x: functional.sin(x))
OPS.register("Cos", since=7)(lambda x: functional.cos(x))
OPS.register("Tan", since=7)(lambda x: functional.tan(x))
OPS.register("Tanh", since=6)(lambda x: functional.tanh(x))
OPS.register("Sigmoid", since=6)(lambda x: functional.sigmoid(x))
OPS.register("Relu", since=6)(lambda x: functional.relu(x))
OPS.register("Floor", since=6)(lambda x: functional.floor(x))
OPS.register("Ceil", since=6)(lambda x: functional.ceil(x))
@OPS.register("Round", since=11)
def round_(x):
    # MegEngine's round takes halves away from zero (-0.5 -> -1); ONNX rounds them to even (-0.5 -> -0)
    y = functional.round(x)
    return functional.where((functional.abs(y - x) == 0.5) & (functional.abs(y) % 2 == 1), y - functional.sign(x), y)
OPS.register("Sign", since=9)(lambda x: functional.sign(x))
OPS.register("Not", since=1)(lambda x: functional.logical_not(x))
OPS.register("IsNaN", since=9)(lambda x: functional.isnan(x))
OPS.register("Identity", since=1)(lambda x: x)
OPS.register("Softplus", since=1)(lambda x: functional.softplus(x))
OPS.register("HardSwish", since=14)(lambda x: functional.hswish(x))
OPS.register("Atan", since=7)(lambda x: functional.atan(x))
OPS.register("Asin", since=7)(lambda x: functional.asin(x))
OPS.register("Acos", since=7)(lambda x: functional.acos(x))
OPS.register("Sinh", since=9)(lambda x: functional.sinh(x))
OPS.register("Cosh", since=9)(lambda x: functional.cosh(x))
OPS.register("Asinh", since=9)(lambda x: functional.asinh(x))
OPS.register("Acosh", since=9)(lambda x: functional.acosh(x))
OPS.register("Atanh", since=9)(lambda x: functional.atanh(x))
OPS.register("Mish", since=18)(lambda x: x * functional.tanh(functional.softplus(x)))  # no F.mish: its formula


# Not registered: Erf (MegEngine's public functional API has no erf).


@OPS.register("IsInf", since=10)
def is_inf(x, *, detect_negative=1, detect_positive=1):
    inf = functional.isinf(x)
    if detect_negative and detect_positive:
        return inf
    return functional.logical_and(inf, functional.greater(x, 0) if detect_positive else functional.less(x, 0))


@OPS.register("LeakyRelu", since=6)
def leaky_relu(x, *, alpha=0.01):
    return functional.leaky_relu(x, alpha)


@OPS.register("PRelu", since=9)
def prelu(x, slope):
    return functional.prelu(x, slope)  # functional.prelu broadcasts the slope like numpy, as ONNX does (e.g. (C, 1, 1))


@OPS.register("Elu", since=6)
def elu(x, *, alpha=1.0):
    # MegEngine 1.13 has no F.elu; expm1, not exp(x) - 1, which cancels to 1e-5 relative error near 0 (irtrace
    # fuzz reported that as MegEngine's Elu); min(x, 0): no exp overflow in the branch `where` drops
    return functional.where(x > 0, x, alpha * functional.expm1(functional.minimum(x, 0.0)))


@OPS.register("Gelu", since=20)
def gelu(x, *, approximate="none"):
    if approximate != "none":
        raise Unsupported("MegEngine's F.gelu is the exact erf form only (no approximate='tanh')")
    return functional.gelu(x)


@OPS.register("HardSigmoid", since=6)
def hard_sigmoid(x, *, alpha=0.2, beta=0.5):
    if abs(alpha - 1 / 6) < 1e-7 and beta == 0.5:
        return functional.hsigmoid(x)
    return functional.clip(alpha * x + beta, 0.0, 1.0)  # functional.hsigmoid is relu6(x + 3) / 6 only: other slopes need a clip


@OPS.register("Clip", since=11)
def clip(x, lo=None, hi=None):
    if lo is None and hi is None:  # ONNX: no bounds, the identity; F.clip asserts that one is given
        return functional.copy(x)
    return functional.clip(x, None if lo is None else float(lo.item()), None if hi is None else float(hi.item()))


register_variadic(OPS, "Max", functional.maximum)
register_variadic(OPS, "Min", functional.minimum)
register_variadic(OPS, "Sum", functional.add)


@OPS.register("Where", since=9)
def where(c, x, y):
    shape = np.broadcast_shapes(tuple(c.shape), tuple(x.shape), tuple(y.shape))
    # functional.where wants equal shapes; ONNX broadcasts all three
    return functional.where(functional.broadcast_to(c, shape), functional.broadcast_to(x, shape), functional.broadcast_to(y, shape))


@OPS.register("Cast", since=6)
def cast(x, *, to, saturate=1, round_mode="up"):
    if to not in ONNX_TO_MGE and to != 7:
        raise Unsupported(f"MegEngine has no dtype for ONNX type {to} (no float64, no 64-bit ints)")
    return x.astype(ONNX_TO_MGE.get(to, "int32"))  # int64 -> int32: MegEngine's widest integer


@OPS.register("CastLike", since=15)
def cast_like(x, like, *, saturate=1, round_mode="up"):
    return x.astype(like.dtype)


@OPS.register("Dropout", since=12)
def dropout(x, ratio=None, training_mode=None, *, seed=None):
    if training_mode is not None and bool(training_mode.item()):
        raise Unsupported("Dropout with training_mode=1 draws a fresh mask; irtrace replays recorded masks")
    return x, functional.ones(x.shape, dtype="bool")


@OPS.register("RecordedDropout", domain="ai.irtrace")
def recorded_dropout(x, mask, *, ratio):
    # functional.dropout draws its own mask; replaying a recorded one, a porter multiplies by it
    return x * (mask.astype(x.dtype) / (1.0 - ratio))


@OPS.register("Celu", since=12)
def celu(x, *, alpha=1.0):
    return alpha * elu(x / alpha)  # MegEngine has no celu: ELU of x / alpha (above), scaled back


@OPS.register("Selu", since=6)
def selu(x, *, alpha=1.67326319217681884765625, gamma=1.05070102214813232421875):
    return gamma * elu(x, alpha=alpha)  # MegEngine has no selu: gamma times ELU (above)


OPS.register("Softsign", since=1)(lambda x: x / (1 + functional.abs(x)))  # MegEngine has no softsign: its formula
