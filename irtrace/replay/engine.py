"""The replay loop: every node alone on the bundle's recorded inputs, per backend and mode.

Reference results: fwd is the bundle's recorded value (torch, chained); vjp and vjp2 come
from the torch backend run on the same isolated inputs. The oracle (float64) arbitrates.
"""
import base64
import logging
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field, replace

import numpy as np

from irtrace import compare
from irtrace.errors import IrtraceError, suggest
from irtrace.ir.semantics import accumulates, kink_tag, nondifferentiable_inputs
from irtrace.ir.graph import shape_arithmetic
from irtrace.ir.spec import node_specs
from irtrace.replay import backends as registry
from backends._runtime.wire import Status
from irtrace.replay.batch import Batches
from irtrace.replay.cache import ResultCache
from irtrace.replay.call import bundle_paths, differentiated, from_bundle
from irtrace.replay.select import search_names
from irtrace.replay.worker import WorkerFailed, WorkerProxy, adopt, start_wait

log = logging.getLogger(__name__)
MODES = ("fwd", "vjp", "vjp2")
REFERENCE, ORACLE = registry.reference(), registry.oracle()  # declared roles (backends/*/declare.py)


@dataclass
class NodeReport:
    name: str
    op_type: str
    domain: str
    index: int
    source: dict
    results: list = field(default_factory=list)
    skipped: list = field(default_factory=list)   # {"mode", "output", "backend" (None: all), "reason"}

    def to_json(self):
        return {"name": self.name, "op_type": self.op_type, "domain": self.domain, "index": self.index,
                "source": self.source, "results": [r.to_json() for r in self.results], "skipped": self.skipped}

    @classmethod
    def from_json(cls, d):
        return cls(d["name"], d["op_type"], d["domain"], d["index"], d["source"],
                   [compare.Result.from_json(r) for r in d["results"]], d["skipped"])


@dataclass
class Replay:
    bundle: object
    backends: list
    modes: list
    nodes: list
    elapsed_s: float
    policy: compare.Policy
    versions: dict
    restarts: dict
    # backend -> node name -> what each of its alternative formulations gives there (replay/workarounds.py)
    workarounds: dict = field(default_factory=dict)


def parse_modes(text):
    modes = [m.strip() for m in text.split(",") if m.strip()]
    for m in modes:
        if m not in MODES:
            raise IrtraceError(f"unknown mode {m!r}; choose from {', '.join(MODES)}.{suggest(m, MODES)}")
    return modes


def _select(specs, nodes_regex, ops):
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


class Stopped(Exception):
    """The replay is being interrupted: no worker is started or restarted any more."""


class WorkerPool:
    """One worker per backend per thread (thread-local), all closed at the end. A worker that fails
    to start is not an error here: its calls fail with the reason (WorkerProxy.ensure)."""

    def __init__(self, start_timeout=None):
        self.local = threading.local()
        self.all = []
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.start_timeout = start_timeout  # seconds a worker's start may take (None: WorkerProxy's default)

    def _proxy(self, info):
        w = adopt(info) or WorkerProxy(info)
        if self.start_timeout is not None:
            w.start_timeout = self.start_timeout
        return w

    def _mine(self):
        d = getattr(self.local, "workers", None)
        if d is None:
            d = self.local.workers = {}
        return d

    def get(self, name):
        if self.stopping.is_set():
            raise Stopped()
        d = self._mine()
        if name not in d:
            info = registry.get(name)
            w = d[name] = self._proxy(info)
            with self.lock:
                self.all.append(w)
            _start(w)
        return d[name]

    def prestart(self, names):
        """Start this thread's workers for `names` concurrently (each start imports a framework)."""
        d = self._mine()
        workers = {n: self._proxy(registry.get(n)) for n in names if n not in d}
        d.update(workers)
        with self.lock:
            self.all.extend(workers.values())
        with ThreadPoolExecutor(max(1, len(workers))) as ex:
            list(ex.map(_start, workers.values()))

    def available(self):
        return {w.info.name for w in self.all} | {n for n, i in registry.BACKENDS.items() if i.unavailable() is None}

    def close(self):
        for w in self.all:
            w.ask_to_exit()
        for w in self.all:
            w.wait_exit()

    def kill(self):
        """Interrupted: no new worker starts, every running one is killed now (not asked to exit)."""
        self.stopping.set()
        with self.lock:
            for w in self.all:
                w.kill()


