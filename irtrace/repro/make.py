"""`irtrace repro`: per distinct finding of a report, shrink the first node's case and write
repro.py, issue.md, data.npz (and finding.json, the shrunk numbers, for tools and tests)."""
import base64
import json
import logging
import platform
import re
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import onnx
from onnx import helper

from backends._runtime.wire import Status, is_float
from irtrace import compare
from irtrace.errors import IrtraceError, suggest
from irtrace.ir.spec import decode_attrs
from irtrace.replay import backends
from irtrace.ir.semantics import input_role
from irtrace.replay.call import NodeCall, bundle_paths, differentiated, from_bundle, proto_text, wire_spec
from irtrace.replay.execute import LocalExecutor, WorkerPool
from irtrace.replay.judge import gather, judge_node, labels
from irtrace.replay.plan import ORACLE, REFERENCE, mode_calls
from irtrace.report.json_report import clean
from irtrace.repro import script, standalone
from irtrace.repro.standalone import write_npz
from irtrace.repro.shrink import Case, shrink
from irtrace.repro.recipe import ScriptCase
from irtrace.store import load

log = logging.getLogger(__name__)


class _Runner:
    """Evaluates the finding's node in its mode on candidate inputs: reference, oracle, one backend.
    `call`: the NodeCall the replay made (its cotangents, what it differentiated: wrt, part)."""

    def __init__(self, pool, call, backend, timeout):
        self.pool, self.call, self.backend, self.timeout = pool, call, backend, timeout
        self.executor = LocalExecutor(timeout, pool=pool)
        self.use_oracle = backends.get(ORACLE).unavailable() is None
        self.validator = "onnxruntime" if backends.get("onnxruntime").unavailable() is None else None

    def valid(self, spec, proto, inputs):
        """onnxruntime checks ONNX's rules strictly (e.g. kernel_shape against W's shape), where torch
        would run an inconsistent node: a candidate it rejects is not a valid smaller node."""
        if self.validator is None:
            return True
        forward = NodeCall(spec, "fwd", proto, tuple(inputs))
        reply, _ = self.pool.get(self.validator).call(forward.message(), forward.arrays(), self.timeout)
        return reply.get("status") != Status.ERROR

    def _spec_for(self, case):
        names = tuple("" if a is None else n for n, a in zip(self.call.spec.inputs, case.inputs))
        node = onnx.NodeProto()
        node.ParseFromString(base64.b64decode(self.call.proto))
        del node.input[:]
        node.input.extend(names)
        while node.input and not node.input[-1]:
            node.input.pop()
        names = tuple(node.input)
        spec = replace(self.call.spec, inputs=names)
        if case.attrs:  # the shrinker's plainer attributes, in the node and its spec alike
            keep = [a for a in node.attribute if a.name not in dict(case.attrs)]
            del node.attribute[:]
            node.attribute.extend(keep + [helper.make_attribute(k, v) for k, v in case.attrs])
            spec = replace(spec, attrs=decode_attrs(node))
        return spec, proto_text(node)

    def cots_for(self, case, spec, proto):
        forward = NodeCall(spec, "fwd", proto, tuple(case.inputs[:len(spec.inputs)]))
        reply, out = self.pool.get(REFERENCE).call(forward.message(), forward.arrays(), self.timeout)
        if reply.get("status") != Status.OK:
            return None
        cots = []
        for y, g in zip(out, self.call.cots):
            if y is None or g is None or not is_float(np.asarray(y).dtype):
                cots.append(None)
            # in the output's dtype (a float16 output's cotangent is float16), and of its rank: a scalar's
            # cotangent stays 0-d (np.ascontiguousarray would make it 1-d)
            elif case.cot_style == "ones":
                cots.append(np.ones(np.shape(y), np.asarray(y).dtype))
            elif all(a <= b for a, b in zip(np.shape(y), np.shape(g))) and np.ndim(y) == np.ndim(g):
                cots.append(np.array(np.asarray(g)[tuple(slice(0, d) for d in np.shape(y))], order="C"))
            else:
                cots.append(np.random.default_rng(0).standard_normal(np.shape(y)).astype(np.asarray(y).dtype))
        return cots

    def evaluate(self, case, check=True):
        """(results, the NodeCall, what each side answered) for `case`, or (None, None, None) when it is
        not a valid node."""
        mode = self.call.mode
        spec, proto = self._spec_for(case)
        inputs = list(case.inputs[:len(spec.inputs)])
        if check and not self.valid(spec, proto, inputs):
            return None, None, None
        cots = [None] * len(spec.outputs)
        if mode != "fwd":
            cots = self.cots_for(case, spec, proto)
            if cots is None:
                return None, None, None
        us = list(case.us[:len(spec.inputs)])
        wrt = self.call.wrt
        wrt = None if wrt is None else tuple(k for k in wrt if k < len(inputs) and inputs[k] is not None)
        call = NodeCall(spec, mode, proto, tuple(inputs), tuple(cots), tuple(us), wrt=wrt, part=self.call.part)
        got = gather(self.executor, call, None, [self.backend], self.use_oracle)
        if got.ref is None:
            return None, None, None
        return judge_node(self.executor, call, got, compare.Policy()), call, got


