"""The port check: describe the port, match its parameters, run one step of it with everything captured,
judge it module by module against torch's chained run of the bundle, and explain the first divergence."""
import logging
import re
import time
from dataclasses import asdict, dataclass, field

import numpy as np

from backends._runtime.wire import Status, is_float
from irtrace import compare
from irtrace.errors import IrtraceError
from irtrace.ir.semantics import nondifferentiable_inputs
from irtrace.ir.spec import node_specs
from irtrace.port import align
from irtrace.replay import backends as registry
from irtrace.replay.chained import ChainRounding, chain_request, run_chain
from irtrace.replay.execute import WorkerPool
from irtrace.replay.plan import ORACLE, REFERENCE
from irtrace.replay.worker import WorkerFailed
from irtrace.store import initializer_array

log = logging.getLogger(__name__)
LOSSES = ("dot", "grad-penalty")
# the bundle's node attributes a port module's own can be compared with (ONNX's names, the port drivers'
# vocabulary: backends/_runtime/port.py)
COMPARED = ("pads", "strides", "dilations", "group", "epsilon", "momentum", "running_var_estimator",
            "approximate")


@dataclass
class PortReport:
    """What `irtrace port` found. Rows are dicts: {"name", "value", "verdict", "max_abs", "max_rel",
    "allowed", "message"} (modules: name is the module path, value the bundle value it is aligned with)."""
    bundle: str
    backend: str
    factory: str
    loss: str
    mode: str
    versions: dict = field(default_factory=dict)
    modules: list = field(default_factory=list)       # outputs, in execution order
    grads: list = field(default_factory=list)         # d loss / d module output, in backward order (dot loss)
    parameters: list = field(default_factory=list)    # parameter gradients by state_dict key, worst first
    state: list = field(default_factory=list)         # buffers after the step (running stats)
    outputs: list = field(default_factory=list)       # the model's outputs
    first_forward: dict = None
    first_backward: dict = None
    explanation: dict = None                          # the cross-reference of the first divergence
    unaligned: list = field(default_factory=list)     # port modules with no scope in the bundle
    port_modules: list = field(default_factory=list)  # the port's modules: {"path", "class", "attributes"}
    penalty_dropped: bool = False                     # its parameter gradients are the plain loss's
    plain_loss: bool = False                          # --loss grad-penalty on a model without float inputs
    notes: list = field(default_factory=list)
    time_s: float = None

    @property
    def diverges(self):
        return any(r["verdict"] in compare.FAILING for rows in (self.modules, self.grads, self.parameters,
                                                                 self.state, self.outputs) for r in rows)

    def to_json(self):
        return {"schema": "irtrace.port/1", **asdict(self), "diverges": self.diverges}


def check(bundle, factory, backend, path=(), mapping=None, loss="dot", timeout=600.0, cross_reference=True):
    """Check the port built by `factory` ("pkg.module:callable", importable with `path` on sys.path) in
    `backend`'s environment against `bundle` (an opened Bundle); `mapping`: a PortMap (align.read_map)
    or None; loss "dot" (the bundle's output seeds) or "grad-penalty" (plus the squared gradient of every
    float model input). `cross_reference`: replay the ops of the first diverging module in isolation on the
    backend (cached answers are reused) to say whose fault it is. Returns a PortReport; IrtraceError for
    bad input (a factory that raises, names that do not match, outputs of another shape)."""
    t0 = time.perf_counter()
    if loss not in LOSSES:
        raise IrtraceError(f"unknown --loss {loss!r}; choose {' or '.join(LOSSES)}")
    info = registry.get(backend)
    if info.role != "test":
        raise IrtraceError(f"--backend {backend}: the port is checked against it; give the framework the port is "
                           f"written in (one of {', '.join(n for n, i in registry.BACKENDS.items() if i.port)})")
    if not info.port:
        raise IrtraceError(f"backend {backend!r} does not run ports (no backends/{backend}/port.py); ports run on: "
                           f"{', '.join(n for n, i in registry.BACKENDS.items() if i.port) or 'none'}")
    if (bundle.manifest.get("loss") or {}).get("kind") == "grad-penalty" and loss != "grad-penalty":
        raise IrtraceError("the bundle was exported with the grad-penalty loss: check the port with --loss grad-penalty")
    mapping = mapping or align.PortMap()
    path = [str(p) for p in (path or ())]
    pool = WorkerPool()
    try:
        report = _check(bundle, factory, backend, path, mapping, loss, timeout, pool)
    except PortFailed as e:  # the port crashed, hung or raised before its step: that is the result
        report = PortReport(str(bundle.path), backend, factory, loss, bundle.manifest.get("mode", "eval"))
        report.outputs.append(_row("(the port)", "", e.verdict, None, {"message": e.message}))
    finally:
        pool.close()
    if cross_reference:
        report.explanation = explain(bundle, report, backend, timeout)
    report.time_s = round(time.perf_counter() - t0, 3)
    return report