def _start(worker):
    try:
        worker.ensure()
    except WorkerFailed:
        pass  # its calls report it: ERROR / CRASH on every node of that backend, the rest go on


def modes_of(pool, backend):
    """The modes a backend computes (its worker says; its declaration when it could not start)."""
    w = pool.get(backend)
    return tuple(w.hello["modes"]) if w.hello else registry.get(backend).modes


def _call(pool, backend, call, timeout):
    """(status, reply, arrays) of a NodeCall on one backend; status: ok / UNSUPPORTED / ERROR / CRASH / TIMEOUT."""
    return _receive(pool, _send(pool, backend, call), timeout)


def _send(pool, backend, call):
    """Start a NodeCall on one backend; _receive gets its (status, reply, arrays) with what this returns."""
    worker = pool.get(backend)
    return worker, worker.send(call.message(), call.arrays())


def _receive(pool, sent, timeout):
    worker, rid = sent
    try:
        reply, out = worker.receive(timeout, rid)
    except WorkerFailed as e:
        if pool.stopping.is_set():
            raise Stopped() from None  # killed by the interrupt, not by the node
        return e.verdict, {"message": e.message}, []
    status = {Status.OK: "ok", Status.UNSUPPORTED: compare.UNSUPPORTED,
              Status.ERROR: compare.ERROR}[Status(reply["status"])]
    return status, reply, out


def original_proto(node, original_attrs):
    """The node as it was before canonicalization (e.g. auto_pad=SAME_LOWER), for backends that
    execute ONNX themselves: their own auto_pad handling is code under test too."""
    from onnx import helper
    n = type(node)()
    n.CopyFrom(node)
    del n.attribute[:]
    for k, v in original_attrs.items():
        n.attribute.append(helper.make_attribute(k, v))
    return base64.b64encode(n.SerializeToString()).decode()


def mode_calls(bundle, spec, modes, paths, proto):
    """What a replay judges of one node: (calls, skipped). `calls`: the NodeCalls of the modes in `modes`
    that have something to judge, each differentiating exactly what a training step does (`paths`, a
    call.Paths): vjp the inputs a plain step takes gradients of; vjp2 two calls, s summed over the inputs
    a gradient penalty's first backward differentiates and every input of a penalty step differentiated,
    first ds/dx with the cotangent a constant (the penalty's own graph), then ds/dg in a call of its own.
    `skipped`: report entries saying what is not judged, and why."""
    values = bundle.values
    inputs = [np.asarray(values[i]) if i else None for i in spec.inputs]
    base = from_bundle(bundle, spec, "fwd", proto)
    floats = [k for k, a in enumerate(inputs) if a is not None and a.dtype.kind == "f"]
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


