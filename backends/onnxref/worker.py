"""onnx.reference as shipped, float32, forward only: a backend under test like any other
(its known bugs, e.g. grouped ConvTranspose, must show up as findings)."""
import numpy as np

from backends._onnx_native import NativeAdapter, Runner


def reference_ops():
    """(domain, op_type, since) of every op onnx.reference implements."""
    import re

    from onnx.reference.op_run import OpRun
    from onnx.reference.ops import _op_list
    out = set()
    for name in dir(_op_list):
        cls = getattr(_op_list, name)
        if isinstance(cls, type) and issubclass(cls, OpRun) and not name.startswith("_"):
            m = re.match(r"^(.*?)(?:_(\d+))?$", name)
            out.add((getattr(cls, "op_domain", ""), m.group(1), int(m.group(2) or 1)))
    return out


class ReferenceRunner(Runner):
    name = "onnxref"

    def __init__(self):
        import onnx
        self.onnx = onnx

    def ops(self):
        return reference_ops()

    def versions(self):
        return {"onnx": self.onnx.__version__}

    def new_ops(self, spec):
        """Op classes that replace onnx.reference's own for this node (none: as shipped)."""
        return None

    def session(self, model, spec):
        from onnx.reference import ReferenceEvaluator
        return ReferenceEvaluator(model, new_ops=self.new_ops(spec))

    def run(self, session, names, feeds):
        return [np.asarray(a) for a in session.run(names, feeds)]


def make_adapter():
    return NativeAdapter(ReferenceRunner())
