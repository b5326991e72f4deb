"""Every random draw a model makes, recorded.

dropout.py records functional.dropout's masks (ai.irtrace::RecordedDropout). Every other draw
(torch.rand/randn/randint/..._like, Tensor.bernoulli_/uniform_/normal_/..., torch.bernoulli,
torch.multinomial, torch.normal, dropout1d/2d/3d, alpha dropout, ...) is recorded here: the eager
reference run draws it with torch's own generator and keeps the result; the export run does not
draw but returns the recorded tensor, which torch.export lifts into the graph as a constant. After
export, `name_draws` renames those initializers `<module>.random_<op>[_k]`. Every replay then
reads exactly the numbers torch drew (no RandomNormal/RandomUniform/Bernoulli node is left for
canonical.reject_random to refuse), and the model itself runs unchanged.

Stochastic functions whose output depends on their input (dropout2d, alpha dropout, ...) are
rewritten as the same arithmetic on a recorded draw, so the gradient still flows through the input:
    dropout1d/2d/3d, feature_alpha_dropout: x * mask / (1 - p), mask ~ Bernoulli(1 - p) per channel
    alpha_dropout: x * a_mask + b   (torch's formula, mask per element)
    rrelu (training): x where x >= 0 else x * slope, slope ~ U(lower, upper) per element
    scaled_dot_product_attention(dropout_p > 0): its math form, the dropout a recorded one
"""
import contextlib
import math
import threading

import numpy as np
import torch
from torch.nn import functional
from torch.overrides import TorchFunctionMode

from irtrace.errors import IrtraceError

# functions that return a fresh random tensor (no tensor operand flows into the result)
_FRESH = {"rand", "randn", "randint", "randperm", "rand_like", "randn_like", "randint_like", "bernoulli",
          "multinomial", "normal", "poisson", "binomial", "_standard_gamma", "_sample_dirichlet"}
# Tensor methods that fill their receiver in place with random numbers
_INPLACE = {"bernoulli_", "uniform_", "normal_", "random_", "exponential_", "geometric_", "log_normal_",
            "cauchy_"}
_STATE = threading.local()


def _name(func):
    return getattr(func, "__name__", "") or ""


def _paused():
    return getattr(_STATE, "paused", 0) > 0


@contextlib.contextmanager
def paused():
    """Draws made inside are not recorded (dropout.py's own mask draw: it is recorded there)."""
    _STATE.paused = getattr(_STATE, "paused", 0) + 1
    try:
        yield
    finally:
        _STATE.paused -= 1


class _Recorder(TorchFunctionMode):
    """record=True: draw and keep (op name, tensor) in `draws`; record=False: hand them back in order."""

    def __init__(self, draws, record):
        super().__init__()
        self.draws, self.record, self.it = draws, record, iter(list(draws))
        self.replayed = 0

    def _draw(self, op, make):
        if self.record:
            out = make()
            self.draws.append((op, out.detach().clone()))
            return out
        self.replayed += 1
        try:
            recorded_op, value = next(self.it)
        except StopIteration:
            raise RuntimeError(f"the model drew random numbers ({op}) more often while exporting than in the "
                               f"reference run") from None
        if recorded_op != op:
            raise RuntimeError(f"the model's random draws came in another order while exporting ({op} where the "
                               f"reference run drew {recorded_op})")
        return value.clone()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = _name(func)
        if _paused() or not name:
            return func(*args, **kwargs)
        if name in _INPLACE and args and isinstance(args[0], torch.Tensor):
            value = self._draw(name, lambda: func(*args, **kwargs).detach().clone())
            if self.record:
                return args[0]
            with torch.no_grad():
                return args[0].copy_(value)
        if name in _FRESH:
            # a sample is a constant even when drawn from a differentiable parameter (torch.bernoulli(p)):
            # torch gives it no gradient either
            return self._draw(name, lambda: func(*args, **kwargs))
        rewrite = _REWRITES.get(func)
        if rewrite is not None:
            return rewrite(self, *args, **kwargs)
        return func(*args, **kwargs)


def _feature_dropout(rec, name, x, p, training, inplace, alpha=False):
    if not training or p == 0.0:
        return x
    if p == 1.0:
        return x * 0
    # one mask value per (sample, channel); an unbatched input (C, ...) has one per channel
    # (dropout2d takes a 3-D input as (N, C, L), as torch does)
    batched = x.dim() in {"dropout1d": (3,), "dropout2d": (3, 4), "dropout3d": (5,)}.get(name, (x.dim(),))
    shape = list(x.shape[:2] if batched else x.shape[:1]) + [1] * (x.dim() - (2 if batched else 1))
    mask = rec._draw(name, lambda: torch.empty(shape, dtype=x.dtype).bernoulli_(1 - p))
    if not alpha:
        return x * (mask / (1 - p))
    return _alpha(x, mask, p)


def _alpha(x, keep, p):
    # torch's _dropout_impl for alpha dropout: a = 1/sqrt((alpha'^2 p + 1)(1 - p)), b = noise' * alpha' * a
    alpha = 1.7580993408473766
    a = 1.0 / math.sqrt((alpha * alpha * p + 1) * (1 - p))
    b = (keep - 1) * alpha * a  # (1 - keep) * (-alpha') * a
    return x * (keep * a) + b


