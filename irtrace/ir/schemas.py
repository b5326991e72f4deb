"""Ops of irtrace's own domain, where ONNX's standard op means something else.

- `ai.irtrace::TrainBatchNormalization`: training-mode batch norm whose running-stat outputs
  say which variance estimator updates running_var. ONNX's own
  BatchNormalization(training_mode=1) uses the biased (population) variance; PyTorch
  and MegEngine use the unbiased one. `momentum` follows ONNX: running = momentum *
  running + (1 - momentum) * batch (torch's momentum m is 1 - m here).
- `ai.irtrace::RecordedDropout`: dropout that reads its mask (recorded when the source
  framework drew it) instead of drawing: output = data * mask / (1 - ratio).

The schemas are registered with onnx so the checker validates these nodes like any other.
Their names differ from every standard op's: onnx.reference requires op names unique across domains.
"""
import onnx
from onnx.defs import OpSchema

DOMAIN = "ai.irtrace"
VERSION = 1
_FLOATS = ["tensor(float)", "tensor(double)", "tensor(float16)", "tensor(bfloat16)"]


def _schemas():
    fp, attr = OpSchema.FormalParameter, OpSchema.Attribute
    bn = OpSchema(
        "TrainBatchNormalization", DOMAIN, VERSION,
        doc="Training-mode batch normalization with an explicit running-variance estimator.",
        inputs=[fp("X", "T"), fp("scale", "T"), fp("B", "T"), fp("input_mean", "T"), fp("input_var", "T")],
        outputs=[fp("Y", "T"), fp("running_mean", "T"), fp("running_var", "T")],
        type_constraints=[("T", _FLOATS, "float tensors")],
        attributes=[
            attr("epsilon", OpSchema.AttrType.FLOAT, "added to the batch variance"),
            attr("momentum", OpSchema.AttrType.FLOAT, "keep fraction of the old running stat (ONNX convention)"),
            attr("running_var_estimator", OpSchema.AttrType.STRING, "'unbiased' (torch, MegEngine) or 'biased' (ONNX)"),
        ])
    drop = OpSchema(
        "RecordedDropout", DOMAIN, VERSION,
        doc="Dropout with a recorded mask: output = data * mask / (1 - ratio).",
        inputs=[fp("data", "T"), fp("mask", "B")], outputs=[fp("output", "T")],
        type_constraints=[("T", _FLOATS, "float tensors"), ("B", ["tensor(bool)"], "mask")],
        attributes=[attr("ratio", OpSchema.AttrType.FLOAT, "drop probability")])
    return [bn, drop]


_registered = False


def register_schemas():
    """Register irtrace's ops with onnx (idempotent)."""
    global _registered
    if _registered:
        return
    for s in _schemas():
        try:
            onnx.defs.get_schema(s.name, s.since_version, s.domain)
        except onnx.defs.SchemaError:
            onnx.defs.register_schema(s)
    _registered = True


def schema(name):
    register_schemas()
    return onnx.defs.get_schema(name, VERSION, DOMAIN)
