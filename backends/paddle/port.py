"""A user's Paddle port under `irtrace port` (the protocol: backends/_runtime/port.py). Paddle facts that
shape it: paddle.nn.Linear stores its weight [in, out], the transpose of torch's (loaded transposed, even
when square); BatchNorm's running statistics are the stop_gradient parameters `_mean` and `_variance`
(reported under torch's names, running_mean and running_var), its momentum is the fraction of the running
stat kept (ONNX's convention) and it updates running_var with the biased variance; a conv's padding is
kept as [begin, end] per axis (`_updated_padding`); forward post hooks see every sublayer's output; the
gradients of the captured outputs come from the same paddle.grad call as the parameters' (nothing is added
to the graph), except that two tensors sharing one buffer (views) are each asked on their own, as Paddle
3.3 answers a view asked together with another view of its base with the base's gradient; a gradient
penalty is paddle.grad(create_graph=True), as backends/paddle/autodiff.py does it."""
import warnings

import numpy as np

warnings.filterwarnings("ignore", message="No ccache found")  # paddle.utils.cpp_extension warns at import
import paddle  # noqa: E402
from paddle import nn  # noqa: E402

from backends._runtime.port import check_outputs  # noqa: E402

paddle.disable_static()
_BATCHNORMS = (nn.BatchNorm, nn.layer.norm._BatchNormBase)
_STATS = {"_mean": "running_mean", "_variance": "running_var"}  # Paddle's BatchNorm names, torch's


def is_module(module):
    return isinstance(module, nn.Layer)


def _tensors(module):
    """[(name, tensor, "parameter" | "buffer")]: trainable parameters (stop_gradient False), then buffers
    (BatchNorm's statistics are stop_gradient parameters in Paddle: buffers here, under torch's names)."""
    params, buffers = [], []
    for path, layer in module.named_sublayers(include_self=True):
        prefix = path + "." if path else ""
        for name, p in layer.named_parameters(include_sublayers=False):
            if p.stop_gradient:
                stat = _STATS.get(name) if isinstance(layer, _BATCHNORMS) else None
                buffers.append((prefix + (stat or name), p, "buffer"))
            else:
                params.append((prefix + name, p, "parameter"))
        for name, b in layer.named_buffers(include_sublayers=False):
            if b is not None:
                buffers.append((prefix + name, b, "buffer"))
    return params + buffers


def parameters(module):
    return [(n, t.numpy(), k) for n, t, k in _tensors(module)]


def layouts(module):
    """paddle.nn.Linear's weight is stored [in, out]: always transposed (a square one too)."""
    out = {}
    for path, layer in module.named_sublayers(include_self=True):
        if isinstance(layer, nn.Linear) and len(layer.weight.shape) == 2:
            out[(path + "." if path else "") + "weight"] = ["transpose"]
    return out


def _pads(updated, rank):
    """Paddle's `_updated_padding` (one per axis, or [begin, end] per axis) as ONNX's [begins..., ends...]."""
    p = [int(v) for v in updated]
    if len(p) == rank:
        return p + p
    return p[0::2] + p[1::2]


def modules(module):
    """(path, class, attributes in ONNX's words) of every sublayer."""
    out = []
    for path, m in module.named_sublayers():
        attrs = {}
        if isinstance(m, nn.layer.conv._ConvNd):
            rank = len(m._kernel_size)
            attrs = {"strides": list(m._stride), "dilations": list(m._dilation), "group": int(m._groups)}
            if m._padding_algorithm == "EXPLICIT" or m._padding_algorithm == "VALID":
                # a padding_mode other than zeros pads with F.pad first: the conv's own pads are then 0
                attrs["pads"] = _pads(m._updated_padding, rank)
        elif isinstance(m, _BATCHNORMS):
            # Paddle's momentum is the fraction of the running stat kept, as ONNX's; its batch_norm updates
            # running_var with the biased (population) variance (tests/paddle_known.py)
            attrs = {"epsilon": float(m._epsilon), "momentum": float(m._momentum), "running_var_estimator": "biased"}
        elif isinstance(m, nn.LayerNorm):
            attrs = {"epsilon": float(m._epsilon)}
        elif isinstance(m, nn.GELU):
            attrs = {"approximate": "tanh" if m._approximate else "none"}
        out.append((path, type(m).__name__, attrs))
    return out


