"""A test-only backend: torch's op table with one planted bug, chosen by IRTRACE_PLANTED.

pad:    Conv pads on the wrong side (all of the padding at the end)
lrelu:  LeakyRelu whose backward is not differentiable in the cotangent (d2g = 0)
relu0:  Relu whose gradient at exactly 0 is 1 (a subgradient convention)
crash:  Sigmoid segfaults the worker
bwdcrash: Tanh's backward segfaults the worker (its forward is right)
fussymm: MatMul's backward segfaults when only its second input requires grad, or when a double
         backward runs it with a cotangent that does not require grad (as MegEngine's batched MatMul)
hang:   Tanh never returns
stale:  Tanh off by another number on every call (as a kernel that reads memory it did not write)
shape:  Conv's output one column short (a wrong-shaped op in the middle of a chain)
bnbiased:   training BatchNorm updates running_var with the biased variance
bnmomentum: training BatchNorm applies momentum the other way round
bnseqsum:   training BatchNorm's running mean from its batch summed in order in float32 (as a naive kernel sums):
            no wrong op, another rounding of the same sum
f64:    every op in float64, rounded back: float32 noise only, no wrong op
scribble: every op right, then the worker writes over the inputs it was given (as a framework computing in
          place on the memory it is handed): no wrong op, if each call gets its inputs as the bundle holds them
"""
import ctypes
import os
import time

import numpy as np
import torch
from torch.nn import functional

from backends._ops_common import pad_list
from backends.torch.adapter import TorchAdapter
from backends.torch.ops import OPS


BUG = os.environ.get("IRTRACE_PLANTED", "")
TABLE = OPS.derive(f"planted-{BUG}")


def wrong_side_conv(x, w, b=None, *, auto_pad="NOTSET", dilations, group=1, kernel_shape, pads, strides):
    r = len(kernel_shape)
    moved = [0] * r + [p + q for p, q in zip(pads[:r], pads[r:])]  # everything at the end
    return functional.conv2d(functional.pad(x, pad_list(moved)), w, b, stride=strides, dilation=dilations, groups=group)


class _LeakyNoDouble(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, alpha):
        ctx.save_for_backward(x)
        ctx.alpha = alpha
        return functional.leaky_relu(x, alpha)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g.detach() * torch.where(x > 0, 1.0, ctx.alpha), None  # detach: no second derivative


