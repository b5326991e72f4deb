"""One node in one mode, as every backend receives it: built once, turned into a wire message by one
function (engine, repro shrinking and conformance all send this)."""
import base64
import json
from dataclasses import dataclass, field, replace
from functools import cached_property

import numpy as np

from backends._runtime.wire import dtype_tag, is_float
from irtrace.ir.graph import FLOAT_TYPES, gradient_path, gradient_sources, trained_sources
from irtrace.ir.semantics import nondifferentiable_inputs


@dataclass(frozen=True)
class NodeCall:
    """`spec`: the node (irtrace.ir.spec.NodeSpec); `proto`: its NodeProto, base64 (for backends that
    execute ONNX themselves); `inputs` in ONNX order, `cots` per output (vjp, vjp2), `us` per input
    (vjp2; None: that input's term is not in s); `out_dtypes`: numpy dtype strings of the recorded
    outputs ("" where unknown). `wrt` (vjp, vjp2): the input positions that require grad, exactly those
    a training step differentiates (None: every float input the op differentiates); `part` (vjp2): "x"
    for ds/d(inputs) with the cotangent a constant (a gradient penalty's own graph), "g" for ds/dg in
    a call of its own, None for both."""
    spec: object
    mode: str
    proto: str
    inputs: tuple
    cots: tuple = ()
    us: tuple = ()
    out_dtypes: tuple = ()
    extra: dict = field(default_factory=dict)   # message fields for one receiver (the oracle's "magnitude")
    wrt: tuple = None
    part: str = None

    def message(self):
        """The wire message (JSON-able) of this call: a copy of the one made once per call (a replay asks for
        it to name the call's cache entries and to send it in a batch)."""
        return dict(self._message)

    @cached_property
    def derived(self):
        """What others make of this call, kept with it by their key (the cache's entry names: a node's are asked
        for three to five times); a call is never changed, a changed one is another (dataclasses.replace)."""
        return {}

    @cached_property
    def _message(self):
        spec = wire_spec(self.spec, self.proto, list(self.out_dtypes) or [""] * len(self.spec.outputs))
        grads = {}
        if self.mode != "fwd" and self.wrt is not None:
            grads["wrt"] = list(self.wrt)
        if self.mode == "vjp2" and self.part is not None:
            grads["part"] = self.part
        return {"kind": "run", "mode": self.mode, "spec": spec, **grads, **self.extra}

    @cached_property
    def key_text(self):
        """The call as the cache names its entries: the message (sorted keys) and which directions are in s;
        made once per call (a replay names each call's entries several times; a call is never changed, a
        changed one is another: dataclasses.replace)."""
        return _KEY_TEXT(self._message) + repr([u is None for u in self.us])

    def arrays(self):
        """The arrays sent with the message: inputs, then cotangents (vjp, vjp2), then directions (vjp2)."""
        if self.mode == "fwd":
            return list(self.inputs)
        return list(self.inputs) + list(self.cots) + (list(self.us) if self.mode == "vjp2" else [])

    def named_arrays(self):
        """(value name, array) of each of arrays(), in its order: an input by its name, a cotangent as
        grad/<output>, a direction as u/<input>."""
        from irtrace.store import grad_name, u_name
        names = list(self.spec.inputs)
        if self.mode != "fwd":
            names += [grad_name(o) for o in self.spec.outputs]
        if self.mode == "vjp2":
            names += [u_name(i) for i in self.spec.inputs]
        return list(zip(names, self.arrays()))

    def off(self):
        """The float input positions whose gradients this call does not take (not in `wrt`)."""
        if self.mode == "fwd" or self.wrt is None:
            return []
        return [k for k, a in enumerate(self.inputs) if a is not None and is_float(np.asarray(a).dtype)
                and k not in self.wrt]

    def judges(self, k, n_inputs):
        """Whether result `k` of this call (vjp: per input; vjp2: per input, then per output) is one it
        computes: a gradient it takes, and of vjp2 only its `part`."""
        if self.mode == "fwd":
            return True
        if k < n_inputs:
            return (self.mode == "vjp" or self.part != "g") and (self.wrt is None or k in self.wrt)
        return self.part != "x"

    def with_proto(self, proto):
        """The same call with another form of the node (--form original)."""
        return replace(self, proto=proto)

    def with_extra(self, **fields):
        return replace(self, extra={**self.extra, **fields})

    def request(self, kind, **fields):
        """The message of a request about this call's node that runs nothing: "source" (the op as
        script text). `fields`: the request's own (e.g. "workaround": NAME)."""
        return node_request(kind, self.spec, self.proto, self.out_dtypes or None, **fields)


def proto_text(node):
    """A NodeProto as every message carries it: serialized, base64."""
    return base64.b64encode(node.SerializeToString()).decode()


