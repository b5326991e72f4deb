import paddle
from paddle.nn import functional

from backends._ops_common import register_variadic
from backends.paddle.ops import OPS
from backends.paddle.ops._util import ONNX_TO_PADDLE


def _binary(name, fn):
    OPS.register(name, since=7)(fn)


_binary("Add", lambda a, b: paddle.add(a, b))
_binary("Sub", lambda a, b: paddle.subtract(a, b))
_binary("Mul", lambda a, b: paddle.multiply(a, b))
_binary("Equal", lambda a, b: paddle.equal(a, b))
_binary("Less", lambda a, b: paddle.less_than(a, b))
_binary("LessOrEqual", lambda a, b: paddle.less_equal(a, b))
_binary("Greater", lambda a, b: paddle.greater_than(a, b))
_binary("GreaterOrEqual", lambda a, b: paddle.greater_equal(a, b))
_binary("And", lambda a, b: paddle.logical_and(a, b))
_binary("Or", lambda a, b: paddle.logical_or(a, b))
_binary("Xor", lambda a, b: paddle.logical_xor(a, b))


@OPS.register("Div", since=7)
def div(a, b):
    if a.is_floating_point():
        return paddle.divide(a, b)
    # ONNX integer Div truncates; Paddle's divide of integers is true division and floor_divide
    # floors: a porter floors, then steps toward zero where the signs differ and it was inexact
    q = paddle.floor_divide(a, b)
    inexact = paddle.not_equal(paddle.remainder(a, b), paddle.zeros_like(a))
    return paddle.where(paddle.logical_and(inexact, paddle.less_than(paddle.multiply(a, b), paddle.zeros_like(a))),
                        q + 1, q)


@OPS.register("Pow", since=7)
def pow_(x, y):
    return paddle.pow(x, y.astype(x.dtype) if y.dtype != x.dtype else y)


@OPS.register("Mod", since=10)
def mod(a, b, *, fmod=0):
    if fmod:
        return a - paddle.trunc(a / b) * b  # Paddle has no fmod: a porter writes C's fmod out
    return paddle.remainder(a, b)


def _unary(name, fn, since=6):
    OPS.register(name, since=since)(fn)


_unary("Sqrt", lambda x: paddle.sqrt(x))
_unary("Reciprocal", lambda x: paddle.reciprocal(x))
_unary("Neg", lambda x: paddle.neg(x))
_unary("Abs", lambda x: paddle.abs(x))
_unary("Exp", lambda x: paddle.exp(x))
_unary("Log", lambda x: paddle.log(x))
_unary("Erf", lambda x: paddle.erf(x), since=9)
_unary("Sin", lambda x: paddle.sin(x), since=7)
_unary("Cos", lambda x: paddle.cos(x), since=7)
_unary("Tan", lambda x: paddle.tan(x), since=7)
_unary("Tanh", lambda x: paddle.tanh(x))
_unary("Sigmoid", lambda x: functional.sigmoid(x))
_unary("Relu", lambda x: functional.relu(x))
_unary("Floor", lambda x: paddle.floor(x))
_unary("Ceil", lambda x: paddle.ceil(x))
_unary("Sign", lambda x: paddle.sign(x), since=9)
_unary("Not", lambda x: paddle.logical_not(x), since=1)
_unary("IsNaN", lambda x: paddle.isnan(x), since=9)
_unary("Softsign", lambda x: functional.softsign(x), since=1)
_unary("Round", lambda x: paddle.round(x), since=11)  # Paddle's round, like ONNX, rounds half to even
_unary("Identity", lambda x: x, since=1)
_unary("Softplus", lambda x: functional.softplus(x), since=1)
_unary("HardSwish", lambda x: functional.hardswish(x), since=14)
_unary("Atan", lambda x: paddle.atan(x), since=7)
_unary("Asin", lambda x: paddle.asin(x), since=7)
_unary("Acos", lambda x: paddle.acos(x), since=7)
_unary("Sinh", lambda x: paddle.sinh(x), since=9)
_unary("Cosh", lambda x: paddle.cosh(x), since=9)
_unary("Asinh", lambda x: paddle.asinh(x), since=9)
_unary("Acosh", lambda x: paddle.acosh(x), since=9)
_unary("Atanh", lambda x: paddle.atanh(x), since=9)
_unary("Mish", lambda x: functional.mish(x), since=18)


@OPS.register("IsInf", since=10)
def is_inf(x, *, detect_negative=1, detect_positive=1):
    neg = paddle.isneginf(x) if detect_negative else paddle.zeros_like(x, dtype="bool")
    pos = paddle.isposinf(x) if detect_positive else paddle.zeros_like(x, dtype="bool")
    return paddle.logical_or(neg, pos)


@OPS.register("LeakyRelu", since=6)
def leaky_relu(x, *, alpha=0.01):
    return functional.leaky_relu(x, alpha)


@OPS.register("PRelu", since=9)
def prelu(x, slope):
    channel = x.ndim >= 2 and list(slope.shape) == [x.shape[1]] + [1] * (x.ndim - 2)
    if slope.size == 1 or channel:
        return functional.prelu(x, slope.reshape([-1]))  # Paddle's prelu weight is (C,) or (1,): ONNX's (C, 1, 1) flattened
    return paddle.where(x >= 0, x, x * slope)  # any other ONNX broadcast of the slope: a porter writes it out


@OPS.register("Elu", since=6)
def elu(x, *, alpha=1.0):
    return functional.elu(x, alpha)


@OPS.register("Selu", since=6)
def selu(x, *, alpha=1.67326319217681884765625, gamma=1.05070102214813232421875):
    return functional.selu(x, scale=gamma, alpha=alpha)


@OPS.register("Gelu", since=20)
def gelu(x, *, approximate="none"):
    return functional.gelu(x, approximate=approximate == "tanh")


@OPS.register("HardSigmoid", since=6)
def hard_sigmoid(x, *, alpha=0.2, beta=0.5):
    return functional.hardsigmoid(x, slope=alpha, offset=beta)  # Paddle's defaults are 1/6 and 0.5: always pass them


@OPS.register("Clip", since=11)
def clip(x, lo=None, hi=None):
    if lo is None and hi is None:
        return x
    return paddle.clip(x, None if lo is None else lo.item(), None if hi is None else hi.item())


register_variadic(OPS, "Max", paddle.maximum)
register_variadic(OPS, "Min", paddle.minimum)
register_variadic(OPS, "Sum", paddle.add)


@OPS.register("Where", since=9)
def where(c, x, y):
    return paddle.where(c, x, y)


@OPS.register("Cast", since=6)
def cast(x, *, to, saturate=1, round_mode="up"):
    return paddle.cast(x, ONNX_TO_PADDLE[to])


@OPS.register("CastLike", since=15)
def cast_like(x, like, *, saturate=1, round_mode="up"):
    return paddle.cast(x, like.dtype)


@OPS.register("Dropout", since=12)
def dropout(x, ratio=None, training_mode=None, *, seed=None):
    if training_mode is not None and bool(training_mode.item()):
        raise ValueError("Dropout with training_mode=1 draws a fresh mask; irtrace replays recorded masks only")
    return x, paddle.ones(x.shape, dtype="bool")


@OPS.register("RecordedDropout", domain="ai.irtrace")
def recorded_dropout(x, mask, *, ratio):
    # functional.dropout draws its own mask; replaying a recorded one, a porter multiplies by it
    return x * (mask.astype(x.dtype) / (1.0 - ratio)) if ratio < 1 else x * 0


@OPS.register("Celu", since=12)
def celu(x, *, alpha=1.0):
    return functional.celu(x, alpha)
