"""Chained replay: each backend runs the whole graph from the model inputs, fed by its own
upstream values, then backpropagates the bundle's loss (or a gradient penalty) with its own
autograd. Errors per value against the reference (torch, chained the same way) and the
float64 chain, linked to the isolated verdicts: where chained error first exceeds
tolerance at node X, either X itself is divergent in isolation (the culprit) or the error
accumulated upstream (the upstream nodes with the largest isolated error are named)."""
import logging
import time
from dataclasses import dataclass, field

import networkx as nx
import numpy as np

from backends._runtime.wire import Status, is_float

from irtrace import compare
from irtrace.errors import IrtraceError
from irtrace.ir.graph import dag, gradient_path, gradient_sources, shape_arithmetic
from irtrace.replay.call import from_bundle, proto_text
from irtrace.replay.execute import answer_of
from irtrace.replay.judge import magnitudes, model_call, wants_model_for
from irtrace.replay.plan import ORACLE, REFERENCE
from irtrace.replay.worker import WorkerFailed
from irtrace.replay.workarounds import applied
from irtrace.store import grad_name, initializers, seed_name

log = logging.getLogger(__name__)
LOSSES = ("bundle", "grad-penalty")


@dataclass
class ChainedRun:
    backend: str
    status: str                     # ok / ERROR / UNSUPPORTED / CRASH / TIMEOUT
    message: str = ""
    time_s: float = None
    values: list = field(default_factory=list)       # per value: dict (fwd), in topological order
    grads: list = field(default_factory=list)        # per value: dict (bwd)
    parameters: list = field(default_factory=list)   # per parameter gradient, worst first
    state: list = field(default_factory=list)        # updated running stats
    first_divergence: dict = None
    first_grad_divergence: dict = None
    substituted: list = field(default_factory=list)  # nodes that failed: {"node", "verdict", "message", "outputs"}
    # a run that crashed or hung: where (locate_crash), and that node's isolated verdicts {"mode": verdict}
    crashed_at: dict = None
    notes: list = field(default_factory=list)        # what was not judged, and why
    # alternatives run in place of ops (--workarounds): {"node", "op_type", "name"}, in topological order
    workarounds: list = field(default_factory=list)


def _graph_request(specs, protos, feeds, outputs, penalty, workarounds=None):
    msg = {"kind": "graph", "specs": [{**s.to_json(), "proto": protos[s.name]} for s in specs],
           "feeds": list(feeds), "outputs": outputs, "penalty": penalty}
    if workarounds:
        msg["workarounds"] = dict(workarounds)
    return msg


def _run(pool, backend, msg, arrays, timeout):
    """(status, reply, values, grads) of one chained run. A run that crashes or hangs says where in its
    reply ("at": {"phase": "forward" | "backward", "node"}), from the progress its worker wrote."""
    import tempfile
    with tempfile.NamedTemporaryFile("r", prefix="irtrace-progress-", suffix=".txt") as progress:
        try:
            reply, out = pool.get(backend).call({**msg, "progress": progress.name}, arrays, timeout)
        except WorkerFailed as e:
            return compare.Verdict.of(e.status), {"message": e.message, "at": _where(progress.read())}, {}, {}
    if reply["status"] != Status.OK:
        return compare.Verdict.of(Status(reply["status"])), reply, {}, {}
    nv = len(reply["values"])
    return Status.OK, reply, dict(zip(reply["values"], out[:nv])), dict(zip(reply["grads"], out[nv:]))


def _where(progress):
    """Where a chained run stopped, from its progress lines: in the forward of a node ("forward NODE" last),
    or in the backward, after the forward of every node ("done NODE" last); None before any node."""
    lines = progress.strip().splitlines()
    if not lines:
        return None
    phase, _, node = lines[-1].partition(" ")
    return {"phase": "forward" if phase == "forward" else "backward", "node": node}


