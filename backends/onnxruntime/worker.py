"""onnxruntime: forward only, one-node models, graph optimizations disabled (ORT's own
fusions change numerics), one thread without spinning (many cached sessions with the
default spinning pool are slow to run and to destroy), no memory arena. A batch of nodes runs as one session
(NativeAdapter.run_many): one session.run instead of one session per node."""
import re

from backends._onnx_native import NativeAdapter, Runner
from backends._table import Unsupported


class OrtRunner(Runner):
    name = script_framework = "onnxruntime"
    out_dtypes = True
    batches = True

    def __init__(self):
        import onnxruntime as ort
        self.ort = ort

    def ops(self):
        from onnxruntime.capi import _pybind_state
        out = set()
        for k in _pybind_state.get_all_opkernel_def():
            if k.provider == "CPUExecutionProvider" and k.domain in ("", "ai.onnx"):
                out.add(("", k.op_name, int(k.version_range[0])))
        return out

    def versions(self):
        return {"onnxruntime": self.ort.__version__}

    def session(self, model, spec):
        so = self.ort.SessionOptions()
        so.graph_optimization_level = self.ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        so.intra_op_num_threads = 1
        so.inter_op_num_threads = 1
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
        # no memory arena: a session's arena keeps the largest buffers it ran with (a Transpose of a 2048 x 5632
        # weight: 46 MB) for as long as the session lives, so a worker of one-node sessions grew with the
        # model (4.2 GB at a 1.1B Llama's 2807 nodes); without it each run's buffers are freed after it
        so.enable_cpu_mem_arena = False
        so.log_severity_level = 3
        try:
            return self.ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
        except Exception as e:
            msg = str(e)
            if "NOT_IMPLEMENTED" in msg or "Could not find an implementation" in msg:
                raise Unsupported(f"onnxruntime has no CPU kernel for {spec.op_type} with these types") from e
            # a kernel that refuses an attribute in its own words ("Batchwise recurrent operations (layout == 1) are
            # not supported.": its LSTM, GRU and RNN): a gap of onnxruntime, said as it says it, not an error
            said = re.search(r"[^.:]*\bnot supported\b[^.]*\.", msg)
            if said:
                raise Unsupported(f"onnxruntime's CPU {spec.op_type}: {said.group(0).strip()}") from e
            raise

    def run(self, session, names, feeds):
        if any(getattr(a, "dtype", None) is not None and a.dtype.name == "bfloat16" for a in feeds.values()):
            # session.run converts numpy arrays by their numpy type, and ml_dtypes' bfloat16 has none it knows
            raise Unsupported("onnxruntime's Python API takes no bfloat16 arrays (and has few bfloat16 CPU kernels)")
        return session.run(names, feeds)


def make_adapter():
    return NativeAdapter(OrtRunner())
