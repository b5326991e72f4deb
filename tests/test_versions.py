"""Backends at a declared release (`--backend paddle@3.0.0`): each release in its own managed env, the
releases replayed side by side as distinct backends, a finding listing the versions it reproduces on,
issue.md saying so, and `irtrace repro --versions` re-running a repro script on each release. The real
PaddlePaddle 3.0.0 and 3.3.1 in their own environments (built by `irtrace setup all`), no mocks."""
import hashlib
import json
import subprocess

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from irtrace import envs
from irtrace.cli import main
from irtrace.envs.discover import discover, releases
from irtrace.errors import IrtraceError
from irtrace.export.onnx_bundle import bundle_from_onnx
from irtrace.replay import ReplayOptions, backends
from irtrace.report.folder import replay_into
from irtrace.repro.make import make_repros, read_report
from irtrace.repro.script import releases_line
from irtrace.repro.versions import check_versions

OLD, NEW = "paddle@3.0.0", "paddle@3.3.1"
UNKNOWN = "irtrace: error: backend 'paddle' declares no version '9.9'; declared: 3.3.1 (default), 3.2.0, 3.0.0.\n"


def _needs(*names):
    reasons = [f"{n} unavailable: {r}" for n in names for r in [backends.get(n).unavailable()] if r is not None]
    return pytest.mark.skipif(bool(reasons), reason="; ".join(reasons))


@pytest.mark.parametrize("argv", [["setup", "paddle@9.9"], ["replay", "no-such.irt", "--backend", "paddle@9.9"],
                                  ["env", "paddle@9.9"]])
def test_an_undeclared_version_is_one_line_naming_the_declared_ones(argv, capsys):
    assert main(argv) == 2
    assert capsys.readouterr().err == UNKNOWN


def test_one_release_named_twice_is_refused(capsys):
    assert main(["replay", "no-such.irt", "--backend", "paddle,paddle@3.3.1"]) == 2
    assert capsys.readouterr().err == ("irtrace: error: --backend 'paddle,paddle@3.3.1' names one release twice: "
                                       "paddle and paddle@3.3.1 are both paddle 3.3.1\n")


def test_a_backend_in_the_host_interpreter_has_no_versions():
    with pytest.raises(IrtraceError, match=r"^backend 'torch' runs in the host's interpreter and declares no "
                                           r"versions; use --backend torch$"):
        backends.get("torch@2.0.0")


def test_each_release_has_its_own_env_and_the_default_keeps_its_key():
    """The default env's folder is keyed as before (the requirements file's bytes and the interpreter,
    hashed here independently); a release's by its own requirements, which pin its version; the default
    release named explicitly is the default env."""
    default = envs.get("paddle")
    exe = default.interpreter()
    full = subprocess.run([exe, "-c", "import sys, platform; print(sys.version, platform.machine())"],
                          capture_output=True, text=True).stdout.strip()
    key = hashlib.sha256(default.requirements.read_bytes() + full.encode()).hexdigest()[:12]
    assert default.path() == default.cache_root() / f"paddle-{key}"
    old = envs.get(OLD)
    pinned = [ln for ln in old.requirement_text().decode().splitlines() if ln and not ln.startswith("#")]
    assert pinned == ["paddlepaddle==3.0.0", "numpy==2.2.6", "ml_dtypes==0.6.0"]
    paths = {envs.get(f"paddle@{v}").path() for v in releases(discover()["paddle"].declaration)}
    assert len(paths) == 3 and default.path() in paths
    assert envs.get(NEW).path() == default.path()
    assert "paddle@3.0.0" in envs.all_envs() and "paddle@3.2.0" in envs.all_envs()  # irtrace setup all builds them
    assert backends.get(OLD).install == "irtrace setup paddle@3.0.0"


def test_one_start_of_a_base_interpreter_says_its_version_and_its_full_version(monkeypatch):
    """A replay finds each managed environment's base Python (a pyenv shim here: 0.15 s a start): asked once, it
    says both "3.11" and what names the environments built with it (sys.version and the machine, as before)."""
    import platform
    import sys
    starts = []
    real = subprocess.run
    monkeypatch.setattr(envs.subprocess, "run", lambda cmd, **kw: starts.append(cmd) or real(cmd, **kw))
    envs._asked_once.cache_clear()
    assert envs._version(sys.executable) == "%d.%d" % sys.version_info[:2]
    assert envs._full_version(sys.executable) == f"{sys.version} {platform.machine()}"
    assert len(starts) == 1


