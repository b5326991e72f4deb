from megengine import functional

from backends._table import Unsupported
from backends.megengine.ops import OPS


def _c(t, x):
    """MegEngine's batch_norm wants weight, bias and running stats shaped (1, C, 1, 1)."""
    return functional.reshape(t, (1, -1) + (1,) * (x.ndim - 2))


@OPS.register("BatchNormalization", since=15, nondiff=(3, 4))
def batch_norm(x, scale, b, mean, var, *, epsilon=1e-5, momentum=0.9, training_mode=0):
    if training_mode:
        raise Unsupported("training-mode BatchNormalization is canonicalized to ai.irtrace::TrainBatchNormalization")
    return functional.nn.batch_norm(x, _c(mean, x), _c(var, x), _c(scale, x), _c(b, x), training=False, eps=epsilon)


@OPS.register("TrainBatchNormalization", domain="ai.irtrace", nondiff=(3, 4))
def batch_norm_train(x, scale, b, mean, var, *, epsilon, momentum, running_var_estimator):
    # MegEngine's momentum is the keep fraction, as in ONNX; its running_var uses the unbiased
    # estimator and has no option: a node asking for the biased one gets MegEngine's (a finding)
    y, rm, rv = functional.nn.batch_norm(x, _c(mean, x), _c(var, x), _c(scale, x), _c(b, x), training=True,
                                momentum=momentum, eps=epsilon, inplace=False)
    return y, functional.reshape(rm, mean.shape), functional.reshape(rv, var.shape)


@OPS.register("InstanceNormalization", since=6)
def instance_norm(x, scale, b, *, epsilon=1e-5):
    return functional.nn.instance_norm(x, affine=True, weight=_c(scale, x), bias=_c(b, x), eps=epsilon)


@OPS.register("LayerNormalization", since=17)
def layer_norm(x, scale, b=None, *, axis=-1, epsilon=1e-5, stash_type=1):
    a = axis + x.ndim if axis < 0 else axis
    if b is None:
        b = functional.zeros(scale.shape, dtype=scale.dtype)
    if stash_type != 1:
        raise Unsupported(f"LayerNormalization stash_type={stash_type}")
    return functional.nn.layer_norm(x, tuple(x.shape[a:]), True, scale, b, epsilon)
