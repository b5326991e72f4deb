"""Losses torch.onnx emits for F.nll_loss and F.cross_entropy inside a model's forward, with the Paddle calls a
porter writes: paddle.nn.functional.nll_loss and cross_entropy (axis=1: ONNX's class axis), ONNX's log_prob output
as log_softmax. ONNX without ignore_index ignores no class: Paddle's default -100 is no class either."""
from paddle.nn import functional

from backends.paddle.ops import OPS


@OPS.register("NegativeLogLikelihoodLoss", since=13, nondiff=(1,))
def nll_loss(x, target, weight=None, *, ignore_index=None, reduction="mean"):
    return functional.nll_loss(x, target.astype("int64"), weight,
                               ignore_index=ignore_index if ignore_index is not None else -100, reduction=reduction)


@OPS.register("SoftmaxCrossEntropyLoss", since=13, nondiff=(1,))
def softmax_cross_entropy_loss(scores, labels, weights=None, *, ignore_index=None, reduction="mean"):
    loss = functional.cross_entropy(scores, labels.astype("int64"), weights, axis=1, reduction=reduction,
                                    ignore_index=ignore_index if ignore_index is not None else -100)
    return loss, functional.log_softmax(scores, axis=1)
