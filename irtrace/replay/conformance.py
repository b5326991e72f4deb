"""Conformance against a suite nobody here wrote: the ONNX backend node tests.

The onnx wheel ships the generators, not the data: `collect_testcases()` rebuilds them.
Every single-node case of an op the backend claims (its op table) runs forward through the
backend's worker, exactly as replay would run it (canonicalized node, same wire), and is
compared with the case's expected outputs at the case's own rtol/atol."""
import contextlib
import io
import logging
import time
import warnings
from dataclasses import dataclass

import numpy as np


from backends._runtime.wire import Status, dtype_tag, is_float
from irtrace.errors import IrtraceError
from irtrace.ir.canonical import canonicalize
from irtrace.ir.spec import node_specs
from irtrace import compare
from irtrace.replay import backends as registry
from irtrace.replay.call import NodeCall, proto_text
from irtrace.replay.worker import WorkerFailed, WorkerProxy

log = logging.getLogger(__name__)
PASS, FAIL, ERROR, SKIP = "pass", "fail", "error", "skip"
# a backend that computes in float64 (the oracle) is held to float64's precision where the suite's expected
# outputs are float64 (the suite's own default, rtol 1e-3, is float32's); measured: all 26 such cases pass
FLOAT64_RTOL, FLOAT64_ATOL = 1e-12, 1e-13


@dataclass(frozen=True)
class CaseResult:
    case: str
    op_type: str
    status: str
    detail: str = ""
    max_abs: float = None


def cases():
    """(name, model, inputs, outputs, rtol, atol) of the single-node tensor cases."""
    from onnx.backend.test.case.node import collect_testcases
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        all_cases = collect_testcases()
    out = []
    for c in all_cases:
        if c.model is None or len(c.model.graph.node) != 1 or not c.data_sets:
            continue
        ins, outs = c.data_sets[0]
        if not all(isinstance(a, np.ndarray) and a.dtype != object for a in list(ins) + list(outs)):
            continue  # sequences, optionals and strings are not tensors the IR carries
        out.append((c.name, c.model, list(ins), list(outs), float(c.rtol), float(c.atol)))
    return out


def _numeric(a):
    """`a` in float64 where it is a number array (ml_dtypes' bfloat16 included), else None."""
    a = np.asarray(a)
    return a.astype(np.float64) if a.dtype.kind in "fiub" or is_float(a.dtype) else None


def _ulp_of_largest(expected):
    """One unit in the last place of the expected output's largest finite magnitude, in the expected's
    dtype: the suite computes many expected outputs in that dtype (numpy's float32 FFT for DFT, float16
    attention), so an element that cancels carries that much rounding of its own - an exact float64
    answer differs from test_dft_inverse's expected by 1.5e-6 where the case's atol is 1e-7. Below
    rtol * |expected| for every element within 1e4 of the largest; integers get none."""
    e = np.asarray(expected)
    if not is_float(e.dtype):
        return 0.0
    finite = np.abs(e.astype(np.float64))[np.isfinite(e.astype(np.float64))]
    eps = 2.0 ** -7 if e.dtype.name == "bfloat16" else float(np.finfo(e.dtype).eps) if e.dtype.kind == "f" else 0.0
    return float(finite.max()) * eps if finite.size else 0.0


def _claims(hello):
    return {(d, o) for d, o, _ in hello["ops"]}


def run(backend, limit=None):
    info = registry.get(backend)
    w = WorkerProxy(info)
    hello = w.start()
    claims = _claims(hello)
    exact = hello.get("versions", {}).get("dtype") == "float64"  # the oracle: float64 throughout
    results = []
    try:
        for name, model, ins, outs, rtol, atol in cases()[:limit]:
            node = model.graph.node[0]
            if (node.domain if node.domain != "ai.onnx" else "", node.op_type) not in claims:
                continue
            if exact and outs and all(np.asarray(o).dtype == np.float64 for o in outs):
                rtol, atol = FLOAT64_RTOL, FLOAT64_ATOL  # float64 expected outputs: float64's tolerance
            results.append(_run_case(w, name, model, ins, outs, rtol, atol))
    finally:
        w.close()
    return results


