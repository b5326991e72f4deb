import tensorflow as tf

from backends.tensorflow.ops import OPS


def _c(t, x):
    """A per-channel (C,) tensor shaped (C, 1, ...) to broadcast over NC... (no transpose needed:
    tf.nn.batch_normalization is elementwise)."""
    return tf.reshape(t, [-1] + [1] * (x.shape.rank - 2))


@OPS.register("BatchNormalization", since=15, nondiff=(3, 4))
def batch_norm(x, scale, b, mean, var, *, epsilon=1e-5, momentum=0.9, training_mode=0):
    if training_mode:
        raise ValueError("training-mode BatchNormalization must be canonicalized to "
                         "ai.irtrace::TrainBatchNormalization")
    return tf.nn.batch_normalization(x, _c(mean, x), _c(var, x), _c(b, x), _c(scale, x), epsilon)


@OPS.register("TrainBatchNormalization", domain="ai.irtrace", nondiff=(3, 4))
def batch_norm_train(x, scale, b, mean, var, *, epsilon, momentum, running_var_estimator):
    axes = [0] + list(range(2, x.shape.rank))
    m, v = tf.nn.moments(x, axes=axes)  # v: the biased (population) variance
    y = tf.nn.batch_normalization(x, _c(m, x), _c(v, x), _c(b, x), _c(scale, x), epsilon)
    # the running stats are updated outside autodiff (as Keras does); momentum is the keep fraction, as in ONNX
    n = tf.cast(tf.size(x) // tf.size(m), x.dtype)
    batch_var = v * n / (n - 1) if running_var_estimator == "unbiased" else v  # Keras keeps the biased one
    rm = tf.stop_gradient(momentum * mean + (1.0 - momentum) * m)
    rv = tf.stop_gradient(momentum * var + (1.0 - momentum) * batch_var)
    return y, rm, rv


@OPS.register("InstanceNormalization", since=6)
def instance_norm(x, scale, b, *, epsilon=1e-5):
    m, v = tf.nn.moments(x, axes=list(range(2, x.shape.rank)), keepdims=True)
    return tf.nn.batch_normalization(x, m, v, _c(b, x), _c(scale, x), epsilon)


@OPS.register("LayerNormalization", since=17)
def layer_norm(x, scale, b=None, *, axis=-1, epsilon=1e-5, stash_type=1):
    a = axis + x.shape.rank if axis < 0 else axis
    m, v = tf.nn.moments(x, axes=list(range(a, x.shape.rank)), keepdims=True)
    return tf.nn.batch_normalization(x, m, v, b, scale, epsilon)
