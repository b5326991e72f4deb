"""irtrace.testing and its pytest plugin, run by pytest's own pytester in a child pytest: a passing and a
failing assertion on real backends, the folder --irtrace-keep keeps, the irtrace_bundle fixture, and a
strict irtrace_known marker that fails once its bug no longer shows (a planted backend: torch whose
LeakyRelu's double backward is zero)."""
import json
import textwrap
from pathlib import Path

pytest_plugins = ["pytester"]

TESTS = Path(__file__).parent

CONFTEST = f"""
import sys
sys.path.insert(0, {str(TESTS)!r})
import planted_backend
planted_backend.register("lrelu")
"""

SUITE = textwrap.dedent('''
    import pytest
    import torch
    from irtrace.testing import assert_ops_match


    def model():
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.LeakyReLU(0.2)).eval()


    INPUTS = (torch.randn(2, 4, generator=torch.Generator().manual_seed(0)),)


    def test_clean():
        report = assert_ops_match(model(), INPUTS, backend="onnxruntime", modes=("fwd",))
        assert report["summary"]["findings"] == 0


    def test_planted():
        assert_ops_match(model(), INPUTS, backend="planted-lrelu")


    @pytest.mark.irtrace_known("planted-lrelu", "LeakyRelu", "vjp2", reason="no double backward")
    def test_known_bug_still_there():
        assert_ops_match(model(), INPUTS, backend="planted-lrelu")


    @pytest.mark.irtrace_known("onnxruntime", "LeakyRelu", "fwd", reason="was wrong before 1.32")
    def test_known_bug_fixed():
        assert_ops_match(model(), INPUTS, backend="onnxruntime", modes=("fwd",))


    def test_bundle_fixture(irtrace_bundle):
        bundle = irtrace_bundle(model(), INPUTS)
        assert len(bundle.model.graph.node) >= 2
''')


def test_the_plugin_in_a_child_pytest(pytester):
    pytester.makeconftest(CONFTEST)
    # in process (the warm workers and imports are this process's): a module name no file in tests/ has
    pytester.makepyfile(test_user_suite=SUITE)
    keep = pytester.path / "kept"
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", f"--irtrace-keep={keep}", "-q")
    result.assert_outcomes(passed=3, failed=2)
    out = result.stdout.str()
    # the failing assertion's message is the findings table, its repro and where everything is
    result.stdout.fnmatch_lines([
        "*AssertionError: 1 finding(s), worst first:",
        "*DIVERGENT*planted-lrelu LeakyRelu vjp2*1 node(s), first node_leaky_relu (1)*",
        "*max abs 1.48*(vs float64: planted-lrelu 1.48, reference 1.5e-09*",
        "*id planted-lrelu-LeakyRelu-vjp2-divergent-*",
        "*repros: *kept/test_user_suite.py_test_planted/repros (1 written)",
        "*bundle and report: *kept/test_user_suite.py_test_planted",
    ])
    result.stdout.fnmatch_lines(["*known bug onnxruntime LeakyRelu fwd no longer shows (was wrong before 1.32): "
                                 "fixed upstream? remove its irtrace_known marker*"])
    assert "test_known_bug_still_there FAILED" not in out
    # --irtrace-keep keeps the failing tests' folders only, with the bundle, the report and the repros
    assert sorted(p.name for p in keep.iterdir()) == ["test_user_suite.py_test_known_bug_fixed",
                                                       "test_user_suite.py_test_planted"]
    planted = keep / "test_user_suite.py_test_planted"
    assert (planted / "model.irt" / "manifest.json").is_file()
    report = json.loads((planted / "replay" / "report.json").read_text())
    assert [f["op_type"] + " " + f["mode"] for f in report["findings"]] == ["LeakyRelu vjp2"]
    [repro] = [p for p in (planted / "repros").iterdir() if p.is_dir()]
    assert (repro / "repro.py").is_file() and (repro / "issue.md").is_file()


def test_assert_port_matches_passes_a_correct_port_and_names_the_first_diverging_module(tmp_path):
    import pytest

    import models_for_tests as m
    from irtrace.replay import backends
    from irtrace.testing import assert_port_matches
    if backends.get("megengine").unavailable():
        pytest.skip("megengine unavailable")
    model, inputs = m.conv_bn_head(), m.conv_bn_head_inputs()
    ports = [TESTS / "ports"]
    report = assert_port_matches(model, "mge_ports:head", backend="megengine", example_inputs=inputs, train=True,
                                 path=ports)
    assert not report["diverges"] and {r["name"] for r in report["modules"]} == {"conv", "bn", "square", "head"}
    with pytest.raises(AssertionError) as e:  # a Linear weight used without its transpose (square, 8x8)
        assert_port_matches(model, "mge_ports:head_untransposed", backend="megengine", example_inputs=inputs,
                            train=True, path=ports, keep=tmp_path / "kept")
    text = str(e.value)
    assert "the difference is in the port's code of square" in text
    assert text.splitlines()[-1] == f"port report: {tmp_path / 'kept' / 'port' / 'report.json'}"
    assert json.loads((tmp_path / "kept" / "port" / "report.json").read_text())["first_forward"]["name"] == "square"
