"""`irtrace repro`: per distinct finding of a report, shrink the first node's case and write
repro.py, issue.md, data.npz (and finding.json, the shrunk numbers, for tools and tests)."""
import base64
import io
import json
import logging
import platform
import re
import zipfile
from dataclasses import replace
from pathlib import Path

import numpy as np
import onnx
from onnx import helper

from irtrace import compare
from irtrace.errors import IrtraceError, suggest
from irtrace.store import u_name
from irtrace.ir.spec import decode_attrs, node_specs
from irtrace.replay import backends
from irtrace.ir.semantics import input_role
from irtrace.replay.call import NodeCall, bundle_paths
from irtrace.replay.execute import LocalExecutor, WorkerPool
from irtrace.replay.judge import gather, judge_node, labels
from irtrace.replay.plan import ORACLE, REFERENCE, mode_calls
from irtrace.report.json_report import clean
from irtrace.repro import script, standalone
from irtrace.repro.standalone import write_npz
from irtrace.repro.shrink import Case, shrink
from irtrace.store import grad_name, load

log = logging.getLogger(__name__)


class _Runner:
    """Evaluates one node in one mode on candidate inputs: reference, oracle, one backend."""

    def __init__(self, pool, spec, proto, backend, mode, original_cots, timeout, wrt=None, part=None):
        self.pool, self.spec, self.proto, self.backend, self.mode = pool, spec, proto, backend, mode
        self.original_cots, self.timeout = original_cots, timeout
        self.wrt, self.part = wrt, part  # what the replay's call differentiated (NodeCall.wrt, .part)
        self.executor = LocalExecutor(timeout, pool=pool)
        self.use_oracle = backends.get(ORACLE).unavailable() is None
        self.validator = "onnxruntime" if backends.get("onnxruntime").unavailable() is None else None

    def valid(self, spec, proto, inputs):
        """onnxruntime checks ONNX's rules strictly (e.g. kernel_shape against W's shape), where torch
        would run an inconsistent node: a candidate it rejects is not a valid smaller node."""
        if self.validator is None:
            return True
        msg = {"kind": "run", "mode": "fwd", "spec": {**spec.to_json(), "proto": proto}}
        reply, _ = self.pool.get(self.validator).call(msg, inputs, self.timeout)
        return reply.get("status") != "error"

    def _spec_for(self, case):
        names = tuple("" if a is None else n for n, a in zip(self.spec.inputs, case.inputs))
        node = onnx.NodeProto()
        node.ParseFromString(base64.b64decode(self.proto))
        del node.input[:]
        node.input.extend(names)
        while node.input and not node.input[-1]:
            node.input.pop()
        names = tuple(node.input)
        spec = replace(self.spec, inputs=names)
        if case.attrs:  # the shrinker's plainer attributes, in the node and its spec alike
            keep = [a for a in node.attribute if a.name not in dict(case.attrs)]
            del node.attribute[:]
            node.attribute.extend(keep + [helper.make_attribute(k, v) for k, v in case.attrs])
            spec = replace(spec, attrs=decode_attrs(node))
        return spec, base64.b64encode(node.SerializeToString()).decode()

    def cots_for(self, case, spec, proto):
        msg = {"kind": "run", "mode": "fwd", "spec": {**spec.to_json(), "proto": proto}}
        reply, out = self.pool.get(REFERENCE).call(msg, list(case.inputs[:len(spec.inputs)]), self.timeout)
        if reply.get("status") != "ok":
            return None
        cots = []
        for y, g in zip(out, self.original_cots):
            if y is None or g is None or np.asarray(y).dtype.kind != "f":
                cots.append(None)
            elif case.cot_style == "ones":
                cots.append(np.ones(np.shape(y), np.float32))
            elif all(a <= b for a, b in zip(np.shape(y), np.shape(g))) and np.ndim(y) == np.ndim(g):
                cots.append(np.ascontiguousarray(g[tuple(slice(0, d) for d in np.shape(y))]))
            else:
                cots.append(np.random.default_rng(0).standard_normal(np.shape(y)).astype(np.float32))
        return cots

    def evaluate(self, case, check=True):
        """(results, raw numbers) for `case`, or (None, None) when it is not a valid node."""
        spec, proto = self._spec_for(case)
        inputs = list(case.inputs[:len(spec.inputs)])
        if check and not self.valid(spec, proto, inputs):
            return None, None
        cots = [None] * len(spec.outputs)
        if self.mode != "fwd":
            cots = self.cots_for(case, spec, proto)
            if cots is None:
                return None, None
        us = list(case.us[:len(spec.inputs)])
        wrt = None if self.wrt is None else tuple(k for k in self.wrt if k < len(inputs) and inputs[k] is not None)
        call = NodeCall(spec, self.mode, proto, tuple(inputs), tuple(cots), tuple(us), wrt=wrt, part=self.part)
        got = gather(self.executor, call, None, [self.backend], self.use_oracle)
        if got.ref is None:
            return None, None
        return judge_node(self.executor, call, got, compare.Policy()), (spec, inputs, cots, us, got.ref, got.oracle, got.outs)


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
    return report


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
    bundle_path = Path(report["bundle"]["path"])
    if not bundle_path.is_absolute() and not bundle_path.exists():
        bundle_path = report_path.parent.parent / bundle_path
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
            folder = _write_repro(bundle, report, f, pool, out_dir, shrink_budget, timeout, anonymize)
            if folder is not None:
                folders.append(folder)
    finally:
        pool.close()
    return folders


