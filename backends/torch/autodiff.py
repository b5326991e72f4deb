"""fwd, vjp and vjp2 of one op function through torch.autograd.

Standalone (numpy and torch only): generated repro scripts inline this file verbatim, so
what a maintainer reads is exactly what irtrace ran.
  vjp:  h_i = (df/dx_i)^T g for every float input x_i that requires grad
  vjp2: s = sum_i <h_i(x, g), u_i> over the inputs with a direction u; returns (ds/dx_i, ds/dg_j), the
        first with g a constant (a gradient penalty's graph), the second in a graph of its own
"""
import numpy as np
import torch


def to_tensor(a, dtype=None):
    if a is None:
        return None
    if isinstance(a, torch.Tensor):  # a tensor of the caller's (an export's module weights): not copied
        return a.detach() if dtype is None or not a.dtype.is_floating_point else a.detach().to(dtype)
    a = np.array(a, copy=True)
    if a.dtype.name == "bfloat16":  # ml_dtypes' bfloat16: torch.from_numpy takes its bits only
        t = torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    else:
        t = torch.from_numpy(a)
    if dtype is not None and t.dtype.is_floating_point:
        t = t.to(dtype)
    return t


def to_numpy(t):
    if not isinstance(t, torch.Tensor):
        return np.asarray(t)
    if t._is_zerotensor():  # autograd's symbolic zeros (e.g. Abs's second derivative) have no storage
        return np.zeros(tuple(t.shape), dtype=torch.empty((), dtype=t.dtype).numpy().dtype)
    if t.dtype == torch.bfloat16:  # numpy has no bfloat16 of its own: ml_dtypes', same bits
        import ml_dtypes
        return t.detach().cpu().view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return t.detach().cpu().numpy()


def as_tuple(out):
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def leaves(inputs, nondiff=(), dtype=None):
    """Tensors of `inputs`; float ones (except positions in `nondiff`) require grad."""
    xs = [to_tensor(a, dtype) for a in inputs]
    return [x.requires_grad_(True) if x is not None and x.dtype.is_floating_point and i not in nondiff else x
            for i, x in enumerate(xs)]


def fwd(op, inputs, attrs, dtype=None):
    with torch.no_grad():
        return [to_numpy(y) for y in as_tuple(op(*[to_tensor(a, dtype) for a in inputs], **attrs))]


class ShapeMismatch(ValueError):
    """The op's output has another shape than the reference's, so the reference's cotangent cannot be
    applied: the worker answers SHAPE_MISMATCH (the forward's verdict again), not an error the framework
    raised."""


def _grads(ys, gs, xs, create_graph=False):
    pairs = [(y, g) for y, g in zip(ys, gs) if g is not None and isinstance(y, torch.Tensor) and y.requires_grad]
    for y, g in pairs:
        if tuple(y.shape) != tuple(g.shape):
            raise ShapeMismatch(f"output shape {tuple(y.shape)}, not the reference's {tuple(g.shape)}: its "
                                f"cotangent cannot be applied (the forward is SHAPE_MISMATCH)")
    targets = [x for x in xs if x is not None and x.requires_grad]
    if not pairs or not targets:
        return [torch.zeros_like(x) for x in targets]
    return list(torch.autograd.grad([p[0] for p in pairs], targets, [p[1] for p in pairs],
                                    create_graph=create_graph, allow_unused=True, materialize_grads=True))


def vjp(op, inputs, attrs, cots, nondiff=(), dtype=None):
    """Cotangents of every float input (None for the others) given output cotangents."""
    xs = leaves(inputs, nondiff, dtype)
    ys = as_tuple(op(*xs, **attrs))
    hs = iter(_grads(ys, [to_tensor(g, dtype) for g in cots], xs))
    return [to_numpy(next(hs)) if x is not None and x.requires_grad else None for x in xs]


def vjp2(op, inputs, attrs, cots, us, nondiff=(), dtype=None, part=None):
    """A gradient penalty through the op: h = vjp of exactly the inputs with a direction u (what the
    penalty's first backward differentiates), s = sum_i <h_i, u_i>. part "x": ds/dx for every float
    input (except `nondiff`), with g a constant, as the penalty's own graph has it; "g": ds/dg, with
    g requiring grad; None: both, each in a graph of its own. Returns (ds/dx per input, ds/dg per
    output), None where not computed."""
    dx = _penalty(op, inputs, attrs, cots, us, nondiff, dtype, False) if part != "g" else [None] * len(inputs)
    dg = _penalty(op, inputs, attrs, cots, us, nondiff, dtype, True) if part != "x" else [None] * len(cots)
    return dx, dg