def replay(bundle, backends, modes=MODES, nodes_regex=None, ops=None, jobs=1, timeout=60.0, policy=compare.Policy(),
           progress=None, form="canonical", done=None, on_node=None, cache=True, after=None, batch=True):
    """Replay every selected node of `bundle` on `backends` (names) in `modes`; returns a Replay.
    form="original": backends that execute ONNX natively get each node's attributes as they were
    before canonicalization (the others always get the canonical node). `done`: node name ->
    NodeReport already computed (a resumed run: not run again); `on_node(NodeReport)` is called as
    each node completes (the journal appends it). `cache`: keep and reuse the reference's and the
    oracle's results beside the bundle (irtrace/replay/cache.py). `after(session, nodes)`: called once
    every node is done, before the workers close; what it returns is Replay.workarounds (the API passes
    irtrace/replay/workarounds.verify: each backend's alternative formulations on its failing nodes).
    `batch` (jobs 1): the backends under test get their calls in batches sent ahead (replay/batch.py)."""
    for b in backends:
        reason = registry.get(b).unavailable()
        if reason:
            raise IrtraceError(f"backend {b!r} is unavailable: {reason} — run: {registry.get(b).install}")
    t0 = time.perf_counter()
    model = bundle.model
    specs = node_specs(model)
    protos = {n.name: base64.b64encode(n.SerializeToString()).decode() for n in model.graph.node}
    if form not in ("canonical", "original"):
        raise IrtraceError(f"unknown --form {form!r}; choose canonical or original")
    originals = {}
    if form == "original":
        for n in model.graph.node:
            attrs = bundle.node_source(n.name).get("original_attrs")
            if attrs is not None:
                originals[n.name] = original_proto(n, attrs)
    selected = _select(specs, nodes_regex, ops)
    path = bundle_paths(bundle)
    shapes_only = shape_arithmetic(model, bundle.state)
    use_oracle = registry.get(ORACLE).unavailable() is None
    pool = WorkerPool(start_wait(timeout))
    results = ResultCache(bundle, [REFERENCE] + ([ORACLE] if use_oracle else [])) if cache else None

    def on_backends(spec):
        """The backends a node is judged on (a port computes shape arithmetic in Python: only the reference)."""
        return [b for b in backends if b == REFERENCE] if spec.name in shapes_only else backends

    def forms_of(call, on):
        """--form original: ONNX-executing backends get the node as it was before canonicalization; the
        reference and the oracle run once either way."""
        name = call.spec.name
        return {b: call.with_proto(originals[name]) for b in on
                if name in originals and (pool.get(b).hello or {}).get("native")}

    planned, batches = {}, {}  # node name -> mode_calls; backend -> Batches (one worker set: jobs 1)

    def run_node(item):
        index, spec = item
        node = NodeReport(spec.name, spec.op_type, spec.domain, index, bundle.node_source(spec.name))
        on = on_backends(spec)
        if spec.name in shapes_only:
            node.skipped += [{"mode": "*", "output": "*", "backend": b,
                              "reason": "shape arithmetic (computed from shapes and constants only): a port "
                                        "computes it in Python, not with the framework"}
                             for b in backends if b not in on and b != ORACLE]
        calls, skipped = planned.pop(spec.name, None) or mode_calls(bundle, spec, modes, path, protos[spec.name])
        node.skipped += skipped
        for call in calls:
            off = call.off()
            recorded = recorded_outputs(bundle, call)
            rows = judged_before(call, on, results, policy, off, recorded is not None)
            if rows is None:
                got = run_everywhere(pool, call, recorded, on, use_oracle, timeout, forms_of(call, on), results,
                                     batches)
                rows = judge_node(pool, call, got, policy, timeout, off_path=off, cache=results)
            node.results.extend(rows)
        if progress:
            progress()
        return node

    done = dict(done or {})
    todo = [it for it in selected if it[1].name not in done]
    nodes = [done[s.name] for _, s in selected if s.name in done]
    ex = None
    try:
        if jobs <= 1:
            if todo:  # with answers cached, the reference and the oracle start only when one is missing
                warm = results is not None and results.warm()
                roles = [] if warm else [REFERENCE] + ([ORACLE] if use_oracle else [])
                pool.prestart(list(dict.fromkeys(roles + [b for b in backends if b not in (ORACLE, REFERENCE)])))
            if batch and todo:
                for _, spec in todo:
                    planned[spec.name] = mode_calls(bundle, spec, modes, path, protos[spec.name])
                for b in backends:
                    if b in (ORACLE, REFERENCE):
                        continue
                    calls = [forms_of(c, [b]).get(b, c) for _, spec in todo if b in on_backends(spec)
                             for c in planned[spec.name][0] if c.mode in modes_of(pool, b)]
                    batches[b] = Batches(pool, b, calls, timeout)
            for item in todo:
                nodes.append(run_node(item))
                bundle.values.release()  # the node's recorded values leave resident memory (P4)
                if on_node:
                    on_node(nodes[-1])
        else:
            ex = ThreadPoolExecutor(jobs)
            for future in as_completed([ex.submit(run_node, item) for item in todo]):
                nodes.append(future.result())
                if on_node:
                    on_node(nodes[-1])
        for sent in batches.values():
            sent.drain()  # nothing in flight once every node is done (the `after` work calls workers itself)
        nodes.sort(key=lambda n: n.index)
        tried = {}
        if after is not None:
            tried = after(Session(bundle, list(backends), pool, policy, timeout, use_oracle, results, path, protos),
                          nodes)
        versions = {w.info.name: w.hello.get("versions", {}) for w in pool.all if w.hello}
        if results is not None:  # the versions of a reference or oracle that was not started: the cache's
            versions = {**results.versions(), **versions}
            results.replayed(versions)
        roles = [REFERENCE] + ([ORACLE] if use_oracle else [])
        restarts = {name: 0 for name in dict.fromkeys(roles + list(backends))}
        for w in pool.all:
            restarts[w.info.name] = restarts.get(w.info.name, 0) + w.restarts
        for b, sent in batches.items():  # a batch's crash: its nodes were run again alone, and say their own
            restarts[b] -= sent.crashes
    except BaseException:
        pool.kill()  # interrupted (or broken): workers end now, with irtrace, not after their node
        raise
    finally:
        if ex is not None:
            ex.shutdown(wait=True, cancel_futures=True)
        pool.close()
    nodes.sort(key=lambda n: n.index)
    return Replay(bundle, list(backends), list(modes), nodes, time.perf_counter() - t0, policy, versions, restarts,
                  tried)


