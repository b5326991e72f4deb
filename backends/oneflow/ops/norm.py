import oneflow
from oneflow.nn import functional

from backends._table import Unsupported
from backends.oneflow.ops import OPS


@OPS.register("BatchNormalization", since=15, nondiff=(3, 4))
def batch_norm(x, scale, b, mean, var, *, epsilon=1e-5, momentum=0.9, training_mode=0):
    if training_mode:
        raise Unsupported("training-mode BatchNormalization is canonicalized to ai.irtrace::TrainBatchNormalization")
    return functional.batch_norm(x, mean, var, scale, b, training=False, eps=epsilon)


@OPS.register("TrainBatchNormalization", domain="ai.irtrace", nondiff=(3, 4))
def batch_norm_train(x, scale, b, mean, var, *, epsilon, momentum, running_var_estimator):
    # OneFlow's momentum is the weight of the batch statistic (as torch's): 1 - ONNX's keep fraction.
    # functional.batch_norm updates the running stats in place, so it gets copies; it has no
    # estimator option: the running_var is OneFlow's own, whichever the node asks for
    rm, rv = mean.detach().clone(), var.detach().clone()
    y = functional.batch_norm(x, rm, rv, scale, b, training=True, momentum=1.0 - momentum, eps=epsilon)
    return y, rm, rv


@OPS.register("InstanceNormalization", since=6)
def instance_norm(x, scale, b, *, epsilon=1e-5):
    # oneflow.nn.functional has no instance_norm (only the nn.InstanceNorm modules): a porter writes it out
    dims = tuple(range(2, x.dim()))
    c = (1, -1) + (1,) * (x.dim() - 2)
    mean = oneflow.mean(x, dim=dims, keepdim=True)
    var = oneflow.mean((x - mean) * (x - mean), dim=dims, keepdim=True)
    return (x - mean) / oneflow.sqrt(var + epsilon) * scale.reshape(c) + b.reshape(c)


@OPS.register("LayerNormalization", since=17)
def layer_norm(x, scale, b=None, *, axis=-1, epsilon=1e-5, stash_type=1):
    a = axis + x.dim() if axis < 0 else axis
    return functional.layer_norm(x, tuple(x.shape[a:]), scale, b, epsilon)
