"""fwd, vjp and vjp2 of one op function through MegEngine's GradManager.

Standalone (numpy and megengine only): generated repro scripts inline this file verbatim,
so what a maintainer reads is exactly what irtrace ran. MegEngine facts that shape it: no
float64 (refused, never cast silently); attach to a GradManager before computing; `.grad`
accumulates across managers, so it is reset between the inner and the outer backward;
backward does not check the cotangent's shape, so we do.
  vjp:  h_i = (df/dx_i)^T g for every float input x_i that requires grad
  vjp2: s = sum_i <h_i(x, g), u_i> over the inputs with a direction u; returns (ds/dx_i, ds/dg_j)
        through nested GradManagers, the first with g a constant (a gradient penalty's graph), the
        second in a graph of its own
"""
import numpy as np

import megengine as mge
from megengine.autodiff import GradManager
from megengine.core.tensor.dtype import bfloat16 as BFLOAT16  # MegEngine's own numpy type (numpy kind "V")


class ShapeMismatch(ValueError):
    """The op's output has another shape than the reference's, so the reference's cotangent cannot be
    applied: the worker answers SHAPE_MISMATCH (the forward's verdict again), not an error the framework
    raised."""


class Unsupported(Exception):
    """MegEngine cannot express this (a coverage gap, not a divergence)."""


def to_tensor(a):
    if a is None:
        return None
    a = np.asarray(a)
    if a.dtype == np.float64:
        raise Unsupported("float64 input: MegEngine has no float64 (it would cast to float32 silently)")
    if a.dtype == np.int64:
        info = np.iinfo(np.int32)
        if a.size and (a.min() < info.min or a.max() > info.max):
            return a  # e.g. Slice's INT64_MIN "to the end": int32 would wrap it; ops read it with ints()
        a = a.astype(np.int32)  # MegEngine's widest integer; it would convert the same way
    if a.dtype.name == "bfloat16":  # ml_dtypes' type (irtrace's wire): MegEngine's holds the same values
        return mge.tensor(a.astype(np.float32), dtype=BFLOAT16)  # (float32 holds each exactly)
    return mge.tensor(a)


def to_numpy(t):
    return as_numpy(t.numpy()) if isinstance(t, mge.Tensor) else np.asarray(t)


def as_numpy(a):
    """MegEngine's bfloat16 array as ml_dtypes' (irtrace's wire; the same bits), other arrays as they are."""
    if a.dtype != BFLOAT16:
        return a
    import ml_dtypes
    return a.view(np.uint16).view(ml_dtypes.bfloat16)


def as_tuple(out):
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def is_float(t):
    return isinstance(t, mge.Tensor) and (np.dtype(t.dtype).kind == "f" or t.dtype == BFLOAT16)


def differentiable(xs, nondiff=()):
    return [x if is_float(x) and i not in nondiff else None for i, x in enumerate(xs)]


def fed(xs, diff):
    """What the op receives: a recorded copy of each attached leaf. An op that returns its
    input unchanged (Identity, astype to the same dtype) would otherwise hand backward the
    attached leaf itself, for which GradManager computes no gradient; in a real network that
    tensor is never a leaf, so the copy puts the op where it would be. The copy is `x * 1.0`
    (exact, keeps -0.0) by a one of x's dtype (a Python 1.0 is a float32 constant, and the backward of a
    bfloat16 x times it fails MegEngine's dtype assertion); F.copy turns a 0-d tensor into shape (1,)."""
    return [x * mge.tensor(1.0, dtype=x.dtype) if d is not None else x for x, d in zip(xs, diff)]


def pairs(ys, gs):
    out = []
    for y, g in zip(ys, gs):
        if g is None or not is_float(y):
            continue
        if tuple(y.shape) != tuple(g.shape):
            raise ShapeMismatch(f"output shape {tuple(y.shape)}, not the reference's {tuple(g.shape)}: its "
                                f"cotangent cannot be applied (the forward is SHAPE_MISMATCH)")
        out.append((y, g))
    return out


def grad_of(t):
    return None if t is None else (to_numpy(t.grad) if t.grad is not None else as_numpy(np.zeros(t.shape, t.dtype)))


def fwd(op, inputs, attrs):
    return [to_numpy(y) for y in as_tuple(op(*[to_tensor(a) for a in inputs], **attrs))]


def vjp(op, inputs, attrs, cots, nondiff=()):
    xs = [to_tensor(a) for a in inputs]
    diff = differentiable(xs, nondiff)
    gm = GradManager().attach([x for x in diff if x is not None])
    with gm:
        ys = as_tuple(op(*fed(xs, diff), **attrs))
        ps = pairs(ys, [to_tensor(c) for c in cots])
        if ps:
            gm.backward([p[0] for p in ps], [p[1] for p in ps])
    return [grad_of(x) for x in diff]