@dataclass(frozen=True)
class Session:
    """What a replay judges with, for work done on its nodes once they are all done (its `after`): the
    bundle, the backends, the live workers, the Policy, the timeout, whether the oracle arbitrates,
    the ResultCache (or None), the values on a gradient path, and each node's NodeProto (base64)."""
    bundle: object
    backends: list
    pool: object
    policy: compare.Policy
    timeout: float
    use_oracle: bool
    cache: object
    path: object
    protos: dict


def whole(call):
    """The label of a result that stands for the whole call (it failed: ERROR, CRASH, ...): "*", or for
    vjp2 the part that failed, "d2x:*" (the penalty's graph) or "d2g:*"."""
    return f"d2{call.part}:*" if call.mode == "vjp2" and call.part else "*"


def labels(spec, mode):
    """Names of the results of `mode`: fwd outputs; vjp d:<input>; vjp2 d2x:<input> then d2g:<output>."""
    if mode == "fwd":
        return list(spec.outputs)
    if mode == "vjp":
        return [f"d:{i}" for i in spec.inputs]
    return [f"d2x:{i}" for i in spec.inputs] + [f"d2g:{o}" for o in spec.outputs]


def _wants_model(call):
    """For an accumulating op in this mode (ir/semantics.py): the input positions that are not operands
    (the schema's NonDifferentiable ones: Resize's scales, Clip's bounds), which the oracle leaves as
    they are when it evaluates the op on absolute values; None when the model does not apply."""
    spec, mode = call.spec, call.mode
    in_sizes = [int(np.size(a)) for a in call.inputs if a is not None]
    out_sizes = [int(np.size(c)) for c in call.cots if c is not None] if mode != "fwd" else []
    if not accumulates(spec.op_type, mode, in_sizes, out_sizes or [max(in_sizes or [0])]):
        return None
    return sorted(nondifferentiable_inputs(spec.op_type, spec.domain, spec.opset, len(spec.inputs)))


def _oracle_call(call):
    """What the oracle is asked for `call`: its answers, with the rounding model's magnitudes."""
    return call.with_extra(magnitude=_wants_model(call))


def _rounding_call(call):
    """What the oracle is asked for its Monte Carlo estimate of float32 rounding (judge_node)."""
    return call.with_extra(rounding=MCA_SAMPLES)


