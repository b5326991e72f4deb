"""torch adapter: forward, vjp and vjp2 of one op function through torch's own autograd."""
import torch

from backends._runtime.adapter import Adapter
from backends.torch import autodiff
from backends.torch.autodiff import as_tuple
from backends.torch.ops import OPS


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
    """Run the graph chained from `feeds` (name -> np.ndarray); returns name -> torch.Tensor
    (see autodiff.forward)."""
    steps = []
    for s in specs:
        entry = table.lookup(s.domain, s.op_type, s.opset)
        steps.append((entry.fn, s.attrs, s.inputs, s.outputs, entry.flags.get("nondiff", ())))
    return autodiff.forward(steps, feeds, grad=grad)
