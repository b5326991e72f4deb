"""report.html puts names from the bundle (node, value, module names: anything an ONNX file says)
into the page as text, never as markup; its result table columns come from compare.DISPLAY."""
import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper

from irtrace import compare
from irtrace.export.onnx_bundle import bundle_from_onnx
from irtrace.replay import ReplayOptions
from irtrace.report.folder import replay_into

HOSTILE_NODE = "<script>alert(2)</script>"
HOSTILE_VALUE = "x<img src=x onerror=alert(1)>"

PAGE_JS = Path(__file__).parent / "js" / "page.js"  # report.html in jsdom (tests/js, installed by make test)


def _in_jsdom(page, *actions):
    """What report.html shows in jsdom after `actions` (see tests/js/page.js)."""
    if shutil.which("node") is None:
        pytest.skip("node (to run the page's script in jsdom) is not installed")
    assert (PAGE_JS.parent / "node_modules" / "jsdom").is_dir(), "jsdom missing: npm ci --prefix tests/js (make test)"
    r = subprocess.run(["node", str(PAGE_JS), str(page), *actions], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    shown = json.loads(r.stdout)
    assert shown["errors"] == []  # the page's script ran without an error
    return shown


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


def test_the_detail_table_escapes_names_and_shows_every_display_column(page):
    detail = _in_jsdom(page, "click:0")["steps"][0]
    assert HOSTILE_NODE in detail["text"]  # the name as text ...
    assert "script" not in detail["elements"] and "img" not in detail["elements"]  # ... never as elements
    assert detail["headers"][:4] == ["backend", "mode", "output", "verdict"]
    assert [title for _, title, _ in compare.DISPLAY] == detail["headers"][4:-1]


def _synthetic_report(nodes, findings):
    """A report.json as the writer gives it, `nodes` nodes and `findings` findings (backends, ops and node
    counts varying), for the page alone."""
    backends, verdicts = ["megengine", "paddle", "oneflow"], ["DIVERGENT", "ERROR", "NAN_MISMATCH"]
    result = {"backend": "paddle", "mode": "fwd", "output": "y", "verdict": "MATCH", "message": ""}
    out = {"bundle": {"name": "synthetic"}, "summary": {"nodes": nodes, "findings": findings},
           "nodes": [{"name": f"node_{i}", "op_type": "Conv" if i % 2 else "Relu", "worst": "MATCH",
                      "source": {"module": f"layer{i}"}, "results": [result], "skipped": []} for i in range(nodes)],
           "findings": []}
    for k in range(findings):
        out["findings"].append({"id": f"f{k:03d}", "verdict": verdicts[k % 3], "backend": backends[k % 3],
                                "op_type": ["Conv", "Pad", "MaxPool", "Gemm"][k % 4], "mode": "vjp",
                                "nodes": [f"node_{j}" for j in range((k * 7) % 11 + 1)], "first_node": f"node_{k}",
                                "module": f"layer{k}", "worst": {"max_abs": 0.5 / (k + 1)}, "message": ""})
    return out


@pytest.fixture(scope="module")
def big_page(tmp_path_factory):
    from irtrace.report import html
    return html.write(_synthetic_report(10_000, 30), tmp_path_factory.mktemp("big"))


def test_a_10000_node_report_renders_every_node_and_finding_in_time_linear_in_its_size(big_page, tmp_path):
    from irtrace.report import html
    small = _in_jsdom(html.write(_synthetic_report(1_000, 30), tmp_path))
    shown = _in_jsdom(big_page)
    assert shown["nodes"] == 10_000 and [r[0] for r in shown["rows"]] == [f"f{k:03d}" for k in range(30)]
    assert shown["colors"] == ["rgb(51, 170, 51)"] * 3  # MATCH's colour (#3a3), from the page's stylesheet
    # the render's CPU time against a 1,000-node page's in the same run (what one machine's speed or load does
    # not decide): linear, not quadratic (3.6x for 10x the nodes, 0.53 and 1.9 s on this machine, alone; a
    # 2-s bound failed at 2.03 s under make test's two processes), and under 4 s
    assert shown["render_ms"] < 10 * small["render_ms"] and shown["render_ms"] < 4000, (small["render_ms"],
                                                                                         shown["render_ms"])


def test_the_findings_filter_and_sort(big_page):
    steps = _in_jsdom(big_page, "filter:oneflow", "filter:", "sort:5", "sort:5", "sort:0", "filter:nan_mis")["steps"]
    assert [r[0] for r in steps[0]["rows"]] == [f"f{k:03d}" for k in range(2, 30, 3)]  # only oneflow's
    assert len(steps[1]["rows"]) == 30  # an empty filter shows all again
    counts = [int(r[5]) for r in steps[2]["rows"]]  # column 5: nodes, sorted as numbers (11 after 2)
    assert counts == sorted(counts) and counts[-1] == 11 and len(counts) == 30
    assert [int(r[5]) for r in steps[3]["rows"]] == sorted(counts, reverse=True)  # a second click: the other way
    assert [r[0] for r in steps[4]["rows"]] == [f"f{k:03d}" for k in range(30)]  # ids sorted as text
    assert [r[0] for r in steps[5]["rows"]] == [f"f{k:03d}" for k in range(2, 30, 3)]  # NAN_MISMATCH: k % 3 == 2
