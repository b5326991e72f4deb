"""The real TensorFlow (2.21 CPU, eager, deterministic ops) in its own environment as a replay
backend, against torch and float64: the shared op-case table in fwd, vjp and vjp2, the padding
matrix, the example models, chained runs, known answers, a repro, and the seed story (the Keras
WideResNet with padding='same' at stride 2). No mocks."""
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper

from irtrace import compare
from irtrace.replay import backends
from irtrace.replay import ReplayOptions, run
from irtrace.report.folder import replay_into

from conftest import update_known

TESTS = Path(__file__).parent
ROOT = TESTS.parent
REASON = backends.get("tensorflow").unavailable()
pytestmark = pytest.mark.skipif(REASON is not None, reason=f"tensorflow unavailable: {REASON}")
OK = (compare.MATCH, compare.NOISE)
FWD_ONLY = {"equal", "less", "greater", "cast_int"}  # no float output: nothing to differentiate
SHAPE_ARITHMETIC = {"shape", "range"}  # computed from shapes and constants: a port does it in Python, not judged


def _tf_run(args, **kw):
    """A process in TensorFlow's own environment, with the repository importable."""
    info = backends.get("tensorflow")
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), **info.variables()}
    return subprocess.run([info.interpreter(), *args], capture_output=True, text=True, env=env, timeout=300, **kw)


def _described(r):
    """What tests/tensorflow_known.py records for a result: numbers for DIVERGENT, the message otherwise."""
    if r.verdict == compare.DIVERGENT and r.metrics is not None:
        m = r.metrics
        return (f"tensorflow {m.actual_at_worst:.4g} vs torch {m.ref_at_worst:.4g} at {list(m.worst_index)}, "
                f"max abs {m.max_abs:.3g}")
    return re.sub(r"\{\{function_node [^}]*\}\}\s*", "", r.message)[:90]


def _float64_nodes(model, feeds):
    """Two float64 nodes beside the op cases: TensorFlow has float64 and must compute it (a second
    float64 witness), never refuse it or cast it down."""
    rng = np.random.default_rng(3)
    feeds["f64.x"], feeds["f64.w"] = rng.standard_normal((1, 2, 5, 5)), rng.standard_normal((3, 2, 3, 3))
    g = model.graph
    g.input.extend([helper.make_tensor_value_info("f64.x", TensorProto.DOUBLE, [1, 2, 5, 5]),
                    helper.make_tensor_value_info("f64.w", TensorProto.DOUBLE, [3, 2, 3, 3])])
    g.node.extend([helper.make_node("Conv", ["f64.x", "f64.w"], ["f64.c"], name="f64_conv", pads=[0, 0, 1, 1],
                                    strides=[2, 2]),
                   helper.make_node("Softmax", ["f64.c"], ["f64.y"], name="f64_softmax", axis=1)])
    g.output.extend([helper.make_empty_tensor_value_info("f64.y")])
    return model, feeds


@pytest.fixture(scope="module")
def answered():
    """The cases TensorFlow answers (tests/op_cases.py's OPTIONAL ones only where its table has the op)."""
    import op_cases
    return op_cases.cases_of("tensorflow")


@pytest.fixture(scope="module")
def cases_bundle(tmp_path_factory, answered):
    import op_cases
    from irtrace.export.onnx_bundle import bundle_from_onnx
    model, feeds = _float64_nodes(*op_cases.all_cases_model([c for c in op_cases.CASES if c.id in answered])[:2])
    return bundle_from_onnx(model, feeds, tmp_path_factory.mktemp("cases") / "cases.irt", name="op_cases",
                            trained=op_cases.activations(model, feeds))


@pytest.fixture(scope="module")
def tf_replay(cases_bundle):
    return run(cases_bundle, ReplayOptions(["tensorflow"], verify_workarounds=False)).replay


def _observed(rep):
    return {(n.name, r.mode, r.output): r for n in rep.nodes for r in n.results
            if r.backend == "tensorflow" and r.verdict in compare.FAILING + (compare.UNSUPPORTED,)}