def run_everywhere(pool, call, ref_fwd, backends, use_oracle, timeout, forms=None, cache=None, batches=None):
    """Run one NodeCall on the reference, the oracle and `backends`. `ref_fwd`: the recorded outputs (the
    fwd reference) or None to use the reference worker's; `forms`: backend -> the NodeCall it gets instead
    (--form original: another form of the node; an alternative formulation by name); `cache`: a
    ResultCache of the reference's and oracle's answers; `batches`: backend -> Batches (answers sent
    for ahead). Returns a Gathered."""
    spec, mode = call.spec, call.mode
    oracle_call = _oracle_call(call)
    cached_ref = cache.get(call, REFERENCE) if cache is not None else None
    cached_oracle = cache.get(oracle_call, ORACLE) if cache is not None and use_oracle else None
    # every worker computes at once (one request each, then the replies); a backend's result is used
    # only when the reference has one to compare it with
    sent_ref = _send(pool, REFERENCE, call) if cached_ref is None else None
    sent_oracle = _send(pool, ORACLE, oracle_call) if use_oracle and cached_oracle is None else None
    sent, ready = {}, {}
    for backend in backends:
        if backend in (ORACLE, REFERENCE) or mode not in modes_of(pool, backend):
            continue  # the oracle arbitrates, it is not under test; onnxruntime is forward-only
        mine = forms[backend] if forms and backend in forms else call
        answer = batches[backend].take(mine) if batches and backend in batches else None
        if answer is not None:
            ready[backend] = answer
        else:
            sent[backend] = _send(pool, backend, mine)
    ref_status, ref_reply, ref_out = cached_ref or _remember(cache, call, REFERENCE,
                                                             _receive(pool, sent_ref, timeout))
    ref = ref_fwd if mode == "fwd" and ref_fwd is not None else (ref_out if ref_status == "ok" else None)
    oracle, magnitude, o_status = None, None, None
    if use_oracle:
        o_status, o_reply, o_out = cached_oracle or _remember(cache, oracle_call, ORACLE,
                                                              _receive(pool, sent_oracle, timeout))
    if use_oracle and ref is not None:
        n_mag = o_reply.get("magnitude", 0) if o_status == "ok" else 0
        if n_mag:  # M of every result, then Q of every result (then N, the count of terms)
            mags, o_out = o_out[len(o_out) - n_mag:], o_out[:len(o_out) - n_mag]
            per = n_mag // o_reply.get("magnitude_kinds", 2)
            magnitude = list(zip(*(mags[k:k + per] for k in range(0, n_mag, per))))
        check = o_reply.get("check") or {}
        if o_status == "ok" and check.get("verified") is not False:
            oracle = o_out
        elif o_status == "ok":
            log.info("%s %s: oracle gradient failed its finite-difference check (%s); not arbitrating",
                     spec.name, mode, check)
    oracle_failed = None
    if use_oracle and ref is not None and o_status in (compare.ERROR, compare.CRASH, compare.TIMEOUT):
        oracle_failed = (o_status, o_reply.get("message", ""))
    received = {**ready, **{backend: _receive(pool, worker, timeout) for backend, worker in sent.items()}}
    outs = {}
    if ref is not None:
        for backend in backends:
            if backend == REFERENCE:
                outs[backend] = (ref_status, ref_reply, ref_out if mode != "fwd" or ref_fwd is None else ref_fwd)
            elif backend in received:
                outs[backend] = received[backend]
    recomputed = ref_out if mode == "fwd" and ref_fwd is not None and ref_status == "ok" else None
    return Gathered(ref_status, ref_reply, ref, oracle, outs, magnitude, oracle_failed=oracle_failed,
                    recomputed=recomputed)


@dataclass(frozen=True)
class Gathered:
    """What one node in one mode gave: the reference's status, reply and results, the oracle's results
    (None when it cannot arbitrate), each backend's (status, reply, results), and the rounding-error
    model's (M, Q) per result (None for an op that does not accumulate)."""
    ref_status: str
    ref_reply: dict
    ref: list
    oracle: list
    outs: dict
    magnitude: list = None
    spread: list = None    # per result, the oracle's Monte Carlo estimate of float32 rounding (on request)
    oracle_failed: tuple = None  # (verdict, message) when the oracle crashed, hung or raised
    recomputed: list = None      # fwd: what the reference computes now from the recorded inputs