def _pick_label(results, backend, verdict):
    hits = [r for r in results if r.backend == backend and r.verdict == verdict]
    if not hits:
        return None
    return max(hits, key=lambda r: (r.metrics.max_abs if r.metrics else 0.0)).output


_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,199}")
# what _write_repro reads of each finding, and its type
_FINDING_FIELDS = {"id": str, "backend": str, "op_type": str, "mode": str, "verdict": str, "first_node": str,
                   "nodes": list, "message": str}


def read_report(report_path):
    """report.json, checked as far as `irtrace repro` reads it: one line naming the file and the field
    for anything else (a report is user input: it may be hand-edited, truncated or crafted)."""
    report_path = Path(report_path)
    try:
        report = json.loads(report_path.read_text())
    except (OSError, UnicodeDecodeError) as e:
        raise IrtraceError(f"cannot read report {report_path}: {e}") from None
    except ValueError as e:
        raise IrtraceError(f"cannot read report {report_path}: not JSON ({e})") from None
    if not isinstance(report, dict) or report.get("schema") != "irtrace.report/1":
        schema = report.get("schema") if isinstance(report, dict) else type(report).__name__
        raise IrtraceError(f"{report_path}: not an irtrace report (schema {schema!r})")
    if not isinstance(report.get("findings"), list):
        raise IrtraceError(f"{report_path}: findings: not a list")
    bundle = report.get("bundle")
    if not isinstance(bundle, dict) or not isinstance(bundle.get("path"), str):
        raise IrtraceError(f"{report_path}: bundle.path: not a string")
    for k, f in enumerate(report["findings"]):
        if not isinstance(f, dict):
            raise IrtraceError(f"{report_path}: findings[{k}]: not an object")
        for name, kind in _FINDING_FIELDS.items():
            if not isinstance(f.get(name), kind):
                raise IrtraceError(f"{report_path}: findings[{k}].{name}: missing or not a {kind.__name__}")
        if not _ID.fullmatch(f["id"]) or ".." in f["id"]:
            raise IrtraceError(f"{report_path}: findings[{k}].id {f['id'][:80]!r}: not a finding id "
                               f"(letters, digits, '.', '_', '-'; it names a folder)")
        if f["mode"] not in ("fwd", "vjp", "vjp2"):
            raise IrtraceError(f"{report_path}: findings[{k}].mode {f['mode'][:20]!r}: not fwd, vjp or vjp2")
        _check_versions(f.get("versions"), f"{report_path}: findings[{k}].versions")
    return report


def _check_versions(versions, where):
    """A finding's "versions" (releases replayed side by side), if it has one: lists of version strings."""
    if versions is None:
        return
    if not isinstance(versions, dict):
        raise IrtraceError(f"{where}: not an object")
    for key in ("reproduces", "clean"):
        listed = versions.get(key)
        if not isinstance(listed, list) or not all(isinstance(v, str) and _ID.fullmatch(v) for v in listed):
            raise IrtraceError(f"{where}.{key}: missing or not a list of versions")
    if not versions["reproduces"]:
        raise IrtraceError(f"{where}.reproduces: empty (a finding reproduces somewhere)")
    if not isinstance(versions.get("latest"), (str, type(None))):
        raise IrtraceError(f"{where}.latest: not a version")


