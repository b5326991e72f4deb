"""Hostile names and crafted reports: a name from a bundle (any ONNX file) is text on a
terminal, in issue.md and in a repro script, never control characters, markup or code; a report.json
given to `irtrace repro` is user input: one line and exit 2 for anything malformed or crafted, and
nothing is written outside -o, nor through a symbolic link."""
import contextlib
import io
import json
import os
import re
import stat
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


# --- nothing lost, nothing silently wrong -----------------------------------------------------------

def relu_onnx(path):
    """A one-Relu ONNX file: the cheapest `irtrace export` there is."""
    import onnx
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    m = helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="r")], "g", [x], [y]),
                          opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(m, str(path))
    return path


def snapshot_tree(root):
    """Every path under `root` with its bytes (None for a folder), and the root's own kind."""
    root = Path(root)
    kind = "link" if root.is_symlink() else "dir" if root.is_dir() else "file" if root.exists() else None
    files = {str(p.relative_to(root)): (None if p.is_dir() else p.read_bytes())
             for p in root.rglob("*")} if kind == "dir" else {}
    return kind, (root.read_bytes() if kind == "file" else None), files


def one_line(rc, err, pattern):
    assert rc == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, (rc, err)
    assert re.search(pattern, err), err


def test_force_replaces_only_a_bundle_or_an_empty_folder(tmp_path, monkeypatch):
    """`export --force` replaces only an irtrace bundle or an empty folder at -o, never a folder of the
    user's files (even the one holding the current folder) or a file: anything else is one line, exit 2,
    and stays byte for byte."""
    model = relu_onnx(tmp_path / "m.onnx")
    work = tmp_path / "work"
    (work / "notes").mkdir(parents=True)
    (work / "notes" / "thesis.tex").write_text("years of work\n")
    (work / "a_file").write_text("keep me\n")
    rc, _, err = run_cli(["export", model, "-o", work / "bundle.irt"])
    assert rc == 0, err
    (work / "link.irt").symlink_to(work / "bundle.irt")
    (work / "fake.irt").mkdir()
    (work / "fake.irt" / "manifest.json").write_text('{"schema": "something.else/1"}')
    cases = [
        (work / "notes", r"it holds 'thesis.tex', which is not part of an irtrace bundle; give another -o"),
        (work / "a_file", r"it exists and is a file, not a bundle"),
        (work / "link.irt", r"it is a symbolic link"),
        (work / "fake.irt", r"its manifest.json does not name an irtrace bundle"),
        (work / "a_file" / "new.irt", r"\S*/a_file is a file, not a folder"),
        (work / "a_file" / "deeper" / "new.irt", r"\S*/a_file is a file, not a folder"),
    ]
    for target, pattern in cases:
        before = {p: snapshot_tree(p) for p in (work, tmp_path)}
        rc, _, err = run_cli(["export", model, "-o", target, "--force"])
        one_line(rc, err, f"cannot write {re.escape(str(target))}: {pattern}")
        assert {p: snapshot_tree(p) for p in (work, tmp_path)} == before, target
    # the current folder, and a folder holding it: refused even when they are empty or bundles
    monkeypatch.chdir(work / "notes")
    for target in (".", "..", str(work)):
        rc, _, err = run_cli(["export", model, "-o", target, "--force"])
        one_line(rc, err, r"it is the current folder or holds it")
    assert (work / "notes" / "thesis.tex").read_text() == "years of work\n"
    monkeypatch.chdir(tmp_path)
    # what --force may replace: a bundle, an empty folder; without --force, neither
    (work / "empty.irt").mkdir()
    rc, _, err = run_cli(["export", model, "-o", work / "empty.irt"])
    one_line(rc, err, r"empty.irt already exists; pass --force")
    for target in (work / "empty.irt", work / "bundle.irt"):
        rc, out, err = run_cli(["export", model, "-o", target, "--force"])
        assert rc == 0 and f"wrote {target}" in out, err
    assert (work / "link.irt").is_symlink() and (work / "a_file").read_text() == "keep me\n"


