"""irtrace export model.onnx: canonicalization of foreign graphs, the onnxruntime export check,
bad input."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from irtrace.cli import main
from irtrace.ir.spec import decode_attrs
from irtrace.store import load


def same_pads_model(size=8, dynamic=False):
    """Conv / MaxPool / AveragePool with auto_pad SAME_UPPER and SAME_LOWER at stride 2."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N" if dynamic else 1, 2, size, size])
    w = onnx.numpy_helper.from_array(np.random.default_rng(0).standard_normal((2, 2, 3, 3)).astype(np.float32), "w")
    nodes, outs = [], []
    for mode in ("SAME_UPPER", "SAME_LOWER"):
        tag = mode.lower()
        nodes += [helper.make_node("Conv", ["x", "w"], [f"conv_{tag}"], name=f"block/conv_{tag}/Conv2D",
                                   kernel_shape=[3, 3], strides=[2, 2], auto_pad=mode),
                  helper.make_node("MaxPool", ["x"], [f"max_{tag}"], name=f"block/max_{tag}/MaxPool",
                                   kernel_shape=[3, 3], strides=[2, 2], auto_pad=mode),
                  helper.make_node("AveragePool", ["x"], [f"avg_{tag}"], name=f"block/avg_{tag}/AvgPool",
                                   kernel_shape=[3, 3], strides=[2, 2], auto_pad=mode)]
        outs += [f"conv_{tag}", f"max_{tag}", f"avg_{tag}"]
    out_shape = ["N" if dynamic else 1, 2, -(-size // 2), -(-size // 2)]
    g = helper.make_graph(nodes, "same_pads", [x], [helper.make_tensor_value_info(o, TensorProto.FLOAT, out_shape)
                                                    for o in outs], [w])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)])


@pytest.fixture(scope="module")
def same_bundle(tmp_path_factory):
    d = tmp_path_factory.mktemp("same")
    onnx.save(same_pads_model(), str(d / "same.onnx"))
    assert main(["export", str(d / "same.onnx"), "-o", str(d / "same.irt")]) == 0
    return load(d / "same.irt")


def test_import_resolves_auto_pad_and_keeps_the_original(same_bundle):
    pads = {n.name: decode_attrs(n)["pads"] for n in same_bundle.model.graph.node}
    assert pads["block/conv_same_upper/Conv2D"] == [0, 0, 1, 1]
    assert pads["block/conv_same_lower/Conv2D"] == [1, 1, 0, 0]
    src = same_bundle.node_source("block/max_same_lower/MaxPool")
    assert src["module"] == "block/max_same_lower"
    assert src["original_attrs"]["auto_pad"] == "SAME_LOWER"
    assert same_bundle.manifest["source"]["framework"] == "onnx"


def test_same_pads_replay_without_divergence(same_bundle):
    from irtrace import compare
    from irtrace.replay import backends
    from irtrace.replay import ReplayOptions, run
    names = ["torch", "onnxruntime", "oracle"] + (["megengine"] if backends.get("megengine").unavailable() is None else [])
    rep = run(same_bundle, ReplayOptions(names, modes=["fwd", "vjp"], verify_workarounds=False)).replay
    bad = [(n.name, r.backend, r.mode, r.verdict) for n in rep.nodes for r in n.results if r.verdict in compare.FAILING]
    assert not bad


@pytest.mark.parametrize("content,message", [
    (b"this is not onnx", r"not an ONNX model"),
])
def test_non_onnx_file(tmp_path, capsys, content, message):
    p = tmp_path / "bad.onnx"
    p.write_bytes(content)
    assert main(["export", str(p), "-o", str(tmp_path / "b.irt")]) == 2
    assert "not an ONNX model" in capsys.readouterr().err


def test_checker_failure(tmp_path, capsys):
    m = same_pads_model()
    m.graph.node[0].input[1] = "missing_weight"
    p = tmp_path / "broken.onnx"
    onnx.save(m, str(p))
    assert main(["export", str(p), "-o", str(tmp_path / "b.irt")]) == 2
    err = capsys.readouterr().err
    assert "fails onnx.checker" in err and len(err.strip().splitlines()) == 1


def test_dynamic_shape_needs_input(tmp_path, capsys):
    p = tmp_path / "dyn.onnx"
    onnx.save(same_pads_model(dynamic=True), str(p))
    assert main(["export", str(p), "-o", str(tmp_path / "d.irt")]) == 2
    assert "input 'x' has dynamic shape ['N', 2, 8, 8]; pass --input x=" in capsys.readouterr().err
    assert main(["export", str(p), "--input", "x=1x2x7x7", "-o", str(tmp_path / "d.irt")]) == 0
    b = load(tmp_path / "d.irt")
    assert b.values["x"].shape == (1, 2, 7, 7)
    assert decode_attrs(b.model.graph.node[0])["pads"] == [1, 1, 1, 1]  # 7 at stride 2: total 2, symmetric


@pytest.mark.parametrize("size,verdict", [(7, "SHAPE_MISMATCH"), (8, "DIVERGENT")])
def test_original_form_exposes_onnx_reference_same_lower_bug(tmp_path, size, verdict):
    """onnx.reference's own auto_pad=SAME_LOWER at stride 2 is wrong (shape for odd sizes, values for
    even); onnxruntime's own auto_pad agrees with irtrace's resolution of it."""
    from irtrace.export.onnx_import import export_onnx
    from irtrace.replay import ReplayOptions, run
    from irtrace.report.findings import group
    p = tmp_path / "same.onnx"
    onnx.save(same_pads_model(size=size), str(p))
    b = export_onnx(p, tmp_path / "same.irt")
    rep = run(b, ReplayOptions(["onnxref", "onnxruntime"], modes=["fwd"], form="original", verify_workarounds=False)).replay
    found = [(f.backend, f.op_type, f.verdict, f.first_node) for f in group(rep)]
    assert found == [("onnxref", "MaxPool", verdict, "block/max_same_lower/MaxPool")]
    canonical = group(run(b, ReplayOptions(["onnxref", "onnxruntime"], modes=["fwd"], verify_workarounds=False)).replay)
    assert not canonical  # the canonical (explicit pads) form is right on both
