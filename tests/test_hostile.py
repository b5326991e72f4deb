"""Hostile names and crafted reports (issue 16): a name from a bundle (any ONNX file) is text on a
terminal, in issue.md and in a repro script, never control characters, markup or code; a report.json
given to `irtrace repro` is user input: one line and exit 2 for anything malformed or crafted, and
nothing is written outside -o, nor through a symbolic link."""
import contextlib
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper

from irtrace.cli import main
from irtrace.export.onnx_bundle import bundle_from_onnx

ANSI_NODE = "conv\x1b[31mRED\x1b[0m\nFAKE: all clear\r"
HTML_NAME = "<img src=x onerror=alert(1)>"


def run_cli(argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main([str(a) for a in argv])
    return rc, out.getvalue(), err.getvalue()


def conv_bundle(path, node_name, model_name=None):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 4, 4])
    w = helper.make_tensor_value_info("w", TensorProto.FLOAT, [1, 1, 3, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 4, 4])
    node = helper.make_node("Conv", ["x", "w"], ["y"], name=node_name, pads=[1, 1, 1, 1])
    m = helper.make_model(helper.make_graph([node], "g", [x, w], [y]), opset_imports=[helper.make_opsetid("", 20)])
    rng = np.random.default_rng(0)
    return bundle_from_onnx(m, {"x": rng.standard_normal((1, 1, 4, 4)).astype(np.float32),
                                "w": rng.standard_normal((1, 1, 3, 3)).astype(np.float32)}, path, name=model_name)


@pytest.fixture(scope="module")
def replayed(tmp_path_factory):
    """A planted-pad finding on a Conv named with ANSI escapes and a newline, in a model named with HTML:
    (report.json path, terminal output)."""
    import planted_backend
    planted_backend.register("pad")
    d = tmp_path_factory.mktemp("hostile")
    b = conv_bundle(d / "b.irt", ANSI_NODE, model_name=HTML_NAME)
    rc, out, err = run_cli(["replay", b.path, "--backend", "planted-pad", "--modes", "fwd", "-o", d / "r"])
    assert rc == 1, err
    return d / "r" / "report.json", out


def test_terminal_shows_control_characters_escaped(replayed):
    _, out = replayed
    assert "\x1b" not in out and "\r" not in out
    assert "first conv\\x1b[31mRED\\x1b[0m\\nFAKE: all clear\\r" in out
    assert not any(line.startswith("FAKE") for line in out.splitlines())


def test_issue_md_has_no_markup_outside_code(replayed, tmp_path):
    report, _ = replayed
    rc, out, err = run_cli(["repro", report, "-o", tmp_path / "rep"])
    assert rc == 0, err
    assert "\x1b" not in out
    (folder,) = [p for p in (tmp_path / "rep").iterdir()]
    issue = (folder / "issue.md").read_text()
    prose = re.sub(r"```.*?```", "", issue, flags=re.S)
    prose = re.sub(r"`[^`\n]*`", "", prose)
    assert "<" not in prose and ">" not in prose.replace("->", ""), prose
    assert "&lt;img src=x onerror=alert(1)&gt;" in issue
    assert "\x1b" not in issue and "\r" not in issue
    text = (folder / "repro.py").read_text()
    assert "\x1b" not in text and "FAKE: all clear" not in text.split('"""')[2]  # not outside the docstring
    compile(text, "repro.py", "exec")


def crafted(report, tmp_path, **change):
    data = json.loads(report.read_text())
    for key, value in change.items():
        target, _, field = key.partition("__")
        if target == "finding":
            data["findings"][0][field] = value
        else:
            data[key] = value
    path = tmp_path / "crafted.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("change, pattern", [
    ({"finding__id": ".."}, r"findings\[0\]\.id '\.\.': not a finding id"),
    ({"finding__id": "../escaped"}, r"findings\[0\]\.id '\.\./escaped': not a finding id"),
    ({"finding__id": "/tmp/abs"}, r"findings\[0\]\.id '/tmp/abs': not a finding id"),
    ({"finding__id": "a\x00b"}, r"findings\[0\]\.id 'a\\x00b': not a finding id"),
    ({"finding__id": 7}, r"findings\[0\]\.id: missing or not a str"),
    ({"finding__mode": "jvp"}, r"findings\[0\]\.mode 'jvp': not fwd, vjp or vjp2"),
    ({"finding__nodes": "conv"}, r"findings\[0\]\.nodes: missing or not a list"),
    ({"finding__first_node": "nope"}, r"first_node 'nope' is not a node of"),
    ({"findings": {"a": 1}}, r"findings: not a list"),
    ({"findings": [3]}, r"findings\[0\]: not an object"),
    ({"bundle": "b.irt"}, r"bundle\.path: not a string"),
    ({"bundle": {"path": "/nonexistent/b.irt"}}, r"/nonexistent/b\.irt"),
    ({"schema": "other/1"}, r"not an irtrace report \(schema 'other/1'\)"),
])
def test_crafted_reports_are_one_line_and_write_nothing(change, pattern, replayed, tmp_path):
    report, _ = replayed
    path = crafted(report, tmp_path, **change)
    before = sorted(p.name for p in tmp_path.parent.iterdir())
    rc, out, err = run_cli(["repro", path, "-o", tmp_path / "rep"])
    assert rc == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert re.search(pattern, err), err
    assert not (tmp_path / "rep").exists() and sorted(p.name for p in tmp_path.parent.iterdir()) == before