def prepare_out(out_dir):
    """The repro folder: created if missing; refused when it is a symlink or not a folder (every file
    is written inside it, never through a link to somewhere else)."""
    out_dir = Path(out_dir)
    if out_dir.is_symlink():
        raise IrtraceError(f"output folder {out_dir}: is a symbolic link; give the folder itself")
    if out_dir.exists() and not out_dir.is_dir():
        raise IrtraceError(f"output folder {out_dir}: exists and is not a folder")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise IrtraceError(f"output folder {out_dir}: cannot create it ({e.strerror})") from None
    return out_dir


def make_repros(report_path, out_dir, finding_ids=None, shrink_budget=300, timeout=60.0, anonymize=True):
    """Write one folder per finding; returns the folders."""
    report_path = Path(report_path)
    report = read_report(report_path)
    findings = report["findings"]
    if finding_ids:
        ids = {f["id"] for f in findings}
        for i in finding_ids:
            if i not in ids:
                raise IrtraceError(f"no finding {i!r} in {report_path}.{suggest(i, ids)}")
        findings = [f for f in findings if f["id"] in finding_ids]
    from irtrace.report.json_report import bundle_path as bundle_of
    bundle_path = bundle_of(report, report_path)
    bundle = load(bundle_path)
    nodes = {n.name for n in bundle.model.graph.node}
    for f in findings:
        if f["first_node"] not in nodes:
            raise IrtraceError(f"{report_path}: finding {f['id']}: first_node {f['first_node'][:80]!r} is not a node "
                               f"of {bundle_path}")
    out_dir = prepare_out(out_dir)
    pool = WorkerPool()
    folders = []
    try:
        for f in findings:
            if _after_forward_shape(f):
                log.info("%s: no repro of its own: the forward's SHAPE_MISMATCH finding's repro shows it", f["id"])
                continue
            folder = _write_repro(bundle, f, pool, out_dir, shrink_budget, timeout, anonymize)
            if folder is not None:
                folders.append(folder)
    finally:
        pool.close()
    return folders


def _after_forward_shape(finding):
    """Whether `finding` is a vjp or vjp2 that could not apply the reference's cotangent because the
    forward's output has another shape (wire Status SHAPE_MISMATCH, no arrays): the forward's own
    SHAPE_MISMATCH finding, and its repro, show the bug."""
    return finding["mode"] != "fwd" and finding["verdict"] == "SHAPE_MISMATCH" and \
        finding["worst"].get("max_abs") is None


@dataclass(frozen=True)
class _Shrunk:
    """A finding's node, shrunk: the case before and after with the shrinker's stats, the smaller case's
    NodeCall, the backend's Result for the checked result (`label`, index `check` among the mode's
    results), the arrays of case.npz and the numbers of finding.json; `varies`: the backend's result of
    the smaller case differed between two runs of it."""
    original: Case
    small: Case
    stats: object
    call: NodeCall
    result: object
    label: str
    check: int
    data: dict
    numbers: dict
    varies: bool = False


def _write_repro(bundle, f, pool, out_dir, shrink_budget, timeout, anonymize=True):
    call = _replayed(bundle, f)
    sources = _sources(pool, call, f, timeout)
    if sources is None:
        return None
    shrunk = _shrink_finding(_Runner(pool, call, f["backend"], timeout), call, f, shrink_budget)
    if shrunk is None:
        return None
    ctx = _context(bundle, f, call, shrunk, sources, pool)
    folder = out_dir / f["id"]  # read_report: a plain name, never '..' or a path
    if folder.is_symlink():
        raise IrtraceError(f"{folder}: is a symbolic link; not writing through it")
    folder.mkdir(parents=True, exist_ok=True)
    case = _script_case(shrunk, ctx)
    backend, verdict, data = f["backend"], f["verdict"], shrunk.data
    who = f"PyTorch {ctx['torch_version']}, float32" if backend != REFERENCE else "float64"
    written = standalone.write(standalone.Job(sources[0], case, ctx["title"], who, harness=(ctx, data)),
                               standalone.repro_forms(sources[0], case), backends.get(backend), folder)
    got = data.get("backend_result")
    ctx.update(form=written.form, output=written.run.output, exit_code=written.run.code, varies=shrunk.varies,
               anonymize=anonymize,
               api=standalone.api_of(written.text), has_data=(folder / "data.npz").exists(),
               workarounds=own_workarounds(pool, backend, call.spec, f.get("workarounds"), timeout),
               all_zero=got is not None and got.size > 0 and not np.any(got) and "reference" in data
               and bool(np.any(data["reference"])))
    if verdict not in (compare.CRASH, compare.TIMEOUT):
        standalone.compare_torch(sources[1], case, pool.get(REFERENCE).info, folder, script.safe(ctx["title"], 200))
    _write_files(folder, f, ctx, shrunk, written)
    return folder


