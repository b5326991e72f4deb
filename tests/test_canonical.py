"""Canonicalization on hand-built ONNX graphs."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from irtrace.errors import IrtraceError
from irtrace.ir.canonical import auto_pad_pads, canonicalize, check
from irtrace.ir.spec import decode_attrs


def _model(op, auto_pad, size=8, kernel=3, stride=2, **extra):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, size, size])
    out = -(-size // stride) if auto_pad.startswith("SAME") else (size - kernel) // stride + 1
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, out, out])
    inits, inputs = [], ["x"]
    attrs = dict(auto_pad=auto_pad, strides=[stride, stride], **extra)
    if op == "Conv":
        w = np.ones((1, 1, kernel, kernel), np.float32)
        inits.append(onnx.numpy_helper.from_array(w, "w"))
        inputs.append("w")
    else:
        attrs["kernel_shape"] = [kernel, kernel]
    node = helper.make_node(op, inputs, ["y"], name="n", **attrs)
    return helper.make_model(helper.make_graph([node], "g", [x], [y], inits), opset_imports=[helper.make_opsetid("", 20)])


@pytest.mark.parametrize("op", ["Conv", "MaxPool", "AveragePool"])
@pytest.mark.parametrize("mode,pads", [("SAME_UPPER", [0, 0, 1, 1]), ("SAME_LOWER", [1, 1, 0, 0]), ("VALID", [0, 0, 0, 0])])
def test_auto_pad_resolved_to_explicit_pads(op, mode, pads):
    # input 8, kernel 3, stride 2: out 4, total pad 1 -> SAME_UPPER puts it at the end (TF 'SAME')
    m, original = canonicalize(_model(op, mode))
    a = decode_attrs(m.graph.node[0])
    assert a["pads"] == pads
    assert a["auto_pad"] == "NOTSET"
    assert original["n"]["auto_pad"] == mode  # the original form is kept
    check(m)


def test_defaults_written_out():
    m, _ = canonicalize(_model("Conv", "NOTSET"))
    a = decode_attrs(m.graph.node[0])
    assert a["kernel_shape"] == [3, 3] and a["dilations"] == [1, 1] and a["group"] == 1 and a["pads"] == [0, 0, 0, 0]


def test_auto_pad_odd_sizes_and_dilation():
    assert auto_pad_pads("SAME_UPPER", [7], [3], [2], [1]) == [1, 1]
    assert auto_pad_pads("SAME_UPPER", [8], [3], [1], [2]) == [2, 2]
    assert auto_pad_pads("SAME_LOWER", [8], [4], [1], [1]) == [2, 1]
    assert auto_pad_pads("SAME_UPPER", [8], [4], [1], [1]) == [1, 2]


def test_constants_folded_into_initializers():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    c = helper.make_node("Constant", [], ["c"], value=helper.make_tensor("v", TensorProto.FLOAT, [2], [1.0, 2.0]))
    add = helper.make_node("Add", ["x", "c"], ["y"])
    m, _ = canonicalize(helper.make_model(helper.make_graph([c, add], "g", [x], [y]),
                                          opset_imports=[helper.make_opsetid("", 20)]))
    assert [n.op_type for n in m.graph.node] == ["Add"]
    assert [t.name for t in m.graph.initializer] == ["c"]
    assert m.graph.node[0].name  # every node gets a unique name


def test_auto_pad_needs_a_known_shape():
    m = _model("Conv", "SAME_UPPER")
    m.graph.input[0].type.tensor_type.shape.dim[2].dim_param = "H"
    with pytest.raises(IrtraceError, match=r"node 'n' \(Conv\): auto_pad needs the input's spatial shape"):
        canonicalize(m)


def test_random_ops_rejected():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    n = helper.make_node("RandomUniformLike", ["x"], ["y"], name="rnd")
    with pytest.raises(IrtraceError, match="node 'rnd' draws random numbers"):
        canonicalize(helper.make_model(helper.make_graph([n], "g", [x], [y]), opset_imports=[helper.make_opsetid("", 20)]))
