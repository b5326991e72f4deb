"""torch adapter: forward, vjp and vjp2 of one op function through torch's own autograd."""
import re

import torch

from backends._runtime.adapter import AutodiffAdapter
from backends.torch import autodiff, repro
from backends.torch.ops import OPS


class TorchAdapter(AutodiffAdapter):
    """Runs op-table entries on numpy inputs. `dtype=torch.float64` casts float inputs up
    (the float64 oracle's gradients)."""
    name = framework = "torch"
    recipe = repro.RECIPE
    autodiff = autodiff
    # torch's words: "addmm_impl_cpu_" not implemented for 'Half'
    missing_kernel = re.compile(r"not implemented for '(Half|BFloat16)'")

    def __init__(self, table=OPS, dtype=None):
        self.table, self.dtype = table, dtype

    def options(self):
        return {"dtype": self.dtype}

    def versions(self):
        return {"torch": torch.__version__}


def run_graph(specs, feeds, table=OPS, grad=True, leaves=None, retain=True):
    """Run the graph chained from `feeds` (name -> np.ndarray); returns name -> torch.Tensor
    (see autodiff.forward; `leaves`: the feeds that require grad, None: every float one; `retain`:
    every value keeps its .grad after a backward)."""
    steps = []
    for s in specs:
        entry = table.lookup(s.domain, s.op_type, s.opset)
        steps.append((entry.fn, s.attrs, s.inputs, s.outputs, entry.flags.get("nondiff", ())))
    return autodiff.forward(steps, feeds, grad=grad, leaves=leaves, retain=retain)
