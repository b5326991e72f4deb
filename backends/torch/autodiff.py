"""fwd, vjp and vjp2 of one op function through torch.autograd.

Standalone (numpy and torch only): generated repro scripts inline this file verbatim, so
what a maintainer reads is exactly what irtrace ran.
  vjp:  h_i = (df/dx_i)^T g for every float input x_i
  vjp2: s = sum_i <h_i(x, g), u_i>; returns (ds/dx_i, ds/dg_j)
"""
import numpy as np
import torch


def to_tensor(a, dtype=None):
    if a is None:
        return None
    t = torch.from_numpy(np.array(a, copy=True))
    if dtype is not None and t.dtype.is_floating_point:
        t = t.to(dtype)
    return t


def to_numpy(t):
    if not isinstance(t, torch.Tensor):
        return np.asarray(t)
    if t._is_zerotensor():  # autograd's symbolic zeros (e.g. Abs's second derivative) have no storage
        return np.zeros(tuple(t.shape), dtype=torch.empty((), dtype=t.dtype).numpy().dtype)
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


def _grads(ys, gs, xs, create_graph=False):
    pairs = [(y, g) for y, g in zip(ys, gs) if g is not None and isinstance(y, torch.Tensor) and y.requires_grad]
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


def vjp2(op, inputs, attrs, cots, us, nondiff=(), dtype=None):
    """With h = vjp(x, g) and s = sum_i <h_i, u_i>: (ds/dx per input, ds/dg per output)."""
    xs = leaves(inputs, nondiff, dtype)
    ys = as_tuple(op(*xs, **attrs))
    gs = [to_tensor(g, dtype).requires_grad_(True) if g is not None else None for g in cots]
    hs = _grads(ys, gs, xs, create_graph=True)
    diff_xs = [x for x in xs if x is not None and x.requires_grad]
    # an input without a direction u (no gradient path in the model) contributes nothing to s
    diff_us = [u for u, x in zip(us, xs) if x is not None and x.requires_grad]
    s = sum(((h * to_tensor(u, dtype).to(h.dtype)).sum() for h, u in zip(hs, diff_us) if u is not None),
            torch.zeros((), dtype=dtype or torch.float32))
    wrt = diff_xs + [g for g in gs if g is not None]
    if s.requires_grad and wrt:
        d = torch.autograd.grad(s, wrt, allow_unused=True, materialize_grads=True)
    else:
        d = [torch.zeros_like(w) for w in wrt]
    d = iter(d)
    dx = [to_numpy(next(d)) if x is not None and x.requires_grad else None for x in xs]
    dg = [to_numpy(next(d)) if g is not None else None for g in gs]
    return dx, dg


def forward(steps, feeds, dtype=None, grad=True):
    """Run `steps` chained from `feeds`: name -> tensor. With `grad`, float feeds are leaves that
    require grad and every float value keeps its own .grad after a backward."""
    env = {}
    for k, v in feeds.items():
        t = to_tensor(v, dtype)
        if grad and t is not None and t.dtype.is_floating_point:
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
                y.retain_grad()
            env[name] = y
    return env


def chained(steps, feeds, outputs, cots, penalty=(), dtype=None):
    """The whole graph chained from `feeds`, then the loss backpropagated through torch.autograd.

    steps: [(op, attrs, input names, output names, nondiff positions)] in topological order.
    loss = sum_o <y_o, c_o>, plus sum_x ||d(sum_o <y_o, c_o>)/dx||^2 over the `penalty` inputs
    (a gradient penalty: the backward then runs double backward through every op).
    Returns (values, grads): name -> array, grads = d loss / d value for every float value."""
    env = forward(steps, feeds, dtype)
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
