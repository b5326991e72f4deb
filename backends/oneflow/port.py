"""A user's OneFlow port under `irtrace port` (the protocol: backends/_runtime/port.py). OneFlow mirrors
torch's API, so its parameters, buffers and layouts are torch's (nothing to transform); what differs:
BatchNorm's momentum is the weight of the batch statistic, as torch's (reported as ONNX's kept fraction,
1 - momentum), and OneFlow 0.9's forward hooks have no handle (removed from the module's hook table);
oneflow.autograd.grad has no allow_unused: what the loss does not reach gets zeros, read from OneFlow's own
graph as backends/oneflow/autodiff.py does. The gradients of the captured outputs come from the same
autograd.grad call as the parameters' (nothing is added to the graph); a gradient penalty is
autograd.grad(create_graph=True)."""
import numpy as np

from backends.oneflow.autodiff import flow, grad
from backends._runtime.port import check_outputs

nn = flow.nn


def is_module(module):
    return isinstance(module, nn.Module)


def parameters(module):
    out = [(n, p.numpy(), "parameter") for n, p in module.named_parameters()]
    return out + [(n, b.numpy(), "buffer") for n, b in module.named_buffers() if b is not None]


def layouts(module):
    """OneFlow stores every parameter as torch does."""
    return {}


def _pair(v, rank):
    return [int(x) for x in v] if isinstance(v, (tuple, list)) else [int(v)] * rank


def modules(module):
    """(path, class, attributes in ONNX's words) of every submodule."""
    out = []
    for path, m in module.named_modules():
        if not path:
            continue
        attrs = {}
        if isinstance(m, (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.ConvTranspose1d, nn.ConvTranspose2d,
                          nn.ConvTranspose3d)):
            rank = len(_pair(m.kernel_size, 1))
            attrs = {"strides": _pair(m.stride, rank), "dilations": _pair(m.dilation, rank), "group": int(m.groups)}
            if getattr(m, "padding_mode", "zeros") == "zeros":
                attrs["pads"] = _pair(m.padding, rank) * 2  # OneFlow pads symmetrically: begins, then ends
        elif isinstance(m, nn.modules.batchnorm._BatchNorm):
            attrs = {"epsilon": float(m.eps)}
            if m.momentum is not None:  # torch's convention: the weight of the batch statistic
                attrs["momentum"] = 1.0 - float(m.momentum)
        elif isinstance(m, nn.LayerNorm):
            attrs = {"epsilon": float(m.eps)}
        elif isinstance(m, nn.GELU):
            attrs = {"approximate": str(getattr(m, "approximate", "none"))}
        out.append((path, type(m).__name__, attrs))
    return out


def load(module, weights):
    """The bundle's values (already in the port's layout) into the module, by name: parameters and buffers."""
    named = dict(module.named_parameters())
    named.update((n, b) for n, b in module.named_buffers() if b is not None)
    with flow.no_grad():
        for name, value in weights.items():
            t = named[name]
            t.copy_(flow.tensor(np.asarray(value), dtype=t.dtype))


def _flat(out):
    if isinstance(out, flow.Tensor):
        return [out]
    if isinstance(out, dict):
        return [t for v in out.values() for t in _flat(v)]
    if isinstance(out, (list, tuple)):
        return [t for v in out for t in _flat(v)]
    return []


def run(module, inputs, seeds, loss, train, capture=True):
    """One step: outputs, every submodule's first output, d loss / d each (the dot loss only), d loss /
    d each parameter, and the buffers after it."""
    module.train() if train else module.eval()
    xs = [flow.tensor(np.asarray(a)) for a in inputs]
    floats = [x for x in xs if x.dtype.is_floating_point]
    if loss == "grad-penalty":
        for x in floats:
            x.requires_grad_(True)
    named = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
    seen, hooks = {}, []
    if capture:
        def hook_for(path):
            def hook(m, ins, out):
                if isinstance(out, flow.Tensor) and path not in seen:
                    seen[path] = out
            return hook
        for path, m in module.named_modules():
            if path:
                hooks.append((m, hook_for(path)))
                m.register_forward_hook(hooks[-1][1])
    try:
        ys = _flat(module(*xs))
    finally:
        for m, h in hooks:  # OneFlow 0.9's register_forward_hook returns no handle
            for key in [k for k, v in m._forward_hooks.items() if v is h]:
                del m._forward_hooks[key]
    check_outputs([tuple(y.shape) for y in ys], seeds)
    terms = [(y * flow.tensor(np.asarray(c), dtype=y.dtype)).sum() for y, c in zip(ys, seeds) if c is not None]
    total = terms[0]
    for t in terms[1:]:
        total = total + t
    if loss == "grad-penalty" and floats:  # no float model input: no penalty term (the plain loss)
        for g in grad([total], [flow.ones_like(total)], floats, create_graph=True):
            total = total + (g * g).sum()
    asked = [] if loss != "dot" else list({id(t): t for t in seen.values() if t.requires_grad}.values())
    params = [p for _, p in named]
    answers = grad([total], [flow.ones_like(total)], params + asked)
    got = {id(t): g for t, g in zip(asked, answers[len(params):])}
    return {"outputs": [y.numpy() for y in ys], "modules": {p: t.numpy() for p, t in seen.items()},
            "grads": {p: got[id(t)].numpy() for p, t in seen.items() if id(t) in got},
            "params": {n: g.numpy() for (n, _), g in zip(named, answers)},
            "buffers": {n: b.numpy() for n, b in module.named_buffers() if b is not None}}
