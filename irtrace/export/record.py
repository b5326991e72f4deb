"""Recording: run the canonical graph in torch (the reference), chained from the model
inputs; record every value, then backpropagate the loss and record every cotangent and
the seeds of the double-backward pass."""
import numpy as np

from irtrace.errors import IrtraceError, strip_ansi
from irtrace.ir.spec import node_specs
from irtrace.store import SEED_PREFIX, grad_name, initializers, u_name  # noqa: F401 - re-exported names

LOSSES = {
    "dot": "L = sum over outputs o of <y_o, c_o>, c_o ~ N(0, 1) drawn from numpy default_rng(seed + 1) in output order",
    "sum": "L = sum over outputs o of sum(y_o) (every output cotangent is ones)",
    "grad-penalty": "L = D + sum over float model inputs x of ||dD/dx||^2, D = sum over outputs o of <y_o, c_o>, "
                    "c_o ~ N(0, 1) from numpy default_rng(seed + 1) (a gradient penalty: the backward runs double "
                    "backward)",
}


def record(model, inputs, outputs, loss="dot", seed=0, sources=None):
    """Returns (values: name -> np.ndarray, specs: name -> (dtype, shape), torch env).

    `inputs` maps graph input names to arrays; `outputs` names the values the loss is over; `sources`:
    the graph inputs and initializers that require grad, as in a training step (the parameters and the
    float inputs; None: every float one). Buffers and constants do not: no gradient is taken through
    them (torch's BatchNormalization differentiates its statistics when they require grad)."""
    import torch

    from backends._table import Unsupported
    from backends.torch.adapter import run_graph
    from backends.torch.autodiff import to_numpy
    if loss not in LOSSES:
        raise IrtraceError(f"unknown loss {loss!r}; choose one of {', '.join(LOSSES)}")
    feeds = dict(initializers(model))
    feeds.update(inputs)
    specs = node_specs(model)
    try:
        env = run_graph(specs, feeds, leaves=sources)
    except Unsupported as e:
        raise IrtraceError(f"cannot record values: {strip_ansi(e)}") from e
    rng = np.random.default_rng(seed + 1)
    total = None
    seeds = {}
    for o in outputs:
        y = env[o]
        if not (isinstance(y, torch.Tensor) and y.dtype.is_floating_point and y.requires_grad):
            continue
        c = np.ones(y.shape, np.float32) if loss == "sum" else rng.standard_normal(y.shape).astype(np.float32)
        seeds[SEED_PREFIX + o] = c
        term = (y * torch.from_numpy(c).to(y.dtype)).sum()
        total = term if total is None else total + term
    if total is not None and loss == "grad-penalty":
        xs = [env[n] for n in inputs if isinstance(env[n], torch.Tensor) and env[n].requires_grad]
        if xs:
            gs = torch.autograd.grad(total, xs, create_graph=True, allow_unused=True, materialize_grads=True)
            for t in env.values():  # retain_grad() hooks fire during autograd.grad too: record from zero
                if isinstance(t, torch.Tensor) and t.grad is not None:
                    t.grad = None
            total = total + sum((g * g).sum() for g in gs)
    if total is not None:
        total.backward()
    values = {}
    urng = np.random.default_rng(seed + 2)
    for name, t in env.items():
        values[name] = _contiguous(to_numpy(t))
        if isinstance(t, torch.Tensor) and t.dtype.is_floating_point and t.requires_grad:
            g = t.grad if t.grad is not None else torch.zeros_like(t)
            values[grad_name(name)] = _contiguous(to_numpy(g))
            values[u_name(name)] = urng.standard_normal(t.shape).astype(values[name].dtype)
    values.update(seeds)
    shapes = {k: (v.dtype, v.shape) for k, v in values.items()}
    return values, shapes, env


def _contiguous(a):
    """`a` (a view of a tensor of the run, which nothing changes any more) as it is where it is
    C-contiguous: a copy of every value and gradient would hold the model's weights twice more."""
    return a if a.flags.c_contiguous else np.array(a, order="C")
