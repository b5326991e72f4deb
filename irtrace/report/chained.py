"""Chained replay in the reports: JSON section, terminal lines, the error-growth plot, HTML."""
import base64
import html
from dataclasses import asdict
from pathlib import Path

from backends._runtime.wire import Status
from irtrace.compare import MATCH, NOISE, NUMERIC_FAILURES, UNSUPPORTED


def to_json(runs, loss):
    return {"loss": loss, "runs": [asdict(r) for r in runs]}


def _fmt(v):
    return "-" if v is None else f"{v:.3g}"


def run_label(run):
    """A run's backend, and whether workarounds were applied in it."""
    return run["backend"] + (" with workarounds" if run.get("workarounds") else "")


def applied_line(run):
    """Which alternatives a run used in place of which ops, e.g. "leaky_relu_where at 5 LeakyRelu nodes"."""
    count = {}
    for w in run.get("workarounds", []):
        count[(w["name"], w["op_type"])] = count.get((w["name"], w["op_type"]), 0) + 1
    return ", ".join(f"{name} at {n} {op} node{'s' if n > 1 else ''}" for (name, op), n in count.items())


def crash_line(at):
    """Where a chained run crashed or hung, and what isolated replay says of that node."""
    if not at.get("node"):
        return f"in the {at['phase']}; node not located" + (f" ({at['message']})" if at.get("message") else "")
    src = at.get("source") or {}
    where = ", ".join(x for x in (src.get("module"), (src.get("file_line") or "").rsplit("/", 1)[-1]) if x)
    how = (f" (the shortest cut of the chain that still crashes ends there: {at['runs']} runs in fresh processes)"
           if at["how"] == "bisection" else "")
    iso = ", ".join(f"{m} {v}" for m, v in (at.get("isolated") or {}).items()) or "not replayed"
    return (f"in the {at['phase']} of node {at['node']} ({at.get('op_type') or '?'}{', ' + where if where else ''})"
            f"{how}; isolated there: {iso}")


def lines(section, top=10):
    out = []
    for r in section["runs"]:
        b = run_label(r)
        if r["status"] == UNSUPPORTED and not r.get("workarounds"):
            continue  # a backend without a chained mode (onnxruntime, onnxref): said in report.json
        if r["status"] != Status.OK:
            out.append(f"chained {b} ({section['loss']} loss): {r['status']}: {r['message'][:300]}")
            if r.get("crashed_at"):
                out.append(f"  {crash_line(r['crashed_at'])}")
            if r.get("workarounds"):
                out.append(f"  applied: {applied_line(r)}")
            if r["parameters"]:
                out.append(f"  all {len(r['parameters'])} parameter gradients: {r['parameters'][0]['verdict']} "
                           f"(not computed: the run did not finish)")
            continue
        bad_v = sum(1 for e in r["values"] if e["verdict"] in NUMERIC_FAILURES)
        bad_g = sum(1 for e in r["grads"] if e["verdict"] in NUMERIC_FAILURES)
        out.append(f"chained {b} ({section['loss']} loss): {len(r['values'])} values, {bad_v} diverge forward; "
                   f"{len(r['grads'])} cotangents, {bad_g} diverge backward")
        if r.get("workarounds"):
            out.append(f"  applied: {applied_line(r)}")
            bad = [e for e in r["parameters"] if e["verdict"] not in (MATCH, NOISE)]
            n = len(r["parameters"])
            out.append(f"  all {n} parameter gradients MATCH or NOISE: the port matches end to end" if n and not bad
                       else f"  {len(bad)} of {n} parameter gradients fail: the port does not match end to end")
        for note in r.get("notes", []):
            out.append(f"  ({note})")
        for sub in r.get("substituted", []):
            out.append(f"  {sub['verdict']} at {sub['node']}: {sub['message'][:200]} — its recorded value was fed "
                       f"downstream")
        for key, title in (("first_divergence", "forward"), ("first_grad_divergence", "backward")):
            d = r.get(key)
            if d:
                out.append(f"  first {title} divergence: {d['value']} (node {d['node']}), max abs {_fmt(d['max_abs'])}"
                           f" — {d['explanation']}")
        if r["parameters"]:
            out.append(f"  parameter gradients, worst first ({len(r['parameters'])}):")
            for e in r["parameters"][:top]:
                out.append(f"    {e['verdict']:<14} {e['value']:<48} max abs {_fmt(e['max_abs']):>9}  "
                           f"max rel {_fmt(e['max_rel']):>9}")
        for e in r["state"]:
            if e["verdict"] not in (MATCH, NOISE):
                out.append(f"  running stat {e['state_dict_key']}: {e['verdict']} max abs {_fmt(e['max_abs'])}")
    return out