def _ask(pool, backend, msg, arrays, timeout):
    try:
        reply, out = pool.get(backend).call(msg, arrays, timeout)
    except WorkerFailed as e:
        raise PortFailed(e.verdict, f"the port's {msg['kind'][5:]} in {backend}'s worker: {e.message}") from None
    if reply.get("status") == Status.ERROR:
        if reply.get("stage") in ("factory", "outputs"):
            raise IrtraceError(reply["message"])
        raise PortFailed(compare.ERROR, f"{backend} raised in the port: {reply.get('message', '')}", reply.get("at"))
    if reply.get("status") != Status.OK:
        raise IrtraceError(f"{backend}: {reply.get('message', 'cannot run ports')}")
    return reply, out


class PortFailed(Exception):
    """The port crashed, hung or raised while running: a result, not a usage error."""

    def __init__(self, verdict, message, at=None):
        super().__init__(message)
        self.verdict, self.message, self.at = verdict, message, at


def _recorded(bundle):
    """The bundle's recorded random values a port may take (dropout masks, draws): name -> array."""
    names = [t.name for t in bundle.model.graph.initializer
             if t.name.endswith(".dropout_mask") or ".dropout_mask_" in t.name or ".random_" in t.name]
    return {n: np.asarray(bundle.values[n]) for n in names}


@dataclass
class _Step:
    """The port's step, planned: the bundle's weights as the port names and lays them out (`loaded`, from
    align.match, and `weights` transformed), the model inputs, whether the loss is the plain one, the
    chained request the reference runs (and its loss seeds), and what the port described of itself."""
    loaded: list
    weights: list
    inputs: list
    plain: bool
    request: object
    described: dict
    values: dict

    @property
    def seeds(self):
        return list(self.request.arrays[len(self.request.feeds):])


def _plan(bundle, base, backend, mapping, loss, timeout, pool):
    m = bundle.manifest
    recorded = _recorded(bundle)
    described, _ = _ask(pool, backend, {"kind": "port-describe", **base, "recorded": list(recorded)},
                        list(recorded.values()), timeout)
    params = set(m.get("parameters", []))
    values = {t.name: ("parameter" if t.name in params else "buffer", tuple(np.shape(bundle.values[t.name])))
              for t in bundle.model.graph.initializer if t.name in params or t.name in set(m.get("buffers", []))}
    loaded = align.match(values, described["parameters"], described.get("layouts", {}), mapping)
    weights = [align.transform(bundle.values[x.bundle], x.how, x.port_shape).astype(
        np.asarray(bundle.values[x.bundle]).dtype) for x in loaded]
    inputs = [np.asarray(bundle.values[i["name"]]) for i in m["inputs"]]
    # a penalty takes the gradient of the float model inputs: with none (token ids), it is the plain loss,
    # and the step is run and judged as one
    plain = loss == "dot" or not any(is_float(a.dtype) for a in inputs)
    request = chain_request(bundle, "bundle" if plain else "grad-penalty")
    return _Step(loaded, weights, inputs, plain, request, described, values)


