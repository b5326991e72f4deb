"""Judge: the answers of one NodeCall (the reference's, the float64 oracle's, each backend's) give its
Results, one per output, or one per whole-call failure. The reference itself is judged against the
oracle; where a result fails, the oracle is asked for the rounding-error model's size of each result (an
accumulating op), then, where one still fails, for its Monte Carlo estimate of float32 rounding, and the
call is judged again each time."""
import logging
from dataclasses import dataclass, replace

import numpy as np

from backends._runtime.wire import Status
from irtrace import compare
from irtrace.ir.semantics import accumulates, kink_tag, nondifferentiable_inputs
from irtrace.replay.plan import ORACLE, REFERENCE

log = logging.getLogger(__name__)
MCA_SAMPLES = 4  # Monte Carlo arithmetic runs per estimate of float32 rounding (backends/oracle/rounding.py)


@dataclass(frozen=True)
class Gathered:
    """What one node in one mode gave: the reference's Answer and results (`ref`: None when there is
    nothing to compare with), the oracle's results (None when it cannot arbitrate), each backend's
    Answer, and the rounding-error model's size array per result (None until judge_node asks for it,
    for an op that does not accumulate, or a result it cannot size: backends/oracle/model.py)."""
    ref_answer: object
    ref: list
    oracle: list
    outs: dict
    magnitude: list = None
    spread: list = None    # per result, the oracle's Monte Carlo estimate of float32 rounding (on request)
    oracle_failed: object = None  # the oracle's Answer when it crashed, hung or raised
    unverified: dict = None       # the oracle's finite-difference check when its gradients failed it
    recomputed: list = None      # fwd: what the reference computes now from the recorded inputs


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


def wants_model_for(call):
    """Whether the rounding-error model applies to `call` (its op accumulates in its mode)."""
    return _wants_model(call) is not None


def model_call(call):
    """What the oracle is asked for the rounding-error model's size of each result (judge_node: where a
    result of an accumulating op fails without it; it costs three more float64 runs of the op). The
    results themselves are not sent again (the oracle's plain answer has them)."""
    return call.with_extra(magnitude=_wants_model(call), extra_only=True)


def wants_model(call, rows, policy):
    """Whether judge_node asks the oracle for the rounding model and judges again: a numeric result fails
    and the op accumulates. The model only widens what passes (an error within max(allowed, bound) is
    NOISE), so a result that passes without it passes with it, with the same verdict."""
    return not policy.fixed and any(r.verdict == compare.DIVERGENT for r in rows) and _wants_model(call) is not None


def rounding_call(call):
    """What the oracle is asked for its Monte Carlo estimate of float32 rounding (judge_node), without
    the results again."""
    return call.with_extra(rounding=MCA_SAMPLES, extra_only=True)


def magnitudes(answer):
    """Per result, the rounding-error model's size array from the oracle's answer (or None), or None."""
    groups = answer.extra.get("magnitude") if answer.ok else None
    return list(groups[0]) if groups else None


def failure(call, backend, verdict, message, **fields):
    """The one Result of a call that gave no results on `backend`."""
    return compare.Result(call.spec.name, call.spec.op_type, backend, call.mode, whole(call), verdict,
                          message=message, **fields)


def judge_all(call, got, policy, off_path=(), cache=None):
    """Results (one per output, or one '*' per whole-node failure) from a Gathered. The reference
    itself is judged against the float64 oracle (no row compares a result with itself); its rows are
    kept in `cache` (a ResultCache), and read from it when an earlier replay judged them."""
    ref_answer = got.ref_answer
    if got.ref is None:
        return [failure(call, REFERENCE, compare.Verdict.of(ref_answer.status),
                        f"reference failed: {ref_answer.reply.get('message', '')}")]
    results = []
    if got.oracle_failed:  # a dead oracle is a row of its own: what follows was judged without float64
        dead = got.oracle_failed
        results.append(failure(call, ORACLE, compare.Verdict.of(dead.status),
                               f"the float64 oracle failed: {dead.reply.get('message', '')}; the {call.mode} "
                               f"results of this node are judged without it"))
    tag = []  # computed on the first failing gradient only: it scans the input

    def kink():
        if not tag:
            tag.append(kink_tag(call.spec.op_type, call.inputs) or "")
        return tag[0]
    # the reference's rows are a function of the cached answers only when both were answers
    settled = cache is not None and got.oracle is not None and ref_answer.ok and not got.oracle_failed
    basis = _basis(call, off_path, got.recomputed is not None, got.spread is not None, got.magnitude is not None)
    shared = {}  # output -> what the reference's and oracle's results alone give (compare._sweep), for every backend
    for backend, answer in got.outs.items():
        keep = settled and backend == REFERENCE
        kept = cache.judged(call, policy, basis) if keep else None
        rows = kept if kept is not None else \
            _judge_backend(call, got, policy, off_path, backend, answer, kink, shared)
        if keep and kept is None:
            cache.keep_judged(call, policy, basis, rows)
        results.extend(rows)
    return results


