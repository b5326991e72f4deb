"""`irtrace diff` output: terminal lines, diff.json and diff.html from irtrace.diff.diff()'s dict."""
import html
import json
from pathlib import Path


def lines(d):
    """The terminal lines: each aligned pair that differs, what one side has alone, the verdict."""
    out = []
    fa, fb = d["a"]["framework"], d["b"]["framework"]
    for p in d["pairs"]:
        if p["attr_diffs"] or p["chained"] == "diverge":
            attrs = "; ".join(f"{k} {vb} vs {va}" for k, (va, vb) in p["attr_diffs"].items())
            out.append(f"{p['op_class']:8} {p['b_module'] or p['b']} ({fb}) ~ {p['a_module'] or p['a']} ({fa}): "
                       f"{attrs or 'same attributes'}; values {p['chained']}"
                       + (f" (max abs {p['chained_max_abs']:.3g})" if p["chained_max_abs"] is not None else "")
                       + (f"; isolated {p['isolated']}" if p["isolated"] not in ("", "-") else ""))
    for side, fw in (("only_a", fa), ("only_b", fb)):
        if d[side]:
            out.append(f"only in {fw}: " + ", ".join(f"{x['op_type']} {x['module'] or x['node']}" for x in d[side]))
    out.append(d["verdict"])
    return out


def write(d, out):
    """diff.json and diff.html in `out` (created). Every name from a bundle is escaped."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "diff.json").write_text(json.dumps(d, indent=1, default=float) + "\n")
    esc = html.escape
    fa, fb = esc(d["a"]["framework"]), esc(d["b"]["framework"])
    rows = "".join(f"<tr><td>{esc(p['op_class'])}</td><td>{esc(p['b_module'] or p['b'])}</td>"
                   f"<td>{esc(p['a_module'] or p['a'])}</td><td>{esc(json.dumps(p['attr_diffs']))}</td>"
                   f"<td>{esc(str(p['chained']))}</td><td>{esc(str(p['chained_max_abs']))}</td>"
                   f"<td>{esc(str(p['isolated']))}</td></tr>" for p in d["pairs"])
    (out / "diff.html").write_text(
        f"<!doctype html><html><head><meta charset='utf-8'><title>irtrace diff</title></head><body>"
        f"<h1>irtrace diff</h1><p>{esc(d['verdict'])}</p><table border='1'><tr><th>op</th><th>{fb}</th>"
        f"<th>{fa}</th><th>attributes ({fa} vs {fb})</th><th>chained values</th><th>max abs</th><th>isolated</th></tr>"
        f"{rows}</table></body></html>\n")
    return out