@pytest.mark.parametrize("mask", [0o022, 0o027])
def test_bundles_and_cache_files_get_the_umasks_permissions(mask, tmp_path):
    """tempfile.mkdtemp makes 0700 folders and safetensors writes 0600 files, which a team could not read:
    bundles and cache files get what the umask gives, as any file the user makes; the signing key alone
    stays private (0600)."""
    from irtrace.envs import trust
    old = os.umask(mask)
    try:
        rc, _, err = run_cli(["export", relu_onnx(tmp_path / "m.onnx"), "-o", tmp_path / "b.irt"])
        assert rc == 0, err
        rc, _, err = run_cli(["replay", tmp_path / "b.irt", "--backend", "torch", "--modes", "fwd",
                              "-o", tmp_path / "r"])
        assert rc == 0, err
    finally:
        os.umask(old)
    folder, file = 0o777 & ~mask, 0o666 & ~mask
    bundle, cache = tmp_path / "b.irt", tmp_path / "b.irt.cache"
    assert stat.S_IMODE(bundle.stat().st_mode) == folder
    assert {p.name: oct(stat.S_IMODE(p.stat().st_mode)) for p in bundle.iterdir()} == \
        {n: oct(file) for n in ("graph.onnx", "values.safetensors", "manifest.json")}
    assert stat.S_IMODE(cache.stat().st_mode) == folder
    entries = list(cache.iterdir())
    assert entries and {oct(stat.S_IMODE(p.stat().st_mode)) for p in entries} == {oct(file)}
    assert stat.S_IMODE((trust.cache_root() / trust.KEY_NAME).stat().st_mode) == 0o600


def test_an_internal_error_exits_3_and_leaves_no_earlier_report(tmp_path, monkeypatch):
    """A bug in irtrace is not a finding (exit 1) nor bad input (exit 2): it exits 3 with its traceback;
    and the report.json an earlier run left in OUT is gone before the run starts, so CI never reads it
    as this run's."""
    b = conv_bundle(tmp_path / "b.irt", "conv")
    out = tmp_path / "r"
    rc, _, err = run_cli(["replay", b.path, "--backend", "torch", "--modes", "fwd", "-o", out])
    assert rc == 0 and (out / "report.json").exists(), err
    from irtrace.replay import engine

    def broken(*args, **kwargs):
        raise ZeroDivisionError("planted bug")
    monkeypatch.setattr(engine, "judge_node", broken)
    monkeypatch.setattr(engine, "judged_before", lambda *a, **k: None)
    rc, _, err = run_cli(["replay", b.path, "--backend", "torch", "--modes", "fwd", "-o", out])
    assert rc == 3, err
    assert "Traceback" in err and "irtrace: internal error: ZeroDivisionError: planted bug" in err
    assert not any((out / n).exists() for n in ("report.json", "report.html", "timings.json")), list(out.iterdir())


@pytest.mark.parametrize("factory, code, pattern", [
    ("interrupted_while_exported", 130, r"^irtrace: interrupted$"),
    ("coloured_export_error", 2, r"torch.onnx.export could not export FailsWhileExported: RuntimeError: boom while tracing"),
])
def test_an_interrupt_wrapped_by_torch_export_is_an_interrupt_and_colours_are_stripped(factory, code, pattern,
                                                                                       tmp_path):
    """torch.export wraps what it meets while tracing in its own error: a Ctrl-C inside is still an
    interrupt (not "could not export", exit 2), and torch's colour codes never reach the message."""
    rc, _, err = run_cli(["export", f"models_for_tests:{factory}", "--input", "x=2x3", "-o", tmp_path / "b.irt"])
    assert rc == code and len(err.splitlines()) == 1 and re.search(pattern, err.strip()), err
    assert "\x1b" not in err and "\\x1b" not in err and "[96m" not in err
    assert not (tmp_path / "b.irt").exists()


def test_nodes_regex_that_backtracks_is_refused_not_a_hang(tmp_path):
    """`(a+)+$` searched in a 5,000-character node name never returns in Python's re: the search runs in
    a child killed after 10 s, and the pattern is one line, exit 2. (The real CLI, in a process of its
    own: a hang here would otherwise hang the test run.)"""
    name = "a" * 5000 + "!"
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    m = helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name=name)], "g", [x], [y]),
                          opset_imports=[helper.make_opsetid("", 17)])
    b = bundle_from_onnx(m, {"x": np.ones((2, 3), np.float32)}, tmp_path / "b.irt")
    import time
    t = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "irtrace", "replay", str(b.path), "--nodes", "(a+)+$", "-o",
                        str(tmp_path / "r")], capture_output=True, text=True, timeout=120)
    assert time.monotonic() - t < 60
    one_line(p.returncode, p.stderr, r"--nodes '\(a\+\)\+\$': searching it in the graph's 1 node names took more "
                                     r"than 10 s .*; simplify it")
    from irtrace.replay.select import search_names
    assert search_names(r"^a+!$|^b", [name, "b", "c"]) == [0, 1]  # the same answers as re.search


