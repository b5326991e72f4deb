from functools import partial

import tensorflow as tf

from backends._ops_common import ints, register_reduce
from backends.tensorflow.ops import OPS


def _identity(x):
    return tf.identity(x)  # a tensor of its own, as every reduction gives


_reduce = partial(register_reduce, OPS, unchanged=_identity)

_reduce("ReduceMean", lambda x, a, k: tf.math.reduce_mean(x, axis=a, keepdims=k))
_reduce("ReduceSum", lambda x, a, k: tf.math.reduce_sum(x, axis=a, keepdims=k), since=13)
_reduce("ReduceMax", lambda x, a, k: tf.math.reduce_max(x, axis=a, keepdims=k))
_reduce("ReduceMin", lambda x, a, k: tf.math.reduce_min(x, axis=a, keepdims=k))
_reduce("ReduceProd", lambda x, a, k: tf.math.reduce_prod(x, axis=a, keepdims=k))
_reduce("ReduceSumSquare", lambda x, a, k: tf.math.reduce_sum(tf.math.square(x), axis=a, keepdims=k))
_reduce("ReduceL1", lambda x, a, k: tf.math.reduce_sum(tf.math.abs(x), axis=a, keepdims=k))
# tf.norm takes one or two axes; over more, the root of the sum of squares (what tf.norm computes)
_reduce("ReduceL2", lambda x, a, k: tf.norm(x, ord="euclidean", axis=a if len(a) > 1 else a[0], keepdims=k)
        if len(a) <= 2 else tf.math.sqrt(tf.math.reduce_sum(tf.math.square(x), axis=a, keepdims=k)))
_reduce("ReduceLogSumExp", lambda x, a, k: tf.math.reduce_logsumexp(x, axis=a, keepdims=k))


def _arg(fn, x, axis, keepdims, select_last_index):
    if select_last_index:  # tf.math.argmax returns the first of equal values: search the reversed axis
        i = x.shape[axis] - 1 - fn(tf.reverse(x, [axis]), axis=axis, output_type=tf.int64)
    else:
        i = fn(x, axis=axis, output_type=tf.int64)
    return tf.expand_dims(i, axis) if keepdims else i


@OPS.register("ArgMax", since=13)
def arg_max(x, *, axis=0, keepdims=1, select_last_index=0):
    return _arg(tf.math.argmax, x, axis + x.shape.rank if axis < 0 else axis, keepdims, select_last_index)


@OPS.register("ArgMin", since=13)
def arg_min(x, *, axis=0, keepdims=1, select_last_index=0):
    return _arg(tf.math.argmin, x, axis + x.shape.rank if axis < 0 else axis, keepdims, select_last_index)


@OPS.register("Softmax", since=13)
def softmax(x, *, axis=-1):
    return tf.nn.softmax(x, axis=axis)


@OPS.register("LogSoftmax", since=13)
def log_softmax(x, *, axis=-1):
    return tf.nn.log_softmax(x, axis=axis)


@OPS.register("CumSum", since=14)
def cumsum(x, axis, *, exclusive=0, reverse=0):
    return tf.math.cumsum(x, axis=ints(axis)[0], exclusive=bool(exclusive), reverse=bool(reverse))


@OPS.register("TopK", since=11)
def top_k(x, k, *, axis=-1, largest=1, sorted=1):
    a = axis + x.shape.rank if axis < 0 else axis
    last = a == x.shape.rank - 1
    perm = [i for i in range(x.shape.rank) if i != a] + [a]
    t = x if last else tf.transpose(x, perm)  # tf.math.top_k works on the last axis
    if largest:
        v, i = tf.math.top_k(t, ints(k)[0], sorted=bool(sorted))
    else:  # top_k has no smallest: the top of -x, negated back
        v, i = tf.math.top_k(-t, ints(k)[0], sorted=bool(sorted))
        v = -v
    i = tf.cast(i, tf.int64)  # ONNX's indices are int64; top_k's are int32
    if not last:
        inv = [perm.index(j) for j in range(x.shape.rank)]
        v, i = tf.transpose(v, inv), tf.transpose(i, inv)
    return v, i