def _replayed(bundle, f):
    """The NodeCall the replay made of the finding's first node, on copies of the recorded values: the
    same inputs require grad, the same directions are in vjp2's s, and for vjp2 the same part (ds/dx with
    the cotangent a constant, or ds/dg)."""
    mode = f["mode"]
    spec = next(s for s in bundle.specs if s.name == f["first_node"])
    node = next(n for n in bundle.model.graph.node if n.name == spec.name)
    recorded = from_bundle(bundle, spec, mode, proto_text(node))
    part = ("g" if str(f.get("worst", {}).get("output", "")).startswith("d2g") else "x") if mode == "vjp2" else None
    made = [c for c in mode_calls(bundle, spec, [mode], bundle_paths(bundle), recorded.proto)[0] if c.part == part]
    copied = lambda arrays: tuple(None if a is None else np.array(a) for a in arrays)  # noqa: E731
    return replace(recorded, inputs=copied(recorded.inputs), cots=copied(recorded.cots),
                   us=copied(made[0].us if made else recorded.us), wrt=made[0].wrt if made else None, part=part)


def _sources(pool, call, f, timeout):
    """(the backend's "source" reply, the reference's) for the finding's node; None when the backend
    writes no script for it (said, and the next finding goes on)."""
    try:
        src = pool.get(f["backend"]).call(call.request("source"), [], timeout)[0]
        torch_src = pool.get(REFERENCE).call(call.request("source"), [], timeout)[0]
    except Exception as e:  # a backend that cannot even start writes no repro; say so, go on
        log.warning("%s: no repro (%s)", f["id"], e)
        return None
    if src.get("status") != Status.OK:
        print(f"{f['id']}: no repro script: {src.get('message')}")
        return None
    return src, torch_src


def _shrink_finding(runner, call, f, shrink_budget):
    """The finding's node shrunk while the backend's result keeps its verdict; None (said) when the node
    alone does not show it any more."""
    backend, verdict, spec = f["backend"], f["verdict"], call.spec
    original = Case(call.inputs, call.us)
    results, _, _ = runner.evaluate(original, check=False)
    label = _pick_label(results or [], backend, verdict)
    if label is None:
        print(f"{f['id']}: does not reproduce on node {spec.name} in isolation any more; skipped")
        return None

    def predicate(case):
        res, _, _ = runner.evaluate(case)
        return res is not None and any(r.backend == backend and r.output == label and r.verdict == verdict for r in res)

    optional = [i for i in range(len(spec.inputs)) if i > 0 and i == len(spec.inputs) - 1]
    axis_attrs = {"axis", "axes", "perm", "pads", "kernel_shape", "strides", "dilations", "output_padding",
                  "output_shape", "blocksize", "split"} & set(spec.attrs)
    small, stats = shrink(original, predicate, optional=optional, budget=shrink_budget, rank=not axis_attrs,
                          attrs=spec.attrs, op_type=spec.op_type,
                          seconds=30.0 if verdict in (compare.CRASH, compare.TIMEOUT) else 90.0)
    results, small_call, got = runner.evaluate(small, check=small is not original)
    result = next(r for r in results if r.backend == backend and r.output == label)
    names = labels(small_call.spec, call.mode)
    k = names.index(label) if label in names else 0
    data = _case_arrays(small_call, got, backend, label, k)
    again = _case_arrays(small_call, runner.evaluate(small, check=False)[2], backend, label, k) \
        if "backend_result" in data else {}
    varies = "backend_result" in again and not np.array_equal(again["backend_result"], data["backend_result"],
                                                              equal_nan=True)
    return _Shrunk(original, small, stats, small_call, result, label, k, data, _numbers(result, data), varies)