@pytest.mark.parametrize("text, pattern", [
    ("{not json", r"not JSON"), ("[1, 2]", r"not an irtrace report \(schema 'list'\)"),
    (b"\xff\xfe", r"cannot read report"), ("", r"not JSON"),
])
def test_malformed_report_files(text, pattern, tmp_path):
    path = tmp_path / "r.json"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    rc, _, err = run_cli(["repro", path, "-o", tmp_path / "rep"])
    assert rc == 2 and len(err.splitlines()) == 1 and re.search(pattern, err), err


def test_repro_output_is_never_a_link_or_a_file(replayed, tmp_path):
    report, _ = replayed
    target = tmp_path / "elsewhere"
    target.mkdir()
    (tmp_path / "link").symlink_to(target)
    rc, _, err = run_cli(["repro", report, "-o", tmp_path / "link"])
    assert rc == 2 and "is a symbolic link" in err and not list(target.iterdir())
    (tmp_path / "file").write_text("x")
    rc, _, err = run_cli(["repro", report, "-o", tmp_path / "file"])
    assert rc == 2 and "exists and is not a folder" in err and (tmp_path / "file").read_text() == "x"


def test_an_error_message_is_one_terminal_line(tmp_path):
    rc, _, err = run_cli(["inspect", tmp_path / "no\x1b[2Jsuch\nbundle"])
    assert rc == 2 and len(err.splitlines()) == 1 and "\x1b" not in err and "no\\x1b[2Jsuch\\nbundle" in err


def test_a_nan_attribute_gives_a_script_that_runs(tmp_path):
    """LeakyRelu with alpha = NaN (any ONNX file may say so): the repro script writes float('nan'),
    runs, and exits 1 because the planted backend's missing second derivative still shows."""
    import planted_backend
    planted_backend.register("lrelu")
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    node = helper.make_node("LeakyRelu", ["x"], ["y"], name="lrelu", alpha=float("nan"))
    m = helper.make_model(helper.make_graph([node], "g", [x], [y]), opset_imports=[helper.make_opsetid("", 17)])
    b = bundle_from_onnx(m, {"x": np.abs(np.random.default_rng(0).standard_normal((2, 3))).astype(np.float32) + 0.5},
                         tmp_path / "b.irt")
    rc, _, err = run_cli(["replay", b.path, "--backend", "planted-lrelu", "--modes", "vjp2", "-o", tmp_path / "r",
                          "--repro", tmp_path / "rep"])
    assert rc == 1, err
    (folder,) = list((tmp_path / "rep").iterdir())
    text = (folder / "repro.py").read_text()
    assert "float('nan')" in text
    r = subprocess.run([sys.executable, str(folder / "repro.py")], capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and "NameError" not in r.stderr, r.stdout + r.stderr


def test_empty_and_duplicate_node_names_keep_the_names_the_graph_gives(tmp_path):
    """An unnamed Relu before a Sigmoid the user called 'Relu_0', and two nodes called 'dup': every
    name the graph gives stays on its (first) node, so each verdict is about the node it names."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    nodes = [helper.make_node("Relu", ["x"], ["a"], name=""),
             helper.make_node("Sigmoid", ["a"], ["b"], name="Relu_0"),
             helper.make_node("Tanh", ["b"], ["c"], name="dup"),
             helper.make_node("Neg", ["c"], ["y"], name="dup")]
    m = helper.make_model(helper.make_graph(nodes, "g", [x], [y]), opset_imports=[helper.make_opsetid("", 17)])
    b = bundle_from_onnx(m, {"x": np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)},
                         tmp_path / "b.irt")
    assert [(n.op_type, n.name) for n in b.model.graph.node] == \
        [("Relu", "Relu_0_2"), ("Sigmoid", "Relu_0"), ("Tanh", "dup"), ("Neg", "dup_2")]
    rc, _, err = run_cli(["replay", b.path, "--modes", "fwd", "-o", tmp_path / "r"])
    assert rc == 0, err
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    assert {n["name"]: n["op_type"] for n in report["nodes"]} == \
        {"Relu_0_2": "Relu", "Relu_0": "Sigmoid", "dup": "Tanh", "dup_2": "Neg"}
    assert all(r["node"] == n["name"] for n in report["nodes"] for r in n["results"])