def _dropout_nd(name):
    def rewrite(rec, input, p=0.5, training=True, inplace=False):
        return _feature_dropout(rec, name, input, p, training, inplace)
    return rewrite


def _feature_alpha(rec, input, p=0.5, training=False, inplace=False):
    return _feature_dropout(rec, "feature_alpha_dropout", input, p, training, inplace, alpha=True)


def _alpha_dropout(rec, input, p=0.5, training=False, inplace=False):
    if not training or p == 0.0:
        return input
    if p == 1.0:
        return input * 0
    keep = rec._draw("alpha_dropout", lambda: torch.empty_like(input).bernoulli_(1 - p))
    return _alpha(input, keep, p)


def _rrelu(rec, input, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False):
    if not training:
        return functional.leaky_relu(input, (lower + upper) / 2)
    slope = rec._draw("rrelu", lambda: torch.empty_like(input).uniform_(lower, upper))
    return torch.where(input >= 0, input, input * slope)


def _sdpa(rec, query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    """scaled_dot_product_attention with dropout_p > 0 draws its mask inside the kernel: written out
    as the documented math (softmax(q k^T * scale + mask) then dropout, then @ v), its dropout is
    functional.dropout, recorded as a RecordedDropout like any other."""
    kw = {"enable_gqa": enable_gqa} if enable_gqa else {}
    if dropout_p == 0.0:
        return functional.scaled_dot_product_attention(query, key, value, attn_mask=attn_mask, dropout_p=0.0,
                                                      is_causal=is_causal, scale=scale, **kw)
    length, source = query.size(-2), key.size(-2)
    scale = 1.0 / math.sqrt(query.size(-1)) if scale is None else scale
    if enable_gqa:
        key = key.repeat_interleave(query.size(-3) // key.size(-3), -3)
        value = value.repeat_interleave(query.size(-3) // value.size(-3), -3)
    attn = query @ key.transpose(-2, -1) * scale
    if is_causal:
        keep = torch.ones(length, source, dtype=torch.bool).tril()
        attn = attn.masked_fill(~keep, float("-inf"))
    if attn_mask is not None:
        attn = attn.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool else attn + attn_mask
    attn = torch.softmax(attn, dim=-1)
    attn = functional.dropout(attn, dropout_p, training=True)
    return attn @ value


_REWRITES = {functional.scaled_dot_product_attention: _sdpa,
             functional.dropout1d: _dropout_nd("dropout1d"), functional.dropout2d: _dropout_nd("dropout2d"),
             functional.dropout3d: _dropout_nd("dropout3d"), functional.alpha_dropout: _alpha_dropout,
             functional.feature_alpha_dropout: _feature_alpha, functional.rrelu: _rrelu}


@contextlib.contextmanager
def recorded(draws, record):
    """While active, every random draw is recorded into (record=True) or taken from (record=False)
    the list `draws` of (op name, tensor), in call order."""
    rec = _Recorder(draws, record)
    with rec:
        yield rec


def name_draws(model, draws, sources):
    """Rename the lifted constants that hold recorded draws `<module>.random_<op>` (module: the
    first node that reads it). Returns the new names. A draw torch.export folded into another
    constant keeps its exporter name (its values are still the recorded ones)."""
    from irtrace.export.outputs import numpy_of
    from irtrace.ir import canonical
    from onnx import numpy_helper
    if not draws:
        return []
    by_bytes = {}
    for op, t in draws:
        a = numpy_of(t)
        by_bytes.setdefault((a.dtype.str, a.shape, a.tobytes()), op)
    readers = {}
    for n in model.graph.node:
        for i in n.input:
            readers.setdefault(i, n.name)
    used = {t.name for t in model.graph.initializer}
    renamed = []
    for init in list(model.graph.initializer):
        if not init.name.startswith(("lifted_tensor", "_tensor_constant", "c_lifted_tensor")):
            continue
        a = numpy_helper.to_array(init)
        op = by_bytes.get((a.dtype.str, a.shape, np.ascontiguousarray(a).tobytes()))
        if op is None:
            continue
        module = sources.get(readers.get(init.name, ""), {}).get("module") or "model"
        base = f"{module}.random_{op.rstrip('_')}"
        name, k = base, 1
        while name in used:
            k += 1
            name = f"{base}_{k}"
        used.add(name)
        canonical.rename_value(model, init.name, name)
        renamed.append(name)
    return renamed


# ONNX ops that draw random numbers (what torch.onnx makes of a draw it traces)
RANDOM_OPS = {"RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike", "Bernoulli", "Multinomial"}


def check_no_draws(model):
    """After an export run without the recorder (the reference run drew nothing, so there is nothing
    to hand back, and the recorder costs torch.onnx.export a Python call per traced op): the graph
    draws nothing either. A draw there would be a number no replay could reproduce."""
    drawn = sorted({n.op_type for n in model.graph.node if n.op_type in RANDOM_OPS})
    if drawn:
        raise IrtraceError(f"the model drew random numbers while exporting ({', '.join(drawn)}) but not in the "
                           f"reference run")


def check_all_used(draws, rec):
    """After the export run: every recorded draw was handed back."""
    if rec.replayed < len(draws):
        raise IrtraceError(f"the model drew random numbers {len(draws)} times in the reference run but "
                           f"{rec.replayed} times while exporting")