def test_op_table_against_torch_known_findings_are_strict(tf_replay):
    from tensorflow_known import KNOWN
    seen = _observed(tf_replay)
    if update_known("tensorflow_known", "KNOWN", {k: (r.verdict, _described(r)) for k, r in seen.items()}):
        return
    new = {k: (r.verdict, _described(r)) for k, r in seen.items() if k not in KNOWN}
    fixed = {k: v for k, v in KNOWN.items() if k not in seen or seen[k].verdict != v[0]}
    assert not new, f"new TensorFlow findings (or a translation bug): {new}"
    assert not fixed, f"known TensorFlow findings that no longer show (fixed? update tests/tensorflow_known.py): {fixed}"
    for k, (verdict, text) in KNOWN.items():
        r = seen[k]
        if verdict == compare.DIVERGENT and "max abs " in text:  # the numbers, not only the verdict
            want = float(text.rsplit("max abs ", 1)[1])
            assert r.metrics.max_abs == pytest.approx(want, rel=0.01), (k, _described(r))
        else:
            assert _described(r).startswith(text[:60]), (k, _described(r))


def test_every_case_has_fwd_vjp_and_vjp2(tf_replay, answered):
    import op_cases
    by_node = {n.name: {r.mode for r in n.results if r.backend == "tensorflow"} for n in tf_replay.nodes}
    skipped = {n.name: [s for s in n.skipped if s.get("backend") == "tensorflow"] for n in tf_replay.nodes}
    for c in (c for c in op_cases.CASES if c.id in answered):
        want = set() if c.id in SHAPE_ARITHMETIC else {"fwd"} if c.id in FWD_ONLY else {"fwd", "vjp", "vjp2"}
        assert by_node[c.id] == want, (c.id, by_node[c.id])
        assert bool(skipped[c.id]) == (c.id in SHAPE_ARITHMETIC), (c.id, skipped[c.id])
        assert all("shape arithmetic" in s["reason"] for s in skipped[c.id])


def test_translation_guards_forward(tf_replay):
    """Attribute translations (momentum, running-var estimator, count_include_pad, pads order, NCHW
    <-> NHWC transposes, grouped and transposed weight layouts, output_padding, align_corners, ...)
    are checked in the forward pass, where TensorFlow's own gradient gaps cannot hide or fake them."""
    v = {(n.name, r.output): r.verdict for n in tf_replay.nodes for r in n.results
         if r.backend == "tensorflow" and r.mode == "fwd"}
    for key in [("batchnorm_train_m07", "batchnorm_train_m07.out1"),   # momentum (keep fraction) -> running_mean
                ("batchnorm_train_m07", "batchnorm_train_m07.out2"),   # unbiased running_var
                ("batchnorm_train", "batchnorm_train.out0"), ("batchnorm_eval", "batchnorm_eval.out0"),
                ("avgpool_exclude_pad", "avgpool_exclude_pad.out0"), ("avgpool_include_pad", "avgpool_include_pad.out0"),
                ("avgpool_asym_exclude", "avgpool_asym_exclude.out0"),
                ("conv_s2_same_upper_pads", "conv_s2_same_upper_pads.out0"),
                ("conv_begin_heavy_pads", "conv_begin_heavy_pads.out0"), ("conv_dilation2", "conv_dilation2.out0"),
                ("conv_groups_batch", "conv_groups_batch.out0"), ("conv_depthwise", "conv_depthwise.out0"),
                ("convtranspose_groups2", "convtranspose_groups2.out0"),
                ("convtranspose_s2_outpad", "convtranspose_s2_outpad.out0"),
                ("convtranspose_asym_pads", "convtranspose_asym_pads.out0"),
                ("pad_constant_asym", "pad_constant_asym.out0"), ("pad_reflect", "pad_reflect.out0"),
                ("pad_edge", "pad_edge.out0"), ("maxpool_asym", "maxpool_asym.out0"),
                ("resize_linear_align_corners", "resize_linear_align_corners.out0"),
                ("resize_linear_half_pixel", "resize_linear_half_pixel.out0"), ("resize_nearest", "resize_nearest.out0"),
                ("slice_negative_step", "slice_negative_step.out0"), ("prelu", "prelu.out0"),
                ("depthtospace_dcr", "depthtospace_dcr.out0"), ("depthtospace_crd", "depthtospace_crd.out0"),
                ("topk", "topk.out1"), ("gelu_tanh", "gelu_tanh.out0"), ("einsum", "einsum.out0"),
                ("cast_int", "cast_int.out0")]:
        assert v[key] in OK, (key, v[key])
    assert not [k for k, verdict in v.items() if verdict not in OK]  # every forward agrees, nothing unsupported


