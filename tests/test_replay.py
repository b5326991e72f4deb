"""Replay on real backends; planted bugs are found with the right verdict and node."""
import dataclasses
import json

import numpy as np
import pytest

import irtrace
from irtrace import compare
from irtrace.cli import main
from irtrace.errors import IrtraceError
from irtrace.replay import ReplayOptions, run
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
    rep = run(example_bundle(name), ReplayOptions(HOST, verify_workarounds=False)).replay
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
    rep = run(example_bundle("wideresnet-train"), ReplayOptions(HOST, verify_workarounds=False)).replay
    assert not [r for n in rep.nodes for r in n.results if r.verdict in compare.FAILING]


def test_onnxref_grouped_conv_transpose_is_a_finding(example_bundle):
    rep = run(example_bundle("stylegan2"), ReplayOptions(["onnxref"], modes=["fwd"], ops=["ConvTranspose"], verify_workarounds=False)).replay
    (f,) = group(rep)
    assert f.backend == "onnxref" and f.op_type == "ConvTranspose" and f.mode == "fwd"
    assert f.verdict in (compare.ERROR, compare.DIVERGENT)
    assert f.module == "synthesis.b8.conv0"
    assert f.file_line.endswith("stylegan2.py:144")


def _planted(bundle, bug, **kw):
    import planted_backend
    planted_backend.register(bug)
    rep = run(bundle, ReplayOptions([f"planted-{bug}"], **kw, verify_workarounds=False)).replay
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
    assert _verdicts(run(b, ReplayOptions(["torch", "onnxruntime"], jobs=2, verify_workarounds=False)).replay) == _verdicts(run(b, ReplayOptions(["torch", "onnxruntime"], verify_workarounds=False)).replay)


def test_selection_and_bad_selection(example_bundle):
    b = example_bundle("wideresnet")
    rep = run(b, ReplayOptions(["onnxruntime"], modes=["fwd"], ops=["Conv"], verify_workarounds=False)).replay
    assert {n.op_type for n in rep.nodes} == {"Conv"} and len(rep.nodes) == 9
    rep = run(b, ReplayOptions(["onnxruntime"], modes=["fwd"], nodes=r"^node_conv2d_3$", verify_workarounds=False)).replay
    assert [n.name for n in rep.nodes] == ["node_conv2d_3"]
    with pytest.raises(IrtraceError, match=r"--ops 'Conw': no such op in this graph\. Did you mean: Conv"):
        run(b, ReplayOptions(["torch"], ops=["Conw"], verify_workarounds=False)).replay
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


def test_the_reference_is_judged_against_float64_and_the_oracle_is_no_row(example_bundle):
    """torch's own fwd/vjp/vjp2 rows compare torch with the float64 oracle (not with itself); the
    oracle, even when named in --backend, arbitrates and has no rows; accumulating ops carry the
    rounding-error model's bound."""
    rep = run(example_bundle("resnet"), ReplayOptions(["torch", "oracle"], nodes="conv|batch|add", verify_workarounds=False)).replay
    rows = [(n.op_type, r) for n in rep.nodes for r in n.results]
    assert rows and not [r for _, r in rows if r.backend == "oracle"]
    torch_rows = [r for _, r in rows if r.backend == "torch"]
    assert {r.mode for r in torch_rows} == {"fwd", "vjp", "vjp2"}
    assert all(r.verdict in (compare.MATCH, compare.NOISE) for r in torch_rows), \
        [(r.node, r.mode, r.output, r.verdict, r.metrics.max_abs if r.metrics else None) for r in torch_rows
         if r.verdict not in (compare.MATCH, compare.NOISE)]
    # not compared with itself: torch differs from float64 somewhere, and says by how much
    assert any(r.metrics is not None and r.metrics.max_abs > 0 for r in torch_rows)
    conv_grads = [r for op, r in rows if op == "Conv" and r.mode != "fwd" and r.backend == "torch"]
    assert conv_grads and all(r.rounding_bound is not None for r in conv_grads if r.verdict == compare.NOISE)


