"""fwd, vjp and vjp2 of one op function through oneflow.autograd.grad (eager mode).

Standalone (numpy and oneflow only): generated repro scripts inline this file verbatim, so
what a maintainer reads is exactly what irtrace ran. OneFlow facts that shape it:
oneflow.autograd.grad has no allow_unused, and for an input the outputs do not depend on it
raises ("Check failed: input->mut_grad_fn_node().get() != nullptr") when the input was never
used, or returns a 0-d NaN when it was used elsewhere. So which inputs the outputs reach is
read from OneFlow's own autograd graph (grad_fn.next_functions): an input it does not reach
gets zeros (OneFlow's graph saying "no path"), every other one is asked of autograd.grad, and
an answer whose shape is not the input's is an error naming it, never reshaped or dropped.
A None grad_output means "ones" to OneFlow, so outputs without a cotangent are left out.
  vjp:  h_i = (df/dx_i)^T g for every float input x_i that requires grad
  vjp2: s = sum_i <h_i(x, g), u_i> over the inputs with a direction u; returns (ds/dx_i, ds/dg_j) through
        autograd.grad(create_graph=True), the first with g a constant (a gradient penalty's graph), the
        second in a graph of its own
"""
import ctypes
import glob
import os
import sysconfig

import numpy as np

# the CUDA libraries OneFlow 0.9's wheel links, dependencies first
CUDA_LIBS = ("libcublasLt.so.11", "libcublas.so.11", "libcudnn_ops_infer.so.8", "libcudnn_ops_train.so.8",
             "libcudnn_cnn_infer.so.8", "libcudnn_cnn_train.so.8")


def load_cuda_runtime():
    """OneFlow 0.9's wheel is a CUDA build. On a machine without CUDA the libraries it links come
    from the nvidia-cudnn-cu11 / nvidia-cublas-cu11 wheels of the same environment: loaded here,
    unless the library path already has them, so `import oneflow` works in a plain `python`."""
    folders = glob.glob(os.path.join(sysconfig.get_paths()["purelib"], "nvidia", "*", "lib"))
    for name in CUDA_LIBS:
        try:
            ctypes.CDLL(name, mode=ctypes.RTLD_GLOBAL)
        except OSError:
            for path in [os.path.join(f, name) for f in folders if os.path.exists(os.path.join(f, name))][:1]:
                ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)


load_cuda_runtime()
import oneflow as flow  # noqa: E402


class ShapeMismatch(ValueError):
    """The op's output has another shape than the reference's, so the reference's cotangent cannot be
    applied: the worker answers SHAPE_MISMATCH (the forward's verdict again), not an error the framework
    raised."""


def to_tensor(a, dtype=None):
    if a is None:
        return None
    a = np.array(a, copy=True)
    if dtype is not None and a.dtype.kind == "f":
        a = a.astype(dtype)
    if a.dtype.name == "bfloat16":  # ml_dtypes' type (irtrace's wire), which flow.tensor does not take:
        return flow.tensor(a.astype(np.float32)).to(flow.bfloat16)  # through float32, exact both ways
    return flow.tensor(a)


def to_numpy(t):
    if not isinstance(t, flow.Tensor):
        return np.asarray(t)
    if t.dtype == flow.bfloat16:  # .numpy() of a bfloat16 tensor gives float32: as ml_dtypes' type, exactly
        import ml_dtypes
        return t.to(flow.float32).numpy().astype(ml_dtypes.bfloat16)
    return t.numpy()


def as_tuple(out):
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def is_float(t):
    return isinstance(t, flow.Tensor) and t.dtype.is_floating_point


def leaves(inputs, nondiff=(), dtype=None):
    """Tensors of `inputs`; float ones (except positions in `nondiff`) require grad."""
    xs = [to_tensor(a, dtype) for a in inputs]
    return [x.requires_grad_(True) if is_float(x) and i not in nondiff else x for i, x in enumerate(xs)]


def wanted(x):
    return is_float(x) and x.requires_grad


def reached(ys, targets):
    """For each target: does OneFlow's autograd graph lead from the outputs `ys` to it?"""
    seen, kept, stack = set(), [], [y.grad_fn for y in ys if y.grad_fn is not None]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        kept.append(node)  # node wrappers are made on access: held, so no id is reused while we walk
        stack.extend(n for n in node.next_functions if n is not None)
    nodes = [t.grad_fn for t in targets]  # a leaf that no op has used yet has none
    return [any(t is y for y in ys) or (n is not None and id(n) in seen) for t, n in zip(targets, nodes)]


def grad(ys, gs, targets, create_graph=False):
    """d<ys, gs>/d target for every target: autograd.grad for the reached ones, zeros for the rest."""
    on_path = reached(ys, targets)
    asked = [t for t, r in zip(targets, on_path) if r]
    answers = iter(flow.autograd.grad(list(ys), asked, list(gs), retain_graph=True, create_graph=create_graph)
                   if asked else ())
    out = []
    for k, (t, r) in enumerate(zip(targets, on_path)):
        if not r:
            out.append(flow.zeros(t.shape, dtype=t.dtype))
            continue
        d = next(answers)
        if d is None or tuple(d.shape) != tuple(t.shape):
            raise ValueError(f"oneflow.autograd.grad returned {None if d is None else tuple(d.shape)} for "
                             f"differentiated input {k} of shape {tuple(t.shape)}")
        out.append(d)
    return out


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
    if not ps:
        return [flow.zeros(x.shape, dtype=x.dtype) for x in targets]
    return grad([p[0] for p in ps], [p[1] for p in ps], targets, create_graph)