def unjudged(call, got):
    """The node's skipped entry (NodeReport.skipped) when the oracle's gradients failed their finite-difference
    check, so that the reference's results of `call` are not judged (nothing to judge them against; the backends
    under test are judged against the reference alone), or None: listed with its reason, not left out."""
    check = got.unverified
    if check is None:
        return None
    if "fd" in check and "autograd" in check:
        numbers = f"along a random direction, autograd {check['autograd']:.6g}, finite differences {check['fd']:.6g}"
    else:
        numbers = f"along u, max abs difference {check.get('fd_max_abs', float('nan')):.3g}"
    return {"mode": call.mode, "output": whole(call), "backend": REFERENCE,
            "reason": f"not judged: the float64 oracle's {call.mode} failed its finite-difference check at two step "
                      f"sizes ({numbers}); the other backends' {call.mode} results are judged against "
                      f"{REFERENCE}'s alone"}


def _basis(call, off_path, recorded, spread, model):
    """What the reference's rows of `call` are judged from (ResultCache.judged's key): the answers (the
    reference's, the oracle's, its rounding model and its rounding estimate where asked for), the inputs
    whose gradients are not judged, and whether fwd is judged on the recorded value."""
    answers = [(call, REFERENCE), (call, ORACLE)] + ([(model_call(call), ORACLE)] if model else []) + \
        ([(rounding_call(call), ORACLE)] if spread else [])
    return {"answers": answers, "off": sorted(off_path), "recorded": recorded}


def _at(values, k):
    return values[k] if values is not None and k < len(values) else None


def _judge_backend(call, got, policy, off_path, backend, answer, kink, shared):
    """judge_all's rows of one backend (`shared`: see judge_all)."""
    spec, mode = call.spec, call.mode
    reply, out = answer.reply, answer.results
    timing = {"time_s": reply.get("time_s"), "ref_time_s": got.ref_answer.reply.get("time_s")}
    is_ref = backend == REFERENCE
    if is_ref and got.oracle is None:
        return []  # without float64 there is nothing to judge the reference against
    if not answer.ok:
        where = f" ({reply['where']})" if reply.get("where") else ""
        return [failure(call, backend, compare.Verdict.of(answer.status), reply.get("message", "") + where,
                        **timing)]
    results = []
    skip = set(nondifferentiable_inputs(spec.op_type, spec.domain, spec.opset, len(spec.inputs))) | set(off_path)
    for k, label in enumerate(labels(spec, mode)):
        if mode != "fwd" and (k < len(spec.inputs) and k in skip or not call.judges(k, len(spec.inputs))):
            continue
        r, a, o = _at(got.ref, k), _at(out, k), _at(got.oracle, k)
        mag, spread = _at(got.magnitude, k), _at(got.spread, k)
        if r is None or (is_ref and o is None):
            continue
        if a is None:
            zero = not np.any(np.asarray(r))
            results.append(compare.Result(spec.name, spec.op_type, backend, mode, label,
                                          compare.MATCH if zero else compare.DIVERGENT,
                                          message="" if zero else f"{backend} computes no gradient for {label[2:]}",
                                          **timing))
            continue
        if is_ref:
            verdict, m, details = compare.judge_reference(a, o, policy, mag, spread, full=False)
            if verdict in compare.FAILING and got.recomputed is not None and k < len(got.recomputed):
                why = _recorded_vs_recomputed(got.recomputed[k], a, o, policy, mag, spread)
                if why:
                    details["message"] = "; ".join(filter(None, [details.get("message"), why]))
        else:
            verdict, m, details = compare.judge(a, r, o, policy, mag, spread, full=False,
                                                shared=shared.setdefault(k, {}))
        tags = (kink(),) if verdict in compare.FAILING and mode != "fwd" and kink() else ()
        # details are named like Result's fields: a new metric of compare.py reaches the report as is
        results.append(compare.Result(node=spec.name, op_type=spec.op_type, backend=backend, mode=mode,
                                      output=label, verdict=verdict, metrics=m, tags=tags, **timing, **details))
    return results


