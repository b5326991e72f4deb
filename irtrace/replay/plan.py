"""Plan: what a replay asks of the backends. From a bundle and the options, the nodes selected, and for
each node the NodeCalls of the modes it judges (each differentiating exactly what a training step
does) with what it does not judge and why, the backends it is judged on, and the form of the node
each backend gets. Nothing here runs a backend: execute.py does, judge.py judges the answers."""
import re
from dataclasses import dataclass, field, replace

import numpy as np

from backends._runtime.wire import is_float
from irtrace.errors import IrtraceError, suggest
from irtrace.ir.graph import shape_arithmetic
from irtrace.replay import backends as registry
from irtrace.replay.call import bundle_paths, differentiated, from_bundle, proto_text
from irtrace.replay.select import search_names

MODES = ("fwd", "vjp", "vjp2")
REFERENCE, ORACLE = registry.reference(), registry.oracle()  # declared roles (backends/*/declare.py)
FORMS = ("canonical", "original")


def parse_modes(text):
    modes = [m.strip() for m in text.split(",") if m.strip()]
    for m in modes:
        if m not in MODES:
            raise IrtraceError(f"unknown mode {m!r}; choose from {', '.join(MODES)}.{suggest(m, MODES)}")
    return modes


def select(specs, nodes_regex, ops):
    """[(index, NodeSpec)] of the nodes --nodes (a regex on names) and --ops (op types) select."""
    out = list(enumerate(specs))
    if nodes_regex:
        try:
            re.compile(nodes_regex)
        except re.error as e:
            raise IrtraceError(f"bad --nodes regex {nodes_regex!r}: {e}") from e
        out = [out[k] for k in search_names(nodes_regex, [s.name for _, s in out])]
    if ops:
        known = {s.op_type for s in specs}
        for o in ops:
            if o not in known:
                raise IrtraceError(f"--ops {o!r}: no such op in this graph.{suggest(o, known)}")
        out = [(i, s) for i, s in out if s.op_type in ops]
    if not out:
        raise IrtraceError("no node matches --nodes/--ops")
    return out


def original_proto(node, original_attrs):
    """The node as it was before canonicalization (e.g. auto_pad=SAME_LOWER), for backends that
    execute ONNX themselves: their own auto_pad handling is code under test too."""
    from onnx import helper
    n = type(node)()
    n.CopyFrom(node)
    del n.attribute[:]
    for k, v in original_attrs.items():
        n.attribute.append(helper.make_attribute(k, v))
    return proto_text(n)


def mode_calls(bundle, spec, modes, paths, proto):
    """What a replay judges of one node: (calls, skipped). `calls`: the NodeCalls of the modes in `modes`
    that have something to judge, each differentiating exactly what a training step does (`paths`, a
    call.Paths): vjp the inputs a plain step takes gradients of; vjp2 two calls, s summed over the inputs
    a gradient penalty's first backward differentiates and every input of a penalty step differentiated,
    first ds/dx with the cotangent a constant (the penalty's own graph), then ds/dg in a call of its own.
    `skipped`: report entries saying what is not judged, and why."""
    base = from_bundle(bundle, spec, "fwd", proto)
    inputs = list(base.inputs)  # read once (a value read from the bundle: 2-3 us)
    floats = [k for k, a in enumerate(inputs) if a is not None and is_float(a.dtype)]
    cotangent = any(c is not None for c in base.cots)
    loss = (bundle.manifest.get("loss") or {}).get("kind")
    calls, skipped = [], []
    for mode in modes:
        if mode == "fwd":
            calls.append(base)
            continue
        if not floats or not cotangent:
            continue  # nothing to differentiate, or the loss does not depend on an output
        wrt, passive = differentiated(spec, inputs, paths.step if mode == "vjp" else paths.attached)
        penal = [k for k in wrt if spec.inputs[k] in paths.penalty] if mode == "vjp2" else wrt
        if not wrt or not penal:
            why = "no input on a gradient path of the model" if not wrt else \
                "no input on a gradient penalty's path (its first backward, the gradient of a model input, " \
                "does not pass through this node)"
            skipped.append({"mode": mode, "output": "*", "backend": None, "reason": why})
            continue
        for k in floats:
            if k in wrt:
                continue
            if k in passive:
                why = "NonDifferentiable in the ONNX schema"
            elif mode == "vjp" and spec.inputs[k] in paths.penalty:
                why = f"a training step does not differentiate the model's inputs (a gradient-penalty loss " \
                      f"does; this bundle's loss: {loss})"
            else:
                why = "not on a gradient path of the model"
            skipped.append({"mode": mode, "output": f"{'d' if mode == 'vjp' else 'd2x'}:{spec.inputs[k]}",
                            "backend": None, "reason": why})
        if mode == "vjp":
            calls.append(replace(base, mode=mode, wrt=wrt))
            continue
        us = tuple(u if k in penal else None for k, u in enumerate(base.us))
        calls += [replace(base, mode=mode, wrt=wrt, us=us, part=part) for part in ("x", "g")]
    return calls, skipped