def test_shape_arithmetic_and_constants_are_not_judged_on_backends_under_test(tmp_path):
    """Shape -> Gather -> Concat -> Reshape target, and a Cast of Slice's INT64_MAX "to the end":
    shape arithmetic a port computes in Python. Only the reference computes it (judged against
    float64); backends under test list it as skipped. A gradient with respect to a constant the
    model never differentiates (Pow's exponent) is skipped too, and its u leaves vjp2 alone."""
    from onnx import TensorProto, helper, numpy_helper

    from irtrace.export.onnx_bundle import bundle_from_onnx
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    inits = [numpy_helper.from_array(np.array([0], np.int64), "zero"),
             numpy_helper.from_array(np.array([-1], np.int64), "minus1"),
             numpy_helper.from_array(np.array([1], np.int64), "start"),
             numpy_helper.from_array(np.array([2**63 - 1], np.int64), "to_end")]
    nodes = [helper.make_node("Shape", ["x"], ["s"], name="shape"),
             helper.make_node("Gather", ["s", "zero"], ["n"], name="take_batch", axis=0),
             helper.make_node("Concat", ["n", "minus1"], ["target"], name="target", axis=0),
             helper.make_node("Slice", ["s", "start", "to_end"], ["tail"], name="tail"),
             helper.make_node("Cast", ["tail"], ["tailf"], name="cast_tail", to=TensorProto.FLOAT),
             helper.make_node("Reshape", ["x", "target"], ["flat"], name="flatten"),
             helper.make_node("Pow", ["flat", "two"], ["sq"], name="square"),
             helper.make_node("ReduceSum", ["tailf"], ["t"], name="sum_tail", keepdims=0),
             helper.make_node("Mul", ["sq", "t"], ["y"], name="scale")]
    # the exponent arrives as a Constant node (folded at canonicalization): a constant, not a weight
    nodes.insert(0, helper.make_node("Constant", [], ["two"], name="two",
                                     value=numpy_helper.from_array(np.array(2.0, np.float32))))
    m = helper.make_model(helper.make_graph(nodes, "g", [x], [y], inits), opset_imports=[helper.make_opsetid("", 17)])
    b = bundle_from_onnx(m, {"x": np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)},
                         tmp_path / "shapes.irt")
    rep = run(b, ReplayOptions(["torch", "onnxruntime"], verify_workarounds=False)).replay
    by = {n.name: n for n in rep.nodes}
    for name in ("shape", "take_batch", "target", "tail", "cast_tail", "sum_tail"):
        assert {r.backend for r in by[name].results} <= {"torch"}, name
        assert any(s.get("backend") == "onnxruntime" and "shape arithmetic" in s["reason"] for s in by[name].skipped)
    assert {r.backend for r in by["flatten"].results} == {"torch", "onnxruntime"}
    square = by["square"]
    assert not [r for r in square.results if r.output.endswith(":two")]
    assert {s["output"] for s in square.skipped} == {"d:two", "d2x:two"}
    assert all(r.verdict in (compare.MATCH, compare.NOISE) for n in rep.nodes for r in n.results)


