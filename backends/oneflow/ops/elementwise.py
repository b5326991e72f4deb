import oneflow
from oneflow.nn import functional

from backends._torch_like import register_elementwise
from backends._table import Unsupported
from backends.oneflow.ops import OPS
from backends.oneflow.ops._util import ONNX_TO_FLOW




@OPS.register("Mod", since=10)
def mod(a, b, *, fmod=0):
    if fmod:
        return oneflow.fmod(a, b)
    return a - oneflow.floor_divide(a, b) * b if a.dtype.is_floating_point else a % b  # Python-style remainder


def _unary(name, fn, since=6):
    OPS.register(name, since=since)(fn)


_unary("Sqrt", lambda x: oneflow.sqrt(x))
_unary("Reciprocal", lambda x: oneflow.reciprocal(x))
_unary("Neg", lambda x: oneflow.neg(x))
_unary("Abs", lambda x: oneflow.abs(x))
_unary("Exp", lambda x: oneflow.exp(x))
_unary("Log", lambda x: oneflow.log(x))
_unary("Erf", lambda x: oneflow.erf(x), since=9)
_unary("Sin", lambda x: oneflow.sin(x), since=7)
_unary("Cos", lambda x: oneflow.cos(x), since=7)
_unary("Tan", lambda x: oneflow.tan(x), since=7)
_unary("Tanh", lambda x: oneflow.tanh(x))
_unary("Sigmoid", lambda x: oneflow.sigmoid(x))
_unary("Relu", lambda x: oneflow.relu(x))
_unary("Floor", lambda x: oneflow.floor(x))
_unary("Ceil", lambda x: oneflow.ceil(x))
_unary("Sign", lambda x: oneflow.sign(x), since=9)
_unary("Not", lambda x: oneflow.logical_not(x), since=1)
_unary("IsNaN", lambda x: oneflow.isnan(x), since=9)
_unary("Softsign", lambda x: functional.softsign(x), since=1)
_unary("Round", lambda x: oneflow.round(x), since=11)  # ONNX rounds half to even, as oneflow.round
_unary("Identity", lambda x: x, since=1)


@OPS.register("IsInf", since=10)
def is_inf(x, *, detect_negative=1, detect_positive=1):
    return oneflow.logical_or(oneflow.logical_and(x == float("-inf"), bool(detect_negative)),
                              oneflow.logical_and(x == float("inf"), bool(detect_positive)))


@OPS.register("PRelu", since=9)
def prelu(x, slope):
    if x.dim() >= 2 and slope.numel() == x.shape[1] and tuple(slope.shape) in (
            (x.shape[1],) + (1,) * k for k in range(x.dim() - 1)):
        return functional.prelu(x, slope.reshape(-1))  # per-channel slope: functional.prelu takes it 1-D
    return oneflow.where(x >= 0, x, x * slope)  # other ONNX broadcasts: functional.prelu cannot take them


@OPS.register("Gelu", since=20)
def gelu(x, *, approximate="none"):
    if approximate == "tanh":
        return functional.gelu(x, approximate="tanh")
    return functional.gelu(x)


@OPS.register("HardSigmoid", since=6)
def hard_sigmoid(x, *, alpha=0.2, beta=0.5):
    if abs(alpha - 1 / 6) < 1e-7 and beta == 0.5:
        return functional.hardsigmoid(x)
    return oneflow.clamp(alpha * x + beta, 0.0, 1.0)  # functional.hardsigmoid is x / 6 + 1 / 2 only: other slopes clamp


@OPS.register("Clip", since=11)
def clip(x, lo=None, hi=None):
    if lo is None and hi is None:
        return x
    # oneflow.clamp takes Python scalars for its bounds
    return oneflow.clamp(x, None if lo is None else float(lo.item()), None if hi is None else float(hi.item()))




@OPS.register("Cast", since=6)
def cast(x, *, to, saturate=1, round_mode="up"):
    if to not in ONNX_TO_FLOW:
        raise Unsupported(f"OneFlow has no dtype for ONNX type {to}")
    return x.to(ONNX_TO_FLOW[to])


@OPS.register("Dropout", since=12)
def dropout(x, ratio=None, training_mode=None, *, seed=None):
    if training_mode is not None and bool(training_mode.item()):
        raise Unsupported("Dropout with training_mode=1 draws a fresh mask; irtrace replays recorded masks")
    return x, oneflow.ones_like(x, dtype=oneflow.bool)


@OPS.register("RecordedDropout", domain="ai.irtrace")
def recorded_dropout(x, mask, *, ratio):
    # functional.dropout draws its own mask; replaying a recorded one, a porter multiplies by it
    return x * (mask.to(x.dtype) / (1.0 - ratio)) if ratio < 1 else x * 0


register_elementwise(OPS, oneflow, functional)
