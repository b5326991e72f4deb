"""report.html puts names from the bundle (node, value, module names: anything an ONNX file says)
into the page as text, never as markup; its result table columns come from compare.DISPLAY."""
import json
import re
import shutil
import subprocess

import numpy as np
import pytest
from onnx import TensorProto, helper

from irtrace import compare
from irtrace.export.onnx_bundle import bundle_from_onnx
from irtrace.replay import ReplayOptions
from irtrace.report.folder import replay_into

HOSTILE_NODE = "<script>alert(2)</script>"
HOSTILE_VALUE = "x<img src=x onerror=alert(1)>"

RUN_PAGE = r"""
const fs = require('fs');
const html = fs.readFileSync(process.argv[2], 'utf8');
const data = html.match(/<script id="data" type="application\/json">([\s\S]*?)<\/script>/)[1];
const code = [...html.matchAll(/<script>([\s\S]*?)<\/script>/g)].pop()[1];
const els = {};
global.document = {
  getElementById: id => id === 'data' ? {textContent: data} :
    (els[id] = els[id] || {innerHTML: '', children: [], appendChild(c) { this.children.push(c); }}),
  createElement: () => ({classList: {add() {}, remove() {}}, style: {}}),
  querySelectorAll: () => [],
};
eval(code);
els['graph'].children[0].onclick();
process.stdout.write(els['detail'].innerHTML);
"""


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    d = tmp_path_factory.mktemp("hostile")
    x = helper.make_tensor_value_info(HOSTILE_VALUE, TensorProto.FLOAT, [3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    m = helper.make_model(helper.make_graph([helper.make_node("Relu", [x.name], ["y"], name=HOSTILE_NODE)], "g",
                                            [x], [y]), opset_imports=[helper.make_opsetid("", 17)])
    b = bundle_from_onnx(m, {x.name: np.array([1.0, -2.0, 3.0], np.float32)}, d / "h.irt")
    out = replay_into(b.path, ReplayOptions.parse("torch,onnxruntime", "fwd,vjp"), out=d / "r").out
    return out / "report.html"


def test_names_never_reach_the_page_as_markup(page):
    text = page.read_text()
    data = re.search(r'<script id="data" type="application/json">(.*?)</script>', text, re.S).group(1)
    assert "</script" not in data.lower()  # the embedded JSON cannot close its own element
    assert json.loads(data.replace("<\\/", "</"))["nodes"][0]["name"] == HOSTILE_NODE
    outside = text.replace(data, "")
    assert HOSTILE_NODE not in outside and "<img" not in outside


@pytest.mark.skipif(shutil.which("node") is None, reason="node (to run the page's script) is not installed")
def test_the_detail_table_escapes_names_and_shows_every_display_column(page, tmp_path):
    script = tmp_path / "run_page.js"
    script.write_text(RUN_PAGE)
    r = subprocess.run(["node", str(script), str(page)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    html = r.stdout
    assert "<script>" not in html and "<img" not in html
    assert "&lt;script&gt;alert(2)&lt;/script&gt;" in html
    for _, title, _ in compare.DISPLAY:
        assert f"<th>{title}</th>" in html
