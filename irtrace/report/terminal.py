"""Terminal output: findings first (worst first), then one summary line with fixed columns."""
from irtrace import compare
from irtrace.errors import printable

_COLOR = {v: v.color[0] for v in compare.Verdict}


def _g(v, fmt="{:.3g}"):
    return "-" if v is None else fmt.format(v)


PER_BACKEND = 8  # findings shown per backend: a screen each; the rest are in report.json


def finding_lines(report, color=False, per_backend=PER_BACKEND):
    """Three lines per finding: what, how much and who is right, where; at most `per_backend` findings of
    each backend (worst first), then how many more report.json holds."""
    out = []
    fs = report["findings"]
    if fs:
        out.append(f"{len(fs)} finding(s), worst first:")
    shown, more = {}, {}
    for f in fs:
        if shown.get(f["backend"], 0) >= per_backend:
            more[f["backend"]] = more.get(f["backend"], 0) + 1
            continue
        shown[f["backend"]] = shown.get(f["backend"], 0) + 1
        w = f["worst"]
        verdict = f"{f['verdict']:<14}"
        if color:
            verdict = f"\033[{_ANSI.get(_COLOR.get(f['verdict']), '0')}m{verdict}\033[0m"
        where = f["first_node"] + (f" ({f['module']}" if f["module"] else "") + \
            (f", {f['file_line'].rsplit('/', 1)[-1]}" if f["file_line"] else "") + (")" if f["module"] else "")
        # names come from the bundle (any ONNX file): never raw control characters on a terminal
        classes = len(f.get("classes") or ())
        spread = f" in {classes} attribute classes" if classes > 1 else ""
        out.append(f"{verdict} " + printable(f"{f['backend']} {f['op_type']} {f['mode']}  {len(f['nodes'])} "
                                             f"node(s){spread}, first {where}"))
        # numbers, not a classification, so the words can never contradict the verdict
        if w.get("backend_oracle_abs") is not None and w.get("oracle_abs") is not None:
            oracle = f"vs float64: {f['backend']} {_g(w['backend_oracle_abs'])}, reference {_g(w['oracle_abs'])}" + \
                (f", allowed {_g(w['allowed'])}" if w.get("allowed") is not None else "")
        else:
            oracle = "no float64 verdict"
        if w.get("max_abs") is not None:
            numbers = "  ".join(f"{title} {_g(w.get(key))}" for key, title, shown in compare.DISPLAY
                                if shown and key != "allowed")
            out.append(f"{'':15}output {printable(w.get('output'))}  {numbers}  passes with atol >= {_g(w.get('min_atol'))}"
                       f" or rtol >= {_g(w.get('min_rtol'))}  ({oracle})")
        note = " ".join(("; ".join(f["tags"]) or f["message"]).split())  # one line, whatever the framework wrote
        out.append(f"{'':15}id {printable(f['id'])}" + (f"  {printable(note[:300])}" if note else ""))
        line = workaround_line(f)
        if line:
            out.append(f"{'':15}{printable(line)}")
        if f.get("versions"):
            out.append(f"{'':15}{printable(versions_line(f['versions']))}")
    for backend, n in more.items():
        out.append(f"... and {n} more {printable(backend)} finding(s), in report.json")
    return out


def versions_line(versions):
    """The releases a finding reproduces on, and those replayed beside them where it does not."""
    latest = versions.get("latest")
    named = lambda vs: ", ".join(v + (" (latest)" if v == latest else "") for v in vs)  # noqa: E731
    return f"reproduces on {named(versions['reproduces'])}" + \
        (f"; not on {named(versions['clean'])}" if versions["clean"] else "")


def workaround_line(finding):
    """One short line naming the alternatives that match on every node of a finding (or that none does);
    None when its backend has none for the op."""
    tried = finding.get("workarounds")
    if not tried:
        return None
    ok = [w["name"] for w in tried if w["matches"]]
    if ok:
        return f"workaround that matches: {', '.join(ok)}"
    def why(w):
        bad = [f"{m} {v}" for m, v in w["verdicts"].items() if v not in (compare.MATCH, compare.NOISE)]
        return ", ".join(bad) if bad else "not judged on every node and mode"
    return "no workaround matches: " + ", ".join(f"{w['name']} ({why(w)})" for w in tried)


_ANSI = {"red": "31", "magenta": "35", "yellow": "33", "cyan": "36", "green": "32"}


def speed_lines(report):
    lines = []
    for backend, rows in report.get("speed", {}).items():
        if rows:
            worst = ", ".join(f"{r['op_type']} {r['mode']} {r['median_ratio']:.1f}x" for r in rows[:3])
            lines.append(f"slowest vs torch on {backend}: {worst}")
    return lines


def summary_line(report):
    s = report["summary"]
    cols = [f"nodes {s['nodes']:>5}", f"MATCH {s['MATCH']:>6}", f"NOISE {s['NOISE']:>5}",
            f"DIVERGENT {s['DIVERGENT']:>4}", f"NAN {s['NAN_MISMATCH']:>3}", f"SHAPE {s['SHAPE_MISMATCH']:>3}",
            f"ERROR {s['ERROR']:>3}", f"CRASH {s['CRASH']:>3}", f"TIMEOUT {s['TIMEOUT']:>3}",
            f"UNSUPPORTED {s['UNSUPPORTED']:>4}", f"findings {s['findings']:>3}", f"{report['elapsed_s']:7.1f} s"]
    return "irtrace replay: " + "  ".join(cols)


def summary_json(report, out):
    """The summary line as one JSON object, for scripts (`irtrace replay --format json`): the counts,
    each finding's id, backend, op, mode, verdict and first node, and where the report is."""
    import json
    keys = ("id", "backend", "op_type", "mode", "verdict", "first_node", "module", "file_line")
    return json.dumps({"summary": report["summary"], "elapsed_s": report["elapsed_s"],
                       "findings": [{k: f.get(k) for k in keys} for f in report["findings"]],
                       "warnings": [w["message"] for w in report.get("warnings", [])],
                       "report": str(out / "report.json")}, sort_keys=True)


def show(report, stream=None):
    import sys
    stream = stream or sys.stdout
    for line in finding_lines(report, color=stream.isatty()) + speed_lines(report) + warning_lines(report) + \
            [summary_line(report)]:
        print(line, file=stream)


def warning_lines(report):
    """One line per warning (json_report.warnings), just above the summary line."""
    return [printable(f"warning: {w['message']}") for w in report.get("warnings", [])]