def test_a_node_no_backend_can_judge_is_a_warning_and_fails_ci(tmp_path, monkeypatch):
    """A bundle whose node is an op the reference cannot run (a Relu made a Hardmax in graph.onnx): every
    comparison is with the reference, so nothing there is judged. That is a warning above the summary
    and in report.json, and a failure (exit 1) under $CI or --strict, never a silent exit 0."""
    import onnx
    b = bundle_from_onnx(onnx.load(str(relu_onnx(tmp_path / "m.onnx"))), {"x": np.full((2, 3), 0.5, np.float32)},
                         tmp_path / "b.irt")
    g = onnx.load(str(b.path / "graph.onnx"), load_external_data=False)
    g.graph.node[0].op_type = "Hardmax"
    (b.path / "graph.onnx").write_bytes(g.SerializeToString())
    monkeypatch.delenv("CI", raising=False)
    argv = ["replay", b.path, "--modes", "fwd", "-o", tmp_path / "r"]
    rc, out, err = run_cli(argv)
    assert rc == 0, err
    warning = "warning: no backend could judge 1 node(s) of op Hardmax (r): the reference (torch) cannot run it"
    assert out.splitlines()[-2].startswith("irtrace replay: ") and warning in out.splitlines()[-3], out
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    assert [(w["kind"], w["op_type"], w["nodes"]) for w in report["warnings"]] == [("unjudged", "Hardmax", ["r"])]
    assert report["warnings"][0]["message"] in (tmp_path / "r" / "report.html").read_text()
    monkeypatch.setenv("CI", "true")
    assert run_cli(argv)[0] == 1
    monkeypatch.setenv("CI", "0")
    assert run_cli(argv)[0] == 0
    assert run_cli(argv + ["--strict"])[0] == 1


def test_repro_takes_workaround_code_from_the_backend_never_from_the_report(tmp_path):
    """report.json is user input: a workaround's code and description in it are never copied into
    workaround.py or issue.md; `irtrace repro` asks the backend for the code of the alternatives it
    declares, and leaves out a name it does not declare."""
    import planted_backend
    planted_backend.register("lrelu", workaround=True)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    m = helper.make_model(helper.make_graph([helper.make_node("LeakyRelu", ["x"], ["y"], name="lrelu", alpha=0.1)],
                                            "g", [x], [y]), opset_imports=[helper.make_opsetid("", 17)])
    b = bundle_from_onnx(m, {"x": np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)},
                         tmp_path / "b.irt")
    rc, _, err = run_cli(["replay", b.path, "--backend", "planted-lrelu-w", "--modes", "vjp2", "-o", tmp_path / "r"])
    assert rc == 1, err
    report = tmp_path / "r" / "report.json"
    data = json.loads(report.read_text())
    (w,) = data["findings"][0]["workarounds"]
    genuine = w["code"]
    assert w["matches"] and "def leaky_relu_functional" in genuine
    pwned = tmp_path / "PWNED"
    evil = f"import os\nos.system('touch {pwned}')\n"
    w.update(code=evil, description="<script>alert(1)</script> trust me")
    data["findings"][0]["workarounds"].insert(0, {"name": "not_declared", "description": "x", "code": evil,
                                                  "verdicts": {"vjp2": "MATCH"}, "matches": True})
    crafted = tmp_path / "crafted.json"
    crafted.write_text(json.dumps(data))
    rc, _, err = run_cli(["repro", crafted, "-o", tmp_path / "rep"])
    assert rc == 0, err
    (folder,) = list((tmp_path / "rep").iterdir())
    assert (folder / "workaround.py").read_text() == genuine.rstrip() + "\n"
    issue = (folder / "issue.md").read_text()
    assert "os.system" not in issue and "trust me" not in issue and "not_declared" not in issue
    assert "Workaround that matches today (torch's own functional.leaky_relu" in issue
    assert not pwned.exists()


