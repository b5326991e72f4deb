"""One node in one mode, as every backend receives it: built once, turned into a wire message by one
function (engine, repro shrinking and conformance all send this)."""
from dataclasses import dataclass, field, replace

import numpy as np

from irtrace.ir.graph import gradient_path, gradient_sources
from irtrace.ir.semantics import nondifferentiable_inputs


@dataclass(frozen=True)
class NodeCall:
    """`spec`: the node (irtrace.ir.spec.NodeSpec); `proto`: its NodeProto, base64 (for backends that
    execute ONNX themselves); `inputs` in ONNX order, `cots` per output (vjp, vjp2), `us` per input
    (vjp2; None: that input's term is not in s); `out_dtypes`: numpy dtype strings of the recorded
    outputs ("" where unknown)."""
    spec: object
    mode: str
    proto: str
    inputs: tuple
    cots: tuple = ()
    us: tuple = ()
    out_dtypes: tuple = ()
    extra: dict = field(default_factory=dict)   # message fields for one receiver (the oracle's "magnitude")

    def message(self):
        """The wire message (JSON-able) of this call."""
        spec = {**self.spec.to_json(), "proto": self.proto,
                "out_dtypes": list(self.out_dtypes) or [""] * len(self.spec.outputs)}
        return {"kind": "run", "mode": self.mode, "spec": spec, **self.extra}

    def arrays(self):
        """The arrays sent with the message: inputs, then cotangents (vjp, vjp2), then directions (vjp2)."""
        if self.mode == "fwd":
            return list(self.inputs)
        return list(self.inputs) + list(self.cots) + (list(self.us) if self.mode == "vjp2" else [])

    def with_proto(self, proto):
        """The same call with another form of the node (--form original)."""
        return replace(self, proto=proto)

    def with_extra(self, **fields):
        return replace(self, extra={**self.extra, **fields})


def from_bundle(bundle, spec, mode, proto, us_off=()):
    """The NodeCall of `spec` in `mode` on the bundle's recorded values; `us_off`: input positions whose
    direction u is left out of vjp2's s (off every gradient path)."""
    from irtrace.store import grad_name, u_name
    values = bundle.values
    inputs = tuple(np.asarray(values[i]) if i else None for i in spec.inputs)
    cots = tuple(np.asarray(values[grad_name(o)]) if o and grad_name(o) in values else None for o in spec.outputs)
    us = tuple(np.asarray(values[u_name(i)]) if i and u_name(i) in values and k not in us_off else None
               for k, i in enumerate(spec.inputs))
    dtypes = tuple(values.spec(o)[0].str if o and o in values else "" for o in spec.outputs)
    return NodeCall(spec, mode, proto, inputs, cots, us, dtypes)


def bundle_gradient_path(bundle):
    """The values on a gradient path of the bundle's model (the manifest's `differentiable` sources)."""
    declared = bundle.manifest.get("differentiable")
    return gradient_path(bundle.model, declared if declared is not None else gradient_sources(bundle.model))


def undifferentiated_inputs(spec, inputs, path):
    """(positions, passive): the float inputs of `spec` the model never differentiates, whose gradients
    are not judged and whose u leaves vjp2's s: those off every gradient path (a gain, a filter tap, a
    folded exponent) and those the ONNX schema marks NonDifferentiable whatever path they lie on
    (`passive`: Clip's bounds, Resize's scales; torch would differentiate a float Clip bound, the ONNX
    op does not). An op whose every float input is NonDifferentiable (Floor, Round) is still
    differentiated by autograd, to zero, and a framework without that rule is a finding: it stays."""
    passive = set(nondifferentiable_inputs(spec.op_type, spec.domain, spec.opset, len(spec.inputs)))
    if all(k in passive for k, a in enumerate(inputs) if a is not None and a.dtype.kind == "f"):
        passive = set()
    off = [k for k, i in enumerate(spec.inputs)
           if i and (i not in path or k in passive) and inputs[k].dtype.kind == "f"]
    return off, passive
