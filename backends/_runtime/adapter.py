"""The base every backend adapter extends: lookup through its op table, shape checks."""
from backends._table import Unsupported


class Adapter:
    name = "?"
    modes = ("fwd",)
    table = None
    last_check = None  # set by a backend that verifies its own result (the oracle)

    def lookup(self, spec):
        return self.table.lookup(spec.domain, spec.op_type, spec.opset)

    def versions(self):
        return {}

    @staticmethod
    def check_outputs(spec, outs):
        declared = [o for o in spec.outputs if o]
        if len(outs) < len(declared):
            raise Unsupported(f"{spec.op_type} with {len(declared)} outputs: the op function returns {len(outs)}")
        return list(outs[:len(spec.outputs)])

    autodiff = None  # the backend's standalone autodiff module, when it has one

    def chained(self, pairs, feeds, outputs, cots, penalty):
        """The graph run chained by the framework; pairs = [(entry, spec)] in topological order."""
        if self.autodiff is None or not hasattr(self.autodiff, "chained"):
            raise Unsupported(f"backend {self.name!r} has no chained mode")
        steps = [(self._op(e, s), s.attrs, s.inputs, s.outputs, e.flags.get("nondiff", ())) for e, s in pairs]
        return self.autodiff.chained(steps, feeds, outputs, cots, tuple(penalty))
