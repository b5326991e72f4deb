"""Replay on real backends; planted bugs are found with the right verdict and node."""
import json

import numpy as np
import pytest

import irtrace
from irtrace import compare
from irtrace.cli import main
from irtrace.errors import IrtraceError
from irtrace.replay.engine import replay
from irtrace.report.findings import group

HOST = ["torch", "onnxruntime", "oracle"]


@pytest.fixture(scope="module")
def planted_bundle(tmp_path_factory):
    import models_for_tests
    return irtrace.export(models_for_tests.planted_target(), models_for_tests.planted_target_inputs(), tmp_path_factory.mktemp("p") / "p.irt")


def _verdicts(rep):
    return {(n.name, r.backend, r.mode, r.output): r.verdict for n in rep.nodes for r in n.results}


@pytest.mark.parametrize("name", ["resnet", "wideresnet", "gpt", "stylegan2"])
def test_examples_agree_on_torch_onnxruntime_oracle(example_bundle, name):
    rep = replay(example_bundle(name), HOST)
    bad = [(n.name, r.backend, r.mode, r.output, r.verdict, r.message) for n in rep.nodes for r in n.results
           if r.verdict in compare.FAILING]
    assert not bad
    counts = {v: sum(1 for n in rep.nodes for r in n.results if r.verdict == v) for v in compare.VERDICTS}
    assert counts[compare.MATCH] > 100
    # every node has torch fwd; nodes with float inputs and cotangents have vjp and vjp2
    assert all(any(r.backend == "torch" and r.mode == "fwd" for r in n.results) for n in rep.nodes)
    assert sum(1 for n in rep.nodes for r in n.results if r.mode == "vjp2" and r.backend == "torch") > 20


@pytest.mark.slow
def test_wideresnet_train_agrees(example_bundle):
    rep = replay(example_bundle("wideresnet-train"), HOST)
    assert not [r for n in rep.nodes for r in n.results if r.verdict in compare.FAILING]


def test_onnxref_grouped_conv_transpose_is_a_finding(example_bundle):
    rep = replay(example_bundle("stylegan2"), ["onnxref"], modes=["fwd"], ops=["ConvTranspose"])
    (f,) = group(rep)
    assert f.backend == "onnxref" and f.op_type == "ConvTranspose" and f.mode == "fwd"
    assert f.verdict in (compare.ERROR, compare.DIVERGENT)
    assert f.module == "synthesis.b8.conv0"
    assert f.file_line.endswith("stylegan2.py:144")


def _planted(bundle, bug, **kw):
    import planted_backend
    planted_backend.register(bug)
    rep = replay(bundle, [f"planted-{bug}"], **kw)
    return rep, group(rep)


def test_conv_padding_wrong_side_is_divergent_fwd(planted_bundle):
    rep, findings = _planted(planted_bundle, "pad")
    fwd = [f for f in findings if f.mode == "fwd"]
    assert [(f.op_type, f.verdict) for f in fwd] == [("Conv", compare.DIVERGENT)]
    w = fwd[0].worst
    assert fwd[0].first_node == "node_conv2d" and fwd[0].module == "conv"
    assert w["closer_to_oracle"] == "reference" and w["max_abs"] > 0.1
    assert w["min_atol"] == pytest.approx(w["max_abs"])
    assert all(f.op_type == "Conv" for f in findings)  # nothing else is blamed


def test_leaky_relu_without_second_derivative_found_in_vjp2_only(planted_bundle):
    rep, findings = _planted(planted_bundle, "lrelu")
    assert [(f.op_type, f.mode, f.verdict) for f in findings] == [("LeakyRelu", "vjp2", compare.DIVERGENT)]
    assert findings[0].worst["output"].startswith("d2g:")
    v = _verdicts(rep)
    assert v[("node_leaky_relu", "planted-lrelu", "vjp", "d:conv2d")] == compare.MATCH


def test_subgradient_at_kink_is_tagged(planted_bundle):
    _, findings = _planted(planted_bundle, "relu0")
    assert findings and all(f.op_type == "Relu" for f in findings)
    assert any("exact zeros in input 0" in t for f in findings for t in f.tags)


def test_segfault_is_crash_and_replay_goes_on(planted_bundle):
    rep, findings = _planted(planted_bundle, "crash")
    crash = [f for f in findings if f.verdict == compare.CRASH]
    assert {f.op_type for f in crash} == {"Sigmoid"}
    assert "SIGSEGV" in crash[0].message
    assert rep.restarts["planted-crash"] >= 1
    v = _verdicts(rep)
    assert v[("node_tanh", "planted-crash", "fwd", "tanh")] == compare.MATCH  # nodes after the crash are compared