def _recorded_note(bundle, described):
    """What the report says of the random values a training-mode bundle recorded, or None."""
    recorded = _recorded(bundle)
    if bundle.manifest.get("mode") != "train" or not recorded:
        return None
    which = f"{len(recorded)} random value(s) ({', '.join(list(recorded)[:3])}{', ...' if len(recorded) > 3 else ''})"
    return (f"the bundle's {which} were handed to the port's factory (recorded=)" if described.get("took_recorded")
            else f"the bundle recorded {which}: a port that draws its own differs from torch there; a factory with "
                 f"a `recorded` keyword gets them")


def _run_step(bundle, base, step, loss, timeout, pool, backend):
    """(reply, {section: {name: array}}) of the port's step in its framework's worker."""
    m = bundle.manifest
    seeds = step.seeds
    msg = {"kind": "port-run", **base, "weights": [x.port for x in step.loaded], "loss": "dot" if step.plain else loss,
           "train": m.get("mode") == "train", "counts": [len(step.weights), len(step.inputs), len(seeds)]}
    reply, out = _ask(pool, backend, msg, step.weights + step.inputs + seeds, timeout)
    got = {}
    for (section, name), a in zip(reply["names"], out):
        got.setdefault(section, {})[name] = a
    outputs = [got.get("outputs", {}).get(str(k)) for k in range(len(got.get("outputs", {})))]
    graph_outputs = m["outputs"]
    if len(outputs) != len(graph_outputs) or any(np.shape(a) != tuple(bundle.values.spec(o)[1])
                                                 for a, o in zip(outputs, graph_outputs)):
        raise IrtraceError(f"the port returned {len(outputs)} output(s) of shape(s) "
                           f"{[list(np.shape(a)) for a in outputs]}; the bundle's model returns {len(graph_outputs)} of "
                           f"shape(s) {[list(bundle.values.spec(o)[1]) for o in graph_outputs]}")
    return reply, got, outputs


class _Judge:
    """Rows of the port's numbers against the reference's chained run of the bundle (and float64's)."""

    def __init__(self, pool, request, timeout):
        status, ref_reply, self.ref_vals, self.ref_grads = run_chain(pool, REFERENCE, request, timeout)
        if status != Status.OK:
            raise IrtraceError(f"the reference could not run the bundle chained: {ref_reply.get('message', '')}")
        self.o_vals, self.o_grads = {}, {}
        if ORACLE in pool.available():
            _, _, self.o_vals, self.o_grads = run_chain(pool, ORACLE, request, timeout)
        self.rounding = ChainRounding(pool, request, timeout)
        self.policy = compare.Policy()

    def row(self, kind, name, label, actual):
        """The row of `actual` against the reference's `kind` ("values" or "grads") of value `name`, or
        None where the reference has none."""
        reference = (self.ref_vals if kind == "values" else self.ref_grads).get(name)
        oracle = (self.o_vals if kind == "values" else self.o_grads).get(name)
        if reference is None:
            return None
        if np.shape(actual) != np.shape(reference):
            return _row(label, name, compare.SHAPE_MISMATCH, None,
                        {"message": f"shape {list(np.shape(actual))} in the port, {list(np.shape(reference))} in the bundle"})
        verdict, met, details = self.rounding.judge(kind, name, np.asarray(actual), np.asarray(reference), oracle,
                                                    self.policy)
        return _row(label, name, verdict, met, details)


