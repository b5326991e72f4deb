"""report.json: the stable, documented schema (docs/report.md)."""
import json
import math
import os
import platform
import statistics
from dataclasses import asdict
from pathlib import Path

import numpy as np

from irtrace.version import __version__
from irtrace import compare
from irtrace.replay import backends as registry

SCHEMA = "irtrace.report/1"


def speed(replay, top=5):
    """Per backend, the op types where it is slowest relative to torch (median time ratio)."""
    per = {}
    for node in replay.nodes:
        for r in node.results:
            if r.backend in (registry.reference(), registry.oracle()) or r.time_s is None or not r.ref_time_s:
                continue
            per.setdefault((r.backend, node.op_type, r.mode), {})[node.name] = (r.time_s, r.ref_time_s)
    out = {}
    for (backend, op, mode), by_node in per.items():
        ratios = [t / max(rt, 1e-9) for t, rt in by_node.values()]
        out.setdefault(backend, []).append({"op_type": op, "mode": mode, "nodes": len(by_node),
                                            "median_ratio": round(statistics.median(ratios), 3),
                                            "median_time_s": statistics.median(t for t, _ in by_node.values())})
    return {b: sorted(v, key=lambda e: -e["median_ratio"])[:top] for b, v in out.items()}


_AS_IS = {str, int, bool, type(None)}


