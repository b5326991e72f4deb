from megengine import functional

from backends._table import Unsupported
from backends.megengine.ops import OPS


def _c(t, x):
    """MegEngine's batch_norm wants weight, bias and running stats shaped (1, C, 1, 1)."""
    return functional.reshape(t, (1, -1) + (1,) * (x.ndim - 2))


def _as_4d(x):
    """MegEngine's batch_norm / instance_norm take 4-D input only; its BatchNorm1d module views an
    (N, C) or (N, C, L) input as (N, C, L, 1), and so does a porter calling the functional form. MegEngine has no
    BatchNorm3d: a porter views an (N, C, D, H, W) input as (N, C, D*H, W), the same elements per channel."""
    if x.ndim > 4:
        return functional.reshape(x, tuple(x.shape[:2]) + (-1, x.shape[-1]))
    return x if x.ndim == 4 else functional.reshape(x, tuple(x.shape) + (1,) * (4 - x.ndim))


@OPS.register("BatchNormalization", since=15, nondiff=(3, 4))
def batch_norm(x, scale, b, mean, var, *, epsilon=1e-5, momentum=0.9, training_mode=0):
    if training_mode:
        raise Unsupported("training-mode BatchNormalization is canonicalized to ai.irtrace::TrainBatchNormalization")
    x4 = _as_4d(x)
    y = functional.nn.batch_norm(x4, _c(mean, x4), _c(var, x4), _c(scale, x4), _c(b, x4), training=False, eps=epsilon)
    return functional.reshape(y, x.shape)


@OPS.register("TrainBatchNormalization", domain="ai.irtrace", nondiff=(3, 4))
def batch_norm_train(x, scale, b, mean, var, *, epsilon, momentum, running_var_estimator):
    # MegEngine's momentum is the keep fraction, as in ONNX; its running_var uses the unbiased
    # estimator and has no option: a node asking for the biased one gets MegEngine's (a finding)
    x4 = _as_4d(x)
    y, rm, rv = functional.nn.batch_norm(x4, _c(mean, x4), _c(var, x4), _c(scale, x4), _c(b, x4), training=True,
                                         momentum=momentum, eps=epsilon, inplace=False)
    return functional.reshape(y, x.shape), functional.reshape(rm, mean.shape), functional.reshape(rv, var.shape)


@OPS.register("InstanceNormalization", since=6)
def instance_norm(x, scale, b, *, epsilon=1e-5):
    x4 = _as_4d(x)
    y = functional.nn.instance_norm(x4, affine=True, weight=_c(scale, x4), bias=_c(b, x4), eps=epsilon)
    return functional.reshape(y, x.shape)


@OPS.register("LayerNormalization", since=17)
def layer_norm(x, scale, b=None, *, axis=-1, epsilon=1e-5, stash_type=1):
    a = axis + x.ndim if axis < 0 else axis
    if b is None:
        b = functional.zeros(scale.shape, dtype=scale.dtype)
    if stash_type != 1:
        raise Unsupported(f"LayerNormalization stash_type={stash_type}")
    return functional.nn.layer_norm(x, tuple(x.shape[a:]), True, scale, b, epsilon)
