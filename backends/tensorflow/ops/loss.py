"""Losses torch.onnx emits for F.nll_loss and F.cross_entropy inside a model's forward, as a TensorFlow porter
writes them: the class axis moved last, tf.nn.sparse_softmax_cross_entropy_with_logits for the cross entropy
(its fused kernel) and the picked log-probability by tf.gather for nll_loss; TensorFlow has no class weights or
ignored class, so each element's loss is scaled by its class's weight (0 where it is the ignored class) and the
mean divides by the weights' sum, as ONNX (and torch) do. ONNX's log_prob output is tf.nn.log_softmax."""
import tensorflow as tf

from backends._ops_common import weighted_reduction
from backends.tensorflow.ops import OPS


def _last(x):
    """`x` with its class axis (1) moved last: [N, d1, ..., C]."""
    return x if x.shape.rank == 2 else tf.transpose(x, [0] + list(range(2, x.shape.rank)) + [1])


def _target(target, ignore_index):
    """(the class indices, the same with the ignored class's as 0): tf.gather refuses an index outside the table
    on a CPU, and the ignored elements' losses are weighted 0 (_reduced)."""
    target = tf.cast(target, tf.int64)
    return target, target if ignore_index is None else tf.where(target == ignore_index, tf.zeros_like(target), target)


def _reduced(losses, target, safe, weight, ignore_index, reduction):
    """The per-element `losses` weighted by their class's weight (none: 1), 0 for the ignored class, reduced."""
    w = tf.ones_like(losses) if weight is None else tf.gather(weight, safe)
    if ignore_index is not None:
        w = w * tf.cast(target != ignore_index, losses.dtype)
    return weighted_reduction(losses, w, reduction, tf.reduce_sum)


@OPS.register("NegativeLogLikelihoodLoss", since=13, nondiff=(1,))
def nll_loss(x, target, weight=None, *, ignore_index=None, reduction="mean"):
    target, safe = _target(target, ignore_index)
    picked = tf.gather(_last(x), safe, batch_dims=safe.shape.rank)
    return _reduced(-picked, target, safe, weight, ignore_index, reduction)


@OPS.register("SoftmaxCrossEntropyLoss", since=13, nondiff=(1,))
def softmax_cross_entropy_loss(scores, labels, weights=None, *, ignore_index=None, reduction="mean"):
    labels, safe = _target(labels, ignore_index)
    losses = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=safe, logits=_last(scores))
    return _reduced(losses, labels, safe, weights, ignore_index, reduction), tf.nn.log_softmax(scores, axis=1)
