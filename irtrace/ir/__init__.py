"""The IR: canonical ONNX graphs and the node specs handed to backends. Knows no framework."""
from irtrace.ir.spec import NodeSpec, node_specs, decode_attrs  # noqa: F401
