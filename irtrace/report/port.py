"""`irtrace port` in the reports: report.json (schema irtrace.port/1, docs/report.md), the terminal lines,
report.html."""
import html
import json
from pathlib import Path

from irtrace import compare
from irtrace.errors import printable


def _g(v):
    return "-" if v is None else f"{v:.3g}"


def _row(r):
    return (f"{r['verdict']:<14} {printable(r['name'])}  max abs {_g(r['max_abs'])}  max rel {_g(r['max_rel'])}"
            f"  allowed {_g(r['allowed'])}" + (f"  {printable(r['message'][:200])}" if r.get("message") else ""))


def lines(report, top=8):
    """What the terminal shows: the verdict per part, the first diverging module forward and backward, the
    worst parameter gradients, the running stats that differ, the cross-reference."""
    r = report if isinstance(report, dict) else report.to_json()
    out = [f"port {r['factory']} on {r['backend']} ({r['loss']} loss, {r['mode']} mode) vs {r['bundle']}"]
    for kind, title in (("outputs", "model outputs"), ("modules", "module outputs"), ("grads", "module output gradients"),
                        ("parameters", "parameter gradients"), ("state", "running stats")):
        rows = r[kind]
        if not rows:
            continue
        bad = [x for x in rows if x["verdict"] in compare.FAILING]
        out.append(f"  {title}: {len(rows)} compared, {len(bad)} diverge")
    for key, title in (("first_forward", "first module whose output diverges"),
                       ("first_backward", "first module (backward order) whose output gradient diverges")):
        if r.get(key):
            out.append(f"  {title}: {_row(r[key])}")
    bad = [x for x in r["parameters"] if x["verdict"] in compare.FAILING]
    if bad:
        out.append(f"  parameter gradients that diverge, worst first ({len(bad)}):")
        out += [f"    {_row(x)}" for x in bad[:top]]
    for x in r["state"]:
        if x["verdict"] in compare.FAILING:
            out.append(f"  running stat {_row(x)}")
    for x in r["outputs"]:
        if x["verdict"] in compare.FAILING and x["name"] == "(the step)":
            out.append(f"  {_row(x)}")
    e = r.get("explanation")
    if e:
        out.append(f"  why: {printable(e['text'])}")
    for note in r.get("notes", []):
        out.append(f"  ({printable(note)})")
    if r.get("unaligned"):
        out.append(f"  ({len(r['unaligned'])} port module(s) with no module of that path in the bundle, not compared: "
                   f"{printable(', '.join(r['unaligned'][:5]))}{', ...' if len(r['unaligned']) > 5 else ''}; "
                   f"one that is a bundle module under another name: rename it with --map)")
    verdict = "the port diverges" if r["diverges"] else "the port matches (every comparison MATCH or NOISE)"
    out.append(f"irtrace port: {verdict}  {r['time_s']:.1f} s" if r.get("time_s") is not None else
               f"irtrace port: {verdict}")
    return out


def write(report, out_dir):
    """report.json and report.html in `out_dir`; returns the folder."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    data = report.to_json()
    (out / "report.json").write_text(json.dumps(data, indent=1, allow_nan=True, default=str) + "\n")
    (out / "report.html").write_text(_html(data))
    return out


def _html(r):
    esc = html.escape
    parts = [f"<!doctype html><meta charset='utf-8'><title>irtrace port: {esc(r['factory'])}</title>",
             "<style>body{font-family:sans-serif}td,th{padding:2px 8px;text-align:left}"
             ".bad{color:#d33}.ok{color:#3a3}</style>",
             f"<h1>irtrace port: {esc(r['factory'])} on {esc(r['backend'])}</h1>",
             f"<p>{esc(r['bundle'])}, {esc(r['loss'])} loss, {esc(r['mode'])} mode: "
             f"<b>{'the port diverges' if r['diverges'] else 'the port matches'}</b></p>"]
    if r.get("explanation"):
        parts.append(f"<p>{esc(r['explanation']['text'])}</p>")
    for kind in ("outputs", "modules", "grads", "parameters", "state"):
        rows = r[kind]
        if not rows:
            continue
        parts.append(f"<h2>{esc(kind)}</h2><table><tr><th>name</th><th>verdict</th><th>max abs</th><th>max rel</th>"
                     f"<th>allowed</th><th>message</th></tr>")
        for x in rows:
            cls = "bad" if x["verdict"] in compare.FAILING else "ok"
            parts.append(f"<tr><td>{esc(x['name'])}</td><td class='{cls}'>{esc(x['verdict'])}</td><td>{_g(x['max_abs'])}"
                         f"</td><td>{_g(x['max_rel'])}</td><td>{_g(x['allowed'])}</td><td>{esc(x.get('message') or '')}"
                         f"</td></tr>")
        parts.append("</table>")
    return "\n".join(parts) + "\n"