def _write_repro(bundle, report, f, pool, out_dir, shrink_budget, timeout, anonymize=True):
    backend, mode, verdict = f["backend"], f["mode"], f["verdict"]
    specs = {s.name: s for s in node_specs(bundle.model)}
    spec = specs[f["first_node"]]
    proto = next(base64.b64encode(n.SerializeToString()).decode() for n in bundle.model.graph.node
                 if n.name == spec.name)
    v = bundle.values
    inputs = tuple(np.array(v[i]) if i else None for i in spec.inputs)
    # the call the replay made: the same inputs require grad, the same directions are in vjp2's s, and
    # for vjp2 the same part (ds/dx with the cotangent a constant, or ds/dg)
    part = ("g" if str(f.get("worst", {}).get("output", "")).startswith("d2g") else "x") if mode == "vjp2" else None
    made = [c for c in mode_calls(bundle, spec, [mode], bundle_paths(bundle), proto)[0] if c.part == part]
    wrt = made[0].wrt if made else None
    us = tuple(np.array(u) if u is not None else None for u in made[0].us) if made else \
        tuple(np.array(v[u_name(i)]) if i and u_name(i) in v else None for i in spec.inputs)
    cots = [np.array(v[grad_name(o)]) if o and grad_name(o) in v else None for o in spec.outputs]
    out_dtypes = [v.spec(o)[0].str if o and o in v else "" for o in spec.outputs]
    try:
        pool.get(backend)
        src = pool.get(backend).call({"kind": "source", "spec": {**spec.to_json(), "proto": proto,
                                                                 "out_dtypes": out_dtypes}}, [], timeout)[0]
        torch_src = pool.get(REFERENCE).call({"kind": "source", "spec": {**spec.to_json(), "proto": proto}}, [],
                                             timeout)[0]
    except Exception as e:  # a backend that cannot even start writes no repro; say so, go on
        log.warning("%s: no repro (%s)", f["id"], e)
        return None
    if src.get("status") != "ok":
        print(f"{f['id']}: no repro script: {src.get('message')}")
        return None
    runner = _Runner(pool, spec, proto, backend, mode, cots, timeout, wrt, part)
    original = Case(inputs, us)
    results, _ = runner.evaluate(original, check=False)
    label = _pick_label(results or [], backend, verdict)
    if label is None:
        print(f"{f['id']}: does not reproduce on node {spec.name} in isolation any more; skipped")
        return None

    def predicate(case):
        res, _ = runner.evaluate(case)
        return res is not None and any(r.backend == backend and r.output == label and r.verdict == verdict for r in res)

    optional = [i for i in range(len(spec.inputs)) if i > 0 and i == len(spec.inputs) - 1]
    axis_attrs = {"axis", "axes", "perm", "pads", "kernel_shape", "strides", "dilations", "output_padding",
                  "output_shape", "blocksize", "split"} & set(spec.attrs)
    small, stats = shrink(original, predicate, optional=optional, budget=shrink_budget, rank=not axis_attrs,
                          attrs=spec.attrs, op_type=spec.op_type,
                          seconds=30.0 if verdict in (compare.CRASH, compare.TIMEOUT) else 90.0)
    results, raw = runner.evaluate(small, check=small is not original)
    sspec, sinputs, scots, sus, ref, oracle, outs = raw
    result = next(r for r in results if r.backend == backend and r.output == label)
    names = labels(sspec, mode)
    k = names.index(label) if label in names else 0
    status, reply, out = outs[backend]
    data = {}
    for i, a in enumerate(sinputs):
        if a is not None:
            data[f"input{i}"] = a
    for j, g in enumerate(scots if mode != "fwd" else []):
        if g is not None:
            data[f"cot{j}"] = g
    for i, u in enumerate(sus if mode == "vjp2" else []):
        if u is not None:
            data[f"u{i}"] = u
    if backend == REFERENCE:  # a finding against the reference itself: float64 is what it should give
        ref = [None if o is None else np.asarray(o, np.float64) for o in oracle] if oracle is not None else None
    if not label.endswith("*") and ref is not None and k < len(ref) and ref[k] is not None:
        data["reference"] = np.asarray(ref[k])
        if oracle is not None and k < len(oracle) and oracle[k] is not None:
            data["oracle"] = np.asarray(oracle[k], np.float64)
        if status == "ok" and k < len(out) and out[k] is not None:
            data["backend_result"] = np.asarray(out[k])
    m = result.metrics
    numbers = {"max_abs": m.max_abs if m else None, "max_rel": m.max_rel if m else None,
               "worst_index": list(m.worst_index) if m else None,
               "actual_at_worst": m.actual_at_worst if m else None, "ref_at_worst": m.ref_at_worst if m else None,
               "oracle_at_worst": float(np.asarray(data["oracle"])[tuple(m.worst_index)])
               if m and "oracle" in data else None,
               "oracle_abs": result.oracle_abs, "allowed": result.allowed}
    fw = src["script"]["framework"]
    framework_name = script.framework_name(src["script"], backend)
    versions = {**src.get("versions", {})}
    role = input_role(spec.op_type, spec.domain, spec.opset, k) if label.startswith(("d:", "d2x:")) and \
        not label.endswith("*") else "input"
    title = f"[{framework_name}] {script.safe(spec.op_type)}: {script.symptom(verdict, label, numbers, result.message, role)} " \
            f"in {script._MODE_WORDS[mode]}"
    manifest = bundle.manifest
    ctx = {
        "title": title, "role": role, "framework": fw, "framework_module": fw, "framework_name": framework_name,
        "autodiff": src["script"]["autodiff"], "op": src["op"], "imports": src["imports"],
        "defined_in": src["defined_in"], "attrs": _plain_attrs(sspec.attrs), "mode": mode, "part": part,
        "nondiff": _nondiff(src["nondiff"], wrt, sinputs),
        "n_inputs": len(sspec.inputs), "n_outputs": len(sspec.outputs), "check_index": k, "label": label,
        "verdict": verdict, "allowed": float(result.allowed if result.allowed is not None else 0.0), "node": spec.name, "op_type": spec.op_type,
        "module": f.get("module", ""), "file_line": f.get("file_line", ""), "model": manifest.get("name", ""),
        "torch_code": _torch_block(torch_src), "numbers": numbers, "message": result.message or f.get("message", ""),
        "torch_version": pool.get(REFERENCE).hello["versions"].get("torch", ""),
        "environment": {**{k2: v2 for k2, v2 in versions.items()},
                        "Python": src["script"].get("python", ""), "OS": platform.platform(),
                        "CPU": _cpu()},
        "n_nodes": len(f["nodes"]), "original_shapes": original.shapes(), "shrunk_shapes": small.shapes(),
        "shrink_calls": stats.calls,
    }
    folder = out_dir / f["id"]  # read_report: a plain name, never '..' or a path
    if folder.is_symlink():
        raise IrtraceError(f"{folder}: is a symbolic link; not writing through it")
    folder.mkdir(parents=True, exist_ok=True)
    _, sproto = runner._spec_for(small)
    case = {"spec": {**sspec.to_json(), "proto": sproto}, "mode": mode, "part": part, "verdict": verdict, "check": k,
            "inputs": sinputs, "cots": scots, "us": sus, "nondiff": ctx["nondiff"], "attrs": ctx["attrs"],
            "want": data.get("reference"),
            "f64": data.get("oracle"), "allowed": ctx["allowed"], "got": data.get("backend_result")}
    who = f"PyTorch {ctx['torch_version']}, float32" if backend != REFERENCE else "float64"
    info = backends.get(backend)
    text, npz, form, run = standalone.best_script(src, case, info, folder, ctx["title"], who)
    if text is None:  # no straight-line form reproduces: the harness that runs irtrace's own autodiff
        text, npz, form = script.render_script(ctx), data, "harness"
        write_npz(folder / "data.npz", npz)
        run = standalone.run_script(info, folder, text)
    got_w = data.get("backend_result")
    workarounds = own_workarounds(pool, backend, spec, f.get("workarounds"), timeout)
    ctx.update(form=form, output=run.output, exit_code=run.code, anonymize=anonymize, api=standalone.api_of(text),
               has_data=(folder / "data.npz").exists(), workarounds=workarounds,
               all_zero=got_w is not None and got_w.size > 0 and not np.any(got_w) and "reference" in data
               and bool(np.any(data["reference"])))
    if verdict not in (compare.CRASH, compare.TIMEOUT):
        ctx["straight_torch"] = standalone.torch_script(torch_src, case, folder, pool.get(REFERENCE).info,
                                                        script.safe(ctx["title"], 200))
    (folder / "issue.md").write_text(script.render_issue(ctx, text))
    write_npz(folder / "case.npz", data)  # every array of the shrunk case, for tools and tests
    matching = [w for w in workarounds if w["matches"] and w["code"]]
    if matching:  # the first matching workaround's code, as the backend declares it
        (folder / "workaround.py").write_text(matching[0]["code"].rstrip() + "\n")
    (folder / "finding.json").write_text(json.dumps(clean({
        "id": f["id"], "backend": backend, "mode": mode, "verdict": verdict, "label": label, "node": spec.name,
        "numbers": numbers, "original_shapes": original.shapes(), "shrunk_shapes": small.shapes(),
        "shrink": {"calls": stats.calls, "accepted": stats.accepted, "seconds": round(stats.seconds, 3),
                   "stopped": stats.stopped},
        "environment_python": src["script"].get("python", ""), "framework": fw,
        "script": {"form": form, "lines": text.count("\n"), "exit_code": run.code, "reproduces": run.code == 1,
                   "same_result": run.same}}), indent=1, allow_nan=False,
        default=lambda o: None) + "\n")
    said = "reproduces" if run.code == 1 else f"DOES NOT reproduce standalone (exit {run.code})"
    print(f"{f['id']}: {folder} (shrunk {original.shapes()} -> {small.shapes()} in {stats.calls} steps; "
          f"{form} script, {text.count(chr(10))} lines, {said})")
    return folder


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
    if torch_src.get("status") != "ok":
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
