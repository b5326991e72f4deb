"""NodeSpec: what a backend receives for one node. Attributes are decoded here, once;
op functions never touch protobuf."""
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import numpy_helper

from irtrace.errors import IrtraceError


@dataclass(frozen=True)
class NodeSpec:
    name: str
    op_type: str
    domain: str
    opset: int
    inputs: tuple     # value names; "" for an omitted optional input
    outputs: tuple
    attrs: dict       # ONNX attribute name -> python value (int, float, str, list, np.ndarray)

    def to_json(self):
        return {"name": self.name, "op_type": self.op_type, "domain": self.domain, "opset": self.opset,
                "inputs": list(self.inputs), "outputs": list(self.outputs),
                "attrs": {k: _attr_json(v) for k, v in self.attrs.items()}}


def _attr_json(v):
    if isinstance(v, np.ndarray):
        return {"__tensor__": {"dtype": v.dtype.str, "shape": list(v.shape), "data": v.ravel().tolist()}}
    return v


def decode_attr(a, where=""):
    t = onnx.AttributeProto
    if a.type == t.FLOAT:
        return float(a.f)
    if a.type == t.INT:
        return int(a.i)
    if a.type == t.STRING:
        return a.s.decode("utf-8")
    if a.type == t.INTS:
        return [int(i) for i in a.ints]
    if a.type == t.FLOATS:
        return [float(f) for f in a.floats]
    if a.type == t.STRINGS:
        return [s.decode("utf-8") for s in a.strings]
    if a.type == t.TENSOR:
        return numpy_helper.to_array(a.t)
    raise IrtraceError(f"attribute {a.name!r} of {where} has type {t.AttributeType.Name(a.type)}, "
                       f"which irtrace cannot pass to a backend")


def decode_attrs(node):
    return {a.name: decode_attr(a, f"node {node.name!r} ({node.op_type})") for a in node.attribute}


def opset_of(model, domain):
    for o in model.opset_import:
        if o.domain in (domain, "ai.onnx" if domain == "" else domain):
            return int(o.version)
    return 1


def node_specs(model):
    """NodeSpecs of the model's graph, in its (topological) order."""
    return [NodeSpec(n.name, n.op_type, n.domain, opset_of(model, n.domain), tuple(n.input), tuple(n.output),
                     decode_attrs(n)) for n in model.graph.node]
