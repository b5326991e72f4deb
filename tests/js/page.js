// report.html loaded in jsdom with its script run, then the actions given on the command line, one JSON
// line of what they show on stdout (tests/test_report_html.py reads it):
//   node page.js report.html [filter:TEXT] [sort:COLUMN] [click:NODE_INDEX] ...
const fs = require('fs');
const {JSDOM, VirtualConsole} = require('jsdom');

const [file, ...actions] = process.argv.slice(2);
const html = fs.readFileSync(file, 'utf8');
const errors = [];
const console_ = new VirtualConsole();
console_.on('jsdomError', e => errors.push(String(e.message || e)));
// the time to render, as the CPU time this process spent (what a loaded machine does not inflate), and wall
const t0 = performance.now(), c0 = process.cpuUsage();
const dom = new JSDOM(html, {runScripts: 'dangerously', virtualConsole: console_});
const cpu = process.cpuUsage(c0), renderMs = (cpu.user + cpu.system) / 1000, wallMs = performance.now() - t0;
const doc = dom.window.document;
const table = doc.getElementById('findings');
const shown = () => table ? Array.from(table.rows).slice(1).filter(r => r.style.display !== 'none')
  .map(r => Array.from(r.cells).map(c => c.textContent)) : [];
const spans = doc.querySelectorAll('#graph .n');
const out = {render_ms: renderMs, wall_ms: wallMs, nodes: spans.length, rows: shown(), steps: [],
             colors: Array.from(spans).slice(0, 3).map(e => dom.window.getComputedStyle(e).backgroundColor)};
for (const a of actions) {
  const [what, arg] = [a.slice(0, a.indexOf(':')), a.slice(a.indexOf(':') + 1)];
  if (what === 'filter') {
    const q = doc.getElementById('filter');
    q.value = arg;
    q.dispatchEvent(new dom.window.Event('input'));
    out.steps.push({rows: shown()});
  } else if (what === 'sort') {
    table.rows[0].cells[Number(arg)].click();
    out.steps.push({rows: shown()});
  } else if (what === 'click') {
    doc.querySelectorAll('#graph .n')[Number(arg)].click();
    const d = doc.getElementById('detail');
    out.steps.push({text: d.textContent, elements: Array.from(d.querySelectorAll('*')).map(e => e.tagName.toLowerCase()),
                    headers: Array.from(d.querySelectorAll('th')).map(e => e.textContent)});
  } else {
    throw new Error('unknown action ' + a);
  }
}
out.errors = errors;
process.stdout.write(JSON.stringify(out));