def _case_arrays(call, got, backend, label, k):
    """case.npz: the call's arrays (inputs, cotangents, directions as the mode takes them) and the
    checked result as the reference, float64 and the backend computed it."""
    data = {f"input{i}": a for i, a in enumerate(call.inputs) if a is not None}
    data.update({f"cot{j}": g for j, g in enumerate(call.cots if call.mode != "fwd" else []) if g is not None})
    data.update({f"u{i}": u for i, u in enumerate(call.us if call.mode == "vjp2" else []) if u is not None})
    ref, oracle = got.ref, got.oracle
    status, _, out = got.outs[backend]
    if backend == REFERENCE:  # a finding against the reference itself: float64 is what it should give
        ref = [None if o is None else np.asarray(o, np.float64) for o in oracle] if oracle is not None else None
    if not label.endswith("*") and ref is not None and k < len(ref) and ref[k] is not None:
        data["reference"] = np.asarray(ref[k])
        if oracle is not None and k < len(oracle) and oracle[k] is not None:
            data["oracle"] = np.asarray(oracle[k], np.float64)
        if status == Status.OK and k < len(out) and out[k] is not None:
            data["backend_result"] = np.asarray(out[k])
    return data


def _numbers(result, data):
    m = result.metrics
    return {"max_abs": m.max_abs if m else None, "max_rel": m.max_rel if m else None,
            "worst_index": list(m.worst_index) if m else None,
            "actual_at_worst": m.actual_at_worst if m else None, "ref_at_worst": m.ref_at_worst if m else None,
            "oracle_at_worst": float(np.asarray(data["oracle"])[tuple(m.worst_index)])
            if m and "oracle" in data else None,
            "oracle_abs": result.oracle_abs, "allowed": result.allowed}


def _context(bundle, f, call, shrunk, sources, pool):
    """The fields of the harness script and issue.md (script.render_script, script.render_issue)."""
    src, torch_src = sources
    spec, mode, verdict, label, result = call.spec, f["mode"], f["verdict"], shrunk.label, shrunk.result
    small = shrunk.call
    fw = src["script"]["framework"]
    framework_name = script.framework_name(src["script"], f["backend"])
    role = input_role(spec.op_type, spec.domain, spec.opset, shrunk.check) \
        if label.startswith(("d:", "d2x:")) and not label.endswith("*") else "input"
    symptom = script.symptom(verdict, label, shrunk.numbers, result.message, role)
    # a low-precision case says its dtype in the title: the same op in float32 may be right
    low = sorted({np.asarray(a).dtype.name for a in small.inputs if a is not None} & {"float16", "bfloat16"})
    return {
        "title": f"[{framework_name}] {script.safe(spec.op_type)}: {symptom} in {script._MODE_WORDS[mode]}"
                 + (f" ({', '.join(low)})" if low else ""),
        "role": role, "framework": fw, "framework_module": fw, "framework_name": framework_name,
        "autodiff": src["script"]["autodiff"], "op": src["op"], "imports": src["imports"],
        "defined_in": src["defined_in"], "attrs": _plain_attrs(small.spec.attrs), "mode": mode, "part": call.part,
        "nondiff": _nondiff(src["nondiff"], call.wrt, small.inputs),
        "n_inputs": len(small.spec.inputs), "n_outputs": len(small.spec.outputs), "check_index": shrunk.check,
        "label": label, "verdict": verdict, "allowed": float(result.allowed if result.allowed is not None else 0.0),
        "allowance": script.allowance(result) or "none: the finding is not a number",
        "node": spec.name, "op_type": spec.op_type, "module": f.get("module", ""),
        "file_line": f.get("file_line", ""), "model": bundle.manifest.get("name", ""),
        "torch_code": _torch_block(torch_src), "numbers": shrunk.numbers,
        "message": result.message or f.get("message", ""),
        "torch_version": pool.get(REFERENCE).hello["versions"].get("torch", ""),
        "environment": {**src.get("versions", {}), "Python": src["script"].get("python", ""),
                        "OS": platform.platform(), "CPU": _cpu()},
        "n_nodes": len(f["nodes"]), "original_shapes": shrunk.original.shapes(),
        "shrunk_shapes": shrunk.small.shapes(), "shrink_calls": shrunk.stats.calls,
        "releases": f.get("versions"),
    }


