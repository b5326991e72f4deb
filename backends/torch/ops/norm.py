import torch
from torch.nn import functional

from backends.torch.ops import OPS


@OPS.register("BatchNormalization", since=15)
def batch_norm(x, scale, b, mean, var, *, epsilon=1e-5, momentum=0.9, training_mode=0):
    if training_mode:
        raise ValueError("training-mode BatchNormalization must be canonicalized to ai.irtrace::TrainBatchNormalization")
    if mean.requires_grad or var.requires_grad:
        # statistics computed in the graph (weight standardisation: torch.onnx writes F.batch_norm(w, None,
        # None, training=True) as ReduceMean statistics feeding this op): torch's batch_norm refuses gradients
        # for running stats, so the ONNX formula, differentiable in all five inputs
        shape = [1, -1] + [1] * (x.dim() - 2)
        return (x - mean.reshape(shape)) / torch.sqrt(var.reshape(shape) + epsilon) * scale.reshape(shape) + \
            b.reshape(shape)
    return functional.batch_norm(x, mean, var, scale, b, training=False, eps=epsilon)


@OPS.register("TrainBatchNormalization", domain="ai.irtrace", nondiff=(3, 4))
def batch_norm_train(x, scale, b, mean, var, *, epsilon, momentum, running_var_estimator):
    # torch's momentum is the weight of the batch statistic: 1 - ONNX's keep fraction
    rm, rv = mean.detach().clone(), var.detach().clone()
    y = functional.batch_norm(x, rm, rv, scale, b, training=True, momentum=1.0 - momentum, eps=epsilon)
    if running_var_estimator == "biased":  # ONNX's own convention; torch updates with the unbiased one
        dims = [0] + list(range(2, x.dim()))
        with torch.no_grad():
            rv = momentum * var + (1.0 - momentum) * x.var(dim=dims, unbiased=False)
    return y, rm, rv


@OPS.register("InstanceNormalization", since=6)
def instance_norm(x, scale, b, *, epsilon=1e-5):
    return functional.instance_norm(x, weight=scale, bias=b, eps=epsilon)


@OPS.register("LayerNormalization", since=17)
def layer_norm(x, scale, b=None, *, axis=-1, epsilon=1e-5, stash_type=1):
    """Y, Mean and InvStdDev (the optional two from the kernel functional.layer_norm runs: no extra work)."""
    a = axis + x.dim() if axis < 0 else axis
    return torch.native_layer_norm(x, x.shape[a:], scale, b, epsilon)
