"""One ONNX node run on numpy inputs by onnx.reference or onnxruntime.

Standalone (numpy, onnx, and onnxruntime for that backend): generated repro scripts inline
this file verbatim; the op is the node itself, rebuilt from its type and attributes."""
import numpy as np
from onnx import helper


# how a straight-line repro script runs the node (irtrace/repro/straight.py: the node built with
# onnx.helper from its type and attributes, {feeds} the inputs by name)
RECIPES = {
    "onnxruntime": {"node": True, "imports": ["import onnxruntime as ort", "from onnx import helper"],
                    "setup": ["so = ort.SessionOptions()",
                              "so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # the node as is"],
                    "run": "ort.InferenceSession(model.SerializeToString(), so, providers=['CPUExecutionProvider'])"
                           ".run(None, {feeds})", "numpy": "np.asarray({})"},
    "onnxref": {"node": True, "imports": ["from onnx import helper", "from onnx.reference import ReferenceEvaluator"],
                "setup": [], "run": "ReferenceEvaluator(model).run(None, {feeds})", "numpy": "np.asarray({})"},
}


def one_node(op, inputs, attrs):
    names = [f"x{i}" if a is not None else "" for i, a in enumerate(inputs)]
    while names and not names[-1]:
        names.pop()
    outs = [f"y{j}" for j in range(op["n_outputs"])]
    node = helper.make_node(op["op_type"], names, outs, domain=op["domain"], **attrs)
    g_in = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(np.asarray(a).dtype), list(np.shape(a)))
            for n, a in zip(names, inputs) if n]
    g_out = [helper.make_tensor_value_info(o, helper.np_dtype_to_tensor_dtype(np.dtype(dt)), None) if dt else
             helper.make_empty_tensor_value_info(o) for o, dt in zip(outs, op["out_dtypes"])]
    model = helper.make_model(helper.make_graph([node], "repro", g_in, g_out),
                              opset_imports=[helper.make_opsetid(op["domain"], op["opset"])])
    model.ir_version = min(model.ir_version, 10)
    return model, {n: np.asarray(a) for n, a in zip(names, inputs) if n}


def fwd(op, inputs, attrs):
    model, feeds = one_node(op, inputs, attrs)
    if op["runtime"] == "onnxruntime":
        import onnxruntime as ort
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # no fusions: the node as is
        sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
        return sess.run(None, feeds)
    from onnx.reference import ReferenceEvaluator
    return ReferenceEvaluator(model).run(None, feeds)


def vjp(*args, **kwargs):
    raise NotImplementedError("forward only")


vjp2 = vjp