def _script_case(shrunk, ctx):
    """The shrunk case as the scripts compute and check it."""
    call, data = shrunk.call, shrunk.data
    nondiff = set(ctx["nondiff"])
    if call.mode == "fwd":  # nothing requires grad: the schema's attribute-like inputs (Resize's scales) are known
        nondiff |= differentiated(call.spec, list(call.inputs), set())[1]
    return ScriptCase(wire_spec(call.spec, call.proto), call.mode, ctx["verdict"], shrunk.check, call.inputs,
                      call.cots, call.us, tuple(sorted(nondiff)), ctx["attrs"], want=data.get("reference"),
                      f64=data.get("oracle"), got=data.get("backend_result"), allowed=ctx["allowed"],
                      allowance=f"irtrace's allowance: {ctx['allowance']}", part=call.part,
                      error=shrunk.result.message if ctx["verdict"] == compare.ERROR else None,
                      varies=shrunk.varies)


def _write_files(folder, f, ctx, shrunk, written):
    """issue.md, case.npz, workaround.py (when one matches) and finding.json beside the script; one line
    on the terminal."""
    (folder / "issue.md").write_text(script.render_issue(ctx, written.text))
    write_npz(folder / "case.npz", shrunk.data)  # every array of the shrunk case, for tools and tests
    matching = [w for w in ctx["workarounds"] if w["matches"] and w["code"]]
    if matching:  # the first matching workaround's code, as the backend declares it
        (folder / "workaround.py").write_text(matching[0]["code"].rstrip() + "\n")
    run, text, stats = written.run, written.text, shrunk.stats
    (folder / "finding.json").write_text(json.dumps(clean({
        "id": f["id"], "backend": f["backend"], "mode": f["mode"], "verdict": f["verdict"], "label": shrunk.label,
        "node": f["first_node"], "numbers": shrunk.numbers, "original_shapes": shrunk.original.shapes(),
        "shrunk_shapes": shrunk.small.shapes(),
        "shrink": {"calls": stats.calls, "accepted": stats.accepted, "seconds": round(stats.seconds, 3),
                   "stopped": stats.stopped},
        "environment_python": ctx["environment"]["Python"], "framework": ctx["framework"],
        "script": {"form": written.form, "lines": text.count("\n"), "exit_code": run.code,
                   "reproduces": run.code == 1, "same_result": run.same, "varies": shrunk.varies}}), indent=1,
        allow_nan=False,
        default=lambda o: None) + "\n")
    said = "reproduces" if run.code == 1 else f"DOES NOT reproduce standalone (exit {run.code})"
    print(f"{f['id']}: {folder} (shrunk {shrunk.original.shapes()} -> {shrunk.small.shapes()} in {stats.calls} "
          f"steps; {written.form} script, {text.count(chr(10))} lines, {said})")


def _nondiff(own, wrt, inputs):
    """The input positions that do not require grad in the repro: every one the replay's call did not
    differentiate (`wrt`; None: the op's own `nondiff` flags)."""
    if wrt is None:
        return list(own)
    return [k for k in range(len(inputs)) if k not in wrt]


def own_workarounds(pool, backend, spec, claimed, timeout):
    """The workarounds report.json lists for a finding, each with its name, description and code as the
    backend itself declares them (backends/<name>/workarounds.py, through its worker's "alternatives"
    and "source" replies), never as report.json holds them: a report is user input, and what issue.md
    shows and workaround.py holds is read and run by people. Only the verdicts come from the report; an
    entry the backend does not declare for this op is left out."""
    from irtrace.replay.workarounds import code_of, declared
    claimed = [w for w in claimed or [] if isinstance(w, dict) and isinstance(w.get("name"), str)]
    if not claimed:
        return []
    offered = declared(pool, backend, spec, timeout)
    out = []
    for w in claimed:
        if w["name"] not in offered:
            log.warning("%s: the report lists a workaround %r that %s does not declare for %s; left out",
                        spec.name, w["name"][:80], backend, spec.op_type)
            continue
        verdicts = w.get("verdicts") if isinstance(w.get("verdicts"), dict) else {}
        out.append({"name": w["name"], "description": offered[w["name"]], "matches": w.get("matches") is True,
                    "verdicts": {str(m): str(v) for m, v in verdicts.items()},
                    "code": code_of(pool, backend, spec, w["name"], timeout)})
    return out


def _plain_attrs(attrs):
    return {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in attrs.items()}


def _torch_block(torch_src):
    if torch_src.get("status") != Status.OK:
        return "raise ImportError('no PyTorch equivalent for this op')\n"
    return torch_src["script"]["autodiff"] + "\n\n" + "\n".join(torch_src["imports"]) + "\n\n" + torch_src["op"]


def _cpu():
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


_write_npz = write_npz  # the name tests use