def locate_crash(pool, backend, bundle, request, status, reply, timeout):
    """Which node a chained run that crashed or hung was in: {"node", "phase", "how", "runs"}. In the
    forward the progress says (how "progress"). In the backward (after every node's forward, where one call
    of the framework runs the whole graph's backward) a crash is bisected: the chain cut after k nodes,
    its loss the recorded cotangents of the values the cut leaves, run in fresh processes (`runs` of
    them): the node is the last one of the shortest cut that still crashes (how "bisection"). A hang in
    the backward is not bisected (each try would wait the timeout): node None."""
    at = reply.get("at")
    if at is None:
        return None
    if at["phase"] == "forward":
        return {"node": at["node"], "phase": "forward", "how": "progress", "runs": 0}
    if status != compare.CRASH:
        return {"node": None, "phase": "backward", "how": "progress", "runs": 0}
    n = len(request.specs)
    runs = [0]

    def crashes(k):
        runs[0] += 1
        msg, arrays = _prefix(bundle, request, k)
        return _run(pool, backend, msg, arrays, timeout)[0] == compare.CRASH
    if not crashes(n):
        return {"node": None, "phase": "backward", "how": "bisection", "runs": runs[0],
                "message": "the crash does not happen with the loss cut at the graph's outputs (its seeds the "
                           "recorded cotangents): not located"}
    lo, hi = 0, n  # the cut after lo nodes does not crash (none: nothing runs), after hi it does
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if crashes(mid) else (mid, hi)
    return {"node": request.specs[hi - 1].name, "phase": "backward", "how": "bisection", "runs": runs[0]}


def _prefix(bundle, request, k):
    """(message, arrays) of the chain cut after its first k nodes: the same feeds and penalty, the loss
    summed over the values the cut leaves (made before it, read after it or a graph output) with their
    recorded cotangents as seeds."""
    specs = request.specs[:k]
    later = {i for s in request.specs[k:] for i in s.inputs if i} | set(request.message["outputs"])
    made = [o for s in specs for o in s.outputs if o]
    frontier = [o for o in made if o in later and grad_name(o) in bundle.values]
    msg = {**request.message, "specs": request.message["specs"][:k], "outputs": frontier,
           "shapes": {o: v for o, v in request.message.get("shapes", {}).items() if o in set(made)}}
    cots = [np.asarray(bundle.values[grad_name(o)]) for o in frontier]
    return msg, list(request.feeds.values()) + cots


def _entry(name, node, index, verdict, m, details, kind):
    return {"value": name, "node": node, "index": index, "kind": kind, "verdict": verdict,
            "max_abs": m.max_abs if m else None, "max_rel": m.max_rel if m else None,
            "allowed": details.get("allowed"), "float32_rounding": details.get("float32_rounding"),
            "closer_to_oracle": details.get("closer_to_oracle"), "message": details.get("message", "")}


CHAIN_MCA_SAMPLES = 2  # Monte Carlo arithmetic runs of the whole float64 chain (backends/oracle/rounding.py)


class ChainRounding:
    """How far float32 rounding of the whole chain can move each value and gradient: asked of the
    oracle once per chained replay, the first time a verdict would be DIVERGENT without it (a chain
    accumulates rounding that no single op's model sees: a scalar's gradient summed over a network,
    a cotangent of 1e-28 behind a mask). The same for every backend."""

    def __init__(self, pool, request, timeout):
        self.pool, self.request, self.timeout, self.got = pool, request, timeout, None

    def get(self, kind, name):
        if self.got is None:
            msg = {**self.request.message, "rounding": CHAIN_MCA_SAMPLES}
            status, reply, vals, grads = _run(self.pool, ORACLE, msg, self.request.arrays, self.timeout)
            if status != Status.OK:
                log.info("no float32 rounding estimate of the chain: %s", reply.get("message", status))
            self.got = (vals, grads)
        return self.got[0 if kind == "values" else 1].get(name)

    def judge(self, kind, name, actual, ref, oracle, policy):
        """compare.judge, and again with the chain's rounding estimate where it would be DIVERGENT."""
        verdict, met, details = compare.judge(actual, ref, oracle, policy)
        if verdict == compare.DIVERGENT and oracle is not None and not policy.fixed:
            moved = self.get(kind, name)
            if moved is not None:
                verdict, met, details = compare.judge(actual, ref, oracle, policy, spread=moved)
        return verdict, met, details


@dataclass(frozen=True)
class ChainRequest:
    """One chained run's request, the same for every backend: the graph, its feeds (model inputs and
    initializers), the loss's output seeds, and the penalty inputs (empty: the plain loss)."""
    message: dict
    arrays: list
    loss: str
    penalty: tuple
    feeds: dict
    specs: list
    workarounds: dict = None   # node name -> the alternative run in place of its op