def test_a_pin_of_a_package_the_file_does_not_name_is_added():
    from dataclasses import replace
    text = replace(envs.get("paddle"), pins=("paddlepaddle==3.2.0", "protobuf==5.29.0")).requirement_text().decode()
    pinned = [ln for ln in text.splitlines() if ln and not ln.startswith("#")]
    assert pinned == ["paddlepaddle==3.2.0", "numpy==2.2.6", "ml_dtypes==0.6.0", "protobuf==5.29.0"]


@pytest.mark.parametrize("versions, line", [
    ({"reproduces": ["3.2.0", "3.3.1"], "clean": [], "latest": "3.3.1"},
     "Reproduces on PaddlePaddle 3.2.0 and 3.3.1 (latest)."),
    ({"reproduces": ["3.0.0"], "clean": ["3.2.0", "3.3.1"], "latest": "3.3.1"},
     "Reproduces only on PaddlePaddle 3.0.0; fixed in 3.2.0 and 3.3.1 (latest)."),
    ({"reproduces": ["3.3.1"], "clean": ["3.0.0"], "latest": "3.3.1"},
     "Reproduces on PaddlePaddle 3.3.1 (latest); not on 3.0.0."),
    ({"reproduces": [], "clean": ["3.0.0", "3.3.1"], "latest": "3.3.1"},
     "Does not reproduce on PaddlePaddle 3.0.0 and 3.3.1 (latest)."),
])
def test_issue_line_on_releases(versions, line):
    assert releases_line(versions, "PaddlePaddle") == line


def test_a_report_with_malformed_versions_is_refused(tmp_path):
    finding = {"id": "paddle-Pad-vjp2-divergent-0", "backend": "paddle", "op_type": "Pad", "mode": "vjp2",
               "verdict": "DIVERGENT", "first_node": "pad", "nodes": ["pad"], "message": "",
               "versions": {"reproduces": "3.0.0", "clean": []}}
    path = tmp_path / "report.json"
    path.write_text(json.dumps({"schema": "irtrace.report/1", "bundle": {"path": "x.irt"}, "findings": [finding]}))
    with pytest.raises(IrtraceError, match=r"findings\[0\]\.versions\.reproduces: missing or not a list of versions"):
        read_report(path)


def _repro_folder(root, backend):
    folder = root / f"{backend}-Conv-fwd-divergent-0"
    folder.mkdir(parents=True)
    (folder / "finding.json").write_text(json.dumps({"backend": backend}))
    (folder / "repro.py").write_text("raise SystemExit(1)\n")
    return folder


def test_versions_skips_a_repro_whose_backend_declares_none_and_refuses_an_unknown_one(tmp_path, capsys):
    _repro_folder(tmp_path / "repros", "onnxruntime")
    assert main(["repro", "--versions", "all", str(tmp_path / "repros")]) == 0
    assert capsys.readouterr().out == \
        "onnxruntime-Conv-fwd-divergent-0: skipped: backend 'onnxruntime' declares no versions\n"
    folder = _repro_folder(tmp_path / "other", "padle@3.0.0")
    assert main(["repro", "--versions", "all", str(tmp_path / "other")]) == 2
    assert capsys.readouterr().err == (f"irtrace: error: {folder / 'finding.json'}: backend 'padle' is not one "
                                       f"irtrace knows. Did you mean: paddle, oracle?\n")
    assert main(["repro", "--versions", "all", str(tmp_path / "none")]) == 2
    assert "none: not a folder of repros" in capsys.readouterr().err


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    """Pad with a constant value (its double grad pads the direction with the value: every Paddle 3.x) and
    Round on ties (Paddle 3.0.0 rounds them away from zero; later releases, like torch, to even; no release
    has a double grad of round)."""
    rng = np.random.default_rng(0)
    feeds = {"x": rng.standard_normal((1, 2, 3, 4)).astype(np.float32),
             "t": np.array([0.5, 1.5, 2.5, -0.5, -2.5, 0.25], np.float32)}
    nodes = [helper.make_node("Pad", ["x", "pads", "value"], ["y"], name="pad", mode="constant"),
             helper.make_node("Round", ["t"], ["r"], name="round")]
    inits = [numpy_helper.from_array(np.array([0, 0, 1, 0, 0, 0, 0, 2], np.int64), "pads"),
             numpy_helper.from_array(np.array(1.5, np.float32), "value")]
    ins = [helper.make_tensor_value_info(k, TensorProto.FLOAT, list(v.shape)) for k, v in feeds.items()]
    outs = [helper.make_empty_tensor_value_info(o) for o in ("y", "r")]
    model = helper.make_model(helper.make_graph(nodes, "g", ins, outs, inits),
                              opset_imports=[helper.make_opsetid("", 20)])
    path = tmp_path_factory.mktemp("versions") / "pad_round.irt"
    return bundle_from_onnx(model, feeds, path, trained=["x", "t", "value"])


