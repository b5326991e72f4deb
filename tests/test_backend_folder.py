"""A backend is a folder: a new backend written in a temp dir (a numpy backend of a few ops) is found
through $IRTRACE_BACKEND_PATH, listed by `irtrace backends` and replayed on, with no other change.
And the import rules of ../shared/DESIGN.md hold in the tree."""
import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper

ROOT = Path(__file__).resolve().parents[1]

DECLARE = '''from backends._runtime.declare import Backend

BACKEND = Backend("numpyplain", "NumPy", "numpy, three ops, forward only (a test backend)", module="numpy",
                  modes=("fwd",))
'''
WORKER = '''import numpy as np

from backends._runtime.adapter import Adapter
from backends._table import OpTable

OPS = OpTable("numpyplain")
OPS.register("Relu", since=1)(lambda x: np.maximum(x, 0))
OPS.register("Add", since=1)(lambda a, b: a + b)
OPS.register("Mul", since=1)(lambda a, b: a * b + np.float32(1e-3))  # a planted bug: off by 1e-3


class NumpyAdapter(Adapter):
    name = "numpyplain"
    table = OPS

    def fwd(self, entry, inputs, spec):
        return self.check_outputs(spec, [np.asarray(entry.fn(*inputs, **spec.attrs))])


def make_adapter():
    return NumpyAdapter()
'''


def _bundle(tmp_path):
    from irtrace.export.onnx_bundle import bundle_from_onnx
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("z", TensorProto.FLOAT, None)
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"), helper.make_node("Add", ["r", "x"], ["s"], name="add"),
             helper.make_node("Mul", ["s", "x"], ["z"], name="mul")]
    m = helper.make_model(helper.make_graph(nodes, "g", [x], [y]), opset_imports=[helper.make_opsetid("", 17)])
    return bundle_from_onnx(m, {"x": np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)},
                            tmp_path / "b.irt")


@pytest.mark.slow
def test_a_new_backend_is_one_folder(tmp_path):
    folder = tmp_path / "plugins" / "numpyplain"
    folder.mkdir(parents=True)
    (folder / "__init__.py").write_text("")
    (folder / "declare.py").write_text(DECLARE)
    (folder / "worker.py").write_text(WORKER)
    bundle = _bundle(tmp_path)
    env = {**os.environ, "IRTRACE_BACKEND_PATH": str(tmp_path / "plugins")}
    listed = subprocess.run([sys.executable, "-m", "irtrace", "backends"], capture_output=True, text=True, env=env)
    assert listed.returncode == 0, listed.stderr
    line = next(ln for ln in listed.stdout.splitlines() if ln.startswith("numpyplain"))
    assert "fwd" in line and "ops    3" in line and "available" in line
    r = subprocess.run([sys.executable, "-m", "irtrace", "replay", str(bundle.path), "--backend", "numpyplain",
                        "--modes", "fwd", "-o", str(tmp_path / "out")], capture_output=True, text=True, env=env)
    assert r.returncode == 1, r.stdout + r.stderr  # the planted Mul bug is a finding
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    verdicts = {(n["name"], res["backend"]): res["verdict"] for n in report["nodes"] for res in n["results"]}
    assert verdicts[("relu", "numpyplain")] == "MATCH" and verdicts[("add", "numpyplain")] == "MATCH"
    assert verdicts[("mul", "numpyplain")] == "DIVERGENT"
    assert [f["op_type"] for f in report["findings"]] == ["Mul"]
    # without the path, the host knows nothing of it
    gone = subprocess.run([sys.executable, "-m", "irtrace", "backends"], capture_output=True, text=True,
                          env={k: v for k, v in os.environ.items() if k != "IRTRACE_BACKEND_PATH"})
    assert "numpyplain" not in gone.stdout


def _imports(path):
    tree = ast.parse(path.read_text())
    for n in ast.walk(tree):
        if isinstance(n, ast.Import):
            yield from (a.name for a in n.names)
        elif isinstance(n, ast.ImportFrom) and n.module and not n.level:
            yield n.module


LAYERS = {"ir": 0, "store": 0, "compare": 0, "errors": 0, "envs": 0,
          "export": 1, "replay": 1, "report": 2, "repro": 2, "fuzz": 3, "testing": 3}


def test_import_rules():
    """Layers bottom to top: ir, store, compare -> export, replay -> report, repro -> fuzz -> cli; replay and
    repro never import export; backends never import the host; no one-letter module aliases."""
    bad = []
    for path in sorted(ROOT.glob("backends/**/*.py")):
        bad += [f"{path.relative_to(ROOT)} imports {m}" for m in _imports(path) if m.split(".")[0] == "irtrace"]
    for path in sorted(ROOT.glob("irtrace/**/*.py")):
        part = path.relative_to(ROOT / "irtrace").parts[0].removesuffix(".py")
        if part not in LAYERS:
            continue
        for m in _imports(path):
            if not m.startswith("irtrace."):
                continue
            target = m.split(".")[1]
            if target in LAYERS and LAYERS[target] > LAYERS[part]:
                bad.append(f"{path.relative_to(ROOT)} imports upward: {m}")
            if part in ("replay", "repro") and target == "export":
                bad.append(f"{path.relative_to(ROOT)} imports {m}")
    for path in sorted(list(ROOT.glob("irtrace/**/*.py")) + list(ROOT.glob("backends/**/*.py"))):
        for n in ast.walk(ast.parse(path.read_text())):
            if isinstance(n, (ast.Import, ast.ImportFrom)):
                bad += [f"{path.relative_to(ROOT)}: alias {a.asname}" for a in n.names if a.asname and len(a.asname) == 1]
    assert not bad, "\n".join(bad)
    rules = ROOT.parent / "shared" / "tools" / "import_rules.py"
    if rules.exists():
        r = subprocess.run([sys.executable, str(rules)], cwd=ROOT, capture_output=True, text=True)
        assert r.returncode == 0, r.stdout


@pytest.mark.slow
def test_coverage_doc_is_generated_from_the_op_tables_and_current():
    """docs/coverage.md lists, per backend, exactly its op table's keys (regenerate it with
    `irtrace backends --coverage-md docs/coverage.md`); every backend available here is checked."""
    from irtrace.replay import backends as registry
    from irtrace.replay.coverage import describe
    lines = [ln for ln in (ROOT / "docs" / "coverage.md").read_text().splitlines() if ln.startswith("| ")]
    columns = [c.strip() for c in lines[0].strip("|").split("|")][1:]
    documented = {c: set() for c in columns}
    for ln in lines[1:]:
        cells = [c.strip() for c in ln.strip("|").split("|")]
        for c, cell in zip(columns, cells[1:]):
            if cell == "yes":
                documented[c].add(cells[0])
    rows = [r for r in describe() if r["available"] and not r["name"].startswith("planted")]
    assert rows
    for r in rows:
        have = {f"{d}::{o}" if d else o for d, o in r["op_list"]}
        assert r["name"] in documented, f"{r['name']} has no column in docs/coverage.md: regenerate it"
        assert have == documented[r["name"]], (r["name"], sorted(have ^ documented[r["name"]])[:10])
    declared = {n for n, i in registry.BACKENDS.items() if i.modes and not n.startswith("planted")}
    assert declared <= set(columns), f"backends without a coverage column: {sorted(declared - set(columns))}"
