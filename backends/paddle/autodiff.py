"""fwd, vjp and vjp2 of one op function through paddle.grad (dynamic graph mode).

Standalone (numpy and paddle only): generated repro scripts inline this file verbatim, so
what a maintainer reads is exactly what irtrace ran. Paddle facts that shape it: tensors are
created with stop_gradient=True, so float inputs are made differentiable explicitly;
paddle.grad with allow_unused=True answers None for an input that no output depends on (Paddle
saying "no path": that gradient is zero, and only then is it written as zeros); a None
grad_output means "ones" to Paddle, so outputs without a cotangent are left out, never passed.
  vjp:  h_i = (df/dx_i)^T g for every float input x_i that is differentiable
  vjp2: s = sum_i <h_i(x, g), u_i> over the inputs with a direction u; returns (ds/dx_i, ds/dg_j) through
        paddle.grad(create_graph=True), the first with g a constant (a gradient penalty's graph), the
        second in a graph of its own
"""
import warnings

import numpy as np

warnings.filterwarnings("ignore", message="No ccache found")  # paddle.utils.cpp_extension warns at import
import paddle  # noqa: E402


class ShapeMismatch(ValueError):
    """The op's output has another shape than the reference's, so the reference's cotangent cannot be
    applied: the worker answers SHAPE_MISMATCH (the forward's verdict again), not an error the framework
    raised."""

paddle.disable_static()


def to_tensor(a, dtype=None):
    if a is None:
        return None
    a = np.array(a, copy=True)
    if dtype is not None and a.dtype.kind == "f":
        a = a.astype(dtype)
    if a.dtype.name == "bfloat16":  # ml_dtypes' type (irtrace's wire): Paddle takes bfloat16 as numpy uint16 bits
        a = a.view(np.uint16)
    return paddle.to_tensor(a)


def to_numpy(t):
    if not isinstance(t, paddle.Tensor):
        return np.asarray(t)
    if t.dtype == paddle.bfloat16:  # Paddle gives bfloat16 as numpy uint16 bits: ml_dtypes' type, the same bits
        import ml_dtypes
        return t.numpy().view(ml_dtypes.bfloat16)
    return t.numpy()


def as_tuple(out):
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def is_float(t):
    return isinstance(t, paddle.Tensor) and t.is_floating_point()


def leaves(inputs, nondiff=(), dtype=None):
    """Tensors of `inputs`; float ones (except positions in `nondiff`) are differentiable."""
    xs = [to_tensor(a, dtype) for a in inputs]
    for i, x in enumerate(xs):
        if is_float(x) and i not in nondiff:
            x.stop_gradient = False
    return xs


def wanted(x):
    return is_float(x) and not x.stop_gradient


def zeros_for(t):
    return paddle.zeros(t.shape, dtype=t.dtype)


def explicit(gs, targets):
    """paddle.grad's answer with allow_unused=True: None is Paddle's own "no path to this input"."""
    return [g if g is not None else zeros_for(t) for g, t in zip(gs, targets)]


def pairs(ys, gs):
    out = []
    for y, g in zip(ys, gs):
        if g is None or not wanted(y):
            continue
        if tuple(y.shape) != tuple(g.shape):
            raise ShapeMismatch(f"output shape {tuple(y.shape)}, not the reference's {tuple(g.shape)}: its "
                                f"cotangent cannot be applied (the forward is SHAPE_MISMATCH)")
        out.append((y, g))
    return out


def grads(ys, gs, xs, create_graph=False):
    ps = pairs(ys, gs)
    targets = [x for x in xs if wanted(x)]
    if not ps or not targets:
        return [zeros_for(x) for x in targets]
    return explicit(paddle.grad([p[0] for p in ps], targets, [p[1] for p in ps], create_graph=create_graph,
                                allow_unused=True), targets)


def fwd(op, inputs, attrs, dtype=None):
    with paddle.no_grad():
        return [to_numpy(y) for y in as_tuple(op(*[to_tensor(a, dtype) for a in inputs], **attrs))]


def vjp(op, inputs, attrs, cots, nondiff=(), dtype=None):
    """Cotangents of every float input (None for the others) given output cotangents."""
    xs = leaves(inputs, nondiff, dtype)
    ys = as_tuple(op(*xs, **attrs))
    hs = iter(grads(ys, [to_tensor(g, dtype) for g in cots], xs))
    return [to_numpy(next(hs)) if wanted(x) else None for x in xs]


def vjp2(op, inputs, attrs, cots, us, nondiff=(), dtype=None, part=None):
    """A gradient penalty through the op: h = paddle.grad(create_graph=True) of exactly the inputs with a
    direction u (what the penalty's first backward differentiates), s = sum_i <h_i, u_i>. part "x":
    ds/dx for every differentiable input, g a constant (stop_gradient), the penalty's own graph; "g":
    ds/dg, g differentiable; None: both, each in a graph of its own. Returns (ds/dx per input, ds/dg
    per output), None where not computed."""
    dx = _penalty(op, inputs, attrs, cots, us, nondiff, dtype, False) if part != "g" else [None] * len(inputs)
    dg = _penalty(op, inputs, attrs, cots, us, nondiff, dtype, True) if part != "x" else [None] * len(cots)
    return dx, dg