def _check(bundle, factory, backend, path, mapping, loss, timeout, pool):
    m = bundle.manifest
    base = {"factory": factory, "path": path}
    step = _plan(bundle, base, backend, mapping, loss, timeout, pool)
    report = PortReport(str(bundle.path), backend, factory, loss, m.get("mode", "eval"))
    note = _recorded_note(bundle, step.described)
    if note:
        report.notes.append(note)
    try:
        reply, got, outputs = _run_step(bundle, base, step, loss, timeout, pool, backend)
    except PortFailed as e:
        report.outputs.append(_row("(the step)", "", e.verdict, None, {"message": e.message,
                                                                       **({"at": e.at} if e.at else {})}))
        report.notes.append(f"the port did not finish its step: {e.message}")
        return report
    report.versions = pool.get(backend).hello.get("versions", {}) if pool.get(backend).hello else {}
    report.notes += reply.get("notes", [])
    judge = _Judge(pool, step.request, timeout)
    for o, a in zip(m["outputs"], outputs):
        report.outputs.append(judge.row("values", o, o, a))
    _judge_modules(bundle, report, judge, got, mapping, step.plain, loss)
    _judge_parameters(report, judge, got.get("params", {}), step, backend)
    _judge_state(bundle, report, judge, got.get("buffers", {}), step.loaded)
    if not step.plain and any(r["verdict"] in compare.FAILING for r in report.parameters):
        report.penalty_dropped = _plain_loss_gradients(bundle, pool, step.loaded, got.get("params", {}), timeout)
        if report.penalty_dropped:
            report.notes.append("the port's parameter gradients are those of the plain loss (no penalty term): its step "
                                "drops the gradient penalty (an input detached, or a gradient taken without "
                                "create_graph / outside the outer GradManager)")
    report.first_forward = next((r for r in report.modules if r["verdict"] in compare.FAILING), None)
    report.first_backward = next((r for r in report.grads if r["verdict"] in compare.FAILING), None)
    # what the step showed of a module (a padding that depends on its input's size, a padding layer before it)
    # completes what its description said
    seen = reply.get("attributes") or {}
    report.port_modules = [{**mod, "attributes": {**(mod.get("attributes") or {}), **seen.get(mod["path"], {})}}
                           for mod in step.described.get("modules", [])]
    return report


def _judge_modules(bundle, report, judge, got, mapping, plain, loss):
    """Each aligned module's output, and under the plain loss its output's gradient, in report.modules
    and report.grads (backward order)."""
    m = bundle.manifest
    scopes = align.module_values(bundle.model, m.get("nodes", {}), set(m.get("state_outputs", {}).values()))
    captured = {mapping.bundle_name(p): a for p, a in got.get("modules", {}).items()}
    grads = {mapping.bundle_name(p): a for p, a in got.get("grads", {}).items()}
    report.unaligned = sorted(p for p in got.get("modules", {}) if mapping.bundle_name(p) not in scopes)
    for scope, value in scopes.items():
        if scope in captured:
            row = judge.row("values", value, scope, captured[scope])
            if row is not None:
                report.modules.append(row)
    if not plain:
        report.notes.append("module output gradients are not compared under a gradient penalty: there they depend on "
                            "which tensors each framework's backward formulas keep, not on the model")
        return
    if loss != "dot":
        report.plain_loss = True
        report.notes.append("the model has no float input for a gradient penalty to differentiate: its loss is "
                            "the plain one, and module output gradients are compared as under it")
    for scope, value in reversed(list(scopes.items())):
        if scope in grads:
            row = judge.row("grads", value, scope, grads[scope])
            if row is not None:
                report.grads.append(row)


