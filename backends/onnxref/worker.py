"""onnx.reference as shipped, float32, forward only: a backend under test like any other
(its known bugs, e.g. grouped ConvTranspose, must show up as findings)."""
import numpy as np

from backends._onnx_native import NativeScript, lookup_native, native_table, one_node_model, signature
from backends._runtime.adapter import Adapter


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


class ReferenceAdapter(NativeScript, Adapter):
    name = "onnxref"
    modes = ("fwd",)
    script_framework, runtime = "onnx", "onnxref"
    native = True  # executes the ONNX node itself: `--form original` gives it the original attributes
    cast = None

    def __init__(self):
        import onnx
        self.onnx = onnx
        self.table = native_table(self.name, reference_ops(), self._run)
        self.cache = {}

    def versions(self):
        return {"onnx": self.onnx.__version__}

    def lookup(self, spec):
        return lookup_native(self, spec)

    def _run(self, *args, **kwargs):
        raise AssertionError("onnx.reference executes the node itself")

    def evaluator(self, spec, inputs):
        from onnx.reference import ReferenceEvaluator
        key = signature(spec, inputs)
        if key not in self.cache:
            model, _ = one_node_model(spec, inputs, cast=self.cast)
            self.cache[key] = ReferenceEvaluator(model, new_ops=self.new_ops(spec))
        return self.cache[key]

    def new_ops(self, spec):
        return None

    def fwd(self, entry, inputs, spec):
        ev = self.evaluator(spec, inputs)
        feeds = {}
        for n, a in zip(spec.inputs, inputs):
            if n:
                a = np.asarray(a)
                feeds[n] = a.astype(self.cast) if self.cast is not None and a.dtype.kind == "f" else a
        names = [o for o in spec.outputs if o]
        got = dict(zip(names, ev.run(names, feeds)))
        return [np.asarray(got[o]) if o else None for o in spec.outputs]


def make_adapter():
    return ReferenceAdapter()
