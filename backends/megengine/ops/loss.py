"""Losses torch.onnx emits for F.nll_loss and F.cross_entropy inside a model's forward, as a MegEngine porter
writes them: F.nn.cross_entropy (its logsumexp less the picked logit) and, for nll_loss, the picked value by
F.nn.indexing_one_hot; MegEngine has no class weights or ignored class, so each element's loss is scaled by its
class's weight (0 where it is the ignored class) and the mean divides by the weights' sum, as ONNX (and torch)
do. ONNX's log_prob output is F.logsoftmax."""
from megengine import functional

from backends._ops_common import weighted_reduction
from backends.megengine.ops import OPS


def _target(target, ignore_index):
    """(the class indices, the same with the ignored class's as 0): a picked index must be in the table, and the
    ignored elements' losses are weighted 0 (_reduced)."""
    target = target.astype("int32")
    return target, target if ignore_index is None else functional.where(target == ignore_index, 0 * target, target)


def _reduced(losses, target, safe, weight, ignore_index, reduction):
    """The per-element `losses` weighted by their class's weight (none: 1), 0 for the ignored class, reduced."""
    w = functional.ones_like(losses) if weight is None else weight[safe]
    if ignore_index is not None:
        w = w * (target != ignore_index).astype(losses.dtype)
    return weighted_reduction(losses, w, reduction, functional.sum)


@OPS.register("NegativeLogLikelihoodLoss", since=13, nondiff=(1,))
def nll_loss(x, target, weight=None, *, ignore_index=None, reduction="mean"):
    target, safe = _target(target, ignore_index)
    return _reduced(-functional.nn.indexing_one_hot(x, safe, axis=1), target, safe, weight, ignore_index, reduction)


@OPS.register("SoftmaxCrossEntropyLoss", since=13, nondiff=(1,))
def softmax_cross_entropy_loss(scores, labels, weights=None, *, ignore_index=None, reduction="mean"):
    labels, safe = _target(labels, ignore_index)
    losses = functional.nn.cross_entropy(scores, safe, axis=1, reduction="none")
    return _reduced(losses, labels, safe, weights, ignore_index, reduction), functional.logsoftmax(scores, axis=1)
