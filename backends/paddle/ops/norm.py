from paddle.nn import functional

from backends._table import Unsupported
from backends.paddle.ops import OPS


@OPS.register("BatchNormalization", since=15, nondiff=(3, 4))
def batch_norm(x, scale, b, mean, var, *, epsilon=1e-5, momentum=0.9, training_mode=0):
    if training_mode:
        raise Unsupported("training-mode BatchNormalization is canonicalized to ai.irtrace::TrainBatchNormalization")
    return functional.batch_norm(x, mean, var, scale, b, training=False, epsilon=epsilon)


@OPS.register("TrainBatchNormalization", domain="ai.irtrace", nondiff=(3, 4))
def batch_norm_train(x, scale, b, mean, var, *, epsilon, momentum, running_var_estimator):
    # Paddle's momentum is the keep fraction, as in ONNX (torch's 0.1 is Paddle's 0.9); batch_norm
    # updates the running stats in place, so it gets copies; it has no running-var estimator option:
    # a node asking for the other estimator gets Paddle's (a finding)
    rm, rv = mean.detach().clone(), var.detach().clone()
    y = functional.batch_norm(x, rm, rv, scale, b, training=True, momentum=momentum, epsilon=epsilon)
    return y, rm, rv


@OPS.register("InstanceNormalization", since=6)
def instance_norm(x, scale, b, *, epsilon=1e-5):
    return functional.instance_norm(x, weight=scale, bias=b, eps=epsilon)


@OPS.register("LayerNormalization", since=17)
def layer_norm(x, scale, b=None, *, axis=-1, epsilon=1e-5, stash_type=1):
    a = axis + x.ndim if axis < 0 else axis
    if stash_type != 1:
        raise Unsupported(f"LayerNormalization stash_type={stash_type}: Paddle's layer_norm computes in float32")
    # Paddle's layer_norm kernel takes weight and bias flattened to 1-D (shape (prod(normalized_shape),))
    return functional.layer_norm(x, list(x.shape[a:]), scale.reshape([-1]), None if b is None else b.reshape([-1]),
                                 epsilon)

