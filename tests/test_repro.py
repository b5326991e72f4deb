"""irtrace repro: shrunk single-op scripts that run without irtrace and show their divergence."""
import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import irtrace
from irtrace.replay import ReplayOptions
from irtrace.report.folder import replay_into
from irtrace.replay import backends
from irtrace.repro.make import _write_npz, make_repros


def _run(script, python=sys.executable):
    return subprocess.run([python, str(script)], capture_output=True, text=True, cwd=script.parent, timeout=300)


def _replay_and_repro(bundle, backend, modes, tmp_path, name):
    replayed = replay_into(bundle.path, ReplayOptions.parse(backend, modes), out=tmp_path / f"{name}.replay")
    report, out = replayed.json, replayed.out
    assert report["findings"]
    return report, make_repros(out / "report.json", tmp_path / f"{name}.repros")


def _printed_max_abs(stdout):
    return float(re.search(r"max abs difference ([0-9.eE+-]+|inf)", stdout).group(1))


def _literals(text):
    """The arrays a script writes as one-line literals (`u = mge.tensor(np.array([...], 'float32'))`)."""
    out = {}
    for name, expr in re.findall(r"^(\w+) = (.*?)(?:  # .*)?$", text, re.M):
        expr = re.sub(r"^\w+\.(?:tensor|constant|to_tensor)\((np\..*)\)$", r"\1", expr)
        if expr.startswith("np.") and " if " not in expr:
            try:
                out[name] = eval(expr, {"np": np})  # noqa: S307 - our own generated literal
            except Exception:  # noqa: BLE001 - not a literal
                pass
    return out