def _blocks(manifest_nodes, specs, depth=2):
    """(index, label) where the module path's first `depth` parts change: block boundaries."""
    out, last = [], None
    for i, s in enumerate(specs):
        mod = manifest_nodes.get(s.name, {}).get("module", "")
        key = ".".join(mod.split(".")[:depth]) if mod else ""
        if key and key != last:
            out.append((i, key))
            last = key
    return out


def plot(section, bundle, path):
    """Max rel error (log) against node position, one line per backend and direction; labels at the
    first divergence and at block boundaries (thinned so they stay readable at 1,000 nodes)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    specs = bundle.specs
    n = len(specs)
    fig, ax = plt.subplots(figsize=(min(24, 8 + n / 60), 5.5), dpi=110)
    floor = 1e-9
    for r in section["runs"]:
        if r["status"] != Status.OK:
            continue
        for kind, entries, style in (("fwd", r["values"], "-"), ("bwd", r["grads"], "--")):
            worst = {}
            for e in entries:
                if e["max_rel"] is not None:
                    worst[e["index"]] = max(worst.get(e["index"], 0.0), e["max_rel"])
            xs = sorted(worst)
            if xs:
                ax.plot(xs, [max(worst[x], floor) for x in xs], style, lw=1.1, marker="." if n < 200 else None,
                        ms=3, label=f"{run_label(r)} {kind}")
        for key, color in (("first_divergence", "red"), ("first_grad_divergence", "purple")):
            d = r.get(key)
            if d:
                mod = bundle.manifest["nodes"].get(d["node"], {}).get("module", "") or d["node"]
                ax.axvline(d["index"], color=color, lw=0.8, alpha=0.6)
                ax.annotate(f"{'culprit' if d.get('culprit') else 'first divergence'}: {mod}",
                            (d["index"], max(d["max_rel"] or floor, floor)), xytext=(5, 10), textcoords="offset points",
                            color=color, fontsize=8)
    blocks = _blocks(bundle.manifest["nodes"], specs)
    step = max(1, len(blocks) // 24)
    for i, (x, label) in enumerate(blocks):
        ax.axvline(x, color="0.85", lw=0.6, zorder=0)
        if i % step == 0:
            ax.text(x, 1.01, label, rotation=60, fontsize=7, transform=ax.get_xaxis_transform(), ha="left", va="bottom")
    ax.set_yscale("log")
    ax.set_xlim(-1, n)
    ax.set_xlabel("node (topological order)")
    ax.set_ylabel("max relative error vs torch (chained)")
    ax.set_title(f"chained replay of {bundle.manifest.get('name', '')}, {section['loss']} loss", pad=60, fontsize=10)
    ax.grid(True, which="major", axis="y", alpha=0.3)
    if ax.get_legend_handles_labels()[0]:  # a run that failed draws no line
        ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return Path(path)


def html_section(section, png):
    img = base64.b64encode(Path(png).read_bytes()).decode() if png and Path(png).exists() else ""
    rows = []
    for r in section["runs"]:
        for e in r["parameters"]:
            rows.append(f"<tr><td>{html.escape(run_label(r))}</td><td>{html.escape(e['value'])}</td>"
                        f"<td>{e['verdict']}</td><td>{_fmt(e['max_abs'])}</td><td>{_fmt(e['max_rel'])}</td></tr>")
    text = "<br>".join(html.escape(x) for x in lines(section))
    return (f"<h2>Chained replay</h2><p>{text}</p>" + (f'<img alt="chained error" src="data:image/png;base64,{img}" '
                                                        f'style="max-width:100%">' if img else "") +
            "<h3>Parameter gradients, worst first</h3><table><tr><th>backend</th><th>parameter</th><th>verdict</th>"
            "<th>max abs</th><th>max rel</th></tr>" + "".join(rows) + "</table>")