def wire_spec(spec, proto=None, out_dtypes=None):
    """The "spec" of a message: the node's JSON, with its proto and the recorded outputs' dtypes where
    the receiver reads them."""
    out = spec.to_json()
    if proto is not None:
        out["proto"] = proto
    if out_dtypes is not None:
        out["out_dtypes"] = list(out_dtypes)
    return out


def node_request(kind, spec, proto=None, out_dtypes=None, **fields):
    """The message of a request about a node that runs nothing: "source" (its op, or with
    "workaround": NAME that alternative, as script text) or "alternatives" (the workarounds its backend
    declares for the op)."""
    return {"kind": kind, "spec": wire_spec(spec, proto, out_dtypes), **fields}


# json.dumps(message, sort_keys=True, default=str), by an encoder made once (json.dumps makes one at every call
# given an option); the message is encoded as it is, not copied first
_KEY_TEXT = json.JSONEncoder(sort_keys=True, default=str).encode


def from_bundle(bundle, spec, mode, proto, us_off=()):
    """The NodeCall of `spec` in `mode` on the bundle's recorded values; `us_off`: input positions whose
    direction u is left out of vjp2's s (off the gradient penalty's path)."""
    from irtrace.store import grad_name, u_name
    values = bundle.values
    inputs = tuple(np.asarray(values[i]) if i else None for i in spec.inputs)
    cots = tuple(np.asarray(values[grad_name(o)]) if o and grad_name(o) in values else None for o in spec.outputs)
    us = tuple(np.asarray(values[u_name(i)]) if i and u_name(i) in values and k not in us_off else None
               for k, i in enumerate(spec.inputs))
    dtypes = tuple(dtype_tag(values.spec(o)[0]) if o and o in values else "" for o in spec.outputs)
    return NodeCall(spec, mode, proto, inputs, cots, us, dtypes)


@dataclass(frozen=True)
class Paths:
    """What a training step on the bundle's model differentiates, as sets of value names.
    `step`: the values a plain training step takes gradients through (vjp): those computed from a
    parameter, and from a model input too when the loss is a gradient penalty (or the model has no
    parameters: then its inputs are what is differentiated). `penalty`: the values a gradient penalty's
    first backward differentiates (vjp2's s): those computed from a float model input (for a model fed
    integers only, e.g. token ids: from the first float values made from them, the embedded tokens)."""
    step: frozenset
    penalty: frozenset

    @property
    def attached(self):
        """What requires grad in a gradient-penalty step (vjp2): the step's values and the penalty's."""
        return self.step | self.penalty


def bundle_paths(bundle):
    """The Paths of a bundle, from its manifest: `differentiable` (the float graph inputs and the
    parameters), `trained` (what its training step differentiates, see trained_sources; older bundles:
    the same rule on the parameters) and its loss."""
    model = bundle.model
    m = bundle.manifest
    declared = m.get("differentiable")
    sources = set(declared) if declared is not None else gradient_sources(model)
    inits = {t.name for t in model.graph.initializer}
    inputs = sources - inits
    from_inputs = gradient_path(model, inputs) if inputs else gradient_path(model, _embedded(model))
    trained = m.get("trained")
    if trained is None:
        trained = trained_sources(sources & inits, inputs, (m.get("loss") or {}).get("kind"))
    return Paths(frozenset(gradient_path(model, set(trained))), frozenset(from_inputs))


def _embedded(model):
    """The float values first made from the model's non-float inputs (a Gather of an embedding table by
    token ids, after any integer arithmetic on them): what a gradient penalty of a model fed integers
    differentiates."""
    inits = {t.name for t in model.graph.initializer}
    data = {i.name for i in model.graph.input if i.name not in inits}
    floats = {v.name for v in list(model.graph.value_info) + list(model.graph.output)
              if v.type.tensor_type.elem_type in FLOAT_TYPES}
    out = set()
    for n in model.graph.node:
        if any(i in data for i in n.input):
            for o in n.output:
                (out if o in floats else data).add(o)
    return out


def differentiated(spec, inputs, path):
    """(wrt, passive): the positions of the float inputs of `spec` on `path` (a set of value names), and
    those the ONNX schema marks NonDifferentiable whatever path they lie on (Clip's bounds, Resize's
    scales; torch would differentiate a float Clip bound, the ONNX op does not), which are never in wrt.
    An op whose every float input is NonDifferentiable (Floor, Round) is still differentiated by autograd,
    to zero, and a framework without that rule is a finding: those stay."""
    passive = set(nondifferentiable_inputs(spec.op_type, spec.domain, spec.opset, len(spec.inputs)))
    if all(k in passive for k, a in enumerate(inputs) if a is not None and is_float(a.dtype)):
        passive = set()
    wrt = tuple(k for k, i in enumerate(spec.inputs)
                if i and i in path and k not in passive and is_float(inputs[k].dtype))
    return wrt, passive
