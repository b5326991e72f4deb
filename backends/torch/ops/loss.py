"""Losses torch.onnx emits for F.nll_loss and F.cross_entropy inside a model's forward."""
import torch
from torch.nn import functional

from backends.torch.ops import OPS


def _constant(weight):
    """A class weight as ONNX has it, NonDifferentiable (torch's nll_loss refuses one that requires grad: a graph
    whose recording differentiates every float input passes it so)."""
    return None if weight is None else weight.detach()


@OPS.register("NegativeLogLikelihoodLoss", since=13, nondiff=(1,))
def nll_loss(x, target, weight=None, *, ignore_index=None, reduction="mean"):
    # without ignore_index ONNX ignores no class; torch's default -100 is no class either
    return functional.nll_loss(x, target.to(torch.int64), _constant(weight),
                               ignore_index=ignore_index if ignore_index is not None else -100, reduction=reduction)


@OPS.register("SoftmaxCrossEntropyLoss", since=13, nondiff=(1,))
def softmax_cross_entropy_loss(scores, labels, weights=None, *, ignore_index=None, reduction="mean"):
    log_prob = functional.log_softmax(scores, dim=1)
    loss = functional.nll_loss(log_prob, labels.to(torch.int64), _constant(weights),
                               ignore_index=ignore_index if ignore_index is not None else -100, reduction=reduction)
    return loss, log_prob