def test_gradient_path_follows_differentiable_inputs_only():
    """MobileViTv2's GroupNorm(1, C) as torch.onnx exports it: InstanceNormalization's scale is a
    ones constant CastLike'd to the activation's type and expanded to a shape computed from it. The
    activation reaches the scale only through CastLike's target_type and Shape: nothing the model
    differentiates, so the scale's gradient is not judged. Where's condition likewise."""
    from onnx import TensorProto, helper

    from irtrace.ir.graph import gradient_path
    f = TensorProto.FLOAT
    nodes = [helper.make_node("CastLike", ["one", "x"], ["one_like"]),
             helper.make_node("Shape", ["x"], ["shape"], start=1, end=2),
             helper.make_node("Expand", ["one_like", "shape"], ["scale"]),
             helper.make_node("InstanceNormalization", ["x", "scale", "bias"], ["y"]),
             helper.make_node("Greater", ["y", "zero"], ["positive"]),
             helper.make_node("Where", ["positive", "gain", "w"], ["z"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", f, [1, 3, 4])],
                              [helper.make_tensor_value_info("z", f, None)],
                              [helper.make_tensor("one", f, [], [1.0]), helper.make_tensor("bias", f, [3], [0.0] * 3),
                               helper.make_tensor("zero", f, [], [0.0]), helper.make_tensor("gain", f, [], [2.0]),
                               helper.make_tensor("w", f, [], [3.0])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    on = gradient_path(model, {"x", "w"})
    assert on == {"x", "w", "y", "z"}  # Greater: a comparison, no derivative either


def test_index_tables_from_lengths_are_shape_arithmetic_but_a_scalar_parameter_is_data():
    """T5's relative-position buckets: Range over constant lengths, a Log of a length ratio (a float
    scalar the exporter folds), Min and Where in int64 — computed from shapes and constants only, so
    a port computes them in Python (or int32), not as the model's data. A one-element float that is
    a parameter (CLIP's logit_scale) stays data, and so does what is computed from it."""
    from onnx import TensorProto, helper, numpy_helper

    from irtrace.ir.graph import shape_arithmetic
    i64 = lambda v, n: numpy_helper.from_array(np.array(v, np.int64), n)  # noqa: E731
    f32 = lambda v, n: numpy_helper.from_array(np.array(v, np.float32), n)  # noqa: E731
    inits = [i64(0, "zero"), i64(8, "len"), i64(1, "one"), i64(7, "max_bucket"), f32(2.0, "ratio"),
             f32(2.659, "logit_scale"), f32(np.ones((8, 4)), "table")]
    nodes = [helper.make_node("Range", ["zero", "len", "one"], ["pos"], name="range"),
             helper.make_node("Cast", ["pos"], ["posf"], name="to_float", to=TensorProto.FLOAT),
             helper.make_node("Div", ["posf", "ratio"], ["scaled"], name="div"),
             helper.make_node("Log", ["scaled"], ["logs"], name="log"),
             helper.make_node("Cast", ["logs"], ["bucket"], name="to_int", to=TensorProto.INT64),
             helper.make_node("Min", ["bucket", "max_bucket"], ["clamped"], name="min"),
             helper.make_node("Gather", ["table", "clamped"], ["bias"], name="lookup", axis=0),
             helper.make_node("Exp", ["logit_scale"], ["scale"], name="exp_scale"),
             helper.make_node("Mul", ["x", "scale"], ["xs"], name="apply_scale"),
             helper.make_node("Add", ["xs", "bias"], ["y"], name="add_bias")]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, 4])
    m = helper.make_model(helper.make_graph(nodes, "g", [x], [y], inits), opset_imports=[helper.make_opsetid("", 17)])
    assert shape_arithmetic(m, state={"logit_scale", "table"}) == {"range", "to_float", "div", "log", "to_int", "min"}
    # without knowing the parameters, a one-element float is a folded constant
    assert "exp_scale" in shape_arithmetic(m)


def test_the_harness_differentiates_what_a_training_step_does(tmp_path):
    """y = x @ w, x a model input, w a parameter, the dot loss. A plain training step takes
    only w's gradient; a gradient penalty's graph takes d/dx with the cotangent a constant, and ds/dg
    comes in a call of its own. A backend whose MatMul backward segfaults in exactly those two cases (as
    MegEngine's batched MatMul does) is CRASH there, and MATCH where g requires grad; before, vjp attached
    x too and vjp2 attached g, and said MATCH on both."""
    import planted_backend
    from onnx import TensorProto, helper, numpy_helper

    from irtrace.export.onnx_bundle import bundle_from_onnx
    planted_backend.register("fussymm")
    rng = np.random.default_rng(0)
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], "mm",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(rng.standard_normal((4, 5)).astype(np.float32), "w")])
    b = bundle_from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]),
                         {"x": rng.standard_normal((2, 3, 4)).astype(np.float32)}, tmp_path / "mm.irt")
    rep = run(b, ReplayOptions(["torch", "planted-fussymm"], timeout=10.0, verify_workarounds=False)).replay
    got = {(r.backend, r.mode, r.output): r.verdict for n in rep.nodes for r in n.results}
    assert got == {("torch", "fwd", "y"): compare.MATCH, ("planted-fussymm", "fwd", "y"): compare.MATCH,
                   ("torch", "vjp", "d:w"): compare.MATCH, ("planted-fussymm", "vjp", "*"): compare.CRASH,
                   ("torch", "vjp2", "d2x:x"): compare.MATCH, ("torch", "vjp2", "d2x:w"): compare.MATCH,
                   ("planted-fussymm", "vjp2", "d2x:*"): compare.CRASH,
                   ("torch", "vjp2", "d2g:y"): compare.MATCH, ("planted-fussymm", "vjp2", "d2g:y"): compare.MATCH}, got
    (node,) = rep.nodes
    assert node.skipped == [{"mode": "vjp", "output": "d:x", "backend": None,
                             "reason": "a training step does not differentiate the model's inputs (a gradient-penalty "
                                       "loss does; this bundle's loss: dot)"}]