def test_first_order_gradients_fail_only_where_tf_cpu_refuses(tf_replay):
    bad = {(n.name, r.verdict) for n in tf_replay.nodes for r in n.results
           if r.backend == "tensorflow" and r.mode == "vjp" and r.verdict not in OK}
    assert bad == {("conv_dilation2", "ERROR"), ("conv_groups2", "ERROR"), ("conv_depthwise", "ERROR"),
                   ("conv_groups_batch", "ERROR"),
                   ("batchnorm_eval_stats", "UNSUPPORTED")}  # statistics from the graph: not differentiated


def test_float64_is_computed_not_refused(tf_replay, cases_bundle):
    assert cases_bundle.values["f64.y"].dtype == np.float64
    results = [r for n in tf_replay.nodes if n.name.startswith("f64_") for r in n.results if r.backend == "tensorflow"]
    want = {(n, m) for n in ("f64_conv", "f64_softmax") for m in ("fwd", "vjp", "vjp2")}
    assert {(r.node, r.mode) for r in results} == want
    assert all(r.verdict == compare.MATCH for r in results), [(r.node, r.output, r.verdict, r.message) for r in results]


@pytest.mark.slow
def test_onednn_kernels_change_no_verdict(cases_bundle, monkeypatch):
    """With TF_ENABLE_ONEDNN_OPTS=1 (oneDNN's kernels, off by default on this CPU) the op cases give
    the same fwd and vjp verdicts, and the worker states that oneDNN was on."""
    from tensorflow_known import KNOWN
    monkeypatch.setenv("TF_ENABLE_ONEDNN_OPTS", "1")
    rep = run(cases_bundle, ReplayOptions(["tensorflow"], modes=["fwd", "vjp"], verify_workarounds=False)).replay
    assert rep.versions["tensorflow"]["onednn"] == "on (TF_ENABLE_ONEDNN_OPTS=1)", rep.versions
    assert set(_observed(rep)) == {k for k in KNOWN if k[1] in ("fwd", "vjp")}


def test_padding_matrix_against_float64(tmp_path):
    import op_cases
    import padding_matrix
    from padding_known import KNOWN
    from irtrace.export.onnx_bundle import bundle_from_onnx
    model, feeds, _ = op_cases.all_cases_model(padding_matrix.cases())
    b = bundle_from_onnx(model, feeds, tmp_path / "pad.irt", name="padding_matrix", trained=op_cases.activations(model, feeds))
    rep = run(b, ReplayOptions(["tensorflow"], modes=["fwd"], verify_workarounds=False)).replay
    assert len(rep.nodes) == 234
    seen = {(n.name, r.backend): r.verdict for n in rep.nodes for r in n.results
            if r.backend == "tensorflow" and r.verdict not in OK}
    assert seen == {k: v for k, v in KNOWN.items() if k[1] == "tensorflow"}
    assert all(any(r.backend == "tensorflow" for r in n.results) for n in rep.nodes)