def fwd(op, inputs, attrs, dtype=None):
    with flow.no_grad():
        return [to_numpy(y) for y in as_tuple(op(*[to_tensor(a, dtype) for a in inputs], **attrs))]


def vjp(op, inputs, attrs, cots, nondiff=(), dtype=None):
    """Cotangents of every float input (None for the others) given output cotangents."""
    xs = leaves(inputs, nondiff, dtype)
    ys = as_tuple(op(*xs, **attrs))
    hs = iter(grads(ys, [to_tensor(g, dtype) for g in cots], xs))
    return [to_numpy(next(hs)) if wanted(x) else None for x in xs]


def vjp2(op, inputs, attrs, cots, us, nondiff=(), dtype=None, part=None):
    """A gradient penalty through the op: h = autograd.grad(create_graph=True) of exactly the inputs with
    a direction u (what the penalty's first backward differentiates), s = sum_i <h_i, u_i>. part "x":
    ds/dx for every float input that requires grad, g a constant, the penalty's own graph; "g": ds/dg,
    g requiring grad; None: both, each in a graph of its own. Returns (ds/dx per input, ds/dg per
    output), None where not computed."""
    dx = _penalty(op, inputs, attrs, cots, us, nondiff, dtype, False) if part != "g" else [None] * len(inputs)
    dg = _penalty(op, inputs, attrs, cots, us, nondiff, dtype, True) if part != "x" else [None] * len(cots)
    return dx, dg


def _penalty(op, inputs, attrs, cots, us, nondiff, dtype, of_g):
    """vjp2's one graph: ds/dx per input, or ds/dg per output (of_g)."""
    xs = leaves(inputs, nondiff, dtype)
    ys = as_tuple(op(*xs, **attrs))
    gs = [to_tensor(g, dtype) for g in cots]
    if of_g:
        gs = [g.requires_grad_(True) if g is not None else None for g in gs]
    penal = [(x, u) for x, u in zip(xs, us) if wanted(x) and u is not None]
    hs = grads(ys, gs, [x for x, _ in penal], create_graph=True)
    terms = [(h * to_tensor(u, dtype).to(h.dtype)).sum() for h, (_, u) in zip(hs, penal)]
    s = terms[0] if terms else None
    for t in terms[1:]:
        s = s + t
    wrt = [g for g in gs if g is not None] if of_g else [x for x in xs if wanted(x)]
    if s is not None and wrt:
        d = iter(grad([s], [flow.ones_like(s)], wrt))  # a constant s (every h constant) reaches nothing: zeros
    else:  # no direction u at all
        d = iter([flow.zeros(w.shape, dtype=w.dtype) for w in wrt])
    if of_g:
        return [to_numpy(next(d)) if g is not None else None for g in gs]
    return [to_numpy(next(d)) if wanted(x) else None for x in xs]


def forward(steps, feeds, dtype=None, grad=True, leaves=None):
    """Run `steps` chained from `feeds`: name -> tensor. With `grad`, float feeds require grad,
    and every value is a distinct tensor (so each has its own gradient)."""
    env = {}
    for k, v in feeds.items():
        t = to_tensor(v, dtype)
        if grad and is_float(t) and (leaves is None or k in leaves):  # a training step's parameters, inputs
            t.requires_grad_(True)
        env[k] = t
    for op, attrs, ins, outs, nondiff in steps:
        xs = [(env[i].detach() if k in nondiff and isinstance(env[i], flow.Tensor) else env[i]) if i else None
              for k, i in enumerate(ins)]
        for name, y in zip(outs, as_tuple(op(*xs, **attrs))):
            if not name:
                continue
            if not isinstance(y, flow.Tensor):
                y = flow.tensor(np.asarray(y))
            if wanted(y) and any(y is x for x in xs):
                y = y.clone()  # Identity returns its input: a distinct tensor per value, as torch's view_as
            env[name] = y
    return env


def chained(steps, feeds, outputs, cots, penalty=(), dtype=None, leaves=None):
    """The whole graph chained from `feeds`, then the loss differentiated by oneflow.autograd.grad.

    steps: [(op, attrs, input names, output names, nondiff positions)] in topological order.
    loss = sum_o <y_o, c_o>, plus sum_x ||d(sum_o <y_o, c_o>)/dx||^2 over the `penalty` inputs
    (a gradient penalty: create_graph=True, then the outer autograd.grad runs double backward
    through every op). Returns (values, grads): name -> array, grads = d loss / d value for
    every float value that depends on a float feed."""
    env = forward(steps, feeds, dtype, leaves=leaves)  # leaves: the feeds that require grad (None: all)
    terms = [(env[o] * to_tensor(c, dtype).to(env[o].dtype)).sum() for o, c in zip(outputs, cots)
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
        for g in grad([base], [flow.ones_like(base)], xs, create_graph=True):
            loss = loss + (g * g).sum()
    names = [k for k, t in env.items() if wanted(t)]
    ds = grad([loss], [flow.ones_like(loss)], [env[k] for k in names])
    values = {k: to_numpy(t) for k, t in env.items() if t is not None}
    return values, {k: to_numpy(d) for k, d in zip(names, ds)}
