"""fwd, vjp and vjp2 of one op function through TensorFlow's GradientTape, eagerly.

Standalone (numpy and tensorflow only): generated repro scripts inline this file verbatim, so
what a maintainer reads is exactly what irtrace ran. Deterministic ops are switched on here, so a
repro runs with the same setting as the replay. float64 stays float64 (TensorFlow has it).
Where TensorFlow returns no gradient (None: no recorded path, or an op it declares
NotDifferentiable), vjp and vjp2 return None, never a zero of our own: irtrace then says "computes no
gradient" unless torch's answer is zero too. The chained loss keeps every term: TensorFlow's own
explicit zeros (unconnected_gradients=ZERO) stand for "no path". An op without a registered
gradient raises (LookupError).
  vjp:  h_i = (df/dx_i)^T g for every float input x_i that is watched
  vjp2: s = sum_i <h_i(x, g), u_i> over the inputs with a direction u; returns (ds/dx_i, ds/dg_j) through
        nested tapes, the first with g a constant (a gradient penalty's graph), the second in a graph of
        its own
"""
import numpy as np
import tensorflow as tf


class ShapeMismatch(ValueError):
    """The op's output has another shape than the reference's, so the reference's cotangent cannot be
    applied: the worker answers SHAPE_MISMATCH (the forward's verdict again), not an error the framework
    raised."""

tf.config.experimental.enable_op_determinism()
ZERO = tf.UnconnectedGradients.ZERO


def to_tensor(a):
    if a is None:
        return None
    return tf.constant(np.asarray(a))


def to_numpy(t):
    if isinstance(t, tf.IndexedSlices):  # e.g. tf.gather's gradient: sparse rows, made dense
        t = tf.convert_to_tensor(t)
    return t.numpy() if isinstance(t, (tf.Tensor, tf.Variable)) else np.asarray(t)


def as_tuple(out):
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def is_float(t):
    return isinstance(t, tf.Tensor) and t.dtype.is_floating


def differentiable(xs, nondiff=()):
    return [x if is_float(x) and i not in nondiff else None for i, x in enumerate(xs)]


def pairs(ys, gs):
    """(output, cotangent) for every float output with a cotangent; shapes must agree (the
    tape would broadcast a wrong-shaped cotangent without a word)."""
    out = []
    for y, g in zip(ys, gs):
        if g is None or not is_float(y):
            continue
        if tuple(y.shape) != tuple(g.shape):
            raise ShapeMismatch(f"output shape {tuple(y.shape)}, not the reference's {tuple(g.shape)}: its "
                                f"cotangent cannot be applied (the forward is SHAPE_MISMATCH)")
        out.append((y, tf.cast(g, y.dtype)))
    return out


def fwd(op, inputs, attrs):
    return [to_numpy(y) for y in as_tuple(op(*[to_tensor(a) for a in inputs], **attrs))]


def _gradient(tape, ps, targets):
    """d<ys, gs>/d targets; None where TensorFlow gives no gradient (see the module docstring)."""
    if not ps or not targets:
        return [tf.zeros_like(t) for t in targets]  # no float output with a cotangent: exactly zero
    hs = tape.gradient([p[0] for p in ps], targets, output_gradients=[p[1] for p in ps])
    return [None if h is None else tf.convert_to_tensor(h) for h in hs]  # IndexedSlices (tf.gather's) made dense


def vjp(op, inputs, attrs, cots, nondiff=()):
    """Cotangents of every float input (None for the others) given output cotangents."""
    xs = [to_tensor(a) for a in inputs]
    diff = differentiable(xs, nondiff)
    targets = [x for x in diff if x is not None]
    with tf.GradientTape() as tape:
        for x in targets:
            tape.watch(x)
        ys = as_tuple(op(*xs, **attrs))
    hs = iter(_gradient(tape, pairs(ys, [to_tensor(c) for c in cots]), targets))
    return [_maybe(next(hs)) if x is not None else None for x in diff]


def _maybe(t):
    return None if t is None else to_numpy(t)


def vjp2(op, inputs, attrs, cots, us, nondiff=(), part=None):
    """A gradient penalty through the op, with nested tapes: the inner one watches exactly the inputs
    with a direction u (what the penalty's first backward differentiates), the outer every float input;
    s = sum_i <h_i, u_i>. part "x": ds/dx, g a constant (not watched), the penalty's own graph; "g":
    ds/dg, g watched by the outer tape; None: both, each in a graph of its own. Returns (ds/dx per
    input, ds/dg per output), None where not computed."""
    dx = _penalty(op, inputs, attrs, cots, us, nondiff, False) if part != "g" else [None] * len(inputs)
    dg = _penalty(op, inputs, attrs, cots, us, nondiff, True) if part != "x" else [None] * len(cots)
    return dx, dg