def chain_request(bundle, loss="bundle", substituted=(), workarounds=None):
    """The ChainRequest of `bundle` for `loss` ("bundle": the bundle's own loss, a gradient penalty
    when it was exported with one; "grad-penalty": the penalty over every float model input).
    `substituted`: nodes that failed on this backend: their recorded values are fed instead.
    `workarounds`: node name -> an alternative formulation the backend runs in place of its op."""
    if loss not in LOSSES:
        raise IrtraceError(f"unknown chained loss {loss!r}; choose from {', '.join(LOSSES)}")
    model = bundle.model
    # shape arithmetic is what a port computes in Python: every backend gets its recorded values
    shapes_only = shape_arithmetic(model, bundle.state) | set(substituted)
    specs = [s for s in bundle.specs if s.name not in shapes_only]
    protos = {n.name: proto_text(n) for n in model.graph.node}
    m = bundle.manifest
    feeds = dict(initializers(model, bundle.values))
    for i in model.graph.input:
        feeds[i.name] = np.asarray(bundle.values[i.name])
    for n in model.graph.node:
        if n.name in shapes_only:
            feeds.update({o: np.asarray(bundle.values[o]) for o in n.output if o and o in bundle.values})
    outputs = m["outputs"]

    def seed(o):  # the loss's output seed c_o (older bundles: the output cotangent, the same for "dot")
        for k in (seed_name(o), grad_name(o)):
            if k in bundle.values:
                return np.asarray(bundle.values[k])
        return None
    cots = [seed(o) for o in outputs]
    if loss == "grad-penalty" or m["loss"].get("kind") == "grad-penalty":
        loss = "grad-penalty"
        penalty = [i.name for i in model.graph.input if is_float(feeds[i.name].dtype)]
        if m["loss"].get("kind") == "sum":
            cots = [np.ones_like(c) if c is not None else None for c in cots]
    else:
        penalty = []
    workarounds = {n: w for n, w in (workarounds or {}).items() if n not in shapes_only}
    msg = _graph_request(specs, protos, feeds, outputs, penalty, workarounds)
    msg["shapes"] = {o: list(bundle.values.spec(o)[1]) for s in specs for o in s.outputs if o and o in bundle.values}
    # what requires grad: the model's parameters and float inputs, as in a training step; never a buffer, a
    # constant the exporter materialised or a recorded value fed in place of shape arithmetic
    declared = m.get("differentiable")
    sources = set(declared) if declared is not None else gradient_sources(model)
    msg["leaves"] = sorted(k for k in feeds if k in sources)
    return ChainRequest(msg, list(feeds.values()) + cots, loss, tuple(penalty), feeds, specs, workarounds or None)


def run_chain(pool, backend, request, timeout=600.0):
    """(status, reply, values, grads) of one backend's chained run: status Status.OK or a failing verdict;
    values and grads map value names to arrays (grads: d loss / d value)."""
    return _run(pool, backend, request.message, request.arrays, timeout)


def chained_replay(bundle, backends, pool, loss="bundle", timeout=600.0, policy=compare.Policy(), isolated=None,
                   workarounds=False):
    """(chained runs of `backends`, the loss used); `isolated`: the isolated Replay, to link verdicts.
    loss="bundle" uses the bundle's own loss (a gradient penalty when it was exported with one).
    `workarounds`: after a backend's run, run it again with every workaround the isolated replay
    verified on a node (irtrace/replay/workarounds.py) in place of that node's op (ChainedRun.workarounds
    says which), when there is one."""
    request = chain_request(bundle, loss)
    chain = _Chain(bundle, pool, request, timeout, policy, isolated)
    runs = []
    for backend in backends:
        runs.append(chain.run(backend, request))
        chosen = applied(isolated, backend) if workarounds and isolated is not None else {}
        if chosen:  # the port with every verified workaround in place of its failing op
            run = chain.run(backend, chain_request(bundle, request.loss, workarounds=chosen))
            run.workarounds = [{"node": n, "op_type": chain.op_of[n], "name": chosen[n]}
                               for n in sorted(chosen, key=chain.index.get)]
            runs.append(run)
    return runs, request.loss