@pytest.mark.slow
def test_backends_command_lists_it_with_its_op_count():
    r = subprocess.run([sys.executable, "-m", "irtrace", "backends"], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0
    assert re.search(r"^tensorflow +fwd,vjp,vjp2 +ops +102 +available$", r.stdout, re.M), r.stdout


# --- known answers --------------------------------------------------------------------------------
def test_chained_known_answer_x_times_w(tmp_path):
    """y = x * w, output seed c, penalty input x: L = <x*w, c> (+ ||w*c||^2 under the gradient penalty),
    so dL/dw = x*c (+ 2*w*c^2) and dL/dx = w*c, by hand in float64, for both losses."""
    from irtrace.export.onnx_bundle import bundle_from_onnx
    from irtrace.replay.chained import chain_request, run_chain
    from irtrace.replay.execute import WorkerPool
    from irtrace.store import seed_name
    from onnx import numpy_helper
    graph = helper.make_graph([helper.make_node("Mul", ["x", "w"], ["y"], name="mul")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(np.array([0.5, -1.0, 2.0], np.float32), "w")])
    b = bundle_from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]),
                         {"x": np.array([1.0, 2.0, 3.0], np.float32)}, tmp_path / "mul.irt")
    x, w = np.array([1.0, 2.0, 3.0]), np.array([0.5, -1.0, 2.0])
    c = np.asarray(b.values[seed_name("y")], np.float64)
    assert np.abs(2 * w * c * c).max() > 0.1  # the penalty term matters: a chain that dropped it would fail
    pool = WorkerPool()
    try:
        for loss in ("bundle", "grad-penalty"):
            status, reply, values, grads = run_chain(pool, "tensorflow", chain_request(b, loss))
            assert status == "ok", reply.get("message")
            dw = x * c + (2 * w * c * c if loss == "grad-penalty" else 0)
            np.testing.assert_allclose(values["y"], x * w, rtol=1e-6)
            for name, want in (("w", dw), ("x", w * c), ("y", c)):
                np.testing.assert_allclose(grads[name], want, rtol=1e-6, atol=1e-6, err_msg=f"{loss} dL/d{name}")
    finally:
        pool.close()


def test_vjp2_known_answer_matmul_and_the_stated_settings(tmp_path):
    """vjp2 of MatMul y = a @ b (the op table's own function, through autodiff.vjp2 in TensorFlow's env):
    h = (g b^T, a^T g), s = <h_a, u_a> + <h_b, u_b>, so ds/da = g u_b^T, ds/db = u_a^T g,
    ds/dg = u_a b + a u_b, written out in numpy float64."""
    rng = np.random.default_rng(11)
    a, b = rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal((4, 5)).astype(np.float32)
    g = rng.standard_normal((3, 5)).astype(np.float32)
    ua, ub = rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal((4, 5)).astype(np.float32)
    np.savez(tmp_path / "in.npz", a=a, b=b, g=g, ua=ua, ub=ub)
    script = ("import sys, numpy as np\n"
              "from backends.tensorflow import autodiff\n"
              "from backends.tensorflow.ops import OPS\n"
              "d = np.load(sys.argv[1])\n"
              "op = OPS.lookup('', 'MatMul', 20).fn\n"
              "dx, dg = autodiff.vjp2(op, [d['a'], d['b']], {}, [d['g']], [d['ua'], d['ub']])\n"
              "h = autodiff.vjp(op, [d['a'], d['b']], {}, [d['g']])\n"
              "np.savez(sys.argv[2], da=dx[0], db=dx[1], dg=dg[0], ha=h[0], hb=h[1])\n"
              "from backends.tensorflow.worker import make_adapter\n"
              "import json; a = make_adapter(); print(json.dumps({'versions': a.versions(), 'ops': a.table.keys()}))\n")
    r = _tf_run(["-c", script, str(tmp_path / "in.npz"), str(tmp_path / "out.npz")], cwd=ROOT)
    assert r.returncode == 0, r.stderr
    out = np.load(tmp_path / "out.npz")
    hello = json.loads(r.stdout.strip().splitlines()[-1])  # what the worker states: the numerics settings
    v = hello["versions"]
    assert v["tensorflow"] == "2.21.0" and v["eager"] == "True" and v["op_determinism"] == "True"
    assert re.match(r"(on|off) \(TF_ENABLE_ONEDNN_OPTS=", v["onednn"]), v["onednn"]
    assert len(hello["ops"]) == 102 and ["ai.irtrace", "TrainBatchNormalization", 1] in hello["ops"]
    a64, b64, g64, ua64, ub64 = (x.astype(np.float64) for x in (a, b, g, ua, ub))
    for name, want in (("ha", g64 @ b64.T), ("hb", a64.T @ g64), ("da", g64 @ ub64.T), ("db", ua64.T @ g64),
                       ("dg", ua64 @ b64 + a64 @ ub64)):
        assert out[name].dtype == np.float32
        np.testing.assert_allclose(out[name], want, rtol=1e-5, atol=1e-5 * np.abs(want).max(), err_msg=name)


