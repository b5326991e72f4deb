"""Weights stored once: graph.onnx refers to them in values.safetensors as ONNX
external data. onnx, its checker and onnxruntime read graph.onnx with its weights; irtrace reads them
from the value store; replay, chained replay and bundles with every weight inline in graph.onnx give the
same verdicts. The malformed external-data cases are in test_malformed.py (GRAPH_CASES)."""
import os

import numpy as np
import pytest
import torch

import irtrace
from irtrace import compare
from irtrace.replay import ReplayOptions, run
from irtrace.report.folder import replay_into
from irtrace.replay import ReplayOptions, run
from irtrace.report.folder import replay_into
from irtrace.store import EXTERNAL_MIN_BYTES, GRAPH, MANIFEST, VALUES, initializers, load

BACKENDS = ["torch", "onnxruntime"]


class Small(torch.nn.Module):
    """Conv, batch norm (eval), two linears: 267 KB of weights, the 64-byte conv bias among them."""
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 16, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(16)
        self.fc1 = torch.nn.Linear(16 * 8 * 8, 64)
        self.fc2 = torch.nn.Linear(64, 10)

    def forward(self, x):
        y = torch.relu(self.bn(self.conv(x)))
        return self.fc2(torch.tanh(self.fc1(y.flatten(1))))


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    torch.manual_seed(0)
    model = Small().eval()
    with torch.no_grad():  # running statistics other than 0 and 1, so a mix-up would show
        model.bn.running_mean.uniform_(-0.5, 0.5)
        model.bn.running_var.uniform_(0.5, 2.0)
    x = torch.randn(2, 3, 8, 8, generator=torch.Generator().manual_seed(1))
    path = tmp_path_factory.mktemp("ext") / "small.irt"
    return model, irtrace.export(model, (x,), path)


@pytest.fixture(scope="module")
def inline(exported, tmp_path_factory):
    """The same bundle with every weight inline in graph.onnx (and in the value store), a layout irtrace still reads."""
    import shutil

    import onnx
    _, b = exported
    old = tmp_path_factory.mktemp("old") / "small.irt"
    shutil.copytree(b.path, old)
    onnx.save(onnx.load(str(b.path / GRAPH)), str(old / GRAPH))  # onnx.load reads the external data in
    return load(old)


def _sizes(path):
    return {f: os.path.getsize(path / f) for f in (GRAPH, VALUES, MANIFEST)}


def test_weights_stored_once_and_onnx_reads_them(exported):
    import onnx
    import onnxruntime as ort
    model, b = exported
    state = {k: v.numpy() for k, v in model.state_dict().items() if v.dtype.is_floating_point}
    weights = sum(v.nbytes for v in state.values())
    assert weights == 4 * (16 * 3 * 9 + 16 + 4 * 16 + 1024 * 64 + 64 + 64 * 10 + 10) == 267_048
    sizes = _sizes(b.path)
    recorded = sum(np.asarray(b.values[k]).nbytes for k in b.values if k not in state)
    assert sizes[GRAPH] < weights / 10  # measured 7.6 KB for 267 KB of weights
    assert sum(sizes.values()) <= 1.1 * (weights + recorded), (sizes, weights, recorded)

    # the model in memory holds no weight data: the value store serves it
    external = {t.name for t in b.model.graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL}
    assert external == {"conv.weight", "fc1.weight", "fc1.bias", "fc2.weight"}
    assert all(not t.raw_data for t in b.model.graph.initializer if t.name in external)
    inline_names = {t.name for t in b.model.graph.initializer} - external
    assert {"conv.bias", "bn.weight", "bn.bias", "bn.running_mean", "bn.running_var", "fc2.bias"} <= inline_names
    assert all(b.values[n].nbytes <= EXTERNAL_MIN_BYTES for n in inline_names if n in b.values)
    read = initializers(b.model, b.values)
    for name, value in state.items():
        assert np.array_equal(read[name], value), name

    # onnx reads graph.onnx whole: the same weights, bit for bit
    full = onnx.load(str(b.path / GRAPH))
    arrays = {t.name: onnx.numpy_helper.to_array(t) for t in full.graph.initializer}
    for name, value in state.items():
        assert np.array_equal(arrays[name], value), name
    onnx.checker.check_model(str(b.path / GRAPH), full_check=True)

    # onnxruntime runs graph.onnx from its path and gives the recorded outputs
    session = ort.InferenceSession(str(b.path / GRAPH), providers=["CPUExecutionProvider"])
    feeds = {i["name"]: np.asarray(b.values[i["name"]]) for i in b.manifest["inputs"]}
    got = dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds)))
    (out,) = b.manifest["outputs"]
    assert got[out].shape == (2, 10)
    np.testing.assert_allclose(got[out], b.values[out], rtol=1e-5, atol=1e-5)
    with torch.no_grad():
        want = model(torch.from_numpy(np.array(b.values[b.manifest["inputs"][0]["name"]]))).numpy()
    np.testing.assert_allclose(got[out], want, rtol=1e-5, atol=1e-5)