def _judge_parameters(report, judge, port_grads, step, backend):
    """Every parameter torch trains: the port's gradient judged, or an ERROR saying why there is none."""
    for x in step.loaded:
        if x.kind != "parameter":
            if step.values[x.bundle][0] == "parameter":  # torch trains it, the port does not: never dropped silently
                report.parameters.append(_row(x.bundle, x.bundle, compare.ERROR, None, {
                    "message": f"the port does not train {x.port} (its framework holds it as a constant: "
                               f"stop_gradient / requires_grad off); torch does"}))
            continue
        if x.port not in port_grads:
            report.parameters.append(_row(x.bundle, x.bundle, compare.ERROR, None,
                                          {"message": f"{backend} computed no gradient for {x.port}"}))
            continue
        g = align.untransform(port_grads[x.port], x.how, x.bundle_shape)
        row = judge.row("grads", x.bundle, x.bundle, g)
        if row is not None:
            report.parameters.append(row)
    report.parameters.sort(key=lambda r: (-compare.SEVERITY.get(r["verdict"], 0), -(r["max_rel"] or 0.0), r["name"]))


def _judge_state(bundle, report, judge, buffers, loaded):
    """The port's buffers after its step (running statistics) against torch's, by state_dict key."""
    by_port = {x.bundle: x for x in loaded if x.kind == "buffer"}
    for key, value in bundle.manifest.get("state_outputs", {}).items():
        x = by_port.get(key)
        if x is None or x.port not in buffers:
            continue
        after = align.untransform(buffers[x.port], x.how, x.bundle_shape)
        row = judge.row("values", value, key, after)
        if row is not None:
            row["message"] = row["message"] or _estimator(bundle, key, after, judge.ref_vals.get(value))
            report.state.append(row)


def _plain_loss_gradients(bundle, pool, loaded, port_grads, timeout):
    """Whether the port's parameter gradients are torch's for the plain (dot) loss: a step that dropped
    the penalty term."""
    if (bundle.manifest.get("loss") or {}).get("kind") == "grad-penalty":
        return False
    status, _, _, plain = run_chain(pool, REFERENCE, chain_request(bundle, "bundle"), timeout)
    if status != Status.OK:
        return False
    judged = 0
    for x in loaded:
        if x.kind == "parameter" and x.port in port_grads and x.bundle in plain:
            verdict, _, _ = compare.judge(align.untransform(port_grads[x.port], x.how, x.bundle_shape), plain[x.bundle],
                                          None, compare.Policy(rtol=1e-3, atol=1e-5))
            if verdict in compare.FAILING:
                return False
            judged += 1
    return judged > 0


def _row(name, value, verdict, met, details):
    return {"name": name, "value": value, "verdict": str(verdict),
            "max_abs": met.max_abs if met is not None else None, "max_rel": met.max_rel if met is not None else None,
            "allowed": details.get("allowed"), "closer_to_oracle": details.get("closer_to_oracle"),
            "message": details.get("message", ""), **({"at": details["at"]} if details.get("at") else {})}


def _estimator(bundle, key, port_after, ref_after):
    """For a running variance that differs: whether the port updates it with the other estimator of the
    batch variance (the factor n/(n-1) between the unbiased and the biased one, exactly)."""
    if not key.endswith("running_var") or ref_after is None:
        return ""
    node = next((n for n in bundle.model.graph.node if key in n.input), None)
    if node is None:
        return ""
    attrs = {a.name: a for a in node.attribute}
    if "momentum" not in attrs:
        return ""
    keep = attrs["momentum"].f
    old = np.asarray(bundle.values[key], np.float64)
    x = np.asarray(bundle.values[node.input[0]])
    n = x.size // x.shape[1]
    if keep >= 1.0 or n < 2:
        return ""
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = (np.asarray(port_after, np.float64) - keep * old) / (np.asarray(ref_after, np.float64) - keep * old)
    ratio = float(np.median(ratio[np.isfinite(ratio)])) if np.isfinite(ratio).any() else float("nan")
    for factor, words in (((n - 1) / n, "the biased (population) variance, where torch updates with the unbiased"),
                          (n / (n - 1), "the unbiased variance, where the bundle's node updates with the biased")):
        if abs(ratio - factor) <= 1e-3 * factor:
            return (f"the port's batch variance is {ratio:.6g} × the bundle's = {'(n-1)/n' if factor < 1 else 'n/(n-1)'} "
                    f"exactly (n = {n} values per channel): it updates running_var with {words}")
    return ""


