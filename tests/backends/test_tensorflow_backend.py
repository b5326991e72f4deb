"""TensorFlow's own tests, beyond the contract every backend keeps (tests/backends/test_contract.py):
float64 computed, oneDNN's kernels, the numerics settings its worker states, chained runs, repros run
by its env, and the seed story (the Keras WideResNet with padding='same' at stride 2). The real
TensorFlow (2.21 CPU, eager, deterministic ops) in its own environment, no mocks."""
import json
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

from irtrace import compare
from irtrace.replay import backends
from irtrace.replay import ReplayOptions, run

from contracts import CONTRACTS, OK, cases_fixture, low_precision_findings, observed, unavailable_mark

TESTS = Path(__file__).parents[1]
ROOT = TESTS.parent
pytestmark = unavailable_mark("tensorflow")
cases = cases_fixture("tensorflow")  # the op-case table replayed once per session (shared with the contract)


def _observed(rep):
    return observed(CONTRACTS["tensorflow"], rep)


def _tf_run(args, **kw):
    """A process in TensorFlow's own environment, with the repository importable."""
    info = backends.get("tensorflow")
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), **info.variables()}
    return subprocess.run([info.interpreter(), *args], capture_output=True, text=True, env=env, timeout=300, **kw)


def test_float64_is_computed_not_refused(cases):
    tf_replay, cases_bundle = cases.replay, cases.bundle
    assert cases_bundle.values["f64.y"].dtype == np.float64
    results = [r for n in tf_replay.nodes if n.name.startswith("f64_") for r in n.results if r.backend == "tensorflow"]
    want = {(n, m) for n in ("f64_conv", "f64_softmax") for m in ("fwd", "vjp", "vjp2")}
    assert {(r.node, r.mode) for r in results} == want
    assert all(r.verdict == compare.MATCH for r in results), [(r.node, r.output, r.verdict, r.message) for r in results]


@pytest.mark.slow
def test_onednn_kernels_change_no_verdict(cases, monkeypatch):
    """With TF_ENABLE_ONEDNN_OPTS=1 (oneDNN's kernels, off by default on this CPU) the op cases give
    the same fwd and vjp verdicts, and the worker states that oneDNN was on."""
    from tensorflow_known import KNOWN
    monkeypatch.setenv("TF_ENABLE_ONEDNN_OPTS", "1")
    rep = run(cases.bundle, ReplayOptions(["tensorflow"], modes=["fwd", "vjp"], verify_workarounds=False)).replay
    assert rep.versions["tensorflow"]["onednn"] == "on (TF_ENABLE_ONEDNN_OPTS=1)", rep.versions
    assert set(_observed(rep)) == {k for k in KNOWN if k[1] in ("fwd", "vjp")}


# --- known answers --------------------------------------------------------------------------------


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
    assert len(hello["ops"]) == 120 and ["ai.irtrace", "TrainBatchNormalization", 1] in hello["ops"]
    a64, b64, g64, ua64, ub64 = (x.astype(np.float64) for x in (a, b, g, ua, ub))
    for name, want in (("ha", g64 @ b64.T), ("hb", a64.T @ g64), ("da", g64 @ ub64.T), ("db", ua64.T @ g64),
                       ("dg", ua64 @ b64 + a64 @ ub64)):
        assert out[name].dtype == np.float32
        np.testing.assert_allclose(out[name], want, rtol=1e-5, atol=1e-5 * np.abs(want).max(), err_msg=name)