def _penalty(op, inputs, attrs, cots, us, nondiff, dtype, of_g):
    """vjp2's one graph: ds/dx per input (of_g False) or ds/dg per output (of_g True)."""
    xs = leaves(inputs, nondiff, dtype)
    ys = as_tuple(op(*xs, **attrs))
    gs = [to_tensor(g, dtype) for g in cots]
    if of_g:
        gs = [g.requires_grad_(True) if g is not None else None for g in gs]
    penal = [(x, u) for x, u in zip(xs, us) if x is not None and x.requires_grad and u is not None]
    hs = _grads(ys, gs, [x for x, _ in penal], create_graph=True)
    s = sum(((h * to_tensor(u, dtype).to(h.dtype)).sum() for h, (_, u) in zip(hs, penal)),
            torch.zeros((), dtype=dtype or torch.float32))
    wrt = [g for g in gs if g is not None] if of_g else [x for x in xs if x is not None and x.requires_grad]
    if s.requires_grad and wrt:
        d = iter(torch.autograd.grad(s, wrt, allow_unused=True, materialize_grads=True))
    else:  # s depends on none of them: zero
        d = iter([torch.zeros_like(w) for w in wrt])
    if of_g:
        return [to_numpy(next(d)) if g is not None else None for g in gs]
    return [to_numpy(next(d)) if x is not None and x.requires_grad else None for x in xs]


def forward(steps, feeds, dtype=None, grad=True, leaves=None, retain=True):
    """Run `steps` chained from `feeds`: name -> tensor. With `grad`, the float feeds named in `leaves`
    (None: every float feed) are leaves that require grad, as a training step's parameters and
    penalised inputs do (never a buffer or a constant), and, with `retain`, every float value keeps its
    own .grad after a backward (without, the caller hooks the values it wants the gradients of)."""
    env = {}
    for k, v in feeds.items():
        t = to_tensor(v, dtype)
        if grad and t is not None and t.dtype.is_floating_point and (leaves is None or k in leaves):
            t.requires_grad_(True)
        env[k] = t
    for op, attrs, ins, outs, nondiff in steps:
        xs = [(env[i].detach() if k in nondiff else env[i]) if i else None for k, i in enumerate(ins)]
        for name, y in zip(outs, as_tuple(op(*xs, **attrs))):
            if not name:
                continue
            if isinstance(y, torch.Tensor) and y.requires_grad:
                if y.is_leaf or any(y is x for x in xs):
                    y = y.view_as(y)  # a distinct tensor per value, so each keeps its own .grad
                if retain:
                    y.retain_grad()
            env[name] = y
    return env


def chained(steps, feeds, outputs, cots, penalty=(), dtype=None, leaves=None):
    """The whole graph chained from `feeds`, then the loss backpropagated through torch.autograd.

    steps: [(op, attrs, input names, output names, nondiff positions)] in topological order.
    loss = sum_o <y_o, c_o>, plus sum_x ||d(sum_o <y_o, c_o>)/dx||^2 over the `penalty` inputs
    (a gradient penalty: the backward then runs double backward through every op).
    `leaves`: the feeds that require grad (None: every float feed).
    Returns (values, grads): name -> array, grads = d loss / d value for every float value."""
    env = forward(steps, feeds, dtype, leaves=leaves)
    base = sum(((env[o] * to_tensor(c, dtype).to(env[o].dtype)).sum() for o, c in zip(outputs, cots)
                if c is not None and isinstance(env[o], torch.Tensor) and env[o].requires_grad),
               torch.zeros((), dtype=dtype or torch.float32))
    loss = base
    if penalty and base.requires_grad:
        xs = [env[p] for p in penalty]
        gs = torch.autograd.grad(base, xs, create_graph=True, allow_unused=True, materialize_grads=True)
        for t in env.values():  # retain_grad() hooks fire during autograd.grad too: start the backward from zero
            if isinstance(t, torch.Tensor) and t.grad is not None:
                t.grad = None
        loss = base + sum((g * g).sum() for g in gs)
    if loss.requires_grad:
        loss.backward()
    values = {k: to_numpy(t) for k, t in env.items() if t is not None}
    grads = {k: to_numpy(t.grad if t.grad is not None else torch.zeros_like(t)) for k, t in env.items()
             if isinstance(t, torch.Tensor) and t.requires_grad}
    return values, grads