def _penalty(op, inputs, attrs, cots, us, nondiff, dtype, of_g):
    """vjp2's one graph: ds/dx per input, or ds/dg per output (of_g)."""
    xs = leaves(inputs, nondiff, dtype)
    ys = as_tuple(op(*xs, **attrs))
    gs = [to_tensor(g, dtype) for g in cots]
    if of_g:
        for g in gs:
            if g is not None:
                g.stop_gradient = False
    penal = [(x, u) for x, u in zip(xs, us) if wanted(x) and u is not None]
    hs = grads(ys, gs, [x for x, _ in penal], create_graph=True)
    terms = [(h * to_tensor(u, dtype).astype(h.dtype)).sum() for h, (_, u) in zip(hs, penal)]
    s = terms[0] if terms else None
    for t in terms[1:]:
        s = s + t
    wrt = [g for g in gs if g is not None] if of_g else [x for x in xs if wanted(x)]
    if s is not None and not s.stop_gradient and wrt:
        d = iter(explicit(paddle.grad([s], wrt, allow_unused=True), wrt))
    else:  # s does not depend on them at all (every h is a constant)
        d = iter([zeros_for(w) for w in wrt])
    if of_g:
        return [to_numpy(next(d)) if g is not None else None for g in gs]
    return [to_numpy(next(d)) if wanted(x) else None for x in xs]


def forward(steps, feeds, dtype=None, grad=True, leaves=None):
    """Run `steps` chained from `feeds`: name -> tensor. With `grad`, float feeds are
    differentiable leaves, and each value is a tensor paddle.grad can be asked about: Paddle 3.3's
    paddle.grad gets intermediate tensors wrong, silently, when they are views (reshape, unsqueeze,
    slicing share their input's buffer: asked with its input, a view gets the input's gradient) or
    outputs of a multi-output op (split: the last output's gradient for all, or a fatal error).
    Such an output is copied (Tensor.clone(): exact, and its gradient is the identity), as is an
    input returned unchanged (Identity), so every value is a tensor of its own."""
    env = {}
    for k, v in feeds.items():
        t = to_tensor(v, dtype)
        if grad and is_float(t) and (leaves is None or k in leaves):  # a training step's parameters, inputs
            t.stop_gradient = False
        env[k] = t
    for op, attrs, ins, outs, nondiff in steps:
        xs = [(env[i].detach() if k in nondiff and isinstance(env[i], paddle.Tensor) else env[i]) if i else None
              for k, i in enumerate(ins)]
        ys = as_tuple(op(*xs, **attrs))
        for name, y in zip(outs, ys):
            if not name:
                continue
            if not isinstance(y, paddle.Tensor):
                y = paddle.to_tensor(np.asarray(y))
            if grad and wanted(y) and (len(ys) > 1 or any(
                    isinstance(x, paddle.Tensor) and (y is x or y._is_shared_buffer_with(x)) for x in xs)):
                y = y.clone()
            env[name] = y
    return env


def chained(steps, feeds, outputs, cots, penalty=(), dtype=None, leaves=None):
    """The whole graph chained from `feeds`, then the loss differentiated by paddle.grad.

    steps: [(op, attrs, input names, output names, nondiff positions)] in topological order.
    loss = sum_o <y_o, c_o>, plus sum_x ||d(sum_o <y_o, c_o>)/dx||^2 over the `penalty` inputs
    (a gradient penalty: create_graph=True, then the outer paddle.grad runs double backward
    through every op). Returns (values, grads): name -> array, grads = d loss / d value for
    every float value that depends on a float feed."""
    env = forward(steps, feeds, dtype, leaves=leaves)  # leaves: the feeds that are differentiable (None: all)
    terms = [(env[o] * to_tensor(c, dtype).astype(env[o].dtype)).sum() for o, c in zip(outputs, cots)
             if c is not None and wanted(env[o])]
    if not terms:
        raise ValueError(f"no output among {list(outputs)} is a float value that depends on a float input")
    base = terms[0]
    for t in terms[1:]:
        base = base + t
    loss = base
    if penalty:
        xs = [env[p] for p in penalty]
        bad = [p for p, x in zip(penalty, xs) if not wanted(x)]
        if bad:
            raise ValueError(f"penalty inputs {bad} are not differentiable float values")
        for g in explicit(paddle.grad([base], xs, create_graph=True, allow_unused=True), xs):
            loss = loss + (g * g).sum()
    names = [k for k, t in env.items() if wanted(t)]
    ds = explicit(paddle.grad([loss], [env[k] for k in names], allow_unused=True), [env[k] for k in names])
    values = {k: to_numpy(t) for k, t in env.items() if t is not None}
    return values, {k: to_numpy(d) for k, d in zip(names, ds)}
