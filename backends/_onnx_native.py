"""Shared by backends that execute ONNX itself (onnxruntime, onnx.reference, the oracle):
a one-node model per node, cached per signature (node proto + input dtypes and shapes)."""
import base64

import numpy as np
import onnx
from onnx import helper

from backends._table import OpTable, Unsupported

IRTRACE_DOMAIN = "ai.irtrace"


def node_parts(spec, inputs, out_dtypes=None, cast=None, rename=None):
    """(node, graph inputs, feeds, graph outputs) of the node `spec` on inputs shaped like `inputs`;
    `rename(kind, position, name)` gives the value names used in the graph ("in"/"out"), for several
    nodes in one graph (each reads its own copy of its inputs and writes outputs no other reads)."""
    node = onnx.NodeProto()
    node.ParseFromString(base64.b64decode(spec.proto))
    name_of = rename or (lambda kind, k, name: name)
    g_inputs, feeds = [], {}
    for k, (name, a) in enumerate(zip(spec.inputs, inputs)):
        if not name:
            continue
        name = name_of("in", k, name)
        if name in feeds:
            continue
        a = np.asarray(a)
        if cast is not None and a.dtype.kind == "f":
            a = a.astype(cast)
        feeds[name] = a
        g_inputs.append(helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(a.dtype), list(a.shape)))
    outs = []
    for i, name in enumerate(spec.outputs):
        if not name:
            continue
        name = name_of("out", i, name)
        dt = out_dtypes[i] if out_dtypes and out_dtypes[i] else None
        if dt is not None and cast is not None and np.dtype(dt).kind == "f":
            dt = cast
        outs.append(helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(np.dtype(dt)), None)
                    if dt is not None else helper.make_empty_tensor_value_info(name))
    if rename is not None:
        node.input[:] = [name_of("in", k, n) if n else "" for k, n in enumerate(node.input)]
        node.output[:] = [name_of("out", k, n) if n else "" for k, n in enumerate(node.output)]
    return node, g_inputs, feeds, outs


def model_of(nodes, g_inputs, outs, spec, name):
    """A model of `nodes` at the opset of `spec` (and its domain's)."""
    opsets = [helper.make_opsetid("", spec.opset if not spec.domain else 20)]
    if spec.domain:
        opsets.append(helper.make_opsetid(spec.domain, spec.opset))
    model = helper.make_model(helper.make_graph(nodes, name, g_inputs, outs), opset_imports=opsets)
    model.ir_version = min(model.ir_version, 10)
    return model


def one_node_model(spec, inputs, out_dtypes=None, cast=None):
    """A model of the single node `spec` (with its NodeProto) on inputs shaped like `inputs`.
    `cast` maps a float input dtype to the dtype the model declares (the oracle's float64)."""
    node, g_inputs, feeds, outs = node_parts(spec, inputs, out_dtypes, cast)
    return model_of([node], g_inputs, outs, spec, spec.name or "node"), feeds


def signature(spec, inputs):
    return (spec.proto, tuple((None if a is None else (np.asarray(a).dtype.str, np.asarray(a).shape)) for a in inputs))


def native_table(backend, op_types, fn):
    """An op table whose entries all run `fn` (the runtime executes the ONNX node itself)."""
    table = OpTable(backend)
    for domain, op_type, since in sorted(set(op_types)):
        try:
            table.register(op_type, since=since, domain=domain)(fn)
        except RuntimeError:
            pass  # the runtime lists some kernels once per provider/type: one entry is enough
    return table


def unsupported_domain(spec, backend):
    if spec.domain == IRTRACE_DOMAIN:
        raise Unsupported(f"{backend} has no kernel for {spec.domain}::{spec.op_type} (irtrace's own op)")


def lookup_native(adapter, spec):
    """The runtime's own kernel list decides, except for ONNX function ops (e.g. CastLike),
    which runtimes expand into ops they do have."""
    unsupported_domain(spec, adapter.name)
    try:
        return adapter.table.lookup(spec.domain, spec.op_type, spec.opset)
    except Unsupported:
        try:
            schema = onnx.defs.get_schema(spec.op_type, spec.opset, spec.domain)
        except onnx.defs.SchemaError:
            raise Unsupported(f"{spec.op_type!r} is not an ONNX op (domain {spec.domain!r})") from None
        if schema.has_function or schema.has_context_dependent_function:
            return None
        raise


class NativeScript:
    """Repro scripts of a backend that executes ONNX itself: the op is the node, rebuilt from its type
    and attributes by backends/_onnx_script.py (inlined verbatim). Set `script_framework`, `runtime`."""
    script_framework = "onnx"
    runtime = "onnxref"

    def script(self):
        import inspect
        import platform

        from backends import _onnx_script
        return {"framework": self.script_framework, "autodiff": inspect.getsource(_onnx_script),
                "python": platform.python_version(), "recipe": _onnx_script.RECIPES.get(self.runtime)}

    def op_block(self, spec):
        op = {"op_type": spec.op_type, "domain": spec.domain, "opset": spec.opset, "n_outputs": len(spec.outputs),
              "out_dtypes": list(spec.out_dtypes) or [""] * len(spec.outputs), "runtime": self.runtime}
        return f"op = {op!r}\n", []