def test_attribute_names_reach_scripts_only_as_string_literals():
    """The function and node forms of a repro script pass attributes as `**{'name': value}`: whatever
    name reaches them (store_check refuses non-identifiers on load) is a string literal, never code."""
    import ast

    from irtrace.repro import standalone
    hostile = "pads=0), __import__('os').system('id'), (x"
    _, call, _, _ = standalone._call_form("def op(x, **kw):\n    return x\n", [], ["x"], [np.ones(2)],
                                          {hostile: [1, 1], "group": 2})
    assert call == "op(x, **{\"pads=0), __import__('os').system('id'), (x\": [1, 1], 'group': 2})"
    tree = ast.parse(call, mode="eval")
    assert {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} == {"op", "x"}
    node = helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1], group=1)
    node.attribute[0].name = hostile
    import base64
    spec = {"proto": base64.b64encode(node.SerializeToString()).decode(), "outputs": ["y"], "opset": 17}
    lines, _ = standalone._node_form(spec, ["x", "w"], [np.ones((1, 1, 3, 3), np.float32)] * 2)
    first = ast.parse(lines[0])
    assert {n.id for n in ast.walk(first) if isinstance(n, ast.Name)} == {"node", "helper"}
    assert repr(hostile) in lines[0] or json.dumps(hostile) in lines[0]


def unrelated_pair(tmp_path):
    """Two bundles of different models: a MatMul/Sigmoid/ReduceSum and a Relu."""
    from test_cache import small
    import onnx
    a = small(tmp_path / "a.irt")
    b = bundle_from_onnx(onnx.load(str(relu_onnx(tmp_path / "m.onnx"))), {"x": np.ones((2, 3), np.float32)},
                         tmp_path / "b.irt")
    return a, b


def conv_pair(tmp_path, b_pads, b_output=None):
    """Two one-Conv bundles on the same input and weights; B's pads `b_pads`; `b_output`: B's recorded
    output overwritten with this bundle's (a port whose recorded values were made to agree)."""
    rng = np.random.default_rng(0)
    feeds = {"x": rng.standard_normal((1, 1, 6, 6)).astype(np.float32),
             "w": rng.standard_normal((1, 1, 3, 3)).astype(np.float32)}

    def one(path, pads):
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 6, 6])
        w = helper.make_tensor_value_info("w", TensorProto.FLOAT, [1, 1, 3, 3])
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
        node = helper.make_node("Conv", ["x", "w"], ["y"], name="conv", pads=pads, strides=[2, 2])
        m = helper.make_model(helper.make_graph([node], "g", [x, w], [y]), opset_imports=[helper.make_opsetid("", 17)])
        return bundle_from_onnx(m, feeds, path)
    a = one(tmp_path / "a.irt", [0, 0, 1, 1])
    b = one(tmp_path / "b.irt", b_pads)
    if b_output is not None:
        from irtrace.store import load
        values = load(b.path).values
        offset, length = values.extent("y")
        with open(b.path / "values.safetensors", "r+b") as f:
            f.seek(offset)
            f.write(np.ascontiguousarray(load(b_output.path).values["y"]).tobytes()[:length])
    return a, b


def test_diff_never_calls_different_models_equivalent(tmp_path):
    """`irtrace diff` of unrelated bundles must not say "no numeric divergence ... over 0 aligned nodes"
    with exit 0, nor sum up a pair shown as "isolated diverge" as "numerically equivalent". The graph outputs are
    always compared; 0 aligned nodes, different outputs, or an isolated divergence is a difference
    (exit 1), and the verdict names it."""
    a, b = unrelated_pair(tmp_path)
    rc, out, err = run_cli(["diff", a.path, b.path, "-o", tmp_path / "d0"])
    assert rc == 1, err
    verdict = out.splitlines()[-2]
    assert verdict.startswith("not the same model: no compute node of") and "equivalent" not in out, out
    d = json.loads((tmp_path / "d0" / "diff.json").read_text())
    assert d["differ"] and d["outputs"] == [{"a": "y", "b": "y", "values": "incomparable", "max_abs": None}]

    (tmp_path / "same").mkdir()
    same_a, same_b = conv_pair(tmp_path / "same", [0, 0, 1, 1])
    rc, out, _ = run_cli(["diff", same_a.path, same_b.path, "-o", tmp_path / "d1"])
    assert rc == 0 and out.splitlines()[-2].startswith("no numeric divergence") and "1 graph output(s)" in out

    (tmp_path / "iso").mkdir()  # TF 'SAME' at stride 2 vs torch padding=1, B's recorded output made A's
    agreed_a, agreed_b = conv_pair(tmp_path / "iso", [1, 1, 1, 1], b_output=same_a)
    rc, out, _ = run_cli(["diff", agreed_a.path, agreed_b.path, "-o", tmp_path / "d2"])
    lines = out.splitlines()
    assert rc == 1 and any("isolated diverge" in ln for ln in lines[:-2]), out
    assert "equivalent" not in lines[-2] and "isolated" in lines[-2] and "although the recorded values agree" in lines[-2]

    # the aligned nodes agree (a Relu), the graph outputs do not (Neg after it on one side, Abs on the other)
    pair = []
    for k, op in enumerate(("Neg", "Abs")):
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
        nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"), helper.make_node(op, ["r"], ["y"], name="last")]
        m = helper.make_model(helper.make_graph(nodes, "g", [x], [y]), opset_imports=[helper.make_opsetid("", 17)])
        pair.append(bundle_from_onnx(m, {"x": np.arange(6, dtype=np.float32).reshape(2, 3)}, tmp_path / f"o{k}.irt"))
    rc, out, _ = run_cli(["diff", pair[0].path, pair[1].path, "-o", tmp_path / "d3"])
    lines = out.splitlines()
    assert rc == 1 and lines[-2].startswith("the graph outputs of") and "although the 1 aligned node(s) agree" in lines[-2]
    assert any(ln.startswith("output   y (onnx) ~ y (onnx): diverge") for ln in lines), out