def test_bicubic_resize_is_onnx_cubic_only_approximately_and_so_unsupported(tmp_path):
    """tf.image.resize's bicubic (Keys a = -0.5, half-pixel centres) weighs only the samples inside the
    image at its border and renormalizes: near ONNX's cubic with exclude_outside=1, computed here
    independently by onnxruntime (a 1x2 -> 2x3 upsample, where the border is every sample), yet only to
    ~1e-4; 2 % from exclude_outside=0, the edge clamped, as which the backend once ran it (irtrace fuzz
    found that). Neither is TensorFlow's exactly: the backend's cubic Resize is UNSUPPORTED, said why."""
    import onnxruntime
    from onnx import helper
    x = np.random.default_rng(5).standard_normal((2, 3, 1, 2)).astype(np.float32)
    attrs = dict(mode="cubic", coordinate_transformation_mode="half_pixel", cubic_coeff_a=-0.5)

    def onnx_resize(exclude):
        node = helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], exclude_outside=exclude, **attrs)
        graph = helper.make_graph([node], "r", [helper.make_tensor_value_info("x", 1, list(x.shape))],
                                  [helper.make_tensor_value_info("y", 1, None)],
                                  [helper.make_tensor("sizes", 7, [4], [2, 3, 2, 3])])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
        return onnxruntime.InferenceSession(model.SerializeToString()).run(None, {"x": x})[0]
    np.save(tmp_path / "x.npy", x)
    script = ("import sys, numpy as np, tensorflow as tf\n"
              "from backends.tensorflow.ops import OPS\n"
              "x = tf.constant(np.load(sys.argv[1]))\n"
              "y = tf.image.resize(tf.transpose(x, [0, 2, 3, 1]), [2, 3], method='bicubic')\n"
              "np.save(sys.argv[2], tf.transpose(y, [0, 3, 1, 2]).numpy())\n"
              "op = OPS.lookup('', 'Resize', 19).fn\n"
              "for exclude in (0, 1):\n"
              "    try:\n"
              "        op(x, None, None, tf.constant([2, 3, 2, 3]), exclude_outside=exclude,\n"
              f"           **{attrs!r})\n"
              "    except Exception as e:\n"
              "        print(type(e).__name__, e)\n")
    r = _tf_run(["-c", script, str(tmp_path / "x.npy"), str(tmp_path / "y.npy")], cwd=ROOT)
    assert r.returncode == 0, r.stderr
    got, excluded, clamped = np.load(tmp_path / "y.npy"), onnx_resize(1), onnx_resize(0)
    assert 1e-6 < np.abs(got - excluded).max() < 5e-4 * np.abs(excluded).max()
    assert np.abs(got - clamped).max() > 1e-2
    said = "Unsupported tf.image.resize's bicubic is ONNX's cubic Resize only approximately (exclude_outside=1, " \
           "weights within ~1e-4): no exact cubic Resize"
    assert r.stdout.strip().splitlines()[-2:] == [said, said], r.stdout


_NEAREST = dict(mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor")


@pytest.mark.parametrize("op, shape, out, attrs, sizes, mode, verdict, call", [
    # the gradient of a 3-D average pool over explicitly padded input raises (AttributeError); the op's
    # pooling was a closure, which a repro cannot carry (the repro was the 84-line op function)
    ("AveragePool", [1, 1, 2, 1, 1], [1, 1, 1, 1, 1], dict(kernel_shape=[3, 3, 1], pads=[1, 2, 0, 0, 0, 0]), None,
     "vjp", "ERROR", "tf.nn.avg_pool("),
    # nearest Resize has no second derivative (LookupError); the op asks its sizes' TensorShape for
    # num_elements(), which the repro writer's known shapes did not answer (a 156-line function script)
    ("Resize", [2, 3, 1, 1], [2, 3, 19, 2], _NEAREST, [2, 3, 19, 2], "vjp2", "ERROR", "resize_nearest_neighbor("),
    # bilinear Resize's gradient has no gradient with respect to its cotangent (None where torch gives one):
    # the straight script called .numpy() on None (exit 2) and the 444-line harness was kept; it says so now
    ("Resize", [1, 2, 1, 1], [1, 2, 6, 4], dict(mode="linear"), [1, 2, 6, 4], "vjp2", "DIVERGENT",
     "if d_g is None:\n    print('no gradient: d_g is None (PyTorch"),
])
def test_a_fuzzed_finding_gets_a_straight_line_repro(tmp_path, op, shape, out, attrs, sizes, mode, verdict, call):
    """Three TensorFlow findings irtrace fuzz made, each once written as the op's whole function or the
    harness, now a straight-line script that reproduces."""
    from onnx import helper

    from irtrace.export.onnx_bundle import bundle_from_onnx
    from irtrace.report.folder import replay_into
    from irtrace.repro.make import make_repros
    x = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    node = helper.make_node(op, ["x", "", "", "sizes"] if sizes else ["x"], ["y"], name="n", **attrs)
    inits = [helper.make_tensor("sizes", 7, [len(sizes)], sizes)] if sizes else []
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", 1, shape)],
                              [helper.make_tensor_value_info("y", 1, out)], inits)
    bundle = bundle_from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)]), {"x": x},
                              tmp_path / "b.irt", trained=["x"])
    written = replay_into(bundle.path, ReplayOptions(backends=("tensorflow",), modes=(mode,)), tmp_path / "replay")
    ids = [f["id"] for f in written.json["findings"] if f["op_type"] == op and f["verdict"] == verdict]
    assert len(ids) == 1, written.json["findings"]
    (folder,) = make_repros(tmp_path / "replay" / "report.json", tmp_path / "repros", finding_ids=ids, shrink_budget=5)
    script = json.loads((folder / "finding.json").read_text())["script"]
    assert script["form"] == "straight" and script["reproduces"], script
    assert call in (folder / "repro.py").read_text()


