"""report.html: self-contained (no CDN). The findings table, filtered by what a row says (the box above
it) and sorted by a click on a column's header (again: the other way); the graph in topological order,
each node coloured by its worst verdict; a click on a node shows its numbers."""
import html
import json
from pathlib import Path

from irtrace import compare

_COLORS = {**{str(v): v.color[1] for v in compare.Verdict}, None: "#999"}

_PAGE = """<!doctype html><html><head><meta charset="utf-8"><title>irtrace report: {title}</title>
<style>
body{{font:13px/1.4 system-ui,sans-serif;margin:16px;color:#222}} h1{{font-size:18px}}
#graph{{display:flex;flex-wrap:wrap;gap:3px;margin:12px 0}}
.n{{padding:2px 5px;border-radius:3px;color:#fff;cursor:pointer;font-size:11px;white-space:nowrap}}
.n.sel{{outline:2px solid #000}} {verdict_css} table{{border-collapse:collapse;margin-top:8px}}
td,th{{border:1px solid #ccc;padding:2px 6px;text-align:left;font-size:12px}} .legend span{{margin-right:10px}}
#findings th{{cursor:pointer}}
</style></head><body>
<h1>irtrace replay of {title}</h1>
<p>{summary}</p>{warnings}
<div class="legend">{legend}</div>
<h2>Findings</h2>{findings}
{extra}
<h2>Nodes in topological order</h2>
<div id="graph"></div><div id="detail">Click a node to see its numbers.</div>
<script id="data" type="application/json">{data}</script>
<script>
const R = JSON.parse(document.getElementById('data').textContent);
const C = {colors};
const g = document.getElementById('graph'), d = document.getElementById('detail');
const COLS = {columns};
const esc = v => String(v).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
const f = v => v === null || v === undefined ? '-' : (typeof v === 'number' ? v.toPrecision(3) : esc(v));
const T = document.getElementById('findings'), Q = document.getElementById('filter');
if (T) {{
  const rows = () => Array.from(T.tBodies[0].rows).slice(1);  // the first row holds the headers
  Q.oninput = () => {{
    const q = Q.value.toLowerCase();
    rows().forEach(r => {{ r.style.display = r.textContent.toLowerCase().includes(q) ? '' : 'none'; }});
  }};
  Array.from(T.rows[0].cells).forEach((th, k) => {{
    th.onclick = () => {{
      const up = th.dataset.order !== 'up';
      Array.from(T.rows[0].cells).forEach(c => {{ delete c.dataset.order; }});
      th.dataset.order = up ? 'up' : 'down';
      const key = r => {{ const t = r.cells[k].textContent, x = Number(t); return t !== '' && !isNaN(x) ? x : t; }};
      const cmp = (a, b) => {{
        const x = key(a), y = key(b);
        const c = typeof x === typeof y ? (x < y ? -1 : x > y ? 1 : 0) : (typeof x === 'number' ? -1 : 1);
        return up ? c : -c;
      }};
      rows().sort(cmp).forEach(r => T.tBodies[0].appendChild(r));
    }};
  }});
}}
// the nodes' spans built apart and added at once; one click handler for them all (10,000 nodes)
const frag = document.createDocumentFragment();
R.nodes.forEach((n, i) => {{
  const e = document.createElement('span');
  e.className = 'n v-' + (n.worst || 'null'); e.dataset.i = i;  // a class: no style parsed per node
  e.textContent = n.op_type; e.title = n.name + (n.source.module ? ' (' + n.source.module + ')' : '');  // text, not HTML
  frag.appendChild(e);
}});
g.appendChild(frag);
g.onclick = ev => {{
  const e = ev.target.closest('.n');
  if (!e) return;
  const n = R.nodes[Number(e.dataset.i)];
  document.querySelectorAll('.n.sel').forEach(x => x.classList.remove('sel')); e.classList.add('sel');
  let h = '<h3>' + esc(n.name) + ' — ' + esc(n.op_type) + '</h3><p>module: ' + esc(n.source.module || '-') +
          ' · ' + esc(n.source.file_line || '') + '</p><table><tr><th>backend</th><th>mode</th><th>output</th>' +
          '<th>verdict</th>' + COLS.map(c => '<th>' + esc(c[1]) + '</th>').join('') + '<th>message</th></tr>';
  n.results.forEach(r => {{
    h += '<tr><td>' + esc(r.backend) + '</td><td>' + esc(r.mode) + '</td><td>' + esc(r.output) +
         '</td><td style="color:' + (C[r.verdict] || '#000') + '">' + esc(r.verdict) + '</td>' +
         COLS.map(c => '<td>' + f(r[c[0]]) + '</td>').join('') + '<td>' + esc(r.message || '') + '</td></tr>';
  }});
  (n.skipped || []).forEach(s => {{
    h += '<tr><td>' + esc(s.backend || 'all') + '</td><td>' + esc(s.mode) + '</td><td>' + esc(s.output) +
         '</td><td>skipped</td>' + COLS.map(() => '<td></td>').join('') + '<td>' + esc(s.reason) + '</td></tr>';
  }});
  d.innerHTML = h + '</table>';
}};
</script></body></html>
"""