class _Chain:
    """A bundle's chained replay: the reference's run of the whole graph (and float64's) that every
    backend's run is judged against, and what judging needs of the graph."""

    def __init__(self, bundle, pool, request, timeout, policy, isolated):
        self.bundle, self.pool, self.timeout, self.policy, self.isolated = bundle, pool, timeout, policy, isolated
        self.penalty, self.specs = request.penalty, request.specs
        m = bundle.manifest
        ref_status, ref_reply, self.ref_vals, self.ref_grads = run_chain(pool, REFERENCE, request, timeout)
        if ref_status != Status.OK:
            raise IrtraceError(f"the reference could not run the graph chained: {ref_reply.get('message', '')}")
        _, _, self.o_vals, self.o_grads = run_chain(pool, ORACLE, request, timeout) \
            if ORACLE in pool.available() else (None, {}, {}, {})
        declared = m.get("differentiable")
        self.path = gradient_path(bundle.model, declared if declared is not None else gradient_sources(bundle.model))
        specs = list(bundle.specs)
        self.index = {s.name: i for i, s in enumerate(specs)}  # the report's node indices
        self.op_of = {s.name: s.op_type for s in specs}
        self.producer = {o: (self.index[s.name], s.name) for s in request.specs for o in s.outputs if o}
        self.order = [o for s in request.specs for o in s.outputs if o]
        self.params = [p for p in m.get("parameters", []) if p in request.feeds]
        self.state = m.get("state_outputs", {})
        self.rounding = ChainRounding(pool, request, timeout)
        self.graph = dag(specs)
        self.nodes = {s.name: s for s in request.specs}
        self.protos = {s["name"]: s["proto"] for s in request.message["specs"]}
        self.models = {}  # value -> the rounding-error model's size array of the op that makes it (or None)

    def judge(self, kind, name, actual):
        """(verdict, metrics, details) of a backend's value or gradient `name` against the reference's: as
        compare.judge, then with the chain's Monte Carlo rounding, then, for a value an accumulating op makes, with
        that op's rounding-error model too, as its isolated replay judges it (a batch mean of near-cancelling
        terms, a running mean, is off by its terms' rounding, not its own size: the chain's two Monte Carlo runs
        round each op's result, not the sum inside it)."""
        ref, oracle = (self.ref_vals, self.o_vals) if kind == "values" else (self.ref_grads, self.o_grads)
        verdict, met, details = self.rounding.judge(kind, name, actual, ref[name], oracle.get(name), self.policy)
        if verdict == compare.DIVERGENT and kind == "values" and oracle.get(name) is not None and not self.policy.fixed:
            size = self._model(name)
            if size is not None:
                verdict, met, details = compare.judge(actual, ref[name], oracle[name], self.policy, model=size,
                                                      spread=self.rounding.get(kind, name))
        return verdict, met, details

    def _model(self, name):
        """The rounding-error model's size array of value `name`, asked of the oracle for the node that makes it, on
        its recorded inputs (the chain's reference values, to rounding), as judge_node asks it; None where the op
        does not accumulate, or the oracle cannot size it (said in the log)."""
        if name not in self.models:
            self.models[name] = None
            spec = self.nodes.get(self.producer[name][1])
            recorded = spec is not None and all(i in self.bundle.values for i in spec.inputs if i)
            call = from_bundle(self.bundle, spec, "fwd", self.protos.get(spec.name)) if recorded else None
            if call is not None and wants_model_for(call):
                ask = model_call(call)
                try:
                    reply, out = self.pool.get(ORACLE).call(ask.message(), ask.arrays(), self.timeout)
                    sizes = magnitudes(answer_of(reply, out))
                except WorkerFailed as e:
                    log.info("no rounding-error model of %s: %s", name, e.message)
                    sizes = None
                k = list(spec.outputs).index(name)
                self.models[name] = sizes[k] if sizes is not None and k < len(sizes) else None
        return self.models[name]

    def entry(self, name, verdict, met, details, kind):
        return _entry(name, self.producer[name][1], self.producer[name][0], verdict, met, details, kind)

    def run(self, backend, request):
        """One chained run of `backend` on `request`, judged."""
        t0 = time.perf_counter()
        status, reply, vals, grads, substituted, request = _run_substituting(self.pool, backend, self.bundle, request,
                                                                             self.timeout)
        run = ChainedRun(backend, status, reply.get("message", ""), time.perf_counter() - t0)
        run.substituted = substituted
        if status in (compare.CRASH, compare.TIMEOUT):
            self._locate(run, backend, request, status, reply)
        if status != Status.OK:  # every parameter still gets a row: what could not be computed, and why
            reason = f"the chained run ended in {status}: {run.message}"
            verdict = status if status in compare.VERDICTS else compare.ERROR
            run.parameters = [_entry(p, "", -1, verdict, None, {"message": reason}, "param_grad") for p in self.params]
            return run
        # what a substituted node cuts off: every value upstream of it gets part of its cotangent through it
        cut = {a for sub in substituted for a in _upstream_values(self.bundle.model, self.graph, sub["node"])}
        self._judge_values(run, vals, grads, substituted, cut)
        self._judge_parameters(run, backend, grads, substituted, cut)
        for key, value in self.state.items():
            if value in vals and value in self.ref_vals:
                verdict, met, ex = self.judge("values", value, vals[value])
                run.state.append({**self.entry(value, verdict, met, ex, "state"), "state_dict_key": key})
        run.first_divergence = _link(run.values, self.specs, self.isolated, backend, "fwd", "upstream")
        # a cotangent is made by the nodes downstream of its value; with a gradient penalty the
        # backward pass runs every op's double backward, so isolated vjp2 is the one to ask
        run.first_grad_divergence = _link(list(reversed(run.grads)), self.specs, self.isolated, backend,
                                          "vjp2" if self.penalty else "vjp",
                                          "everywhere" if self.penalty else "downstream")
        if any(p not in grads for p in self.params):
            for p in self.params:
                if p not in grads:
                    run.parameters.append(_entry(p, "", -1, compare.ERROR, None,
                                                 {"message": f"{backend} returned no gradient for {p}"}, "param_grad"))
        return run

    def _locate(self, run, backend, request, status, reply):
        """Where a chained run that crashed or hung stopped, with the node's isolated verdicts."""
        run.crashed_at = locate_crash(self.pool, backend, self.bundle, request, status, reply, self.timeout)
        node = (run.crashed_at or {}).get("node")
        if node:
            run.crashed_at["index"] = self.index.get(node)
            run.crashed_at["op_type"] = self.op_of.get(node)
            run.crashed_at["source"] = self.bundle.node_source(node)
            run.crashed_at["isolated"] = {m: str(r.verdict) for m in ("fwd", "vjp", "vjp2")
                                          if (r := _isolated(self.isolated, backend, node, m)) is not None}

    def _judge_values(self, run, vals, grads, substituted, cut):
        """Every value in graph order, and its cotangent (run.values, run.grads)."""
        unjudged = 0
        failed = {o: sub for sub in substituted for o in sub["outputs"]}
        for name in self.order:
            if name in failed:
                sub = failed[name]
                run.values.append(_entry(name, sub["node"], self.producer[name][0], sub["verdict"], None,
                                         {"message": f"{sub['message']} (its recorded value was fed downstream)"},
                                         "fwd"))
                continue
            if name in vals and name in self.ref_vals:
                run.values.append(self.entry(name, *self.judge("values", name, vals[name]), "fwd"))
            if name in cut and name in self.path:
                run.grads.append(self.entry(name, _cut_verdict(substituted), None,
                                            {"message": "part of its cotangent flows through a substituted node"},
                                            "bwd"))
            elif self.penalty and name in grads:
                unjudged += 1
            elif name in grads and name in self.ref_grads and name in self.path:
                run.grads.append(self.entry(name, *self.judge("grads", name, grads[name]), "bwd"))
        if unjudged:
            # under a gradient penalty d loss / d v of an intermediate v depends on which tensors each
            # framework's backward formulas read (the output of Sqrt, or its input), not on the model
            run.notes.append(f"{unjudged} cotangents of intermediate values not judged: under a gradient "
                             f"penalty they depend on what each framework's backward saves, not on the model")

    def _judge_parameters(self, run, backend, grads, substituted, cut):
        for p in self.params:
            if p in cut:
                nodes = ", ".join(sub["node"] for sub in substituted)
                run.parameters.append(_entry(p, "", -1, _cut_verdict(substituted), None, {
                    "message": f"not computed: its gradient passes through {nodes}, which failed on "
                               f"{backend} and was replaced by its recorded value"}, "param_grad"))
            elif p in grads and p in self.ref_grads:
                verdict, met, ex = self.judge("grads", p, grads[p])
                run.parameters.append(_entry(p, "", -1, verdict, met, ex, "param_grad"))
        run.parameters.sort(key=lambda e: (-compare.SEVERITY.get(e["verdict"], 0), -(e["max_rel"] or 0.0), e["value"]))


