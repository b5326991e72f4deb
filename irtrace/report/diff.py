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
    for p in d["pairs"]:  # B's node on A's inputs differs where the recorded values agree: said too
        if not p["attr_diffs"] and p["chained"] != "diverge" and p["isolated"] not in ("", "-", "equal"):
            out.append(f"{p['op_class']:8} {p['b_module'] or p['b']} ({fb}) ~ {p['a_module'] or p['a']} ({fa}): "
                       f"values {p['chained']}; isolated {p['isolated']}")
    for side, fw in (("only_a", fa), ("only_b", fb)):
        if d[side]:
            out.append(f"only in {fw}: " + ", ".join(f"{x['op_type']} {x['module'] or x['node']}" for x in d[side]))
    for o in d.get("outputs", []):
        if o["values"] != "equal":
            out.append(f"output   {o['b'] or '-'} ({fb}) ~ {o['a'] or '-'} ({fa}): {o['values']}"
                       + (f" (max abs {o['max_abs']:.3g})" if o["max_abs"] is not None else ""))
    out.append(d["verdict"])
    return out


def write(d, out):
    """diff.json and diff.html in `out` (created). Every name from a bundle is escaped."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    # strict JSON: a max abs of inf or nan (a value that overflowed on one side) is null
    (out / "diff.json").write_text(json.dumps(_strict(d), indent=1, default=float, allow_nan=False) + "\n")
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


def _strict(v):
    if hasattr(v, "item") and not isinstance(v, (list, tuple, dict)):  # a numpy scalar
        v = v.item()
    if isinstance(v, float):
        return v if v == v and abs(v) != float("inf") else None
    if isinstance(v, dict):
        return {k: _strict(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_strict(x) for x in v]
    return v