def load(module, weights):
    """The bundle's values (already in the port's layout) into the module, by name: parameters and buffers."""
    named = {n: t for n, t, _ in _tensors(module)}
    for name, value in weights.items():
        named[name].set_value(np.asarray(value, dtype=np.dtype(str(named[name].numpy().dtype))))


def _flat(out):
    if isinstance(out, paddle.Tensor):
        return [out]
    if isinstance(out, dict):
        return [t for v in out.values() for t in _flat(v)]
    if isinstance(out, (list, tuple)):
        return [t for v in out for t in _flat(v)]
    return []


def _grad(loss, wrt, retain):
    """d loss / d each of `wrt` (zeros where Paddle says no path)."""
    gs = paddle.grad([loss], wrt, retain_graph=retain, allow_unused=True)
    return [g if g is not None else paddle.zeros(t.shape, t.dtype) for g, t in zip(gs, wrt)]


def run(module, inputs, seeds, loss, train, capture=True):
    """One step: outputs, every sublayer's first output, d loss / d each (the dot loss only), d loss /
    d each parameter, and the buffers after it."""
    module.train() if train else module.eval()
    xs = [paddle.to_tensor(np.asarray(a)) for a in inputs]
    floats = [x for x in xs if x.is_floating_point()]
    if loss == "grad-penalty":
        for x in floats:
            x.stop_gradient = False
    named = [(n, t) for n, t, k in _tensors(module) if k == "parameter"]
    seen, hooks = {}, []
    if capture:
        def hook_for(path):
            def hook(layer, ins, out):
                if isinstance(out, paddle.Tensor) and path not in seen:
                    seen[path] = out
            return hook
        hooks = [m.register_forward_post_hook(hook_for(path)) for path, m in module.named_sublayers()]
    try:
        ys = _flat(module(*xs))
    finally:
        for h in hooks:
            h.remove()
    check_outputs([y.shape for y in ys], seeds)
    terms = [(y * paddle.to_tensor(np.asarray(c))).sum() for y, c in zip(ys, seeds) if c is not None]
    total = terms[0]
    for t in terms[1:]:
        total = total + t
    if loss == "grad-penalty" and floats:  # no float model input: no penalty term (the plain loss)
        for g in paddle.grad([total], floats, create_graph=True, allow_unused=True):
            if g is not None:
                total = total + (g * g).sum()
    # the captured outputs on a gradient path, each tensor once; one that shares its buffer with another asked
    # tensor (a view) is asked on its own
    asked = [] if loss != "dot" else list({id(t): t for t in seen.values() if not t.stop_gradient}.values())
    params = [t for _, t in named]
    views = [t for t in asked if any(t is not u and t._is_shared_buffer_with(u) for u in params + asked)]
    together = [t for t in asked if not any(t is v for v in views)]
    answers = _grad(total, params + together, retain=bool(views))
    got = {id(t): g for t, g in zip(together, answers[len(params):])}
    for k, v in enumerate(views):
        got[id(v)] = _grad(total, [v], retain=k + 1 < len(views))[0]
    return {"outputs": [y.numpy() for y in ys], "modules": {p: t.numpy() for p, t in seen.items()},
            "grads": {p: got[id(t)].numpy() for p, t in seen.items() if id(t) in got},
            "params": {n: g.numpy() for (n, _), g in zip(named, answers)},
            "buffers": {n: t.numpy() for n, t, k in _tensors(module) if k == "buffer"}}
