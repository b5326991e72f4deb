import torch
from torch.nn import functional

from backends._table import Unsupported
from backends._torch_like import register_elementwise
from backends.torch.ops import OPS
from backends.torch.ops._util import ONNX_TO_TORCH




@OPS.register("Mod", since=10)
def mod(a, b, *, fmod=0):
    return torch.fmod(a, b) if fmod else torch.remainder(a, b)


def _unary(name, fn, since=6):
    OPS.register(name, since=since)(fn)


_unary("Sqrt", torch.sqrt)
_unary("Reciprocal", torch.reciprocal)
_unary("Neg", torch.neg)
_unary("Abs", torch.abs)
_unary("Exp", torch.exp)
_unary("Log", torch.log)
_unary("Erf", torch.erf, since=9)
_unary("Sin", torch.sin, since=7)
_unary("Cos", torch.cos, since=7)
_unary("Tan", torch.tan, since=7)
_unary("Tanh", torch.tanh)
_unary("Sigmoid", torch.sigmoid)
_unary("Relu", torch.relu)
_unary("Floor", torch.floor)
_unary("Ceil", torch.ceil)
_unary("Sign", torch.sign, since=9)
_unary("Not", torch.logical_not, since=1)
_unary("IsNaN", torch.isnan, since=9)
_unary("Softsign", functional.softsign, since=1)
_unary("Round", torch.round, since=11)  # ONNX and torch both round half to even
OPS.register("BitwiseAnd", since=18)(lambda a, b: torch.bitwise_and(a, b))
OPS.register("BitwiseOr", since=18)(lambda a, b: torch.bitwise_or(a, b))
OPS.register("BitwiseXor", since=18)(lambda a, b: torch.bitwise_xor(a, b))


# torch's CPU shifts and bitwise_not take uint8 and the signed types only (torch.onnx makes
# `x << 1` on int64 a BitShift of uint64): the same bits as the signed type of that width
_SIGNED = {torch.uint16: torch.int16, torch.uint32: torch.int32, torch.uint64: torch.int64}


@OPS.register("BitShift", since=11)
def bit_shift(x, y, *, direction):
    signed = _SIGNED.get(x.dtype)
    if signed is None:
        return torch.bitwise_left_shift(x, y) if direction == "LEFT" else torch.bitwise_right_shift(x, y)
    xs, ys = x.view(signed), y.view(signed)
    if direction == "LEFT":
        return torch.bitwise_left_shift(xs, ys).view(x.dtype)
    # an unsigned right shift is logical: clear the bits the signed shift copied from the top bit
    bits = torch.iinfo(signed).bits
    out = torch.bitwise_right_shift(xs, ys)
    keep = torch.bitwise_left_shift(torch.ones_like(xs), (bits - ys).clamp(max=bits - 1)) - 1
    return torch.where((xs < 0) & (ys > 0), out & keep, out).view(x.dtype)


@OPS.register("BitwiseNot", since=18)
def bitwise_not(x):
    signed = _SIGNED.get(x.dtype)
    return torch.bitwise_not(x) if signed is None else torch.bitwise_not(x.view(signed)).view(x.dtype)


_unary("Identity", lambda x: x, since=1)


@OPS.register("IsInf", since=10)
def is_inf(x, *, detect_negative=1, detect_positive=1):
    return (torch.isneginf(x) & bool(detect_negative)) | (torch.isposinf(x) & bool(detect_positive))


@OPS.register("PRelu", since=9)
def prelu(x, slope):
    return torch.where(x >= 0, x, x * slope)  # ONNX PRelu broadcasts slope unidirectionally; functional.prelu wants 1-D


@OPS.register("Gelu", since=20)
def gelu(x, *, approximate="none"):
    return functional.gelu(x, approximate=approximate)


@OPS.register("HardSigmoid", since=6)
def hard_sigmoid(x, *, alpha=0.2, beta=0.5):
    return torch.clamp(alpha * x + beta, 0, 1)


@OPS.register("Clip", since=11)
def clip(x, lo=None, hi=None):
    if lo is None and hi is None:
        return x
    return torch.clamp(x, lo, hi)




@OPS.register("Cast", since=6)
def cast(x, *, to, saturate=1, round_mode="up"):
    return x.to(ONNX_TO_TORCH[to])


@OPS.register("Dropout", since=12)
def dropout(x, ratio=None, training_mode=None, *, seed=None):
    if training_mode is not None and bool(training_mode):
        raise ValueError("Dropout with training_mode=1 draws a fresh mask; irtrace replays recorded masks only")
    return x, torch.ones_like(x, dtype=torch.bool)


@OPS.register("RecordedDropout", domain="ai.irtrace")
def recorded_dropout(x, mask, *, ratio):
    # the same expression as torch's own CPU dropout: input * (bernoulli mask / (1 - p))
    return x * (mask.to(x.dtype) / (1.0 - ratio)) if ratio < 1 else x * 0


register_elementwise(OPS, torch, functional)

_UNSIGNED = (torch.uint16, torch.uint32, torch.uint64)


def _unsigned(fn, kind):
    """`fn` on uint16/32/64, which torch has no arithmetic or comparison kernels for: uint16 and uint32 in
    int64 (wrapped back to their width), uint64 as the int64 of the same bits (addition, subtraction
    and multiplication wrap the same; comparisons and Max/Min after flipping the sign bit; Div and Mod
    only below 2**63)."""
    def on_unsigned(*xs, **attrs):
        dt = next((x.dtype for x in xs if isinstance(x, torch.Tensor) and x.dtype in _UNSIGNED), None)
        if dt is None:
            return fn(*xs, **attrs)
        if dt != torch.uint64:
            y = fn(*(x.to(torch.int64) for x in xs), **attrs)
            return y if kind == "compare" else (y & (1 << torch.iinfo(dt).bits) - 1).to(dt)
        s = [x.view(torch.int64) for x in xs]
        if kind in ("compare", "extreme"):
            y = fn(*(v ^ -2 ** 63 for v in s), **attrs)
            return y if kind == "compare" else (y ^ -2 ** 63).view(dt)
        if kind == "divide" and any(bool((v < 0).any()) for v in s):
            raise Unsupported("uint64 Div/Mod of values >= 2**63: torch has no unsigned 64-bit division")
        return fn(*s, **attrs).view(dt)
    on_unsigned.__name__ = fn.__name__
    return on_unsigned


for _op, _kind in (("Add", "wrap"), ("Sub", "wrap"), ("Mul", "wrap"), ("Div", "divide"), ("Mod", "divide"),
                   ("Max", "extreme"), ("Min", "extreme"), ("Sum", "wrap"), ("Greater", "compare"),
                   ("GreaterOrEqual", "compare"), ("Less", "compare"), ("LessOrEqual", "compare"),
                   ("Equal", "compare")):
    _entry = OPS.lookup("", _op, 10 ** 6)
    OPS.replace(_op, _entry.since)(_unsigned(_entry.fn, _kind))