def _run_substituting(pool, backend, bundle, request, timeout, limit=20):
    """Run the chain; when a node fails (the framework raises, or a wrong shape), feed its recorded
    value downstream and run again, so everything else still gets a verdict. Returns (status,
    reply, values, grads, substituted: [{"node", "verdict", "message", "outputs"}], the request last run)."""
    substituted = []
    while True:
        status, reply, vals, grads = run_chain(pool, backend, request, timeout)
        node = reply.get("node")
        if status not in (compare.ERROR, compare.UNSUPPORTED) or not node or len(substituted) >= limit or \
                node in {sub["node"] for sub in substituted}:
            return status, reply, vals, grads, substituted, request
        outputs = [o for n in bundle.model.graph.node if n.name == node for o in n.output if o]
        verdict = compare.UNSUPPORTED if status == compare.UNSUPPORTED else \
            compare.SHAPE_MISMATCH if "has shape" in reply.get("message", "") else compare.ERROR
        substituted.append({"node": node, "verdict": verdict, "message": reply.get("message", ""), "outputs": outputs})
        log.info("chained %s: %s failed (%s); feeding its recorded value", backend, node, reply.get("message"))
        request = chain_request(bundle, request.loss, [sub["node"] for sub in substituted], request.workarounds)


def _cut_verdict(substituted):
    """The verdict of what substituted nodes cut off (a cotangent, a parameter's gradient): UNSUPPORTED where
    each of them is (a kernel the framework lacks for these dtypes), else ERROR."""
    return compare.UNSUPPORTED if all(sub["verdict"] == compare.UNSUPPORTED for sub in substituted) else compare.ERROR