def explain(bundle, report, backend, timeout):
    """The cross-reference of the first divergence (forward first, then backward, then the worst parameter
    gradient or running stat): the isolated replay, on the same backend, of the ops that can explain it
    says whether one of them is the framework's fault; if none is, the port's own code of the module is,
    and what differs in its attributes is listed. Those ops: a module's output comes from the ops inside it
    (fwd); its output gradient from the backward of the ops downstream of it (fwd, vjp); a parameter
    gradient from the ops of its module and downstream (fwd, vjp), under a gradient penalty from the
    double backward of every op (vjp2 too); a running stat from its module's forward."""
    sources = bundle.manifest.get("nodes", {})
    model = bundle.model
    penalty = report.loss == "grad-penalty" and not report.plain_loss
    step = next((r for r in report.outputs if r["name"] in ("(the step)", "(the port)")), None)
    if step is not None:
        return _explain_failed_step(bundle, report, backend, step, timeout)
    if report.first_forward is not None:
        path, where = report.first_forward["name"], "forward"
        nodes = align.nodes_in(model, sources, path)
    elif report.first_backward is not None:
        path, where = report.first_backward["name"], "backward"
        nodes = align.nodes_in(model, sources, path) + _downstream(model, align.nodes_in(model, sources, path))
    else:
        bad = [r for r in report.parameters + report.state if r["verdict"] in compare.FAILING]
        if not bad:
            return None
        path = bad[0]["name"].rpartition(".")[0]
        where = "parameter gradients" if bad[0] in report.parameters else "running stats"
        inside = align.nodes_in(model, sources, path)
        nodes = inside if where == "running stats" else \
            ([n.name for n in model.graph.node] if penalty else inside + _downstream(model, inside))
    # the modes that can explain it: a forward value or a running stat comes from the ops' forward, a gradient
    # from their forward and backward, a gradient under a penalty from their double backward too
    modes = ("fwd",) if where in ("forward", "running stats") else ("fwd", "vjp") + (("vjp2",) if penalty else ())
    out = {"module": path, "where": where, "nodes": len(nodes), "modes": list(modes), "culprits": [],
           "attributes": []}
    if nodes:
        # the port's step ran: an op that raises, crashes or hangs in isolation cannot be what it computed
        # differently (the port does not use it, or the step would have failed); the numbers can be
        out["culprits"] = [c for c in _isolated(bundle, backend, nodes, timeout)
                           if c["mode"] in modes and c["verdict"] in compare.NUMERIC_FAILURES]
    out["attributes"] = _attribute_differences(bundle, report, path, align.nodes_in(model, sources, path))
    if report.penalty_dropped:
        out["text"] = (f"the port's parameter gradients are the plain loss's: its step drops the gradient penalty "
                       f"(the penalised input detached, or its gradient taken outside the graph the outer backward "
                       f"sees)")
    elif out["culprits"]:
        c = out["culprits"][0]
        src = bundle.node_source(c["node"]).get("module")
        where_text = f"inside {path}" if c["node"] in align.nodes_in(model, sources, path) else \
            (f"in {src}, " if src else "") + ("through the gradient penalty's double backward" if penalty else
                                               f"downstream of {path}")
        out["text"] = (f"{where_text}, {backend}'s {c['op_type']} is wrong in {c['mode']} ({c['verdict']} at "
                       f"{c['node']}, finding {c['id']}" + (f"; workaround that matches: {', '.join(c['workarounds'])}"
                                                            if c['workarounds'] else "") +
                       "): the framework's fault; write its repro with `irtrace repro`"
                       + (f"; and the port's {path} differs from the bundle's: " + "; ".join(out["attributes"])
                          if out["attributes"] else ""))
    else:
        out["text"] = (f"every op that can explain it ({len(nodes)} around {path}, {', '.join(modes)}) matches in "
                       f"isolation on {backend}: the difference is in the port's code of {path}"
                       + (": " + "; ".join(out["attributes"]) if out["attributes"] else ""))
    return out