def _versions_html(finding):
    """Under a finding's backend, the releases replayed side by side it reproduces on ('' for one release)."""
    from irtrace.report.terminal import versions_line
    versions = finding.get("versions")
    return f"<br><small>{html.escape(versions_line(versions))}</small>" if versions else ""


def workarounds_html(findings):
    """Per finding whose backend has alternatives for its op: each one tried, its verdicts per mode,
    whether it matches on every node of the finding, and its code."""
    parts = []
    for f in findings:
        for w in f.get("workarounds", []):
            verdicts = ", ".join(f"{m} {v}" for m, v in w["verdicts"].items())
            parts.append(f"<h3>{html.escape(f['id'])}: {html.escape(w['name'])} — "
                         f"{'matches' if w['matches'] else 'does not match'}</h3>"
                         f"<p>{html.escape(w['description'])}<br>{html.escape(verdicts)}</p>"
                         f"<pre>{html.escape(w['code'])}</pre>")
    return ("<h2>Workarounds tried</h2>" + "".join(parts)) if parts else ""


def render(report, extra_html=""):
    """The page as one string (write() streams the same text into the file)."""
    parts = []
    _emit(report, extra_html, parts.append)
    return "".join(parts)


def _escaped(text):
    # every <, > and & as a JSON escape: no name can close the element or open a comment in it
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _emit(report, extra_html, out, node_texts=None):
    """The page, piece by piece, into `out`: the report's JSON node by node (json's C encoder on each),
    so a large report is never held as one text besides the report itself: the host's memory stays flat in the
    depth of the model."""
    s = report["summary"]
    summary = ", ".join(f"{k} {v}" for k, v in s.items() if isinstance(v, int) and not isinstance(v, bool) and v)
    legend = "".join(f'<span style="color:{c}">&#9632; {html.escape(str(k))}</span>' for k, c in _COLORS.items() if k)
    if report["findings"]:
        rows = "".join(
            f"<tr><td>{html.escape(f['id'])}</td><td>{html.escape(f['verdict'])}</td><td>{html.escape(f['backend'])}"
            f"{_versions_html(f)}</td>"
            f"<td>{html.escape(f['op_type'])}</td><td>{html.escape(f['mode'])}</td><td>{len(f['nodes'])}</td>"
            f"<td>{html.escape(f['first_node'])}</td><td>{html.escape(f['module'])}</td>"
            f"<td>{f['worst'].get('max_abs')}</td><td>{html.escape(f['message'][:200])}</td>"
            f"<td>{html.escape(', '.join(w['name'] for w in f.get('workarounds', []) if w['matches']))}</td></tr>"
            for f in report["findings"])
        findings = ('<p><input id="filter" placeholder="filter the findings" size="40"></p>'
                    '<table id="findings"><tr><th>id</th><th>verdict</th><th>backend</th><th>op</th><th>mode</th><th>nodes</th>'
                    f"<th>first node</th><th>module</th><th>max abs</th><th>message</th>"
                    f"<th>workaround that matches</th></tr>{rows}</table>") + workarounds_html(report["findings"])
    else:
        findings = "<p>None.</p>"
    colors = json.dumps({str(k) if k else "null": v for k, v in _COLORS.items()})
    verdict_css = " ".join(f".v-{k if k else 'null'}{{background:{v}}}" for k, v in _COLORS.items())
    columns = json.dumps([[key, title] for key, title, _ in compare.DISPLAY])
    before, after = _PAGE.split("{data}")
    warnings = "".join(f'<p style="color:#b00"><b>warning:</b> {html.escape(w["message"])}</p>'
                       for w in report.get("warnings", []))
    fields = dict(title=html.escape(str(report["bundle"]["name"])), summary=html.escape(summary), legend=legend,
                  warnings=warnings,
                  findings=findings, extra=extra_html, colors=colors, columns=columns,
                  verdict_css=verdict_css)
    out(before.format(**fields))
    head = json.dumps({k: v for k, v in report.items() if k != "nodes"}, allow_nan=True)
    out(_escaped(head[:-1] + ("," if head != "{}" else "") + '"nodes":['))
    texts = node_texts or (json.dumps(node, allow_nan=True) for node in report.get("nodes", []))
    for k, text in enumerate(texts):
        out(("," if k else "") + _escaped(text))
    out("]}")
    out(after.format(**fields))


def write(report, out_dir, extra_html="", node_texts=None):
    """OUT/report.html of `report`; `node_texts`: json.dumps of each of its nodes where they are made already
    (json_report.node_texts)."""
    p = Path(out_dir) / "report.html"
    with open(p, "w") as f:
        _emit(report, extra_html, f.write, node_texts)
    return p