def judge_all(call, got, policy, off_path=(), cache=None):
    """Results (one per output, or one '*' per whole-node failure) from a Gathered. The reference
    itself is judged against the float64 oracle (no row compares a result with itself); its rows are
    kept in `cache` (a ResultCache), and read from it when an earlier replay judged them."""
    spec, mode = call.spec, call.mode
    results = []
    if got.ref is None:
        return [compare.Result(spec.name, spec.op_type, REFERENCE, mode, whole(call), got.ref_status,
                               message=f"reference failed: {got.ref_reply.get('message', '')}")]
    if got.oracle_failed:  # a dead oracle is a row of its own: what follows was judged without float64
        status, message = got.oracle_failed
        results.append(compare.Result(spec.name, spec.op_type, ORACLE, mode, whole(call), status,
                                      message=f"the float64 oracle failed: {message}; the {mode} results of this "
                                              f"node are judged without it"))
    tag = []  # computed on the first failing gradient only: it scans the input

    def kink():
        if not tag:
            tag.append(kink_tag(spec.op_type, call.inputs) or "")
        return tag[0]
    # the reference's rows are a function of the cached answers only when both were answers
    settled = cache is not None and got.oracle is not None and got.ref_status == "ok" and not got.oracle_failed
    basis = _basis(call, off_path, got.recomputed is not None, got.spread is not None)
    for backend, answer in got.outs.items():
        keep = settled and backend == REFERENCE
        kept = cache.judged(call, policy, basis) if keep else None
        rows = kept if kept is not None else _judge_backend(call, got, policy, off_path, backend, answer, kink)
        if keep and kept is None:
            cache.keep_judged(call, policy, basis, rows)
        results.extend(rows)
    return results


def _basis(call, off_path, recorded, spread):
    """What the reference's rows of `call` are judged from (ResultCache.judged's key): the answers (the
    reference's, the oracle's, its rounding estimate where asked for), the inputs whose gradients are
    not judged, and whether fwd is judged on the recorded value."""
    answers = [(call, REFERENCE), (_oracle_call(call), ORACLE)] + ([(_rounding_call(call), ORACLE)] if spread else [])
    return {"answers": answers, "off": sorted(off_path), "recorded": recorded}


def _judge_backend(call, got, policy, off_path, backend, answer, kink):
    """judge_all's rows of one backend."""
    spec, mode = call.spec, call.mode
    status, reply, out = answer
    ref_time = got.ref_reply.get("time_s")
    is_ref = backend == REFERENCE
    if is_ref and got.oracle is None:
        return []  # without float64 there is nothing to judge the reference against
    if status != "ok":
        return [compare.Result(spec.name, spec.op_type, backend, mode, whole(call), status,
                               message=reply.get("message", "") + (f" ({reply['where']})" if reply.get("where") else ""),
                               time_s=reply.get("time_s"), ref_time_s=ref_time)]
    results = []
    skip = set(nondifferentiable_inputs(spec.op_type, spec.domain, spec.opset, len(spec.inputs))) | set(off_path)
    for k, label in enumerate(labels(spec, mode)):
        if mode != "fwd" and (k < len(spec.inputs) and k in skip or not call.judges(k, len(spec.inputs))):
            continue
        r = got.ref[k] if k < len(got.ref) else None
        a = out[k] if k < len(out) else None
        o = got.oracle[k] if got.oracle is not None and k < len(got.oracle) and got.oracle[k] is not None else None
        mag = got.magnitude[k] if got.magnitude is not None and k < len(got.magnitude) else None
        if mag is not None and (mag[0] is None or mag[1] is None):
            mag = None
        elif mag is not None and len(mag) > 2 and mag[2] is None:
            mag = mag[:2]
        spread = got.spread[k] if got.spread is not None and k < len(got.spread) else None
        if r is None or (is_ref and o is None):
            continue
        if a is None:
            zero = not np.any(np.asarray(r))
            results.append(compare.Result(spec.name, spec.op_type, backend, mode, label,
                                          compare.MATCH if zero else compare.DIVERGENT,
                                          message="" if zero else f"{backend} computes no gradient for {label[2:]}",
                                          time_s=reply.get("time_s"), ref_time_s=ref_time))
            continue
        if is_ref:
            verdict, m, details = compare.judge_reference(a, o, policy, mag, spread, full=False)
            if verdict in compare.FAILING and got.recomputed is not None and k < len(got.recomputed):
                why = _recorded_vs_recomputed(got.recomputed[k], a, o, policy, mag, spread)
                if why:
                    details["message"] = "; ".join(filter(None, [details.get("message"), why]))
        else:
            verdict, m, details = compare.judge(a, r, o, policy, mag, spread, full=False)
        tags = (kink(),) if verdict in compare.FAILING and mode != "fwd" and kink() else ()
        # details are named like Result's fields: a new metric of compare.py reaches the report as is
        results.append(compare.Result(node=spec.name, op_type=spec.op_type, backend=backend, mode=mode,
                                      output=label, verdict=verdict, metrics=m, tags=tags,
                                      time_s=reply.get("time_s"), ref_time_s=ref_time, **details))
    return results