# --- the example models ---------------------------------------------------------------------------
def _example(example_bundle, name):
    from tensorflow_known import EXAMPLES
    from irtrace.report.findings import group
    b = example_bundle(name)
    rep = run(b, ReplayOptions(["tensorflow"], verify_workarounds=False)).replay
    assert len(rep.nodes) == len(b.model.graph.node)
    for n in rep.nodes:  # compared, or skipped with its reason (shape arithmetic); never UNSUPPORTED
        modes = {r.mode for r in n.results if r.backend == "tensorflow"}
        reasons = [s["reason"] for s in n.skipped if s.get("backend") == "tensorflow" and s["mode"] == "*"]
        assert ("fwd" in modes) != bool(reasons), (n.name, modes, reasons)
        assert not [r for r in n.results if r.backend == "tensorflow" and r.verdict == compare.UNSUPPORTED], n.name
    found = sorted({(f.op_type, f.mode, f.verdict) for f in group(rep)})
    assert found == EXAMPLES[name]
    return rep


@pytest.mark.slow
@pytest.mark.parametrize("name", ["resnet", "wideresnet", "wideresnet-train", "stylegan2", "gpt"])
def test_examples_run_to_the_end(example_bundle, name):
    rep = _example(example_bundle, name)
    assert len(rep.nodes) == {"resnet": 49, "wideresnet": 66, "wideresnet-train": 69, "stylegan2": 244, "gpt": 55}[name]


@pytest.mark.slow
def test_wideresnet_train_chained_both_losses(example_bundle, tmp_path):
    """The chained forward agrees with torch under both losses; under the gradient penalty the
    double backward through tf.nn.moments (batch norm) moves the convolution weights' gradients."""
    from irtrace.replay import ReplayOptions
    from irtrace.report.folder import replay_into
    path = example_bundle("wideresnet-train").path
    runs = {}
    for loss in ("bundle", "grad-penalty"):
        report = replay_into(path, ReplayOptions.parse("tensorflow", "fwd", chained=True, loss=loss), out=tmp_path / loss).json
        (chain,) = report["chained"]["runs"]
        assert chain["status"] == "ok", chain.get("message")
        assert not [e for e in chain["values"] if e["verdict"] in compare.FAILING]
        runs[loss] = {p["value"]: p["verdict"] for p in chain["parameters"]}
    assert len(runs["bundle"]) == 25 and set(runs["bundle"].values()) <= set(OK)
    bad = {k for k, v in runs["grad-penalty"].items() if v == compare.DIVERGENT}
    assert "conv1.weight" in bad and "fc.weight" not in bad and len(bad) == 21


@pytest.mark.slow
def test_layernorm_double_backward_repro_runs_in_the_tf_env(tmp_path):
    import op_cases
    from irtrace.export.onnx_bundle import bundle_from_onnx
    from irtrace.replay import ReplayOptions
    from irtrace.report.folder import replay_into
    from irtrace.repro.make import make_repros
    model, feeds, _ = op_cases.all_cases_model([c for c in op_cases.CASES if c.id == "layernorm"])
    b = bundle_from_onnx(model, feeds, tmp_path / "ln.irt", name="ln", trained=op_cases.activations(model, feeds))
    replayed = replay_into(b.path, ReplayOptions.parse("tensorflow", "vjp2"), out=tmp_path / "replay")
    report, out = replayed.json, replayed.out
    (folder,) = make_repros(out / "report.json", tmp_path / "repros")
    finding = json.loads((folder / "finding.json").read_text())
    assert finding["label"] == "d2x:layernorm.in0" and finding["verdict"] == "DIVERGENT"
    r = _tf_run(["repro.py"], cwd=folder)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "import torch" not in r.stdout
    assert float(re.search(r"max abs difference ([0-9.eE+-]+)", r.stdout).group(1)) > 1e-3
    assert "op_determinism True" in (folder / "issue.md").read_text()