def test_hang_is_timeout_and_replay_goes_on(planted_bundle):
    rep, findings = _planted(planted_bundle, "hang", timeout=2, modes=["fwd"])
    assert [(f.op_type, f.verdict) for f in findings] == [("Tanh", compare.TIMEOUT)]
    assert rep.elapsed_s < 30


def test_parallel_jobs_give_the_same_verdicts(example_bundle):
    b = example_bundle("resnet")
    assert _verdicts(replay(b, ["torch", "onnxruntime"], jobs=2)) == _verdicts(replay(b, ["torch", "onnxruntime"]))


def test_selection_and_bad_selection(example_bundle):
    b = example_bundle("wideresnet")
    rep = replay(b, ["onnxruntime"], modes=["fwd"], ops=["Conv"])
    assert {n.op_type for n in rep.nodes} == {"Conv"} and len(rep.nodes) == 9
    rep = replay(b, ["onnxruntime"], modes=["fwd"], nodes_regex=r"^node_conv2d_3$")
    assert [n.name for n in rep.nodes] == ["node_conv2d_3"]
    with pytest.raises(IrtraceError, match=r"--ops 'Conw': no such op in this graph\. Did you mean: Conv"):
        replay(b, ["torch"], ops=["Conw"])
    with pytest.raises(IrtraceError, match=r"unknown backend 'onnxruntim'.*Did you mean: onnxruntime"):
        from irtrace.replay import backends
        backends.parse_list("onnxruntim")


def test_cli_replay_writes_reports_and_exit_codes(example_bundle, planted_bundle, tmp_path, capsys):
    b = example_bundle("wideresnet")
    rc = main(["replay", str(b.path), "--backend", "torch,onnxruntime", "-o", str(tmp_path / "ok")])
    out = capsys.readouterr().out
    assert rc == 0
    assert out.splitlines()[-2].startswith("irtrace replay: nodes    66  MATCH")
    rep = json.loads((tmp_path / "ok" / "report.json").read_text())
    assert rep["schema"] == "irtrace.report/1" and rep["reference"] == "torch"
    assert {"nodes", "findings", "summary", "backends", "modes", "bundle"} <= set(rep)
    r0 = rep["nodes"][0]["results"][0]
    assert {"backend", "mode", "output", "verdict", "max_abs", "max_rel", "ulp", "closer_to_oracle"} <= set(r0)
    assert (tmp_path / "ok" / "report.html").read_text().startswith("<!doctype html>")
    import planted_backend
    planted_backend.register("pad")
    rc = main(["replay", str(planted_bundle.path), "--backend", "planted-pad", "--modes", "fwd",
               "-o", str(tmp_path / "bad")])
    out = capsys.readouterr().out
    assert rc == 1
    assert "DIVERGENT      planted-pad Conv fwd  1 node(s), first node_conv2d (conv" in out
    assert main(["replay", str(b.path), "--modes", "fwd,jvp"]) == 2
    assert "unknown mode 'jvp'" in capsys.readouterr().err


def test_unsupported_fails_only_with_strict(example_bundle, tmp_path, capsys):
    b = example_bundle("resnet")  # train-mode BN is irtrace's own op: onnxruntime has no kernel
    assert main(["replay", str(b.path), "--backend", "onnxruntime", "--modes", "fwd", "-o", str(tmp_path / "a")]) == 0
    assert main(["replay", str(b.path), "--backend", "onnxruntime", "--modes", "fwd", "--strict",
                 "-o", str(tmp_path / "b")]) == 1
    capsys.readouterr()


def test_oracle_gradients_checked_by_finite_differences():
    """A wrong float64 gradient must fail the oracle's own check instead of arbitrating."""
    import base64

    import onnx
    import torch
    from onnx import helper

    from backends._runtime.spec import WorkerSpec
    from backends.oracle.worker import OracleAdapter
    node = helper.make_node("Sin", ["x"], ["y"], name="s")
    spec = WorkerSpec("s", "Sin", "", 20, ("x",), ("y",), {}, base64.b64encode(node.SerializeToString()).decode())
    x = np.random.default_rng(0).standard_normal(5).astype(np.float32)
    g = np.ones(5, np.float32)
    a = OracleAdapter()
    entry = a.lookup(spec)
    a.vjp(entry, [x], spec, [g])
    assert a.last_check["verified"] is True
    a.grad.table = a.grad.table.derive("wrong")
    a.grad.table.replace("Sin", 7)(lambda t: torch.sin(t) + 0.1 * t * t.detach())  # wrong derivative
    a.vjp(entry, [x], spec, [g])
    assert a.last_check["verified"] is False
    _ = onnx