def _run_case(w, name, model, ins, outs, rtol, atol):
    op = model.graph.node[0].op_type
    try:
        canon, _ = canonicalize(model)
    except (IrtraceError, Exception) as e:  # a case the canonicalizer cannot take: not the backend's fault
        return CaseResult(name, op, SKIP, f"canonicalize: {e}")
    if len(canon.graph.node) != 1:
        return CaseResult(name, op, SKIP, "folded away by canonicalization (a Constant)")
    spec = node_specs(canon)[0]
    proto = proto_text(canon.graph.node[0])
    feeds = dict(zip([i.name for i in model.graph.input], ins))
    pending = iter(outs)  # the case's outputs are the node's named ones, in order
    dtypes = [next(pending, None) if o else None for o in spec.outputs]
    call = NodeCall(spec, "fwd", proto, tuple(feeds.get(i) if i else None for i in spec.inputs),
                    out_dtypes=tuple(dtype_tag(e.dtype) if e is not None else "" for e in dtypes))
    try:
        reply, got = w.call(call.message(), call.arrays(), 30.0)
    except WorkerFailed as e:
        return CaseResult(name, op, ERROR, f"{e.verdict}: {e.message}")
    if reply["status"] == Status.UNSUPPORTED:
        return CaseResult(name, op, SKIP, reply["message"])
    if reply["status"] != Status.OK:
        return CaseResult(name, op, ERROR, reply["message"][:300])
    worst = 0.0
    # an omitted optional output ("") has no expected value
    named = [k for k, o in enumerate(spec.outputs) if o]
    for j, expected in enumerate(outs):
        k = named[j] if j < len(named) else j
        a = got[k] if k < len(got) else None
        if a is None or np.shape(a) != np.shape(expected):
            return CaseResult(name, op, FAIL, f"output {k}: shape {None if a is None else list(np.shape(a))} "
                                              f"vs expected {list(np.shape(expected))}")
        a64, e64 = _numeric(a), _numeric(expected)
        if a64 is None or e64 is None:
            if not np.array_equal(np.asarray(a), np.asarray(expected)):
                return CaseResult(name, op, FAIL, f"output {k} differs")
            continue
        slack = _ulp_of_largest(expected)
        ok, diff = compare.allclose(a64, e64, rtol, atol + slack)
        if not ok:
            return CaseResult(name, op, FAIL, f"output {k}: max abs {diff:.3g} (rtol {rtol:g}, atol {atol:g}"
                                              f"{f' + {slack:.3g}' if slack else ''})", diff)
        worst = max(worst, diff if np.isfinite(diff) else 0.0)
    return CaseResult(name, op, PASS, max_abs=worst)


def summarize(results):
    counts = {s: 0 for s in (PASS, FAIL, ERROR, SKIP)}
    for r in results:
        counts[r.status] += 1
    return counts


def markdown(per_backend):
    lines = ["# ONNX backend node tests, per backend", "",
             "Generated by `irtrace conformance --markdown docs/conformance.md`: the single-node cases of",
             "`onnx.backend.test.case.node.collect_testcases()` for the ops each backend claims.", "",
             "| backend | cases | pass | fail | error | skipped (op version or types not supported) |",
             "|---|---|---|---|---|---|"]
    for b, res in per_backend.items():
        c = summarize(res)
        lines.append(f"| {b} | {len(res)} | {c[PASS]} | {c[FAIL]} | {c[ERROR]} | {c[SKIP]} |")
    lines.append("")
    for b, res in per_backend.items():
        bad = [r for r in res if r.status in (FAIL, ERROR)]
        if bad:
            lines.append(f"## {b}: failures")
            lines.append("")
            lines += [f"- `{r.case}` ({r.op_type}): {r.status}: {r.detail}" for r in bad]
            lines.append("")
    lines += ["## Refused: the claims each backend narrows, with the reason a node gets", "",
              "An op version, attribute value or dtype a backend does not compute is refused (UNSUPPORTED, with",
              "this reason) instead of computed wrongly; the counts are the suite's cases it refuses.", ""]
    for b, res in per_backend.items():
        reasons = {}
        for r in res:
            if r.status == SKIP:
                reasons.setdefault((r.op_type, r.detail), []).append(r.case)
        if reasons:
            lines.append(f"- **{b}**: " + "; ".join(f"{op} ({len(cs)}): {why}"
                                                   for (op, why), cs in sorted(reasons.items())))
    lines.append("")
    return "\n".join(lines) + "\n"


def main_run(backends, out_md=None):
    per = {}
    for b in backends:
        t = time.perf_counter()
        per[b] = run(b)
        c = summarize(per[b])
        print(f"{b:12} cases {len(per[b]):5}  pass {c[PASS]:5}  fail {c[FAIL]:4}  error {c[ERROR]:4}  "
              f"skip {c[SKIP]:4}  {time.perf_counter() - t:6.1f} s")
    if out_md:
        from pathlib import Path
        Path(out_md).write_text(markdown(per))
        print(f"wrote {out_md}")
    return per