@pytest.mark.slow
def test_resnet_every_finding_has_a_repro_that_reproduces_in_the_tf_env(example_bundle, tmp_path):
    from irtrace.replay import ReplayOptions
    from irtrace.report.folder import replay_into
    from irtrace.repro.make import make_repros
    replayed = replay_into(example_bundle("resnet").path, ReplayOptions.parse("tensorflow", "fwd,vjp,vjp2"), out=tmp_path / "r")
    report, out = replayed.json, replayed.out
    folders = make_repros(out / "report.json", tmp_path / "repros")
    assert len(folders) == len(report["findings"]) == 2  # MaxPool vjp2 ERROR, TrainBatchNormalization vjp2 DIVERGENT
    for folder in folders:
        finding = json.loads((folder / "finding.json").read_text())
        r = _tf_run(["repro.py"], cwd=folder)
        assert r.returncode == 1, r.stdout + r.stderr
        if finding["verdict"] == "ERROR":
            assert "\"EXPLICIT\" is not in the list of allowed values" in r.stdout
        else:
            assert r.stdout.startswith("max abs difference")


# --- the seed story: Keras WideResNet, padding='same' at stride 2 ----------------------------------
@pytest.fixture(scope="module")
def keras_bundle(tmp_path_factory):
    from irtrace.cli import main
    d = tmp_path_factory.mktemp("keras")
    script = ("import sys, numpy as np; sys.path.insert(0, sys.argv[3]); import tf_models\n"
              "m = tf_models.wideresnet(); m.save(sys.argv[1])\n"
              "np.savez(sys.argv[2], **{v.path: v.numpy() for v in m.weights})\n")
    r = _tf_run(["-c", script, str(d / "wrn.keras"), str(d / "w.npz"), str(TESTS)])
    assert r.returncode == 0, r.stderr[-2000:]
    x = np.random.default_rng(0).standard_normal((2, 8, 8, 3)).astype(np.float32)
    np.savez(d / "x.npz", x=x)
    assert main(["export", "--from", "tensorflow", str(d / "wrn.keras"), "--input-file", str(d / "x.npz"),
                 "-o", str(d / "tf.irt")]) == 0
    return d, dict(np.load(d / "w.npz")), x


@pytest.mark.slow
def test_seed_story_keras_same_padding_on_torch_and_tensorflow(keras_bundle, capsys):
    """Replayed node by node, the stride-2 'same' conv carries its end-only pads [0, 0, 1, 1] and both
    torch and TensorFlow agree with the recorded TensorFlow values on it, in every mode; the torch
    port with padding=1 is caught by `irtrace diff` at that very layer."""
    import torch

    import irtrace
    import models_for_tests
    from irtrace.cli import main
    from irtrace.ir.spec import decode_attrs
    d, w, x = keras_bundle
    b = irtrace.load(d / "tf.irt")
    convs = {b.node_source(n.name).get("module"): n for n in b.model.graph.node if n.op_type == "Conv"}
    node = convs["block2_conv1"]
    assert decode_attrs(node)["pads"] == [0, 0, 1, 1] and decode_attrs(node)["strides"] == [2, 2]
    rep = run(b, ReplayOptions(["torch", "tensorflow"], verify_workarounds=False)).replay
    for n in rep.nodes:
        assert not [r for r in n.results if r.backend == "tensorflow" and r.verdict not in OK], n.name
    on_conv = {(r.backend, r.mode) for r in next(n for n in rep.nodes if n.name == node.name).results
               if r.verdict in OK}
    assert on_conv >= {(bk, m) for bk in ("torch", "tensorflow") for m in ("fwd", "vjp", "vjp2")}
    port = irtrace.export(models_for_tests.keras_wrn(w, False), (torch.from_numpy(x.transpose(0, 3, 1, 2).copy()),),
                          d / "torch0.irt", force=True)
    capsys.readouterr()
    assert main(["diff", str(d / "tf.irt"), str(port.path), "-o", str(d / "diff0")]) == 1
    assert ("block2.conv1 (torch) ~ block2_conv1 (tensorflow): pads [1, 1, 1, 1] vs [0, 0, 1, 1]"
            in capsys.readouterr().out)