# --- the example models ---------------------------------------------------------------------------


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
    from keras_bundle import keras_wideresnet
    return keras_wideresnet(tmp_path_factory.mktemp("keras"), _tf_run)


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


def test_a_kernel_tensorflow_lacks_for_float16_on_the_cpu_is_unsupported_not_an_error(tmp_path):
    """TensorFlow's CPU build has no float16 MaxPool3D ("Could not find device for node: {{node MaxPool3D}} =
    MaxPool3D[T=DT_HALF, ..."): a 3-D MaxPool in float16 is UNSUPPORTED with its words (the float32 case
    beside it is judged: its gradient is TensorFlow's known ceil_mode ERROR, not asserted here)."""
    half, findings = low_precision_findings(tmp_path, "tensorflow", "MaxPool", rank=5)
    findings = [f for f in findings if f.nodes == [half.id]]
    assert [(f.op_type, f.mode, f.verdict, f.nodes) for f in findings] == [
        ("MaxPool", "fwd", compare.UNSUPPORTED, [half.id]), ("MaxPool", "vjp", compare.UNSUPPORTED, [half.id])]
    assert findings[0].message.startswith("tensorflow has no kernel of this op for these dtypes on this device "
                                          "(NotFoundError: Could not find device for node: {{node MaxPool3D}}"), \
        findings[0].message


def test_a_bfloat16_case_is_recorded_in_bfloat16_and_tensorflow_matches_it(tmp_path):
    """A bfloat16 Add (irtrace fuzz --dtypes bfloat16) is recorded as bfloat16: the reference's output is the
    exact sum (float64, exact for two bfloat16 values) rounded once to bfloat16, and TensorFlow's bfloat16
    forward and gradients are judged in bfloat16's unit roundoff against float64: no finding."""
    from irtrace.fuzz import run as fuzz_run
    from low_precision import recorded_add
    bundle, _ = recorded_add(tmp_path, "bfloat16")
    assert fuzz_run._replay(bundle, ("tensorflow",), ("fwd", "vjp", "vjp2"), 60) == []