def test_one_root_cause_is_one_finding_with_its_attribute_classes(example_bundle):
    """Findings are grouped by (backend, op, mode, verdict, cause), not by node or attributes.
    On a torch replay of the ResNet example made to fail by hand: every Conv's vjp DIVERGENT, on a
    different result per node (d:0 on some, d:1 on others), is one finding whose signature lists both and
    whose classes count the nodes per attribute set; every Relu's fwd ERROR with messages differing only
    in numbers and quoted names is one finding; a different message is another."""
    from dataclasses import replace
    rep = run(example_bundle("resnet"), ReplayOptions(["torch"], modes=["fwd", "vjp"], ops=["Conv", "Relu"], verify_workarounds=False)).replay
    convs = relus = 0
    for n in rep.nodes:
        if n.op_type == "Conv":
            vjps = [r for r in n.results if r.mode == "vjp" and r.output.startswith("d:")]
            k = convs % 2
            convs += 1
            n.results = [replace(r, verdict=compare.DIVERGENT) if r is vjps[min(k, len(vjps) - 1)] else r
                         for r in n.results]
        elif n.op_type == "Relu":
            other = relus == 0
            relus += 1
            msg = ("RuntimeError: kernel 'relu_fast' is missing" if other else
                   f"RuntimeError: shape [{relus}, 3] does not match '{n.name}' at 0x{relus:x}")
            n.results = [replace(r, verdict=compare.ERROR, message=msg) if r.mode == "fwd" else r for r in n.results]
    found = {(f.op_type, f.mode, f.verdict): f for f in group(rep)}
    assert len(group(rep)) == 3, [(f.op_type, f.mode, f.verdict, f.signature) for f in group(rep)]
    conv = found[("Conv", "vjp", compare.DIVERGENT)]
    assert len(conv.nodes) == convs and conv.signature == "d:0, d:1"
    assert sum(c["nodes"] for c in conv.classes) == convs and len(conv.classes) > 1
    errors = sorted((len(f.nodes), f.signature) for f in group(rep) if f.op_type == "Relu")
    assert errors == [(1, "RuntimeError: kernel '…' is missing"),
                      (relus - 1, "RuntimeError: shape [#, #] does not match '…' at #")], errors


def test_a_new_executor_is_one_class_and_sees_every_call(example_bundle):
    """tests/recording_executor.py wraps the replay's executor (the local workers, the batches, the cache)
    and records what it is sent: every node in every mode on every backend named, the reference and the
    oracle included, each answered once, and the verdicts are those of a replay without it."""
    from backends._runtime.wire import Status
    from recording_executor import Recording
    b = example_bundle("resnet")
    options = ReplayOptions(["torch", "onnxruntime"], modes=("fwd", "vjp"), ops=("Conv", "Relu"),
                            verify_workarounds=False)
    recorded = run(b, dataclasses.replace(options, executor=Recording)).replay
    rec = Recording.last
    plain = run(b, options).replay
    assert _verdicts(recorded) == _verdicts(plain)
    convs = [n.name for n in plain.nodes if n.op_type == "Conv"]
    assert len(convs) == sum(1 for n in b.model.graph.node if n.op_type == "Conv") > 3
    for name in convs:
        for backend, modes in (("torch", ("fwd", "vjp")), ("oracle", ("fwd", "vjp")), ("onnxruntime", ("fwd",))):
            for mode in modes:
                assert rec.sent.count((backend, name, mode, None)) == 1, (backend, name, mode)
        assert ("onnxruntime", name, "vjp", None) not in rec.sent  # onnxruntime computes fwd only
    assert sorted(a[:3] for a in rec.answered) == sorted(s[:3] for s in rec.sent)
    assert {a[3] for a in rec.answered} == {Status.OK}


def test_a_forward_of_another_shape_makes_vjp_and_vjp2_shape_mismatch_not_errors(tmp_path):
    """A backend whose Conv output is one column short (planted): the reference's cotangent cannot be
    applied, so its vjp and vjp2 are SHAPE_MISMATCH saying so, not an ERROR the framework would have raised
    (irtrace fuzz counted Paddle's forward shape bugs three times, twice as 'raises ValueError'); repro
    writes the forward's repro only."""
    import planted_backend
    from onnx import TensorProto, helper, numpy_helper

    from irtrace.export.onnx_bundle import bundle_from_onnx
    from irtrace.report.folder import replay_into
    from irtrace.repro.make import make_repros
    planted_backend.register("shape")
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 5, 5])
    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((3, 2, 3, 3)).astype(np.float32), "w")
    m = helper.make_model(helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["y"], name="conv", pads=[1, 1, 1, 1])], "g", [x],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w]), opset_imports=[helper.make_opsetid("", 17)])
    b = bundle_from_onnx(m, {"x": np.random.default_rng(1).standard_normal((1, 2, 5, 5)).astype(np.float32)},
                         tmp_path / "c.irt")
    report = replay_into(b.path, ReplayOptions.parse("planted-shape", "fwd,vjp,vjp2"), tmp_path / "r").json
    found = {(f["mode"], f["verdict"]): f["message"] for f in report["findings"]}
    assert set(found) == {("fwd", "SHAPE_MISMATCH"), ("vjp", "SHAPE_MISMATCH"), ("vjp2", "SHAPE_MISMATCH")}, found
    assert found["vjp", "SHAPE_MISMATCH"] == "output shape (1, 3, 5, 4), not the reference's (1, 3, 5, 5): its " \
                                             "cotangent cannot be applied (the forward is SHAPE_MISMATCH)"
    folders = make_repros(tmp_path / "r" / "report.json", tmp_path / "repros", shrink_budget=5)
    assert [f.name.split("-")[3] for f in folders] == ["fwd"]  # planted-shape-Conv-fwd-...