@pytest.fixture(scope="module")
def side_by_side(bundle, tmp_path_factory):
    out = tmp_path_factory.mktemp("side_by_side")
    return replay_into(bundle.path, ReplayOptions.parse(f"{OLD},{NEW}", "fwd,vjp2", verify_workarounds=False),
                       out=out).json, out


@_needs(OLD, NEW)
def test_releases_side_by_side_are_distinct_backends_and_a_finding_lists_where_it_reproduces(side_by_side):
    report, out = side_by_side
    assert [(b["name"], b["versions"]["paddle"]) for b in report["backends"]] == [(OLD, "3.0.0"), (NEW, "3.3.1")]
    assert "<small>reproduces on 3.0.0; not on 3.3.1 (latest)</small>" in (out / "report.html").read_text()
    by = {(f["op_type"], f["mode"]): f for f in report["findings"]}
    assert set(by) == {("Pad", "vjp2"), ("Round", "fwd"), ("Round", "vjp2")}
    pad, rnd, no_double_grad = by["Pad", "vjp2"], by["Round", "fwd"], by["Round", "vjp2"]
    assert no_double_grad["verdict"] == "ERROR" and "round_grad doesn't have any grad op" in no_double_grad["message"]
    assert no_double_grad["versions"] == {"reproduces": ["3.0.0", "3.3.1"], "clean": [], "latest": "3.3.1"}
    assert pad["backend"] == NEW and pad["id"].startswith("paddle-3.3.1-Pad-vjp2-divergent-")
    assert pad["versions"] == {"reproduces": ["3.0.0", "3.3.1"], "clean": [], "latest": "3.3.1"}
    assert rnd["backend"] == OLD
    assert rnd["versions"] == {"reproduces": ["3.0.0"], "clean": ["3.3.1"], "latest": "3.3.1"}
    rows = {r["backend"]: r for n in report["nodes"] if n["name"] == "round" for r in n["results"]
            if r["mode"] == "fwd" and r["backend"] in (OLD, NEW)}
    # the ties 0.5, 2.5, -0.5, -2.5 rounded away from zero: each off by exactly 1 from round-half-to-even
    assert rows[OLD]["verdict"] == "DIVERGENT" and rows[OLD]["max_abs"] == 1.0
    assert np.array_equal(np.round(np.array([0.5, 2.5, -0.5, -2.5])), [0.0, 2.0, -0.0, -2.0])
    assert rows[NEW]["verdict"] == "MATCH"


@_needs("paddle")
def test_the_default_release_reads_as_before(bundle, tmp_path):
    report = replay_into(bundle.path, ReplayOptions.parse("paddle", "fwd,vjp2", verify_workarounds=False),
                         out=tmp_path / "default").json
    assert sorted(f["id"].rsplit("-", 1)[0] for f in report["findings"]) == \
        ["paddle-Pad-vjp2-divergent", "paddle-Round-vjp2-error"]
    assert all(f["backend"] == "paddle" and "versions" not in f for f in report["findings"])


@_needs(OLD, NEW)
def test_issue_md_says_where_it_reproduces_and_versions_reruns_the_script(side_by_side, tmp_path, capsys):
    report, out = side_by_side
    rnd = next(f for f in report["findings"] if (f["op_type"], f["mode"]) == ("Round", "fwd"))
    (folder,) = make_repros(out / "report.json", tmp_path / "repros", finding_ids=[rnd["id"]], shrink_budget=20)
    issue = (folder / "issue.md").read_text()
    assert issue.startswith("# [PaddlePaddle] Round: the output differs from PyTorch and float64 (max abs 1) in "
                            "forward\n")
    assert "\nReproduces only on PaddlePaddle 3.0.0; fixed in 3.3.1 (latest).\n" in issue
    capsys.readouterr()
    assert main(["repro", "--versions", "3.0.0,3.3.1", str(tmp_path / "repros")]) == 1
    assert capsys.readouterr().out == f"{folder.name}: 3.0.0 reproduces, 3.3.1 (latest) fixed\n"
    ran = json.loads((folder / "versions.json").read_text())
    assert {v: (r["status"], r["exit_code"]) for v, r in ran["versions"].items()} == \
        {"3.0.0": ("reproduces", 1), "3.3.1": ("fixed", 0)}
    assert "max abs difference 1 " in ran["versions"]["3.0.0"]["output"]
    assert (folder / "issue.md").read_text() == issue  # the same verdicts: the same line
    assert main(["repro", "--versions", "2.6.2", str(folder)]) == 2
    assert "declares no version '2.6.2'; declared: 3.0.0, 3.2.0, 3.3.1" in capsys.readouterr().err
