"""Verified workarounds: after a replay, each backend's alternative formulations of an op (declared in
its folder, beside its op table: backends/<name>/workarounds.py) are run on every node where that op
failed on it, on the same recorded inputs, in every mode the backend computes, and judged exactly as
the replay judges (the reference, the float64 oracle, the same Policy). An alternative matches a node
when every result in every mode is MATCH or NOISE. The report gives each finding the alternatives of
its op with their code and verdicts; a chained run can apply the matching ones (`--workarounds`)."""
import logging

from backends._runtime.wire import Status
from irtrace import compare
from irtrace.replay.call import node_request
from irtrace.replay.judge import gather, judge_node
from irtrace.replay.plan import MODES, ORACLE, REFERENCE, mode_calls, recorded_outputs
from irtrace.replay.worker import WorkerFailed

log = logging.getLogger(__name__)
PASSING = (compare.MATCH, compare.NOISE)


def _op_key(domain, op_type):
    return ("" if domain == "ai.onnx" else domain, op_type)


def _offered(pool, backend):
    """{(domain, op type)} the backend has alternatives for, from its workers' hello. A worker is started
    only when the replay started none (a resumed run with every node done); one that could not start
    offers none (its failures are in the replay already, and it is not started again)."""
    started = [w for w in pool.all if w.info.name == backend]
    hellos = [w.hello for w in started if w.hello]
    if not started:
        try:
            hellos = [pool.get(backend).hello or {}]
        except WorkerFailed:
            return set()
    return {_op_key(d, o) for hello in hellos[:1] for d, o, *_ in hello.get("workarounds", [])}


def _ask(pool, backend, msg, timeout):
    """A request that is not a node call ("alternatives", "source"): (reply, or None when it failed)."""
    try:
        reply, _ = pool.get(backend).call(msg, [], timeout)
    except WorkerFailed as e:
        log.info("%s: %s request failed: %s", backend, msg["kind"], e.message)
        return None
    return reply if reply.get("status") == Status.OK else None


def code_of(pool, backend, spec, name, timeout):
    """The standalone source of an alternative (its imports, the helpers it calls, the function under
    its own name), as the backend's worker extracts it; "" when it cannot."""
    reply = _ask(pool, backend, node_request("source", spec, workaround=name), timeout)
    if reply is None:
        return ""
    return "".join(f"{line}\n" for line in reply["imports"]) + ("\n\n" if reply["imports"] else "") + reply["op"]


def declared(pool, backend, spec, timeout):
    """{name: description} of the alternatives `backend` itself declares for the op of `spec` (its
    workers' "alternatives" reply; {} when it declares none or cannot answer)."""
    reply = _ask(pool, backend, node_request("alternatives", spec), timeout)
    return {a["name"]: a["description"] for a in (reply or {}).get("alternatives", [])
            if isinstance(a, dict) and isinstance(a.get("name"), str) and isinstance(a.get("description"), str)}


def worst(verdicts):
    return max(verdicts, key=lambda v: compare.SEVERITY.get(v, 0))


def try_alternative(session, spec, backend, name, modes):
    """({mode: the worst verdict of the backend's results}, the modes judged) of alternative `name` on one
    node, each mode judged as the replay judges it; a mode without a verdict (the reference failed
    there) is left out of the first."""
    s = session
    calls, _ = mode_calls(s.bundle, spec, modes, s.plan.paths, s.plan.protos[spec.name])
    verdicts = {}
    for call in calls:  # vjp2 is two calls (ds/dx, ds/dg): its verdict is the worse of the two
        instead = {backend: call.with_extra(workaround=name)}
        got = gather(s.executor, call, recorded_outputs(s.bundle, call), [backend], s.use_oracle, instead)
        mine = [r.verdict for r in judge_node(s.executor, call, got, s.policy, off_path=call.off(), cache=s.cache)
                if r.backend == backend]
        if mine:
            verdicts[call.mode] = str(worst(mine + ([verdicts[call.mode]] if call.mode in verdicts else [])))
    return verdicts, list(dict.fromkeys(c.mode for c in calls))


def verify(session, nodes, everywhere=False):
    """backend -> node name -> [{"name", "description", "code", "verdicts", "matches"}]: every alternative
    of the node's op on every node with a failing (or UNSUPPORTED) result on that backend (`everywhere`:
    on every node of an op that has alternatives), for the replay `session`
    (irtrace.replay.engine.Session). `matches`: every mode the backend computes that has something to
    judge on that node gave only MATCH or NOISE."""
    executor = session.executor
    local = executor.local()
    pool, timeout = local.pool, local.timeout
    specs = {s.name: s for s in session.bundle.specs}
    out = {}
    for backend in session.backends:
        if backend in (REFERENCE, ORACLE):
            continue
        failed = [n for n in nodes if everywhere or any(r.backend == backend and (r.verdict in compare.FAILING or
                                                                                  r.verdict == compare.UNSUPPORTED)
                                                        for r in n.results)]
        if not failed:
            continue
        offered = _offered(pool, backend)
        failed = [n for n in failed if _op_key(n.domain, n.op_type) in offered]
        if not failed:
            continue
        modes = [m for m in MODES if m in executor.modes(backend)]
        code = {}
        for node in failed:
            spec = specs[node.name]
            reply = _ask(pool, backend, node_request("alternatives", spec), timeout)
            tried = []
            for alt in (reply or {}).get("alternatives", []):
                name = alt["name"]
                verdicts, judged = try_alternative(session, spec, backend, name, modes)
                key = (spec.domain, spec.op_type, spec.opset, name)
                if key not in code:
                    code[key] = code_of(pool, backend, spec, name, timeout)
                tried.append({"name": name, "description": alt["description"], "code": code[key],
                              "verdicts": verdicts,
                              "matches": bool(judged) and all(verdicts.get(m) in PASSING for m in judged)})
                log.info("%s %s on %s: %s", backend, name, node.name, verdicts)
            if tried:
                out.setdefault(backend, {})[node.name] = tried
    return out


def for_finding(replay, finding):
    """The alternatives tried on a finding's nodes, verdicts per mode the worst over its nodes, `matches`
    when it matches on every one of them; None when the backend has none for the finding's op."""
    per_node = replay.workarounds.get(finding["backend"], {})
    tried = [per_node[n] for n in finding["nodes"] if n in per_node]
    if not tried:
        return None
    merged = {}
    for node_list in tried:
        for w in node_list:
            m = merged.setdefault(w["name"], {"name": w["name"], "description": w["description"], "code": w["code"],
                                              "verdicts": {}, "matches": True})
            for mode, v in w["verdicts"].items():
                m["verdicts"][mode] = str(worst([v] + ([m["verdicts"][mode]] if mode in m["verdicts"] else [])))
            m["matches"] = m["matches"] and w["matches"]
    for m in merged.values():
        if len(tried) < len(finding["nodes"]):
            m["matches"] = False  # a node it was not tried on is not verified
        m["verdicts"] = {mode: m["verdicts"][mode] for mode in sorted(m["verdicts"], key=MODES.index)}
    return list(merged.values())


def applied(replay, backend):
    """node name -> the alternative a chained run with workarounds uses there: the first (in the
    backend's registration order) that matches on that node."""
    chosen = {}
    for node, tried in replay.workarounds.get(backend, {}).items():
        ok = [w["name"] for w in tried if w["matches"]]
        if ok:
            chosen[node] = ok[0]
    return chosen