def test_a_warm_worker_is_kept_across_tests_after_a_library_call_turns_keeping_on(tmp_path, monkeypatch):
    """keep_warm() without volatile variables (irtrace fuzz's own call) keeps those the session declared
    (PYTEST_CURRENT_TEST): the next test's replay gets the worker kept by the one before, not a new one
    (it made every later test of a test process start torch and float64 afresh)."""
    from irtrace.replay import backends, worker
    from irtrace.replay.worker import WorkerProxy
    if worker._WARM is None:
        pytest.skip("workers are started per replay here (IRTRACE_COLD_WORKERS=1)")
    worker.keep_warm()  # as irtrace.fuzz does
    assert "PYTEST_CURRENT_TEST" in worker._VOLATILE
    info = backends.get("onnxruntime")
    w = worker.warm(info) or WorkerProxy(info)
    w.start()
    assert worker.park(w)
    monkeypatch.setenv("PYTEST_CURRENT_TEST", "tests/another.py::test_next (call)")
    kept = worker.warm(info)  # this one, or one an earlier test kept: none under a key with the new name
    assert kept is not None and kept.idle()
    assert worker.park(kept)


def test_the_replay_leaves_the_collector_as_it_found_it(planted_bundle):
    """The node loop freezes what survives each node (engine._survivors_frozen): once the replay returns nothing it
    froze stays frozen, so a garbage cycle made during the loop is collected after; a caller's own frozen
    objects stay frozen."""
    import gc
    import weakref

    class Cycle:
        pass
    dead = []

    def on_node(node):  # a cycle made and dropped in the loop, frozen with the node's survivors
        c = Cycle()
        c.me = c
        dead.append(weakref.ref(c))
    assert gc.get_freeze_count() == 0
    run_opts = ReplayOptions(["onnxruntime"], modes=["fwd"], verify_workarounds=False)
    rep = run(planted_bundle, run_opts, on_node=on_node).replay
    assert rep.nodes and len(dead) == len(rep.nodes)
    assert gc.get_freeze_count() == 0
    gc.collect()
    assert all(ref() is None for ref in dead)

    mine = Cycle()
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        run(planted_bundle, run_opts)
        assert gc.get_freeze_count() >= frozen  # not unfrozen by the replay
    finally:
        gc.unfreeze()
    assert mine is not None


def test_a_findings_worst_result_is_the_one_most_allowances_out_where_relative_errors_tie():
    """Where the reference is ~0 a relative error saturates at 1, on every output: the finding shows the result
    that is the most allowances out, not the first (MegEngine's softmax double backward on EdgeNeXt: a d2x of
    5.5e-16 against 4.6e-23, and a d2g of 0.42 against 5e-8; numbers from that replay)."""
    from types import SimpleNamespace

    from irtrace.replay.engine import NodeReport

    def row(node, output, max_abs, allowed):
        metrics = compare.Metrics(max_abs=max_abs, max_rel=1.0, ulp=1e9, cosine=0.0, frac_out=1.0, worst_index=(0,),
                                  actual_at_worst=max_abs, ref_at_worst=0.0, min_atol=max_abs, min_rtol=1.0)
        return compare.Result(node, "Softmax", "megengine", "vjp2", output, compare.DIVERGENT, metrics,
                              allowed=allowed)
    first = [row("node_softmax", "d2x:mul_6", 5.49e-16, 8.65e-22), row("node_softmax", "d2g:softmax", 0.424, 4.64e-7)]
    second = [row("node_softmax_1", "d2x:mul_14", 5.07e-16, 6.41e-22),
              row("node_softmax_1", "d2g:softmax_1", 0.226, 5.0e-7)]
    nodes = [NodeReport("node_softmax", "Softmax", "", 0, {}, first),
             NodeReport("node_softmax_1", "Softmax", "", 1, {}, second)]
    (f,) = group(SimpleNamespace(bundle=SimpleNamespace(specs=[]), nodes=nodes, backends=["megengine"]))
    assert (f.worst["node"], f.worst["output"], f.worst["max_abs"]) == ("node_softmax", "d2g:softmax", 0.424)
    assert f.first_node == "node_softmax" and f.nodes == ["node_softmax", "node_softmax_1"]