def test_a_second_replay_into_the_same_out_is_refused_while_the_first_runs(tmp_path):
    """Two replays into one OUT at once would mix their journals and leave one's report.json under the
    other's "wrote" line. The first holds OUT (a lock on OUT/.irtrace.lock); the second is one line,
    exit 2, and removes nothing of the first's."""
    from irtrace.report.write import prepare_out
    b = conv_bundle(tmp_path / "b.irt", "conv")
    out = tmp_path / "r"
    rc, _, err = run_cli(["replay", b.path, "--backend", "torch", "--modes", "fwd", "-o", out])
    assert rc == 0, err
    before = snapshot_tree(out)
    held = prepare_out(out, claim=True)  # what a running replay holds
    try:
        rc, _, err = run_cli(["replay", b.path, "--backend", "torch", "--modes", "fwd", "-o", out])
        one_line(rc, err, rf"output folder {re.escape(str(out))}: another irtrace replay is writing there "
                          rf"\(pid {os.getpid()}\); wait for it to end, or give another -o")
        assert snapshot_tree(out) == before
    finally:
        held.close()
    assert run_cli(["replay", b.path, "--backend", "torch", "--modes", "fwd", "-o", out])[0] == 0


def test_a_full_disk_while_writing_the_report_is_one_line_and_resumes(tmp_path, monkeypatch):
    """No space for report.json: one line, exit 2 (not a traceback), no half report, and the journal
    holds every node: --resume writes the report once there is room."""
    from irtrace.report import json_report
    b = conv_bundle(tmp_path / "b.irt", "conv")
    out = tmp_path / "r"
    real = json_report.dump_atomic

    def full(path, *args, **kwargs):
        raise OSError(28, "No space left on device", str(path))
    monkeypatch.setattr(json_report, "dump_atomic", full)
    argv = ["replay", b.path, "--backend", "torch", "--modes", "fwd", "-o", out]
    rc, _, err = run_cli(argv)
    one_line(rc, err, r"cannot write the report \(No space left on device\); the results are in .*journal.jsonl: "
                      r"free space, then run the same command with --resume")
    assert not any((out / n).exists() for n in ("report.json", "report.html", "timings.json"))
    monkeypatch.setattr(json_report, "dump_atomic", real)
    rc, _, err = run_cli(argv + ["--resume"])
    assert rc == 0 and "resuming: 1 node(s) already in" in err and (out / "report.json").exists(), err


def test_a_replay_never_writes_into_its_bundle(tmp_path):
    """-o the bundle's own folder (or one inside it) would put reports among the bundle's files (and
    make it a folder that export --force would not replace): refused before anything is written."""
    b = conv_bundle(tmp_path / "b.irt", "conv")
    before = snapshot_tree(b.path)
    for out in (b.path, b.path / "reports", tmp_path / "b.irt" / ".." / "b.irt"):
        rc, _, err = run_cli(["replay", b.path, "--backend", "torch", "--modes", "fwd", "-o", out])
        one_line(rc, err, r": it is the bundle .* or inside it; give another -o")
    assert snapshot_tree(b.path) == before
