"""Recording: run the canonical graph in torch (the reference), chained from the model
inputs; record every value, then backpropagate the loss and record every cotangent and
the seeds of the double-backward pass."""
import numpy as np

from irtrace.errors import IrtraceError, strip_ansi
from irtrace.ir.spec import node_specs
# GRAD_PREFIX, SEED_PREFIX and initializers are re-exported names
from irtrace.store import GRAD_PREFIX, SEED_PREFIX, U_PREFIX, grad_name, initializers, u_name  # noqa: F401

LOSSES = {
    "dot": "L = sum over outputs o of <y_o, c_o>, c_o ~ N(0, 1) drawn from numpy default_rng(seed + 1) in output order",
    "sum": "L = sum over outputs o of sum(y_o) (every output cotangent is ones)",
    "grad-penalty": "L = D + sum over float model inputs x of ||dD/dx||^2, D = sum over outputs o of <y_o, c_o>, "
                    "c_o ~ N(0, 1) from numpy default_rng(seed + 1) (a gradient penalty: the backward runs double "
                    "backward)",
}


def record(model, inputs, outputs, loss="dot", seed=0, sources=None, weights=None, into=None):
    """Returns (values: name -> np.ndarray, specs: name -> (dtype, shape), torch env).

    `inputs` maps graph input names to arrays; `outputs` names the values the loss is over; `sources`:
    the graph inputs and initializers that require grad, as in a training step (the parameters and the
    float inputs; None: every float one). Buffers and constants do not: no gradient is taken through
    them (torch's BatchNormalization differentiates its statistics when they require grad).
    `weights`: name -> torch tensor of the initializers the graph refers to as external data (an export's
    module parameters, used as they are: not copied). `into(specs)` -> a store.ValueWriter: each value,
    gradient and direction is written to it as it is made and not held (values is then None); None:
    they are returned."""
    import torch

    from backends._table import Unsupported
    from backends.torch.adapter import run_graph
    if loss not in LOSSES:
        raise IrtraceError(f"unknown loss {loss!r}; choose one of {', '.join(LOSSES)}")
    feeds = dict(initializers(model, weights))
    feeds.update(inputs)
    try:
        env = run_graph(node_specs(model), feeds, leaves=sources, retain=False)
    except Unsupported as e:
        raise IrtraceError(f"cannot record values: {strip_ansi(e)}") from e
    del feeds
    differentiable = [n for n, t in env.items()
                      if isinstance(t, torch.Tensor) and t.dtype.is_floating_point and t.requires_grad]
    rng = np.random.default_rng(seed + 1)
    seeds = {}
    for o in outputs:
        if o in differentiable:
            y = env[o]
            seeds[SEED_PREFIX + o] = np.ones(y.shape, np.float32) if loss == "sum" else \
                rng.standard_normal(y.shape).astype(np.float32)
    specs = _specs(env, differentiable, seeds)
    sink = _Values() if into is None else into(specs)
    for name, t in env.items():
        sink[name] = _array(t)
    # the vjp2 directions, as many elements as the model has values: drawn by torch in each value's own dtype
    # (ResNet-50's 44.7 M: numpy's float64 draws cast to float32 0.57-0.70 s, torch's float32 draws 0.20-0.22 s),
    # each into one buffer per dtype in turn: torch.randn is that buffer's normal_, the same draws, without a
    # tensor made and let go for each (0.30-0.38 -> 0.21-0.24 s for ResNet-50's; benchmarks/export.py)
    urng, sizes = torch.Generator().manual_seed(seed + 2), {}
    for name in differentiable:
        sizes[env[name].dtype] = max(sizes.get(env[name].dtype, 0), env[name].numel())
    scratch = {dtype: torch.empty(n, dtype=dtype) for dtype, n in sizes.items()}
    for name in differentiable:
        t = env[name]
        sink[u_name(name)] = _array(scratch[t.dtype][:t.numel()].view(t.shape).normal_(generator=urng))
    del scratch
    for name, c in seeds.items():
        sink[name] = c
    _backward(env, differentiable, seeds, inputs, loss, sink)
    for name in differentiable:  # a value the loss does not depend on: its gradient is zero
        if grad_name(name) not in sink.written:
            sink[grad_name(name)] = np.zeros(*reversed(specs[name]))
    return (None if into is not None else dict(sink)), specs, env


def _backward(env, differentiable, seeds, inputs, loss, sink):
    """Backpropagate the loss through `env`, each value's gradient written to `sink` as autograd makes it
    (a hook per value, not retain_grad: no gradient is held after its use)."""
    import torch
    recording = [False]
    hooks = []
    for name in differentiable:
        t = env[name]

        def save(g, name=name):
            if recording[0]:
                sink.accumulate(grad_name(name), _array(g))

        def save_leaf(p, save=save):  # after accumulation, and let go: a leaf would hold its .grad to the end
            save(p.grad)
            p.grad = None
        hooks.append(t.register_post_accumulate_grad_hook(save_leaf) if t.is_leaf else t.register_hook(save))
    total = None
    for name, c in seeds.items():
        y = env[name[len(SEED_PREFIX):]]
        term = (y * torch.from_numpy(c).to(y.dtype)).sum()
        total = term if total is None else total + term
    if total is not None and loss == "grad-penalty":
        xs = [env[n] for n in inputs if isinstance(env[n], torch.Tensor) and env[n].requires_grad]
        if xs:  # its hooks fire too, and are not recorded: the gradients are the whole loss's
            gs = torch.autograd.grad(total, xs, create_graph=True, allow_unused=True, materialize_grads=True)
            total = total + sum((g * g).sum() for g in gs)
    recording[0] = True
    try:
        if total is not None:
            total.backward()
    finally:
        for h in hooks:
            h.remove()


def _array(t):
    """A value of the run as a C-contiguous numpy array that does not change: a view of the tensor where
    it is one (a copy would hold the model's weights once more), else a copy."""
    from backends.torch.autodiff import to_numpy
    a = to_numpy(t)
    return a if a.flags.c_contiguous else np.array(a, order="C")


def _specs(env, differentiable, seeds):
    """name -> (numpy dtype, shape) of everything a recording writes: values, gradients, directions, seeds."""
    specs = {}
    for name, t in env.items():
        specs[name] = _spec(t)
    for name in differentiable:
        specs[grad_name(name)] = specs[u_name(name)] = specs[name]
    for name, c in seeds.items():
        specs[name] = (c.dtype, c.shape)
    return specs


def _spec(t):
    from backends.torch.autodiff import to_numpy
    a = to_numpy(t)  # a view: no copy
    return a.dtype, tuple(a.shape)


class _Values(dict):
    """A recording's values held in memory (a small graph's): the sink a ValueWriter is for a bundle."""

    @property
    def written(self):
        return self

    def __setitem__(self, name, array):
        # a gradient autograd hands a hook may be its own buffer, reused after, and a direction is drawn into one
        # (record): kept as a copy
        super().__setitem__(name, np.array(array, order="C", copy=True) if name.startswith((GRAD_PREFIX, U_PREFIX))
                            else array)

    def accumulate(self, name, array):
        self[name] = self[name] + array if name in self else array