def judged_before(call, on, cache, policy, off_path, recorded):
    """The rows of `call` as an earlier replay judged them, when the reference is the only backend judged
    on this node (nothing else to run: its rows are a function of the cached answers), or None.
    `recorded`: fwd is judged on the bundle's recorded value."""
    if cache is None or [b for b in on if b != ORACLE] != [REFERENCE]:
        return None
    recorded = recorded and call.mode == "fwd"
    rows = cache.judged(call, policy, _basis(call, off_path, recorded, False, False))
    model = rows is not None and wants_model(call, rows, policy)
    if model:  # judged again with the rounding model: those rows (as judge_node decides)
        rows = cache.judged(call, policy, _basis(call, off_path, recorded, False, True))
    if rows is not None and wants_rounding(rows, policy):  # and with the estimate
        rows = cache.judged(call, policy, _basis(call, off_path, recorded, True, model))
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


def judge_node(executor, call, got, policy, off_path=(), cache=None):
    """judge_all, and where a numeric result fails, judge again with the rounding-error model of an
    accumulating op, then, where one still fails, with the oracle's Monte Carlo estimate of how far
    float32 rounding of the op's formula can move it (each asked of `executor` only then: they cost
    three and MCA_SAMPLES more float64 runs)."""
    results = judge_all(call, got, policy, off_path, cache)
    if got.oracle is None:
        return results
    if got.magnitude is None and wants_model(call, results, policy):
        sizes = magnitudes(executor.run(ORACLE, model_call(call)))
        if sizes:
            got = replace(got, magnitude=sizes)
            results = judge_all(call, got, policy, off_path, cache)
        else:
            log.info("%s %s: no rounding model", call.spec.name, call.mode)
    if not wants_rounding(results, policy):
        return results
    answer = executor.run(ORACLE, rounding_call(call))
    spread = answer.extra.get("rounding") if answer.ok else None
    if not spread:
        log.info("%s %s: no float32 rounding estimate (%s)", call.spec.name, call.mode,
                 answer.reply.get("rounding_error") or answer.reply.get("message", answer.status))
        return results
    return judge_all(call, replace(got, spread=list(spread[0])), policy, off_path, cache)


def gather(executor, call, ref_fwd, backends, use_oracle, forms=None):
    """Run one NodeCall on the reference, the oracle and `backends` (every one computes at once: one send
    each, then the answers) and gather what judging it needs. `ref_fwd`: the recorded outputs (the fwd
    reference) or None to use the reference's; `forms`: backend -> the NodeCall it gets instead (--form
    original: another form of the node; an alternative formulation by name). A backend's answer is used
    only when the reference has one to compare it with."""
    mode = call.mode
    sent_ref = executor.send(REFERENCE, call)
    sent_oracle = executor.send(ORACLE, call) if use_oracle else None
    sent = {}
    for backend in backends:
        if backend in (ORACLE, REFERENCE) or mode not in executor.modes(backend):
            continue  # the oracle arbitrates, it is not under test; onnxruntime is forward-only
        sent[backend] = executor.send(backend, (forms or {}).get(backend, call))
    ref_answer = executor.receive(sent_ref)
    recorded = mode == "fwd" and ref_fwd is not None
    ref = ref_fwd if recorded else (ref_answer.results if ref_answer.ok else None)
    oracle, oracle_failed, unverified = None, None, None
    if use_oracle:
        o_answer = executor.receive(sent_oracle)
        if ref is not None and o_answer.ok:
            check = o_answer.reply.get("check") or {}
            if check.get("verified") is not False:
                oracle = o_answer.results
            else:  # the reference's results are not judged: listed as skipped, with the check (unjudged)
                unverified = check
        elif ref is not None and o_answer.status != Status.UNSUPPORTED:
            oracle_failed = o_answer
    received = {backend: executor.receive(ticket) for backend, ticket in sent.items()}
    outs = {}
    if ref is not None:
        for backend in backends:
            if backend == REFERENCE:
                outs[backend] = replace(ref_answer, results=list(ref_fwd)) if recorded else ref_answer
            elif backend in received:
                outs[backend] = received[backend]
    return Gathered(ref_answer, ref, oracle, outs, oracle_failed=oracle_failed, unverified=unverified,
                    recomputed=ref_answer.results if recorded and ref_answer.ok else None)