def _explain_failed_step(bundle, report, backend, step, timeout):
    """A step that raised, crashed or hung: the isolated findings of the backend, anywhere in the bundle,
    that fail the same way (for an ERROR, the same message once numbers and names are taken out)."""
    modes = ("fwd", "vjp") + (("vjp2",) if report.loss == "grad-penalty" and not report.plain_loss else ())
    said = _failure(step["message"].split(" in the port: ", 1)[-1])
    found = [c for c in _isolated(bundle, backend, [n.name for n in bundle.model.graph.node], timeout)
             if c["mode"] in modes and c["verdict"] == step["verdict"]
             and (step["verdict"] != compare.ERROR or _failure(c["message"]) == said or said in _failure(c["message"]))]
    out = {"module": None, "where": "the step", "nodes": len(bundle.model.graph.node), "modes": list(modes),
           "culprits": found, "attributes": []}
    if found:
        c = found[0]
        src = bundle.node_source(c["node"])
        out["module"] = src.get("module")
        out["text"] = (f"the port's step failed ({step['verdict']}); in isolation {backend}'s {c['op_type']} fails the "
                       f"same way in {c['mode']} (first at {c['node']}" + (f", {src['module']}" if src.get("module")
                                                                          else "") + f", finding {c['id']}"
                       + (f"; workaround that matches: {', '.join(c['workarounds'])}" if c["workarounds"] else "")
                       + "): the framework's fault; write its repro with `irtrace repro`")
    else:
        # the port called something the bundle's graph does not make (paddle.flatten where the graph has a
        # Reshape): irtrace cannot tell the framework's fault from the port's there, and says so
        at = step.get("at")
        out["text"] = (f"the port's step failed ({step['verdict']}) and no op of the bundle fails that way in isolation on "
                       f"{backend} ({', '.join(modes)}): the failing call is one the port makes and the bundle's graph "
                       f"does not" + (f" (raised at {at})" if at else " (raised in the framework's backward of the "
                                      "port's step)") + "; write it with the ops the bundle's nodes use to tell whether "
                       f"{backend} or the port's code is at fault")
    return out


def _failure(message):
    """A failure's text as its cause: normalised (findings.normalised: numbers and names out, 200 characters), without
    the raising file:line a replay worker adds and the "(caused by ...)" it adds for a chained error (the port's own
    step has neither: with the tail, TensorFlow's grouped-conv message says its "doesn't" twice, and normalised took
    the text between the two apostrophes for a quoted name), from the whole message (one cut at 200 characters
    before normalising is no longer a prefix of the other)."""
    from irtrace.report.findings import normalised
    text = re.sub(r"\s*\([\w./-]+\.py:\d+\)\s*$", "", (message or "").strip().split("\n")[0])
    return normalised(re.sub(r"\s*\(caused by [A-Za-z_][\w.]*: .*$", "", text))


def _downstream(model, names):
    """The nodes that read, directly or not, what `names` make (in graph order)."""
    from irtrace.ir.graph import dag
    import networkx as nx
    g = dag(node_specs(model))
    below = set()
    for n in names:
        if n in g:
            below |= nx.descendants(g, n)
    return [n.name for n in model.graph.node if n.name in below and n.name not in names]


