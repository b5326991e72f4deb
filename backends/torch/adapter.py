"""torch adapter: forward, vjp and vjp2 of one op function through torch's own autograd."""
import numpy as np
import torch

from backends._runtime.adapter import Adapter
from backends.torch import autodiff
from backends.torch.autodiff import as_tuple, to_tensor
from backends.torch.ops import OPS


def is_diff(t):
    return isinstance(t, torch.Tensor) and t.dtype.is_floating_point


class TorchAdapter(Adapter):
    """Runs op-table entries on numpy inputs. `dtype=torch.float64` casts float inputs up
    (the float64 oracle's gradients)."""
    name = "torch"
    modes = ("fwd", "vjp", "vjp2")

    autodiff = autodiff

    def __init__(self, table=OPS, dtype=None):
        self.table, self.dtype = table, dtype

    def chained(self, pairs, feeds, outputs, cots, penalty):
        steps = [(self._op(e, s), s.attrs, s.inputs, s.outputs, e.flags.get("nondiff", ())) for e, s in pairs]
        return autodiff.chained(steps, feeds, outputs, cots, tuple(penalty), self.dtype)

    def versions(self):
        return {"torch": torch.__version__}

    def script(self):
        """What a repro script needs to run this backend's op without irtrace."""
        import inspect
        import platform
        return {"framework": "torch", "autodiff": inspect.getsource(autodiff), "python": platform.python_version()}

    def _op(self, entry, spec):
        return lambda *xs, **kw: self.check_outputs(spec, as_tuple(entry.fn(*xs, **kw)))

    def fwd(self, entry, inputs, spec):
        return autodiff.fwd(self._op(entry, spec), inputs, spec.attrs, self.dtype)

    def vjp(self, entry, inputs, spec, cots):
        return autodiff.vjp(self._op(entry, spec), inputs, spec.attrs, cots, entry.flags.get("nondiff", ()), self.dtype)

    def vjp2(self, entry, inputs, spec, cots, us):
        return autodiff.vjp2(self._op(entry, spec), inputs, spec.attrs, cots, us, entry.flags.get("nondiff", ()),
                             self.dtype)


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
