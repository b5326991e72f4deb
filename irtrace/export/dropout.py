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

    functional.dropout = dropout
    try:
        yield masks
    finally:
        functional.dropout = _ORIGINAL
