"""onnxruntime: forward only, one-node models, graph optimizations disabled (ORT's own
fusions change numerics), one thread without spinning (many cached sessions with the
default spinning pool are slow to run and to destroy). A batch of nodes runs as one session:
every node in it reads its own recorded inputs and writes outputs no other node reads, so each
still runs alone, on the same kernel, in one session.run instead of one session per node."""
import numpy as np

from backends._onnx_native import (NativeScript, lookup_native, model_of, native_table, node_parts, one_node_model,
                                   signature)
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

    def _new_session(self, model):
        so = self.ort.SessionOptions()
        so.graph_optimization_level = self.ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        so.intra_op_num_threads = 1
        so.inter_op_num_threads = 1
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
        so.log_severity_level = 3
        return self.ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])

    def run_many(self, mode, items):
        """One session for the batch's plain ONNX nodes (those with a kernel here, no subgraph, the
        first node's opset); the others, or all when the session cannot be made or run, one by one."""
        from onnx import AttributeProto
        nodes, g_inputs, feeds, g_outputs, names, taken = [], [], {}, [], {}, []
        for k, (spec, inputs) in enumerate(items):
            if spec.domain or spec.opset != items[0][0].opset:
                continue
            try:
                self.lookup(spec)
            except Unsupported:
                continue
            node, gi, fd, go = node_parts(spec, inputs, spec.out_dtypes or None,
                                          rename=lambda kind, i, name, k=k: f"{kind}{k}.{i}")
            if any(a.type in (AttributeProto.GRAPH, AttributeProto.GRAPHS) for a in node.attribute):
                continue
            node.name = f"node{k}"
            nodes.append(node)
            g_inputs += gi
            feeds.update(fd)
            g_outputs += go
            names[k] = [f"out{k}.{i}" if o else None for i, o in enumerate(spec.outputs)]
            taken.append(k)
        if len(taken) < 2:
            return {}
        try:
            sess = self._new_session(model_of(nodes, g_inputs, g_outputs, items[taken[0]][0], "batch"))
            wanted = [n for k in taken for n in names[k] if n]
            got = dict(zip(wanted, sess.run(wanted, feeds)))
        except Exception:  # noqa: BLE001 - a kernel missing for these types, a node that raises: one by one
            return {}
        return {k: ([got[n] if n else None for n in names[k]], None) for k in taken}

    def _session(self, spec, inputs, out_dtypes):
        key = signature(spec, inputs)
        if key not in self.cache:
            model, _ = one_node_model(spec, inputs, out_dtypes)
            try:
                self.cache[key] = self._new_session(model)
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