def clean(v):
    """Strict JSON: numpy scalars become Python numbers, non-finite floats null (a browser's
    JSON.parse rejects NaN). The common types tested by identity first: a report's rows are a
    few hundred thousand values."""
    t = type(v)
    if t is float:
        return v if math.isfinite(v) else None
    if t is dict:
        return {k: clean(x) for k, x in v.items()}
    if t is list or t is tuple:
        return [clean(x) for x in v]
    if t in _AS_IS:
        return v
    if isinstance(v, np.generic):  # e.g. an np.float32 tolerance: json cannot write numpy scalars
        return clean(v.item())
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, dict):
        return {k: clean(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [clean(x) for x in v]
    return v


def _item(v):
    if isinstance(v, np.generic):
        return v.item()
    raise TypeError(f"Object of type {type(v).__name__} is not JSON serializable")


def dumps_clean(v):
    """json.dumps(clean(v), allow_nan=False), the same text, in one pass where `v` holds no non-finite float:
    json's encoder takes numpy scalars as the numbers they hold (`default`) and writes a non-finite float as
    NaN or Infinity, which a text without either word cannot hold; a text with one (a NaN, or only a name or
    message with the word) is made again through clean. A journal line a node (clean is half of its cost)."""
    text = _WITH_ITEMS(v)
    return _STRICT(clean(v)) if "NaN" in text or "Infinity" in text else text


# json.dumps makes a JSONEncoder at each call given any option (0.7-1.1 us of a row's 2-6 us): made once here
_WITH_ITEMS = json.JSONEncoder(default=_item).encode
_STRICT = json.JSONEncoder(allow_nan=False).encode


def node_text(node):
    """`node`'s to_json() as strict JSON text (dumps_clean): made once, for the node's journal line, report.json's
    entry of it (json.loads of the text: what a reader of the file gets) and report.html's (node_texts), not made
    and encoded again for each (benchmarks/fixed_cost.py); made again where results came since. Only the text is
    kept: a model of many nodes holds a kilobyte or so a node until its report is written."""
    made = (len(node.results), len(node.skipped))
    if node.made_text is None or node.made_text[0] != made:
        node.made_text = (made, dumps_clean(node.to_json()))
    return node.made_text[1]


def node_texts(replay, report):
    """The text json.dumps gives each entry of report["nodes"] (build's: a node's node_text and its "worst"),
    from the node's node_text."""
    return [f'{node_text(n)[:-1]}, "worst": {json.dumps(entry["worst"])}}}'
            for n, entry in zip(replay.nodes, report["nodes"])]


def build(replay, findings, strict=False):
    summary = {v: 0 for v in compare.VERDICTS}
    for node in replay.nodes:
        for r in node.results:
            summary[r.verdict] += 1
    m = replay.bundle.manifest
    report = clean({
        "schema": SCHEMA,
        "irtrace": __version__,
        "bundle": {"path": str(replay.bundle.path), "name": m.get("name"), "mode": m.get("mode"),
                   "source": m.get("source")},
        "reference": registry.reference(),
        "oracle": registry.oracle(),
        "backends": [{"name": b, "versions": replay.versions.get(b, {}), "restarts": replay.restarts.get(b, 0)}
                     for b in replay.backends],
        "restarts": dict(sorted(replay.restarts.items())),  # every worker's, the reference's and oracle's too
        "modes": replay.modes,
        "policy": asdict(replay.policy),
        "host": {"python": platform.python_version(), "platform": platform.platform(),
                 "processor": platform.processor() or platform.machine()},
        "elapsed_s": round(replay.elapsed_s, 3),
        "nodes": [],  # below: each node's JSON read from the text its journal line was (node_text)
        "findings": [_with_workarounds(replay, _finding(f)) for f in findings],
        "warnings": warnings(replay),
        "speed": speed(replay),
        "summary": {**summary, "nodes": len(replay.nodes), "findings": len(findings), "strict": strict},
    })
    report["nodes"] = [{**json.loads(node_text(n)), "worst": _worst(n)} for n in replay.nodes]
    return report


def warnings(replay):
    """What leaves part of the model untested without being a finding (docs/report.md, "Warnings"): the
    nodes no backend could judge because the reference itself cannot run their op (every comparison is
    with the reference, so nothing there was compared). A run with a warning fails under $CI or --strict."""
    ref = registry.reference()
    by_op = {}
    for node in replay.nodes:
        modes = [r.mode for r in node.results if r.backend == ref and r.output == "*"
                 and r.verdict == compare.UNSUPPORTED]
        if modes:
            by_op.setdefault((node.domain, node.op_type), []).append(node.name)
    out = []
    for (domain, op), names in by_op.items():
        shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
        out.append({"kind": "unjudged", "op_type": op, "domain": domain, "nodes": names,
                    "message": f"no backend could judge {len(names)} node(s) of op {(domain + '.') if domain else ''}"
                               f"{op} ({shown}): the reference ({ref}) cannot run it, so nothing there is "
                               f"compared; this fails the run under $CI or --strict"})
    if replay.nodes and not any(node.results for node in replay.nodes):
        out.append({"kind": "nothing judged", "op_type": None, "domain": None, "nodes": [],
                    "message": f"no result was judged on the {len(replay.nodes)} node(s) selected (see each node's "
                               f"skipped entries); this fails the run under $CI or --strict"})
    return out


def _finding(f):
    """A finding as report.json holds it: "versions" only where releases were replayed side by side."""
    out = asdict(f)
    if out["versions"] is None:
        del out["versions"]
    return out


def _with_workarounds(replay, finding):
    """A finding with the alternatives of its op that were tried on its nodes (docs/report.md,
    "Workarounds"): no "workarounds" key when its backend has none for that op."""
    from irtrace.replay.workarounds import for_finding
    tried = for_finding(replay, finding)
    return finding if tried is None else {**finding, "workarounds": tried}


def _worst(node):
    if not node.results:
        return None
    return max((r.verdict for r in node.results), key=lambda v: compare.SEVERITY.get(v, 0))


_TIMES = ("time_s", "ref_time_s")


def split_timings(report):
    """(report, timings): what a replay found, identical in every run of it, and how long it took
    (elapsed_s, speed, each result's time_s / ref_time_s, each chained run's time_s), which differs
    from run to run."""
    timings = {"elapsed_s": report.get("elapsed_s"), "speed": report.get("speed", {}), "results": []}
    kept = {k: v for k, v in report.items() if k not in ("elapsed_s", "speed")}
    kept["nodes"] = []
    for n in report["nodes"]:
        rows = []
        for r in n["results"]:
            row = r.copy()  # less the times, the rest in their order (a comprehension over every key: twice the time)
            times = {k: row.pop(k, None) for k in _TIMES}
            if any(t is not None for t in times.values()):
                timings["results"].append({"node": n["name"], "backend": r["backend"], "mode": r["mode"],
                                           "output": r["output"], **times})
            rows.append(row)
        kept["nodes"].append({**n, "results": rows})
    kept["findings"] = [{**f, "worst": {k: v for k, v in f["worst"].items() if k not in _TIMES}}
                        for f in report["findings"]]
    if report.get("chained"):  # each chained run's time
        runs = report["chained"]["runs"]
        timings["chained"] = [{"backend": r["backend"], "workarounds": bool(r.get("workarounds")),
                               "time_s": r.get("time_s")} for r in runs]
        kept["chained"] = {**report["chained"], "runs": [{k: v for k, v in r.items() if k != "time_s"} for r in runs]}
    return kept, timings


def write(report, out_dir):
    """OUT/report.json (byte-identical for the same replay) and OUT/timings.json; returns report.json's path."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    kept, timings = split_timings(report)
    p = out / "report.json"
    dump_atomic(p, kept, rows="nodes")
    dump_atomic(out / "timings.json", timings, rows="results")
    return p


def write_atomic(path, text):
    """`text` into `path` through a temporary sibling and a rename: never half written."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def dump_atomic(path, value, rows=None):
    """`value` as strict, indented JSON into `path` like write_atomic, written as it is encoded: the text
    of a large report is never held whole in memory. `rows`: the key of a long list whose entries are
    written one per line, by json's C encoder (the indenting encoder is pure Python: on a ResNet-50
    replay it took longer than judging)."""
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w") as f:
        listed = value.get(rows) if rows and isinstance(value, dict) else None
        if not isinstance(listed, list):
            json.dump(value, f, indent=1, allow_nan=False)
        else:
            head = {k: v for k, v in value.items() if k != rows}
            f.write(json.dumps(head, indent=1, allow_nan=False)[:-2] + ",\n" if head else "{\n")
            f.write(f" {json.dumps(rows)}: [")
            for k, entry in enumerate(listed):
                f.write(("," if k else "") + "\n  " + _STRICT(entry))
            f.write("\n ]\n}" if listed else "]\n}")
        f.write("\n")
    os.replace(tmp, path)


def chained_failures(report):
    """Chained results that count as findings: a run that failed, and every failing parameter
    gradient or running statistic of a run (docs/report.md)."""
    out = []
    for run in (report.get("chained") or {}).get("runs", []):
        if run["status"] in compare.FAILING:
            out.append((run["backend"], "run", run["status"]))
        out += [(run["backend"], sub["node"], sub["verdict"]) for sub in run.get("substituted", [])]
        for kind in ("parameters", "state"):
            out += [(run["backend"], e["value"], e["verdict"]) for e in run.get(kind, [])
                    if e["verdict"] in compare.FAILING]
    return out


def exit_code(report, ci=False):
    """0 nothing failing, 1 a finding (isolated, or chained: see chained_failures), or a warning (a part of
    the model nothing judged) where `ci` ($CI set) or the replay was --strict."""
    failing_warning = bool(report.get("warnings")) and (ci or report["summary"].get("strict"))
    return 1 if report["findings"] or chained_failures(report) or failing_warning else 0


def bundle_path(report, report_path):
    """The bundle a report.json (read from `report_path`) replayed: its path as the replay was given it,
    from here, or else from beside the replay's output folder."""
    path = Path(report["bundle"]["path"])
    if not path.is_absolute() and not path.exists():
        path = Path(report_path).parent.parent / path
    return path