def _isolated(bundle, backend, nodes, timeout):
    """The failing findings of `backend` on `nodes` replayed alone (every mode; cached answers reused)."""
    from irtrace.replay.api import ReplayOptions, run
    from irtrace.report.findings import group
    regex = "^(" + "|".join(re.escape(n) for n in nodes) + ")$"
    try:
        outcome = run(bundle, ReplayOptions(backends=(REFERENCE, backend), nodes=regex, timeout=min(timeout, 120.0)))
    except IrtraceError as e:
        log.info("no isolated replay of %s: %s", nodes, e)
        return []
    tried = outcome.replay.workarounds.get(backend, {})
    index = {n.name: n.index for n in outcome.replay.nodes}
    out = []
    for f in sorted(group(outcome.replay), key=lambda f: index.get(f.first_node, 0)):
        if f.backend != backend:
            continue
        names = sorted({w["name"] for node in f.nodes for w in tried.get(node, []) if w.get("matches")})
        out.append({"id": f.id, "op_type": f.op_type, "mode": f.mode, "verdict": str(f.verdict),
                    "node": f.first_node, "workarounds": names, "message": f.message})
    return out


def _attribute_differences(bundle, report, path, nodes):
    """The port module's attributes (as its driver reports them, in ONNX's words) that differ from the
    bundle's nodes of the same module."""
    port = next((mod for mod in report.port_modules if mod["path"] == path), None)
    if port is None:
        return []
    specs = {s.name: s for s in bundle.specs}
    mine = port.get("attributes") or {}
    out = []
    for name in nodes:
        spec = specs.get(name)
        if spec is None:
            continue
        attrs = dict(spec.attrs)
        if "pads" in attrs:
            attrs["pads"] = _effective_pads(bundle, specs, spec)
        for key in COMPARED:
            if key in mine and key in attrs:
                theirs = attrs[key]
                theirs = theirs.tolist() if hasattr(theirs, "tolist") else theirs
                if not _same(mine[key], theirs):
                    out.append(f"{key} {_shown(mine[key])} in the port vs {_shown(theirs)} in the bundle's {spec.op_type} "
                               f"({name})")
    return out


def _effective_pads(bundle, specs, spec):
    """A conv's or pool's pads with those of a zero Pad that feeds only it added (TensorFlow's 'SAME' written
    as F.pad then an unpadded conv is one padding to a port's module)."""
    pads = [int(p) for p in spec.attrs["pads"]]
    producer = next((s for s in specs.values() if spec.inputs[0] in s.outputs), None)
    if producer is None or producer.op_type != "Pad" or producer.attrs.get("mode", "constant") not in ("constant", b"constant"):
        return pads
    # the Pad's readers that read its values (CastLike's target, Shape read only its type or shape)
    readers = [s for s in specs.values() if any(i == spec.inputs[0] and k not in nondifferentiable_inputs(
        s.op_type, s.domain, s.opset, len(s.inputs)) for k, i in enumerate(s.inputs)) and s.op_type != "Shape"]
    known = {t.name: t for t in bundle.model.graph.initializer}

    def constant(k):  # an initializer input of the Pad (small ints are kept in graph.onnx, not the value store)
        name = producer.inputs[k] if len(producer.inputs) > k else ""
        return initializer_array(known[name], bundle.values) if name in known else \
            (np.asarray(bundle.values[name]) if name and name in bundle.values else None)
    widths, value = constant(1), constant(2)
    if len(readers) != 1 or widths is None or (value is not None and np.any(np.asarray(value) != 0)):
        return pads
    w = [int(v) for v in np.asarray(widths).reshape(-1)]
    r, n = len(pads) // 2, len(w) // 2
    if n < r:
        return pads
    begins, ends = w[n - r:n], w[2 * n - r:]
    return [p + b for p, b in zip(pads[:r], begins)] + [p + e for p, e in zip(pads[r:], ends)]


def _shown(v):
    """An attribute as a reader wrote it: a float to float32's precision (the bundle's 1e-5 is stored as
    9.999999747378752e-06)."""
    return f"{v:.7g}" if isinstance(v, float) else v


def _same(a, b):
    if isinstance(a, float) or isinstance(b, float):
        try:
            return abs(float(a) - float(b)) <= 1e-6 * max(1.0, abs(float(b)))
        except (TypeError, ValueError):
            return False
    return list(a) == list(b) if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)) else a == b