def vjp2(op, inputs, attrs, cots, us, nondiff=(), part=None):
    """A gradient penalty through the op, as MegEngine writes one: the inner manager has exactly the
    inputs with a direction u attached (what the penalty's first backward differentiates), the outer
    every float input; s = sum_i <h_i, u_i>. part "x": ds/dx, g a constant (not attached), the penalty's
    own graph; "g": ds/dg, g attached to the outer manager; None: both, each in a graph of its own.
    Returns (ds/dx per input, ds/dg per output), None where not computed."""
    dx = _penalty(op, inputs, attrs, cots, us, nondiff, False) if part != "g" else [None] * len(inputs)
    dg = _penalty(op, inputs, attrs, cots, us, nondiff, True) if part != "x" else [None] * len(cots)
    return dx, dg


def _penalty(op, inputs, attrs, cots, us, nondiff, of_g):
    """vjp2's one graph (nested GradManagers): ds/dx per input, or ds/dg per output (of_g)."""
    xs = [to_tensor(a) for a in inputs]
    diff = differentiable(xs, nondiff)
    attached = [x for x in diff if x is not None]
    penal = [(x, to_tensor(u)) for x, u in zip(diff, us) if x is not None and u is not None]
    gs = [to_tensor(c) for c in cots]
    g_att = [g for g in gs if g is not None] if of_g else []
    outer = GradManager().attach(attached + g_att)
    inner = GradManager().attach([x for x, _ in penal])
    with outer:
        with inner:
            ys = as_tuple(op(*fed(xs, diff), **attrs))
            ps = pairs(ys, gs)
            if ps:
                inner.backward([p[0] for p in ps], [p[1] for p in ps])
        hs = [x.grad for x, _ in penal]
        for t in attached + g_att:
            t.grad = None  # .grad accumulates: the outer backward must start from nothing
        terms = [(h * u).sum() for h, (_, u) in zip(hs, penal) if h is not None]
        if terms:
            s = terms[0]
            for t in terms[1:]:
                s = s + t
            outer.backward(s)
    if of_g:
        return [grad_of(g) for g in gs]
    return [grad_of(x) for x in diff]


def run_steps(steps, env):
    """Run `steps` on `env` (name -> tensor) in order, yielding (output name, value, op inputs);
    the caller stores each value in `env` (possibly changed) before the next step reads it."""
    for op, attrs, ins, outs, nondiff in steps:
        xs = [env[i] if i else None for i in ins]
        for name, y in zip(outs, as_tuple(op(*xs, **attrs))):
            if name:
                if not isinstance(y, mge.Tensor):
                    y = to_tensor(np.asarray(y))  # e.g. Shape's numpy result feeding the next op
                yield name, y, xs


def chained(steps, feeds, outputs, cots, penalty=(), leaves=None):
    """The whole graph chained from `feeds`, then the loss backpropagated through GradManager.

    steps: [(op, attrs, input names, output names, nondiff positions)] in topological order.
    loss = sum_o <y_o, c_o>, plus sum_x ||d(sum_o <y_o, c_o>)/dx||^2 over the `penalty` inputs
    (nested managers: the outer records the inner backward). Returns (values, grads): name -> array.

    d loss / d value for every intermediate value comes from a zero "probe" leaf added to it
    (value + probe), attached to the outer manager before recording starts. Attaching the
    intermediates themselves to the outer manager while the inner one records makes MegEngine
    1.13 return no inner gradient at all (x.grad is None), which would silently drop the penalty
    term; a first, unrecorded run gives the probes their shapes."""
    env = {k: to_tensor(v) for k, v in feeds.items()}
    shapes = {}
    dry = dict(env)
    for name, y, _ in run_steps(steps, dry):
        dry[name] = y
        if is_float(y):
            shapes[name] = (tuple(y.shape), y.dtype)
    probes = {name: mge.tensor(np.zeros(shape, dtype)) for name, (shape, dtype) in shapes.items()}
    leaves = [t for k, t in env.items() if is_float(t) and (leaves is None or k in leaves)]  # attached: a
    # training step's parameters and inputs (None: every float feed), never a buffer or a constant
    outer = GradManager().attach(leaves + list(probes.values()))
    inner = GradManager().attach([env[p] for p in penalty]) if penalty else None
    with outer:
        if inner is not None:
            inner.__enter__()
        for name, y, xs in run_steps(steps, env):
            env[name] = y + probes[name] if name in probes else y
        terms = [(env[o] * to_tensor(c)).sum() for o, c in zip(outputs, cots) if c is not None and is_float(env[o])]
        if not terms:
            raise ValueError("the loss has no term: no float graph output with a seed")
        base = terms[0]
        for t in terms[1:]:
            base = base + t
        loss = base
        if inner is not None:
            inner.backward(base)
            inner.__exit__(None, None, None)
            gx = [env[p].grad for p in penalty]
            missing = [p for p, g in zip(penalty, gx) if g is None]
            if missing:
                raise ValueError(f"MegEngine computed no gradient of the loss for penalty input(s) {missing}: "
                                 f"the gradient penalty cannot be formed")
            for t in leaves + list(probes.values()):
                t.grad = None  # .grad accumulates: the outer backward must start from nothing
            for g in gx:
                loss = loss + (g * g).sum()
        outer.backward(loss)
    values = {k: to_numpy(t) for k, t in env.items() if t is not None}
    grads = {k: grad_of(t) for k, t in env.items() if is_float(t) and k not in probes}
    grads.update({k: grad_of(p) for k, p in probes.items()})
    return values, grads