def _upstream_values(model, graph, node):
    """Every value the node's inputs are computed from (its ancestors' outputs and the graph's
    inputs and initializers that feed them)."""
    nodes = {n.name: n for n in model.graph.node}
    names = (nx.ancestors(graph, node) if node in graph else set()) | {node}
    return {i for n in names for i in nodes[n].input if i}


def _isolated(isolated, backend, node, mode):
    if isolated is None:
        return None
    for n in isolated.nodes:
        if n.name == node:
            rs = [r for r in n.results if r.backend == backend and r.mode == mode]
            if not rs:
                return None
            worst = max(rs, key=lambda r: (compare.SEVERITY.get(r.verdict, 0), r.metrics.max_rel if r.metrics else 0))
            return worst
    return None


def _link(entries, specs, isolated, backend, mode, direction):
    """The first value whose chained error is a failing verdict, and what isolated replay says of
    the node(s) that make it: the culprit, or clean (error accumulated: the worst nodes on the way)."""
    first = next((e for e in entries if e["verdict"] in compare.FAILING), None)
    if first is None:
        return None
    node = first["node"]
    if direction == "downstream":  # the cotangent of a value comes from its consumers
        consumers = [s.name for s in specs if first["value"] in s.inputs]
        failing = [(c, _isolated(isolated, backend, c, mode)) for c in consumers]
        failing = [(c, r) for c, r in failing if r is not None and r.verdict in compare.FAILING]
        if failing:
            node = failing[0][0]
    own = _isolated(isolated, backend, node, mode)
    out = {**first, "isolated_verdict": own.verdict if own else None, "isolated_mode": mode}
    if own is not None and own.verdict in compare.FAILING:
        out["culprit"] = node
        out["explanation"] = f"{node} diverges in isolation too ({own.verdict}, max abs {own.metrics.max_abs:.3g})" \
            if own.metrics else f"{node} fails in isolation too ({own.verdict})"
        return out
    g = dag(specs)
    if direction == "everywhere":  # a gradient penalty's backward runs double backward through every op
        upstream = set(g.nodes) - {node}
    else:
        upstream = (nx.ancestors(g, node) if direction == "upstream" else nx.descendants(g, node)) if node in g else set()
    ranked = []
    for u in upstream:
        r = _isolated(isolated, backend, u, mode)
        if r is not None and (r.metrics is not None or r.verdict in compare.FAILING):
            ranked.append((compare.SEVERITY.get(r.verdict, 0), r.metrics.max_rel if r.metrics else 0.0, u, r.verdict))
    ranked.sort(reverse=True)
    ranked = [(rel, u, v) for _, rel, u, v in ranked]
    out["culprit"] = None
    out["upstream"] = [{"node": u, "max_rel": rel, "verdict": v} for rel, u, v in ranked[:3]]
    where = {"upstream": "upstream", "downstream": "downstream (where its cotangent comes from)",
             "everywhere": "through the double backward of the other ops"}[direction]
    out["explanation"] = (f"{node} is clean in isolation ({own.verdict if own else 'not replayed'}, {mode}): the "
                          f"error accumulated {where}" + (f"; largest isolated {mode} errors there: " +
                                                     ", ".join(f"{u['node']} ({u['verdict']}, {u['max_rel']:.2g})"
                                                               for u in out["upstream"]) if ranked else ""))
    return out
