"""Losses torch.onnx emits for F.nll_loss and F.cross_entropy inside a model's forward, with the OneFlow calls a
porter writes: oneflow.nn.NLLLoss (OneFlow 0.9's functional has no nll_loss) and functional.cross_entropy, ONNX's
log_prob output as log_softmax. ONNX without ignore_index ignores no class: OneFlow's default -100 (torch's) is no
class either."""
import oneflow
from oneflow.nn import functional

from backends.oneflow.ops import OPS


@OPS.register("NegativeLogLikelihoodLoss", since=13, nondiff=(1,))
def nll_loss(x, target, weight=None, *, ignore_index=None, reduction="mean"):
    loss = oneflow.nn.NLLLoss(weight, ignore_index=ignore_index if ignore_index is not None else -100,
                              reduction=reduction)
    return loss(x, target.to(oneflow.int64))


@OPS.register("SoftmaxCrossEntropyLoss", since=13, nondiff=(1,))
def softmax_cross_entropy_loss(scores, labels, weights=None, *, ignore_index=None, reduction="mean"):
    loss = functional.cross_entropy(scores, labels.to(oneflow.int64), weights, reduction=reduction,
                                    ignore_index=ignore_index if ignore_index is not None else -100)
    return loss, functional.log_softmax(scores, dim=1)