def _filed_as_is(folder, python=sys.executable):
    """The script a maintainer files: short, straight-line, no irtrace, no exec; it reproduces (exit 1)
    and computes what irtrace's worker computed (checked by `irtrace repro` itself: finding.json)."""
    text = (folder / "repro.py").read_text()
    finding = json.loads((folder / "finding.json").read_text())
    assert finding["script"]["form"] == "straight", finding["script"]
    assert finding["script"]["reproduces"] and finding["script"]["same_result"] is not False
    assert text.count("\n") <= 40, text
    tree = ast.parse(text)
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names} | {
        (n.module or "").split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert "irtrace" not in imported and "backends" not in imported
    assert not any(isinstance(n, ast.Name) and n.id in ("exec", "eval") for n in ast.walk(tree))
    issue = (folder / "issue.md").read_text()
    assert issue.count("\n") <= 60, issue
    assert "/root" not in issue and "/tmp" not in issue and "/home" not in issue  # no path of this machine
    r = _run(folder / "repro.py", python)
    assert r.returncode == 1, r.stdout + r.stderr
    first = r.stdout.strip().splitlines()[0]
    if finding["script"].get("varies"):  # its output is another each run: of the same form
        first = re.sub(r"[-0-9.e+]+", "N", first)
        assert any(re.sub(r"[-0-9.e+]+", "N", line) == first for line in issue.splitlines()), (first, issue)
    else:
        assert first in issue  # its actual output is in issue.md
    return text, finding, r


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    import models_for_tests
    import planted_backend
    for bug in ("pad", "lrelu", "crash"):
        planted_backend.register(bug)
    return irtrace.export(models_for_tests.planted_target(), models_for_tests.planted_target_inputs(), tmp_path_factory.mktemp("pl") / "p.irt")


def test_wrong_side_padding_shrinks_and_reproduces(planted, tmp_path):
    _, folders = _replay_and_repro(planted, "planted-pad", "fwd", tmp_path, "pad")
    (folder,) = folders
    text, finding, r = _filed_as_is(folder)
    x_shape = finding["shrunk_shapes"][0]
    assert len(x_shape) == 4 and all(a <= b for a, b in zip(x_shape, [1, 1, 3, 3]))  # shrink quality
    assert _printed_max_abs(r.stdout) == pytest.approx(finding["numbers"]["max_abs"], rel=5e-3)  # printed to 3 digits
    assert "y = " in text and "functional.conv2d(" in text  # the op call itself, specialised
    fixed = _run(folder / "compare_torch.py")  # the same case with PyTorch's own op: no difference
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert "max abs difference 0 " in fixed.stdout
    issue = (folder / "issue.md").read_text()
    assert issue.startswith("# [PyTorch (irtrace backend planted-pad)] Conv: the output differs from PyTorch")
    assert "module `conv`" not in issue  # anonymized by default
    assert "```python" in issue and "Its output:" in issue


def test_leaky_relu_second_derivative_shrinks_to_few_elements(planted, tmp_path):
    _, folders = _replay_and_repro(planted, "planted-lrelu", "vjp2", tmp_path, "lrelu")
    (folder,) = folders
    text, finding, r = _filed_as_is(folder)
    assert int(np.prod(finding["shrunk_shapes"][0])) <= 4
    assert finding["label"].startswith("d2g:")
    assert "torch.autograd.grad(s, wrt" in text  # the nested backward, written out
    assert _run(folder / "compare_torch.py").returncode == 0


def test_a_result_that_differs_from_run_to_run_gets_a_straight_repro_that_says_so(planted, tmp_path):
    """A kernel whose wrong values are other ones in every process (Paddle 3.3's max gradient of a 5-D
    input among ties reads memory it did not write): no script can compute the worker's values again, so
    irtrace runs the shrunk case twice, and when the backend's results differ, a script that reproduces
    is the repro, straight-line (it fell back to the 347-line harness), and issue.md says why."""
    import planted_backend
    planted_backend.register("stale")
    _, folders = _replay_and_repro(planted, "planted-stale", "fwd", tmp_path, "stale")
    (folder,) = folders
    text, finding, r = _filed_as_is(folder)
    assert finding["script"]["varies"] is True and "os.urandom(4)" in text, finding["script"]
    assert "The wrong values differ from run to run (irtrace ran the same case twice and got two different " \
           "results" in (folder / "issue.md").read_text()


def test_crash_repro_runs_the_op_in_a_child(planted, tmp_path):
    _, folders = _replay_and_repro(planted, "planted-crash", "fwd", tmp_path, "crash")
    (folder,) = folders
    r = _run(folder / "repro.py")
    assert r.returncode == 1 and "killed by signal" in r.stdout, r.stdout + r.stderr
    assert (folder / "repro.py").read_text().count("\n") <= 40


def test_same_finding_gives_byte_identical_output(planted, tmp_path):
    replayed = replay_into(planted.path, ReplayOptions.parse("planted-pad", "fwd"), out=tmp_path / "r")
    report, out = replayed.json, replayed.out
    a = make_repros(out / "report.json", tmp_path / "a")[0]
    b = make_repros(out / "report.json", tmp_path / "b")[0]
    assert sorted(p.name for p in a.iterdir()) == sorted(p.name for p in b.iterdir())
    for p in a.iterdir():
        if p.name != "finding.json":  # it records the shrink's seconds
            assert p.read_bytes() == (b / p.name).read_bytes(), p.name


def test_hostile_names_cannot_inject_code(tmp_path):
    import planted_backend
    from onnx import TensorProto, helper

    from irtrace.export.onnx_bundle import bundle_from_onnx
    planted_backend.register("pad")
    evil = 'x"""\nimport os; os.system("touch ' + str(tmp_path / "pwned") + '") #\'\'\''
    x = helper.make_tensor_value_info(evil, TensorProto.FLOAT, [1, 1, 4, 4])
    w = helper.make_tensor_value_info("w", TensorProto.FLOAT, [1, 1, 3, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 4, 4])
    node = helper.make_node("Conv", [evil, "w"], ["y"], name=evil, pads=[1, 1, 1, 1])
    m = helper.make_model(helper.make_graph([node], "g", [x, w], [y]), opset_imports=[helper.make_opsetid("", 20)])
    rng = np.random.default_rng(0)
    b = bundle_from_onnx(m, {evil: rng.standard_normal((1, 1, 4, 4)).astype(np.float32),
                             "w": rng.standard_normal((1, 1, 3, 3)).astype(np.float32)}, tmp_path / "evil.irt")
    _, folders = _replay_and_repro(b, "planted-pad", "fwd", tmp_path, "evil")
    text = (folders[0] / "repro.py").read_text()
    ast.parse(text)
    assert 'os.system("touch' not in text
    r = _run(folders[0] / "repro.py")
    assert r.returncode == 1
    assert not (tmp_path / "pwned").exists()


def test_non_finite_values_round_trip(tmp_path):
    a = np.array([np.inf, -np.inf, np.nan, 1.5, -0.0], np.float32)
    _write_npz(tmp_path / "d.npz", {"input0": a})
    with np.load(tmp_path / "d.npz") as d:
        b = d["input0"]
    assert b.dtype == np.float32 and np.array_equal(a, b, equal_nan=True) and np.signbit(b[4])


def test_bad_report_and_unknown_finding(planted, tmp_path, capsys):
    from irtrace.cli import main
    assert main(["repro", str(tmp_path / "nope.json")]) == 2
    assert "cannot read report" in capsys.readouterr().err
    replayed = replay_into(planted.path, ReplayOptions.parse("planted-pad", "fwd"), out=tmp_path / "r")
    report, out = replayed.json, replayed.out
    assert main(["repro", str(out / "report.json"), "--finding", "planted-pad-Conv-fwd-divergent-xxxx",
                 "-o", str(tmp_path / "rr")]) == 2
    assert "Did you mean: planted-pad-Conv-fwd-divergent-" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.skipif(backends.get("megengine").unavailable() is not None, reason="megengine unavailable")
def test_megengine_stylegan2_one_folder_per_bug_each_runs_in_its_env(example_bundle, tmp_path):
    report, folders = _replay_and_repro(example_bundle("stylegan2"), "megengine", "fwd,vjp,vjp2", tmp_path, "sg")
    assert len(folders) == len(report["findings"]) == 2  # LeakyRelu vjp2 (5 nodes) and Pad vjp2 (4 nodes): 2 bugs
    python = backends.get("megengine").interpreter()
    for folder in folders:
        text, finding, r = _filed_as_is(folder, python)
        assert "import torch" not in text and "GradManager" in text
        if finding["verdict"] == "DIVERGENT":  # Pad's d2g: known answer ds/dg = pad(u), computed here by numpy
            assert _printed_max_abs(r.stdout) == pytest.approx(finding["numbers"]["max_abs"], rel=5e-3)  # 3 digits
            lit = _literals(text)
            widths = ast.literal_eval(re.search(r"functional\.pad\(x, (\(\(.*?\)\)),", text).group(1))
            assert lit["want"].shape == (1, 1, 3, 3) and widths == ((0, 0), (0, 0), (1, 1), (1, 1))  # 4-D, one pixel
            assert np.array_equal(lit["want"], np.pad(lit["u"], widths))
            assert "got [0. 0. 0. 0. 0. 0. 0. 0. 0.]" in r.stdout  # MegEngine's d2g: silently zero
        else:
            assert "PRELU_GRAD unimplemented" in r.stdout and "functional.leaky_relu(x, 0.2)" in text


@pytest.mark.slow
@pytest.mark.skipif(any(backends.get(b).unavailable() is not None for b in ("tensorflow", "paddle")),
                    reason="tensorflow or paddle unavailable")
def test_tensorflow_and_paddle_repros_run_in_their_envs(example_bundle, tmp_path):
    replayed = replay_into(example_bundle("stylegan2").path, ReplayOptions.parse("tensorflow,paddle", "vjp,vjp2", ops="Conv,Pow"), out=tmp_path / "tp")
    report, out = replayed.json, replayed.out
    ids = sorted({next(f["id"] for f in report["findings"] if f["backend"] == b and f["op_type"] == op)
                  for b, op in (("tensorflow", "Conv"), ("paddle", "Pow"))})
    folders = make_repros(out / "report.json", tmp_path / "tprep", finding_ids=ids)
    assert len(folders) == 2
    for folder in folders:
        backend = json.loads((folder / "finding.json").read_text())["backend"]
        text, finding, r = _filed_as_is(folder, backends.get(backend).interpreter())
        assert ("GradientTape" in text) if backend == "tensorflow" else ("paddle.grad(" in text)
        assert ("Gradients for grouped convolutions are not supported on CPU" in r.stdout) if backend == "tensorflow" \
            else ("doesn't have any grad op" in r.stdout)


def test_onnx_reference_grouped_conv_transpose_repro(example_bundle, tmp_path):
    replayed = replay_into(example_bundle("stylegan2").path, ReplayOptions.parse("onnxref", "fwd", ops="ConvTranspose"), out=tmp_path / "o")
    report, out = replayed.json, replayed.out
    (folder,) = make_repros(out / "report.json", tmp_path / "orep")
    finding = json.loads((folder / "finding.json").read_text())
    assert finding["framework"] == "onnx"
    text, finding, r = _filed_as_is(folder)
    assert "helper.make_node('ConvTranspose'" in text and "'group': 2" in text  # shrunk to two groups
    assert (folder / "issue.md").read_text().startswith("# [onnx.reference] ConvTranspose: raises ValueError")


def test_titles_name_the_input_by_its_role_and_claim_float64_only_when_it_judged():
    from irtrace.ir.semantics import input_role
    from irtrace.repro.script import symptom
    assert [input_role("Conv", "", 17, k) for k in range(3)] == ["input", "filter", "bias"]
    assert [input_role("MatMul", "", 13, k) for k in range(2)] == ["first operand", "second operand"]
    judged = {"max_abs": 0.5, "oracle_at_worst": 1.0}
    assert symptom("DIVERGENT", "d:w", judged, "", "filter") == \
        "the filter gradient differs from PyTorch and float64 (max abs 0.5)"
    assert symptom("DIVERGENT", "d2x:w", {"max_abs": 0.5, "oracle_at_worst": None}, "", "filter") == \
        "d(grad)/d(filter) differs from PyTorch (max abs 0.5)"


def test_the_allowance_a_repro_states_is_the_term_compare_judged_by():
    """repro.py's check and issue.md name what set the tolerance, as compare.judge decides it."""
    from backends.oracle.model import rounding_size
    from irtrace import compare
    from irtrace.repro.script import allowance
    o = np.linspace(-1.0, 1.0, 8)

    def said(actual, ref, oracle=None, model=None):
        verdict, _, details = compare.judge(np.float32(actual), np.float32(ref), oracle, model=model)
        assert verdict == compare.DIVERGENT
        return allowance(compare.Result("n", "Op", "b", "fwd", "y", verdict, oracle_abs=details.get("oracle_abs"),
                                        allowed=details.get("allowed"), rounding_bound=details.get("rounding_bound"),
                                        float32_rounding=details.get("float32_rounding")))
    assert said(o + 1e-3, o, o) == "8 float32 ULPs at the output's scale"  # the reference is exact
    assert said(o + 1.0, o + 1e-4, o) == "8 x PyTorch's own error against float64"
    assert said(o + 1.0, o, o, rounding_size((np.full(8, 1e3), np.full(8, 1e3)), o)) == \
        "the rounding-error bound of this sum at the worst element"  # 8 eps sqrt(1000) sqrt(1000) = 9.5e-4
    assert said(o + 1.0, o) == "rtol 0.0001, atol 1e-05 x the output's scale (no float64 to arbitrate)"
    assert allowance(compare.Result("n", "Op", "b", "fwd", "y", compare.ERROR)) == ""


def test_a_gradient_the_framework_does_not_compute_is_said_so_in_the_title():
    """A DIVERGENT result without numbers (TensorFlow computes no gradient for a cotangent: irtrace fuzz's
    Resize vjp2) is titled with what is missing, not with a max abs it does not have."""
    from irtrace import compare
    from irtrace.repro import script
    text = script.symptom(compare.DIVERGENT, "d2g:y", {"max_abs": None}, "tensorflow computes no gradient for g:y")
    assert text == "d(grad)/d(cotangent) is not computed (tensorflow computes no gradient for g:y)"