def judged_before(call, on, cache, policy, off_path, recorded):
    """The rows of `call` as an earlier replay judged them, when the reference is the only backend judged
    on this node (nothing else to run: its rows are a function of the cached answers), or None.
    `recorded`: fwd is judged on the bundle's recorded value."""
    if cache is None or [b for b in on if b != ORACLE] != [REFERENCE]:
        return None
    recorded = recorded and call.mode == "fwd"
    rows = cache.judged(call, policy, _basis(call, off_path, recorded, False))
    if rows is not None and wants_rounding(rows, policy):  # judged again with the estimate: those rows
        rows = cache.judged(call, policy, _basis(call, off_path, recorded, True))
    return rows


def wants_rounding(rows, policy):
    """Whether judge_node asks the oracle for its rounding estimate and judges again."""
    return not policy.fixed and any(r.verdict == compare.DIVERGENT for r in rows)


def _recorded_vs_recomputed(again, recorded, oracle, policy, magnitude, spread):
    """Why the recorded forward value fails against float64: torch's own fault, or a value that is not
    what the recorded inputs give (a bundle edited or corrupted after export, a nondeterministic op)."""
    if again is None or np.shape(again) != np.shape(recorded):
        return ""
    verdict, _, _ = compare.judge_reference(again, oracle, policy, magnitude, spread, full=False)
    if verdict in compare.FAILING:
        return ""
    with np.errstate(invalid="ignore", over="ignore"):
        gap = float(np.nanmax(np.abs(np.asarray(again, np.float64) - np.asarray(recorded, np.float64)), initial=0.0))
    return (f"the recorded value is not what torch computes again from the recorded inputs (max abs {gap:.3g}; "
            f"that agrees with float64): the bundle was changed after export, or the op is not deterministic")


MCA_SAMPLES = 4  # Monte Carlo arithmetic runs per estimate of float32 rounding (backends/oracle/rounding.py)


def _remember(cache, call, role, answer):
    if cache is not None:
        cache.put(call, role, *answer)
    return answer


def judge_node(pool, call, got, policy, timeout, off_path=(), cache=None):
    """judge_all, and where a numeric result fails, judge again with the oracle's Monte Carlo estimate
    of how far float32 rounding of the op's formula can move it (asked for only then: it costs
    MCA_SAMPLES more float64 runs)."""
    results = judge_all(call, got, policy, off_path, cache)
    if got.oracle is None or not wants_rounding(results, policy):
        return results
    asked = _rounding_call(call)
    status, reply, out = (cache.get(asked, ORACLE) if cache is not None else None) or \
        _remember(cache, asked, ORACLE, _call(pool, ORACLE, asked, timeout))
    n = reply.get("rounding", 0) if status == "ok" else 0
    if not n:
        log.info("%s %s: no float32 rounding estimate (%s)", call.spec.name, call.mode,
                 reply.get("rounding_error") or reply.get("message", status))
        return results
    return judge_all(call, replace(got, spread=list(out[len(out) - n:])), policy, off_path, cache)
