"""onnxruntime: forward only, one-node models, graph optimizations disabled (ORT's own
fusions change numerics), one thread without spinning (many cached sessions with the
default spinning pool are slow to run and to destroy)."""
import numpy as np

from backends._onnx_native import NativeScript, lookup_native, native_table, one_node_model, signature
from backends._runtime.adapter import Adapter
from backends._table import Unsupported


def _kernels():
    from onnxruntime.capi import _pybind_state
    out = set()
    for k in _pybind_state.get_all_opkernel_def():
        if k.provider == "CPUExecutionProvider" and k.domain in ("", "ai.onnx"):
            out.add(("", k.op_name, int(k.version_range[0])))
    return out


class OrtAdapter(NativeScript, Adapter):
    name = "onnxruntime"
    modes = ("fwd",)
    script_framework, runtime = "onnxruntime", "onnxruntime"
    native = True  # executes the ONNX node itself: `--form original` gives it the original attributes

    def __init__(self):
        import onnxruntime as ort
        self.ort = ort
        self.table = native_table(self.name, _kernels(), self._run)
        self.cache = {}

    def versions(self):
        return {"onnxruntime": self.ort.__version__}

    def lookup(self, spec):
        return lookup_native(self, spec)

    def _session(self, spec, inputs, out_dtypes):
        key = signature(spec, inputs)
        if key not in self.cache:
            model, _ = one_node_model(spec, inputs, out_dtypes)
            so = self.ort.SessionOptions()
            so.graph_optimization_level = self.ort.GraphOptimizationLevel.ORT_DISABLE_ALL
            so.intra_op_num_threads = 1
            so.inter_op_num_threads = 1
            so.add_session_config_entry("session.intra_op.allow_spinning", "0")
            so.log_severity_level = 3
            try:
                self.cache[key] = self.ort.InferenceSession(model.SerializeToString(), so,
                                                            providers=["CPUExecutionProvider"])
            except Exception as e:
                msg = str(e)
                if "NOT_IMPLEMENTED" in msg or "Could not find an implementation" in msg:
                    raise Unsupported(f"onnxruntime has no CPU kernel for {spec.op_type} with these types") from e
                raise
        return self.cache[key]

    def _run(self, *args, **kwargs):
        raise AssertionError("onnxruntime executes the node itself")

    def fwd(self, entry, inputs, spec):
        sess = self._session(spec, inputs, getattr(spec, "out_dtypes", None))
        feeds = {n: np.asarray(a) for n, a in zip(spec.inputs, inputs) if n}
        names = [o for o in spec.outputs if o]
        got = dict(zip(names, sess.run(names, feeds)))
        return [got.get(o) if o else None for o in spec.outputs]


def make_adapter():
    return OrtAdapter()