def recorded_outputs(bundle, call):
    """The fwd reference of a call: the node's recorded outputs (None in other modes)."""
    values = bundle.values
    return [np.asarray(values[o]) if o and o in values else None for o in call.spec.outputs] \
        if call.mode == "fwd" else None


SHAPE_ARITHMETIC = ("shape arithmetic (computed from shapes and constants only): a port computes it in Python, "
                    "not with the framework")


@dataclass
class Plan:
    """The replay of a bundle, planned: `selected` [(index, NodeSpec)] in graph order; `protos` node name ->
    its NodeProto (base64); `originals` node name -> its NodeProto before canonicalization (--form
    original); `paths` what a training step differentiates (call.Paths); `shapes_only` the nodes a port
    computes in Python from shapes (judged on the reference only)."""
    bundle: object
    backends: list
    modes: list
    selected: list
    protos: dict
    originals: dict
    paths: object
    shapes_only: set
    _calls: dict = field(default_factory=dict)

    def on(self, spec):
        """The backends a node is judged on."""
        return [b for b in self.backends if b == REFERENCE] if spec.name in self.shapes_only else self.backends

    def calls(self, spec):
        """(NodeCalls, skipped entries) of a node, computed once."""
        if spec.name not in self._calls:
            self._calls[spec.name] = mode_calls(self.bundle, spec, self.modes, self.paths, self.protos[spec.name])
        return self._calls[spec.name]

    def skipped(self, spec):
        """The report's entries of what the node is not judged on, and why."""
        out = []
        if spec.name in self.shapes_only:
            on = self.on(spec)
            out += [{"mode": "*", "output": "*", "backend": b, "reason": SHAPE_ARITHMETIC}
                    for b in self.backends if b not in on and b != ORACLE]
        return out + self.calls(spec)[1]

    def form(self, call, native):
        """The call a backend gets: --form original gives a backend that executes ONNX itself (`native`)
        the node as it was before canonicalization; every other backend, the call itself."""
        original = self.originals.get(call.spec.name)
        return call.with_proto(original) if native and original is not None else call

    def forget(self, spec):
        self._calls.pop(spec.name, None)


def plan(bundle, options):
    """The Plan of replaying `bundle` as ReplayOptions `options` say (their backends, modes, nodes, ops,
    form); an IrtraceError names what cannot be planned."""
    for b in options.backends:
        # a backend that runs on other machines (a RayExecutor's) may have its environment built there
        reason = None if getattr(options.executor, "elsewhere", False) else registry.get(b).unavailable()
        if reason:
            raise IrtraceError(f"backend {b!r} is unavailable: {reason} — run: {registry.get(b).install}")
    if options.form not in FORMS:
        raise IrtraceError(f"unknown --form {options.form!r}; choose canonical or original")
    model = bundle.model
    specs = bundle.specs
    originals = {}
    if options.form == "original":
        for n in model.graph.node:
            attrs = bundle.node_source(n.name).get("original_attrs")
            if attrs is not None:
                originals[n.name] = original_proto(n, attrs)
    selected = select(specs, options.nodes, list(options.ops) if options.ops else None)
    return Plan(bundle, list(options.backends), list(options.modes), selected,
                {n.name: proto_text(n) for n in model.graph.node}, originals, bundle_paths(bundle),
                shape_arithmetic(model, bundle.state))