def test_old_layout_still_loads(exported, inline):
    import onnx
    _, b = exported
    assert all(t.data_location != onnx.TensorProto.EXTERNAL for t in inline.model.graph.initializer)
    assert _sizes(inline.path)[GRAPH] > _sizes(b.path)[GRAPH] + 266_000  # the external weights (266,688 bytes) again
    new, old = initializers(b.model, b.values), initializers(inline.model, inline.values)
    assert sorted(new) == sorted(old)
    assert all(np.array_equal(new[k], old[k]) for k in new)


def _verdicts(rep):
    return {(n.name, r.backend, r.mode, r.output): r.verdict for n in rep.nodes for r in n.results}


def test_replay_verdicts_unchanged(exported, inline):
    _, b = exported
    new, old = _verdicts(run(b, ReplayOptions(BACKENDS, verify_workarounds=False)).replay), _verdicts(run(inline, ReplayOptions(BACKENDS, verify_workarounds=False)).replay)
    assert new == old
    assert not [k for k, v in new.items() if v in compare.FAILING]
    assert sum(v == compare.MATCH for v in new.values()) >= 30
    assert {m for (_, _, m, _) in new} == {"fwd", "vjp", "vjp2"}


@pytest.mark.slow
def test_chained_replay_reads_the_weights_from_the_value_store(exported, inline, tmp_path):
    """A chained run (onnxruntime has none; planted-f64 is torch's op table in float64, rounded back:
    no wrong op) is fed every initializer: from the value store for external weights, from graph.onnx
    for inline ones; the same values, gradients and parameter gradients come out."""
    import planted_backend
    planted_backend.register("f64")
    _, b = exported
    runs = {}
    for name, bundle in (("new", b), ("old", inline)):
        report = replay_into(bundle.path, ReplayOptions.parse("planted-f64", "fwd,vjp", chained=True), out=tmp_path / name).json
        (chain,) = [r for r in report["chained"]["runs"] if r["backend"] == "planted-f64"]
        assert chain["first_divergence"] is None and chain["first_grad_divergence"] is None
        entries = chain["values"] + chain["grads"] + chain["parameters"]
        assert all(e["verdict"] in (compare.MATCH, compare.NOISE) for e in entries), entries
        runs[name] = sorted((e["kind"], e["value"], e["max_abs"]) for e in entries)
    params = {v for kind, v, _ in runs["new"] if kind == "param_grad"}
    assert {"conv.weight", "fc1.weight", "fc1.bias", "fc2.weight"} <= params
    assert len(runs["new"]) >= 20
    assert runs["new"] == runs["old"]
    assert max(m for *_, m in runs["new"]) < 1e-4


def test_onnxruntime_loads_a_graph_whose_shape_constants_stay_inline(example_bundle):
    """StyleGAN2 pads with 12-element int64 `pads` (96 bytes): shape inference reads them when
    onnxruntime loads the model and refuses external ones ("Cannot parse data from external
    tensors"), so integer initializers and those at NonDifferentiable inputs stay inline."""
    import onnx
    import onnxruntime as ort
    b = example_bundle("stylegan2")
    inits = {t.name: t for t in b.model.graph.initializer}
    pads = [n.input[1] for n in b.model.graph.node if n.op_type == "Pad" and n.input[1] in inits]
    assert pads and max(inits[p].dims[0] for p in pads) == 12
    assert all(inits[p].data_location != onnx.TensorProto.EXTERNAL for p in pads)
    assert sum(t.data_location == onnx.TensorProto.EXTERNAL for t in inits.values()) == 13
    session = ort.InferenceSession(str(b.path / GRAPH), providers=["CPUExecutionProvider"])
    feeds = {i["name"]: np.asarray(b.values[i["name"]]) for i in b.manifest["inputs"]}
    got = dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds)))
    for name in b.manifest["outputs"]:
        np.testing.assert_allclose(got[name], b.values[name], rtol=1e-4, atol=1e-5)


def test_weights_read_by_shape_go_out_too(example_bundle):
    """torch's exporter gives a conv weight a Shape consumer; Shape reads only its input's shape, so
    the weight still goes to the value store (ResNet-50's graph.onnx kept 94 MB of weights before)."""
    import onnx
    b = example_bundle("resnet")
    g = b.model.graph
    shape_read = {n.input[0] for n in g.node if n.op_type == "Shape"}
    weights = [t for t in g.initializer if t.data_type == onnx.TensorProto.FLOAT and t.name in b.state
               and b.values[t.name].nbytes > EXTERNAL_MIN_BYTES]
    assert len(weights) == 7 and len(shape_read & {t.name for t in weights}) >= 6
    assert all(t.data_location == onnx.TensorProto.EXTERNAL for t in weights)