class _ReluOneAtZero(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.relu(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * (x >= 0).to(g.dtype)


def crash(x):
    ctypes.string_at(0)  # a real segfault


class _FussyMatMul(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a @ b

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        if ctx.needs_input_grad[1] and not ctx.needs_input_grad[0]:
            ctypes.string_at(0)  # only the weight requires grad
        if torch.is_grad_enabled() and not g.requires_grad:
            ctypes.string_at(0)  # a double backward whose cotangent is a constant
        return g @ b.transpose(-1, -2), a.transpose(-1, -2) @ g


class _TanhCrashingBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return torch.tanh(x)

    @staticmethod
    def backward(ctx, g):
        ctypes.string_at(0)  # a real segfault, in the backward only


def stale_tanh(x):
    return torch.tanh(x) + (1.0 + int.from_bytes(os.urandom(4), "little"))  # what unwritten memory held this time


def hang(x):
    time.sleep(3600)


def shape_bug(x, w, b=None, *, auto_pad="NOTSET", dilations, group=1, kernel_shape, pads, strides):
    # forgets the end padding of the last spatial axis, as MegEngine's ConvTranspose ignores one
    # output_padding: the output is one column short, and everything downstream breaks
    y = wrong_side_conv(x, w, b, dilations=dilations, group=group, kernel_shape=kernel_shape, pads=pads,
                        strides=strides)
    return y[..., :-1]


def bn_biased(x, scale, b, mean, var, *, epsilon, momentum, running_var_estimator):
    # running_var from the biased (population) variance: the bug OneFlow had (../shared/seeds/001)
    y, rm, rv = OPS.lookup("ai.irtrace", "TrainBatchNormalization", 1).fn(
        x, scale, b, mean, var, epsilon=epsilon, momentum=momentum, running_var_estimator="biased")
    return y, rm, rv


def bn_momentum_inverted(x, scale, b, mean, var, *, epsilon, momentum, running_var_estimator):
    # momentum applied the other way round: running = (1 - m) * running + m * batch
    return OPS.lookup("ai.irtrace", "TrainBatchNormalization", 1).fn(
        x, scale, b, mean, var, epsilon=epsilon, momentum=1.0 - momentum, running_var_estimator=running_var_estimator)


def bn_sequential_sum(x, scale, b, mean, var, *, epsilon, momentum, running_var_estimator):
    # torch's own BatchNorm, but the running mean from each channel's batch summed one element after the other in
    # float32 (numpy's cumsum in the array's dtype), as a naive kernel sums; a running stat has no gradient, so only
    # its rounding changes
    y, rm, rv = OPS.lookup("ai.irtrace", "TrainBatchNormalization", 1).fn(
        x, scale, b, mean, var, epsilon=epsilon, momentum=momentum, running_var_estimator=running_var_estimator)
    flat = x.detach().transpose(0, 1).reshape(x.shape[1], -1).numpy()
    summed = np.cumsum(flat, axis=1, dtype=np.float32)[:, -1] / np.float32(flat.shape[1])
    return y, momentum * mean.detach() + (1.0 - momentum) * torch.from_numpy(summed), rv


BUGS = {
    "bnbiased": ("TrainBatchNormalization", 1, bn_biased, "ai.irtrace"),
    "bnmomentum": ("TrainBatchNormalization", 1, bn_momentum_inverted, "ai.irtrace"),
    "bnseqsum": ("TrainBatchNormalization", 1, bn_sequential_sum, "ai.irtrace"),
    "pad": ("Conv", 11, wrong_side_conv),
    "lrelu": ("LeakyRelu", 6, lambda x, *, alpha=0.01: _LeakyNoDouble.apply(x, alpha)),
    "relu0": ("Relu", 6, lambda x: _ReluOneAtZero.apply(x)),
    "crash": ("Sigmoid", 6, crash),
    "bwdcrash": ("Tanh", 6, lambda x: _TanhCrashingBackward.apply(x)),
    "fussymm": ("MatMul", 13, lambda a, b: _FussyMatMul.apply(a, b)),
    "hang": ("Tanh", 6, hang),
    "stale": ("Tanh", 6, stale_tanh),
    "shape": ("Conv", 11, shape_bug),
}
if BUG == "f64":
    # float32-noise only: every op computed in float64 and rounded back (no op is wrong)
    for (domain, op_type), versions in TABLE._ops.items():
        for since, entry in list(versions.items()):
            def wrapped(*xs, _fn=entry.fn, **kw):
                up = [x.double() if isinstance(x, torch.Tensor) and x.dtype == torch.float32 else x for x in xs]
                out = _fn(*up, **kw)
                down = lambda y: y.float() if isinstance(y, torch.Tensor) and y.dtype == torch.float64 else y  # noqa
                return tuple(down(y) for y in out) if isinstance(out, (tuple, list)) else down(out)
            TABLE.replace(op_type, since, domain)(wrapped)
elif BUG and BUG != "scribble":  # scribble: make_adapter
    op, since, fn, *domain = BUGS[BUG]
    TABLE.replace(op, since, *domain)(fn)


ALTERNATIVES = None
if os.environ.get("IRTRACE_PLANTED_WORKAROUND") and BUG == "lrelu":
    from backends._table import Alternatives
    ALTERNATIVES = Alternatives(TABLE)

    @ALTERNATIVES.register("LeakyRelu", since=6)
    def leaky_relu_functional(x, *, alpha=0.01):
        """torch's own functional.leaky_relu, whose backward is differentiated."""
        return functional.leaky_relu(x, alpha)


class _Scribbling(TorchAdapter):
    def run(self, mode, entry, inputs, spec, cots=(), us=(), wrt=None, part=None):
        out = super().run(mode, entry, inputs, spec, cots, us, wrt, part)
        for a in [*inputs, *cots, *us]:
            if isinstance(a, np.ndarray) and a.dtype.kind == "f" and a.flags.writeable:
                a[...] = 7.0
        return out


def make_adapter():
    a = (_Scribbling if BUG == "scribble" else TorchAdapter)(table=TABLE)
    a.name = f"planted-{BUG}"
    a.workarounds = ALTERNATIVES
    return a


def register(bug, workaround=False):
    """Register backend 'planted-<bug>' with the host (tests call this). `workaround` ('planted-<bug>-w'):
    the backend also declares an alternative formulation that fixes the bug (lrelu only)."""
    from pathlib import Path

    from irtrace.replay import backends
    env = {"IRTRACE_PLANTED": bug, **({"IRTRACE_PLANTED_WORKAROUND": "1"} if workaround else {})}
    return backends.register(backends.BackendInfo(f"planted-{bug}" + ("-w" if workaround else ""), "planted_backend",
                                                  ("torch",), "(test only)", f"torch with a planted bug: {bug}",
                                                  extra_path=(Path(__file__).parent,), env=env,
                                                  modes=("fwd", "vjp", "vjp2")))
