"""TensorFlow import and `irtrace diff`: the WideResNet of ../shared/seeds/004 in Keras
(padding='same', stride 2) and in PyTorch (padding=1), same weights."""
import json
import subprocess
from pathlib import Path

import pytest
import torch

import irtrace
from irtrace import envs
from irtrace.cli import main
from irtrace.errors import IrtraceError

from keras_bundle import keras_wideresnet

TESTS = Path(__file__).parent
try:
    TF = envs.get("tensorflow").python()
except IrtraceError as e:
    TF = None
    REASON = str(e)
pytestmark = pytest.mark.skipif(TF is None, reason="tensorflow environment unavailable")


@pytest.fixture(scope="module")
def keras(tmp_path_factory):
    def run(args):
        return subprocess.run([TF, *args], capture_output=True, text=True,
                              env={"TF_CPP_MIN_LOG_LEVEL": "3", "PATH": "/usr/bin:/bin"})
    return keras_wideresnet(tmp_path_factory.mktemp("tf"), run)


def _port(keras, fixed):
    import models_for_tests
    d, w, x = keras
    path = d / f"torch{int(fixed)}.irt"
    return irtrace.export(models_for_tests.keras_wrn(w, fixed), (torch.from_numpy(x.transpose(0, 3, 1, 2).copy()),), path, force=True)


def test_tf_bundle_keeps_layer_names_and_tf_pads(keras):
    d, _, _ = keras
    b = irtrace.load(d / "tf.irt")
    assert b.manifest["source"]["framework"] == "tensorflow" and b.manifest["versions"]["tf2onnx"] == "1.17.0"
    convs = {b.node_source(n.name).get("module"): n for n in b.model.graph.node if n.op_type == "Conv"}
    from irtrace.ir.spec import decode_attrs
    assert decode_attrs(convs["block2_conv1"])["pads"] == [0, 0, 1, 1]  # TF 'SAME' at stride 2
    layout = [n for n in b.model.graph.node if b.node_source(n.name).get("layout_only")]
    assert layout and all(n.op_type == "Transpose" for n in layout)


def test_diff_names_the_first_stride2_conv_and_its_pads(keras, capsys):
    d, _, _ = keras
    b = _port(keras, fixed=False)
    rc = main(["diff", str(d / "tf.irt"), str(b.path), "-o", str(d / "diff0")])
    out = capsys.readouterr().out
    assert rc == 1
    verdict = out.strip().splitlines()[-2]
    assert verdict.startswith("block2.conv1 (torch) ~ block2_conv1 (tensorflow): pads [1, 1, 1, 1] vs [0, 0, 1, 1]"
                              " — values diverge from here")
    report = json.loads((d / "diff0" / "diff.json").read_text())
    assert report["first_divergence"]["b_module"] == "block2.conv1" and report["differ"]
    before = report["pairs"][:[p["b_module"] for p in report["pairs"]].index("block2.conv1")]
    assert before and all(p["chained"] == "equal" for p in before)  # block1 and the stem agree


def test_diff_after_the_fix_finds_no_numeric_divergence(keras, capsys):
    d, _, _ = keras
    b = _port(keras, fixed=True)
    assert main(["diff", str(d / "tf.irt"), str(b.path), "-o", str(d / "diff1")]) == 0
    assert "no numeric divergence" in capsys.readouterr().out
    report = json.loads((d / "diff1" / "diff.json").read_text())
    assert not report["differ"] and any(x["op_type"] == "Pad" for x in report["only_b"])


def test_unconvertible_tf_model(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(TESTS)
    assert main(["export", "--from", "tensorflow", "tf_models:unconvertible", "--input", "x=2x3x3",
                 "-o", str(tmp_path / "bad.irt")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "tf2onnx cannot convert tf_models:unconvertible" in err[0]


def test_saved_model_folder(keras, capsys):
    d, _, _ = keras
    assert main(["export", "--from", "tensorflow", str(d / "wrn.keras.saved"), "--input-file", str(d / "x.npz"),
                 "-o", str(d / "saved.irt")]) == 0
    b = _port(keras, fixed=False)
    assert main(["diff", str(d / "saved.irt"), str(b.path), "-o", str(d / "diff2")]) == 1
    assert "block2.conv1 (torch) ~ block2_conv1 (tensorflow): pads [1, 1, 1, 1] vs [0, 0, 1, 1]" in capsys.readouterr().out


def test_keras_lstm_through_tf2onnx_replays_clean(tmp_path, monkeypatch):
    """Two Keras LSTM layers, converted by tf2onnx to two ONNX LSTM nodes (with the Squeeze, Slice and
    Transpose around them), and an unrolled GRU (its steps as plain ops): torch replays every node forward,
    backward and double backward, and onnxruntime forward, all MATCH or NOISE against the float64 oracle; so does
    TensorFlow, whose LSTM nodes are Keras's LSTM again (the round trip)."""
    from irtrace.replay import ReplayOptions, run
    monkeypatch.chdir(TESTS)
    assert main(["export", "--from", "tensorflow", "tf_models:recurrent", "--input", "x=2x6x4",
                 "-o", str(tmp_path / "lstm.irt")]) == 0
    report = run(irtrace.load(tmp_path / "lstm.irt"),
                 ReplayOptions(["torch", "onnxruntime", "tensorflow"], verify_workarounds=False)).replay
    rows = {(n.op_type, r.backend, r.mode, str(r.verdict)) for n in report.nodes for r in n.results}
    assert {v for *_, v in rows} <= {"MATCH", "NOISE"}, rows
    assert {("LSTM", b, m) for b in ("torch", "tensorflow") for m in ("fwd", "vjp", "vjp2")} | \
        {("LSTM", "onnxruntime", "fwd")} <= {r[:3] for r in rows}
    assert sum(n.op_type == "LSTM" for n in report.nodes) == 2


def test_keras_gru_loop_says_unroll(tmp_path, capsys, monkeypatch):
    """Keras 3's GRU becomes a Loop in tf2onnx, which irtrace cannot replay node by node: one line, exit 2,
    saying to unroll it (the unrolled GRU replays clean: test_keras_lstm_through_tf2onnx_replays_clean)."""
    monkeypatch.chdir(TESTS)
    assert main(["export", "--from", "tensorflow", "tf_models:gru", "--input", "x=2x6x4",
                 "-o", str(tmp_path / "gru.irt")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "(Loop) has type GRAPH" in err[0] and "build the layer with unroll=True" in err[0]
