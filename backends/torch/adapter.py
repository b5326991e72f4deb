"""torch adapter: forward, vjp and vjp2 of one op function through torch's own autograd."""
import numpy as np
import torch

from backends._runtime.adapter import Adapter
from backends.torch.ops import OPS


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


def is_diff(t):
    return isinstance(t, torch.Tensor) and t.dtype.is_floating_point


class TorchAdapter(Adapter):
    """Runs op-table entries on numpy inputs. `dtype=torch.float64` casts float inputs up
    (the float64 oracle's gradients)."""
    name = "torch"
    modes = ("fwd", "vjp", "vjp2")

    def __init__(self, table=OPS, dtype=None):
        self.table, self.dtype = table, dtype

    def _inputs(self, inputs, diff=None):
        """Tensors of `inputs`; with `diff` (the entry) its differentiable ones require grad."""
        xs = [to_tensor(a, self.dtype) for a in inputs]
        if diff is not None:
            nondiff = diff.flags.get("nondiff", ())
            xs = [x.requires_grad_(True) if is_diff(x) and i not in nondiff else x for i, x in enumerate(xs)]
        return xs

    def versions(self):
        return {"torch": torch.__version__}

    def call(self, entry, xs, spec):
        return self.check_outputs(spec, as_tuple(entry.fn(*xs, **spec.attrs)))

    def fwd(self, entry, inputs, spec):
        with torch.no_grad():
            return [to_numpy(y) for y in self.call(entry, self._inputs(inputs), spec)]

    def _grads(self, ys, gs, xs, create_graph=False):
        pairs = [(y, g) for y, g in zip(ys, gs) if g is not None and isinstance(y, torch.Tensor) and y.requires_grad]
        targets = [x for x in xs if x is not None and x.requires_grad]
        if not pairs or not targets:
            return [torch.zeros_like(x) for x in targets]
        return list(torch.autograd.grad([p[0] for p in pairs], targets, [p[1] for p in pairs],
                                        create_graph=create_graph, allow_unused=True, materialize_grads=True))

    def vjp(self, entry, inputs, spec, cots):
        """Cotangents of every float input (None for the others) given output cotangents."""
        xs = self._inputs(inputs, diff=entry)
        ys = self.call(entry, xs, spec)
        gs = [to_tensor(g, self.dtype) for g in cots]
        hs = iter(self._grads(ys, gs, xs))
        return [to_numpy(next(hs)) if x is not None and x.requires_grad else None for x in xs]

    def vjp2(self, entry, inputs, spec, cots, us):
        """With h = vjp(x, g) and s = sum_i <h_i, u_i>: (ds/dx per input, ds/dg per output)."""
        xs = self._inputs(inputs, diff=entry)
        ys = self.call(entry, xs, spec)
        gs = [to_tensor(g, self.dtype).requires_grad_(True) if g is not None else None for g in cots]
        hs = self._grads(ys, gs, xs, create_graph=True)
        diff_xs = [x for x in xs if x is not None and x.requires_grad]
        # an input without a recorded direction (no gradient path in the model) contributes nothing to s
        diff_us = [u for u, x in zip(us, xs) if x is not None and x.requires_grad]
        s = sum(((h * to_tensor(u, self.dtype).to(h.dtype)).sum() for h, u in zip(hs, diff_us) if u is not None),
                torch.zeros((), dtype=self.dtype or torch.float32))
        wrt = diff_xs + [g for g in gs if g is not None]
        if s.requires_grad and wrt:
            d = torch.autograd.grad(s, wrt, allow_unused=True, materialize_grads=True)
        else:
            d = [torch.zeros_like(w) for w in wrt]
        d = iter(d)
        dx = [to_numpy(next(d)) if x is not None and x.requires_grad else None for x in xs]
        dg = [to_numpy(next(d)) if g is not None else None for g in gs]
        return dx, dg


def run_graph(specs, feeds, table=OPS, grad=True):
    """Run the graph chained from `feeds` (name -> np.ndarray); returns name -> torch.Tensor.
    With `grad`, float feeds are leaves that require grad and every float value keeps its
    .grad after a backward."""
    env = {}
    for k, v in feeds.items():
        t = to_tensor(v)
        if grad and is_diff(t):
            t.requires_grad_(True)
        env[k] = t
    for s in specs:
        entry = table.lookup(s.domain, s.op_type, s.opset)
        nondiff = entry.flags.get("nondiff", ())
        xs = [(env[i].detach() if k in nondiff else env[i]) if i else None for k, i in enumerate(s.inputs)]
        ys = as_tuple(entry.fn(*xs, **s.attrs))
        for name, y in zip(s.outputs, ys):
            if not name:
                continue
            if isinstance(y, torch.Tensor) and y.requires_grad:
                if y.is_leaf or any(y is e for e in xs):
                    y = y.view_as(y)  # a distinct tensor per value, so each keeps its own .grad
                y.retain_grad()
            env[name] = y
    return env
