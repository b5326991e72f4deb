"""Dropout with a recorded mask.

The eager reference run draws each mask exactly as torch's CPU dropout does
(`empty_like(x).bernoulli_(1 - p)`, then `x * (mask / (1 - p))`) and records it. The export
run replays those masks through the custom op `irtrace::dropout`, which becomes
ai.irtrace::RecordedDropout(data, mask) in ONNX with the mask as an initializer, so every replay
uses the mask torch drew.
"""
import contextlib

import torch
from torch.nn import functional

_ORIGINAL = functional.dropout
_SDPA = functional.scaled_dot_product_attention


@torch.library.custom_op("irtrace::dropout", mutates_args=())
def recorded_dropout(x: torch.Tensor, mask: torch.Tensor, p: float) -> torch.Tensor:
    return x * (mask.to(x.dtype) / (1.0 - p))


@recorded_dropout.register_fake
def _(x, mask, p):
    return torch.empty_like(x)


@contextlib.contextmanager
def patched(masks, record, eager=False):
    """While active, functional.dropout in training mode records masks into (record=True) or takes them
    from (record=False) the list `masks`, in call order; `eager`: replayed as the plain product (the
    custom op is for tracing, and has no autograd formula)."""
    it = iter(list(masks))

    def dropout(input, p=0.5, training=True, inplace=False):
        if not training or p == 0.0:
            return _ORIGINAL(input, p, training, inplace)
        if record:
            from irtrace.export import random as random_mod
            with random_mod.paused():  # recorded here, as the mask: not as one of random.py's draws
                noise = torch.empty_like(input).bernoulli_(1 - p)
            masks.append(noise.bool())
            return input * (noise / (1 - p))
        try:
            mask = next(it)
        except StopIteration:
            raise RuntimeError("the model called dropout more often while exporting than in the reference run") from None
        if eager:
            return input * (mask.to(input.dtype) / (1.0 - p))
        return torch.ops.irtrace.dropout(input, mask, float(p))

    def attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
        if dropout_p == 0.0:
            return _SDPA(query, key, value, attn_mask, dropout_p, is_causal, scale=scale, enable_gqa=enable_gqa)
        return _attention(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa, dropout)

    functional.dropout, functional.scaled_dot_product_attention = dropout, attention
    try:
        yield masks
    finally:
        functional.dropout, functional.scaled_dot_product_attention = _ORIGINAL, _SDPA


def _attention(q, k, v, attn_mask, dropout_p, is_causal, scale, enable_gqa, dropout):
    """scaled_dot_product_attention with dropout, as its documentation defines it, with `dropout` for the
    attention weights' dropout: the fused kernel draws that mask where no one can record it."""
    import math
    n, m = q.size(-2), k.size(-2)
    bias = torch.zeros(n, m, dtype=q.dtype, device=q.device)
    if is_causal:
        bias = bias.masked_fill(~torch.ones(n, m, dtype=torch.bool, device=q.device).tril(), float("-inf"))
    if attn_mask is not None:
        bias = bias.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool else attn_mask + bias
    if enable_gqa:
        k = k.repeat_interleave(q.size(-3) // k.size(-3), -3)
        v = v.repeat_interleave(q.size(-3) // v.size(-3), -3)
    weights = q @ k.transpose(-2, -1) * (1 / math.sqrt(q.size(-1)) if scale is None else scale) + bias
    return dropout(torch.softmax(weights, dim=-1), dropout_p, True) @ v