def test_a_block_of_one_tensorflow_documents_no_form_of_is_unsupported_not_an_error(tmp_path):
    """ONNX's SpaceToDepth and DepthToSpace take blocksize 1 (the identity); tf.nn.space_to_depth and
    depth_to_space take block_size >= 2, as their documentation says ("must be at least minimum 2"): irtrace
    fuzz filed it as an ERROR of TensorFlow, which its maintainers would close as documented. It is UNSUPPORTED
    with the reason; a blocksize of 2 is judged (MATCH)."""
    from irtrace.export.onnx_bundle import bundle_from_onnx
    from irtrace.report.folder import replay_into
    from onnx import TensorProto, helper
    info = helper.make_tensor_value_info
    nodes = [helper.make_node("SpaceToDepth", ["x"], ["y1"], name="one", blocksize=1),
             helper.make_node("DepthToSpace", ["x"], ["y2"], name="one_back", blocksize=1),
             helper.make_node("SpaceToDepth", ["x"], ["y3"], name="two", blocksize=2)]
    model = helper.make_model(helper.make_graph(nodes, "g", [info("x", TensorProto.FLOAT, [1, 4, 2, 2])],
                                                [info(y, TensorProto.FLOAT, None) for y in ("y1", "y2", "y3")]),
                              opset_imports=[helper.make_opsetid("", 17)])
    x = np.arange(16, dtype=np.float32).reshape(1, 4, 2, 2)
    bundle = bundle_from_onnx(model, {"x": x}, tmp_path / "s2d.irt")
    replayed = replay_into(bundle.path, ReplayOptions.parse("tensorflow", "fwd"), out=tmp_path / "r")
    rows = {n["name"]: r for n in replayed.json["nodes"] for r in n["results"] if r["backend"] == "tensorflow"}
    assert [rows[k]["verdict"] for k in ("one", "one_back", "two")] == ["UNSUPPORTED", "UNSUPPORTED", "MATCH"], rows
    assert rows["one"]["message"] == "tf.nn.space_to_depth takes block_size >= 2 (its documented range), not 1"


def test_a_bfloat16_bilinear_resize_stays_bfloat16_and_its_repro_is_straight(tmp_path):
    """tf.image.resize's bilinear returns float32 whatever its input (documented); ONNX's Resize keeps bfloat16,
    and a port casts back: so does irtrace's op now. Before, its double backward fed the bfloat16 cotangent to
    a float32 output in the repro script (InvalidArgumentError: ResizeBilinearGrad "expected to be a float
    tensor but is a bfloat16 tensor") where the worker had cast it, and the repro fell back to the harness,
    which did not reproduce. Now: fwd and vjp judged (no finding), the double backward's missing gradient of
    the cotangent (TensorFlow registers none for ResizeBilinearGrad, as in float32) a straight repro."""
    import ml_dtypes
    from irtrace.export.onnx_bundle import bundle_from_onnx
    from irtrace.fuzz import run as fuzz_run
    from irtrace.repro.make import make_repros
    from irtrace.report.folder import replay_into
    from onnx import TensorProto, helper
    info = helper.make_tensor_value_info
    sizes = helper.make_tensor("sizes", TensorProto.INT64, [4], [1, 1, 4, 6])
    model = helper.make_model(helper.make_graph(
        [helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], name="up", mode="linear")], "g",
        [info("x", TensorProto.BFLOAT16, [1, 1, 2, 3])], [info("y", TensorProto.BFLOAT16, None)], [sizes]),
        opset_imports=[helper.make_opsetid("", 19)])
    x = np.array([0.5, -1.25, 2.0, 0.75, 3.5, -0.25], ml_dtypes.bfloat16).reshape(1, 1, 2, 3)
    bundle = bundle_from_onnx(model, {"x": x}, tmp_path / "up.irt")
    assert fuzz_run._replay(bundle, ("tensorflow",), ("fwd", "vjp"), 60) == []
    replayed = replay_into(bundle.path, ReplayOptions.parse("tensorflow", "vjp2"), out=tmp_path / "r")
    rows = {r["output"]: r for n in replayed.json["nodes"] for r in n["results"] if r["backend"] == "tensorflow"}
    assert rows["d2x:x"]["verdict"] == "MATCH" and rows["d2g:y"]["verdict"] == "DIVERGENT", rows
    assert rows["d2g:y"]["message"] == "tensorflow computes no gradient for g:y"
    (folder,) = make_repros(tmp_path / "r" / "report.json", tmp_path / "repros")
    finding = json.loads((folder / "finding.json").read_text())
    assert finding["script"]["form"] == "straight" and finding["script"]["reproduces"], finding["script"]