def _penalty(op, inputs, attrs, cots, us, nondiff, of_g):
    """vjp2's one graph: ds/dx per input, or ds/dg per output (of_g)."""
    xs = [to_tensor(a) for a in inputs]
    diff = differentiable(xs, nondiff)
    targets = [x for x in diff if x is not None]
    penal = [(x, u) for x, u in zip(diff, us) if x is not None and u is not None]
    gs = [to_tensor(c) for c in cots]
    g_targets = [g for g in gs if g is not None] if of_g else []
    with tf.GradientTape() as outer:  # records the inner gradient computation
        for t in targets + g_targets:
            outer.watch(t)
        with tf.GradientTape() as inner:
            for x, _ in penal:
                inner.watch(x)
            ys = as_tuple(op(*xs, **attrs))
        hs = _gradient(inner, pairs(ys, gs), [x for x, _ in penal])
        # an h TensorFlow gives no gradient for has no term: torch's would be <0, u> there
        terms = [tf.reduce_sum(h * tf.cast(to_tensor(u), h.dtype)) for h, (_, u) in zip(hs, penal) if h is not None]
        s = tf.add_n(terms) if terms else None
    wrt = g_targets if of_g else targets
    d = iter(outer.gradient(s, wrt) if s is not None and wrt else [tf.zeros_like(w) for w in wrt])
    if of_g:
        return [_maybe(next(d)) if g is not None else None for g in gs]
    return [_maybe(next(d)) if x is not None else None for x in diff]


def chained(steps, feeds, outputs, cots, penalty=(), leaves=None):
    """The whole graph chained from `feeds`, then the loss backpropagated through GradientTape.

    steps: [(op, attrs, input names, output names, nondiff positions)] in topological order.
    loss = sum_o <y_o, c_o>, plus sum_x ||d(sum_o <y_o, c_o>)/dx||^2 over the `penalty` inputs
    (nested tapes: the outer records the inner gradient, so the backward runs double backward
    through every op). Every penalty term is kept: TensorFlow's explicit zeros for an input the
    outputs do not depend on, an error for a gradient it cannot compute.
    Returns (values, grads): name -> array, grads = d loss / d value for every float value."""
    env = {k: to_tensor(v) for k, v in feeds.items()}
    with tf.GradientTape() as outer:
        for k, t in env.items():
            if is_float(t) and (leaves is None or k in leaves):  # a training step's parameters and inputs
                outer.watch(t)
        inner = tf.GradientTape() if penalty else None
        if inner is not None:
            inner.__enter__()
            for p in penalty:
                inner.watch(env[p])
        for op, attrs, ins, outs, nondiff in steps:
            xs = [(tf.stop_gradient(env[i]) if k in nondiff else env[i]) if i else None for k, i in enumerate(ins)]
            for name, y in zip(outs, as_tuple(op(*xs, **attrs))):
                if not name:
                    continue
                if not isinstance(y, tf.Tensor):
                    y = tf.constant(np.asarray(y))  # e.g. a numpy shape feeding the next op
                elif any(y is x for x in xs) or any(y is t for t in env.values()):
                    y = tf.identity(y)  # a distinct tensor per value, so each gets its own gradient
                env[name] = y
        terms = [tf.reduce_sum(env[o] * tf.cast(to_tensor(c), env[o].dtype)) for o, c in zip(outputs, cots)
                 if c is not None and is_float(env[o])]
        if not terms:
            raise ValueError(f"no float output with a cotangent among {list(outputs)}: the loss would be empty")
        base = tf.add_n(terms)
        loss = base
        if inner is not None:
            inner.__exit__(None, None, None)
            gx = inner.gradient(base, [env[p] for p in penalty], unconnected_gradients=ZERO)
            loss = base + tf.add_n([tf.reduce_sum(g * g) for g in gx])
    names = [k for k, t in env.items() if is_float(t)]
    grads = outer.gradient(loss, [env[k] for k in names], unconnected_gradients=ZERO)
    values = {k: to_numpy(t) for k, t in env.items() if t is not None}
    return values, {k: to_numpy(g) for k, g in zip(names, grads)}
