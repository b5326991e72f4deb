"""A user's MegEngine port under `irtrace port` (the protocol: backends/_runtime/port.py). MegEngine facts
that shape it: a grouped conv's weight is 5-D (G, O/G, I/G, kh, kw) and BatchNorm's parameters and
statistics, like a conv's bias, are 1 x C x 1 x 1: loaded by reshaping the bundle's values; forward hooks
see every submodule's output; a tensor attached to the GradManager when it is made gets its gradient
without any op added to the graph; a gradient penalty is two nested managers."""
import numpy as np

import megengine as mge
import megengine.module as nn
from megengine.autodiff import GradManager

from backends._runtime.port import check_outputs


def is_module(module):
    return isinstance(module, nn.Module)


def parameters(module):
    out = [(n, p.numpy(), "parameter") for n, p in module.named_parameters()]
    return out + [(n, b.numpy(), "buffer") for n, b in module.named_buffers()]


def layouts(module):
    """Every parameter and buffer may be stored reshaped (same axes, or a grouped conv's leading axis split)."""
    return {n: ["reshape"] for n, _, _ in parameters(module)}


def _pads(padding, rank=2):
    p = list(padding) if isinstance(padding, (tuple, list)) else [padding] * rank
    return p + p  # MegEngine pads symmetrically: ONNX's begins, then ends


def _pair(v, rank=2):
    return list(v) if isinstance(v, (tuple, list)) else [v] * rank


def modules(module):
    """(path, class, attributes in ONNX's words) of every submodule."""
    out = []
    for path, m in module.named_modules():
        if not path:
            continue
        attrs = {}
        if isinstance(m, (nn.Conv2d, nn.ConvTranspose2d)):
            attrs = {"pads": _pads(m.padding), "strides": _pair(m.stride), "dilations": _pair(m.dilation),
                     "group": int(m.groups or 1)}
        elif isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d)):
            # MegEngine's momentum is the fraction of the running stat kept, as ONNX's
            attrs = {"epsilon": float(m.eps), "momentum": float(m.momentum)}
        elif isinstance(m, (nn.LayerNorm, nn.GroupNorm, nn.InstanceNorm)):
            attrs = {"epsilon": float(m.eps)}
        out.append((path, type(m).__name__, attrs))
    return out


def load(module, weights):
    """The bundle's values (already in the port's layout) into the module, by name: parameters and buffers."""
    module.load_state_dict({name: np.asarray(value) for name, value in weights.items()}, strict=False)


def _flat(out):
    if isinstance(out, mge.Tensor):
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
    xs = [mge.tensor(np.asarray(a)) for a in inputs]
    floats = [x for x in xs if np.dtype(x.dtype).kind == "f"]
    params = [p for _, p in module.named_parameters()]
    outer = GradManager().attach(params)
    seen = {}
    hooks = []
    if capture:
        def hook_for(path):
            def hook(m, ins, out):
                if isinstance(out, mge.Tensor) and path not in seen:
                    seen[path] = out
                    if loss == "dot":
                        outer.attach([out])  # from here on its gradient is recorded: nothing is added to the graph
            return hook
        hooks = [m.register_forward_hook(hook_for(path)) for path, m in module.named_modules() if path]
    try:
        inner = GradManager().attach(floats) if loss == "grad-penalty" and floats else None  # no float input: no penalty
        with outer:
            if inner is not None:
                inner.__enter__()
            ys = _flat(module(*xs))
            check_outputs([y.shape for y in ys], seeds)
            terms = [(y * mge.tensor(np.asarray(c))).sum() for y, c in zip(ys, seeds) if c is not None]
            total = terms[0]
            for t in terms[1:]:
                total = total + t
            if inner is not None:
                inner.backward(total)
                inner.__exit__(None, None, None)
                gx = [x.grad for x in floats]
                for x in floats:
                    x.grad = None
                for g in gx:
                    if g is not None:
                        total = total + (g * g).sum()
            outer.backward(total)
    finally:
        for h in hooks:
            h.remove()
    grad = {n: (p.grad.numpy() if p.grad is not None else np.zeros(p.shape, np.float32))
            for n, p in module.named_parameters()}
    return {"outputs": [y.numpy() for y in ys], "modules": {p: t.numpy() for p, t in seen.items()},
            "grads": {p: t.grad.numpy() for p, t in seen.items() if loss == "dot" and t.grad is not None},
            "params": grad, "buffers": {n: b.numpy() for n, b in module.named_buffers()}}
