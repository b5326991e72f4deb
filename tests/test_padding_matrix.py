"""The padding matrix on every backend, against the float64 oracle; the canonicalizer's auto_pad
resolution against onnxruntime's own."""
import pytest

from irtrace import compare
from irtrace.replay import backends
from irtrace.replay import ReplayOptions, run

BACKENDS = ["torch", "onnxruntime", "oracle", "onnxref"] + (
    ["megengine"] if backends.get("megengine").unavailable() is None else [])


@pytest.fixture(scope="module")
def matrix(tmp_path_factory):
    import op_cases
    import padding_matrix
    from irtrace.export.onnx_bundle import bundle_from_onnx
    model, feeds, _ = op_cases.all_cases_model(padding_matrix.cases() + padding_matrix.auto_pad_cases())
    return bundle_from_onnx(model, feeds, tmp_path_factory.mktemp("pad") / "pad.irt", name="padding_matrix", trained=op_cases.activations(model, feeds))


def test_every_backend_on_every_padding_case(matrix):
    from padding_known import KNOWN
    rep = run(matrix, ReplayOptions(BACKENDS, modes=["fwd"], nodes="^(?!auto_)", verify_workarounds=False)).replay
    assert len(rep.nodes) == 234
    seen = {(n.name, r.backend): r.verdict for n in rep.nodes for r in n.results if r.verdict not in (compare.MATCH, compare.NOISE)}
    expected = {k: v for k, v in KNOWN.items() if k[1] in BACKENDS}
    assert seen == expected
    # torch, onnxruntime and the oracle itself agree with float64 on every case: begin-heavy and
    # end-heavy pads land on the side they say, through F.pad-then-conv where a framework needs it
    for n in rep.nodes:
        for r in n.results:
            if r.backend in ("torch", "onnxruntime", "oracle", "megengine") and (n.name, r.backend) not in KNOWN:
                assert r.verdict in (compare.MATCH, compare.NOISE), (n.name, r.backend, r.verdict)


def test_asymmetric_pads_matter(matrix):
    """The begin- and end-heavy variants really differ, so the matches above are not vacuous."""
    import numpy as np
    v = matrix.values
    for op in ("conv", "maxpool", "pad_constant"):
        suffix = {"conv": "_n8_s2_d1", "maxpool": "_n8_s2_d1_c0", "pad_constant": "_n8"}[op]
        a, b = v[f"{op}_begin{suffix}.out0"], v[f"{op}_end{suffix}.out0"]
        assert a.shape == b.shape and not np.allclose(a, b)


def test_canonical_auto_pad_equals_onnxruntime_own(matrix):
    rep = run(matrix, ReplayOptions(["onnxruntime"], modes=["fwd"], nodes="^auto_", form="original", verify_workarounds=False)).replay
    assert len(rep.nodes) == 54
    bad = [(n.name, r.verdict) for n in rep.nodes for r in n.results
           if r.backend == "onnxruntime" and r.verdict not in (compare.MATCH, compare.NOISE)]
    assert not bad
    assert all(any(r.backend == "onnxruntime" for r in n.results) for n in rep.nodes)
