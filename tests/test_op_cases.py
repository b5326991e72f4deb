"""The shared op-case table (tests/op_cases.py) on the host's backends: torch judged against the float64
oracle, onnxruntime against torch, in every mode each computes. Every case is a correct op on valid
input, so every verdict must be MATCH or NOISE: an ERROR is the oracle (or a backend) failing on a
valid node (onnx.reference's GatherElements on indices smaller than the data was one), a DIVERGENT
on torch is the reference table disagreeing with float64."""
import pytest

from irtrace import compare
from irtrace.replay import ReplayOptions, run


@pytest.fixture(scope="module")
def cases_replay(tmp_path_factory):
    import op_cases
    from irtrace.export.onnx_bundle import bundle_from_onnx
    model, feeds, _ = op_cases.all_cases_model()
    bundle = bundle_from_onnx(model, feeds, tmp_path_factory.mktemp("cases") / "cases.irt", name="op_cases",
                              trained=op_cases.activations(model, feeds))
    return run(bundle, ReplayOptions(["torch", "onnxruntime", "oracle"], verify_workarounds=False)).replay


def test_op_cases_clean_on_the_host_backends(cases_replay):
    import op_cases
    rows = [(n.name, r) for n in cases_replay.nodes for r in n.results]
    bad = [(name, r.backend, r.mode, r.output, r.verdict, (r.message or "")[:120]) for name, r in rows
           if r.verdict in compare.FAILING]
    assert not bad, bad
    # onnxruntime has no kernel for irtrace's own ops, and its LSTM refuses layout 1 (batch first); nothing else is
    # unsupported
    unsupported = {(name, r.backend, r.message) for name, r in rows if r.verdict == compare.UNSUPPORTED}
    own = {c.id for c in op_cases.CASES if c.domain == "ai.irtrace"}
    assert {(n, b) for n, b, _ in unsupported} == {(c, "onnxruntime") for c in own | {"lstm_batch_first"}}, unsupported
    assert ("lstm_batch_first", "onnxruntime", "onnxruntime's CPU LSTM: Batchwise recurrent operations (layout == 1) "
            "are not supported.") in unsupported
    # every case is judged: torch's forward on each, and gradients where the case has a float input
    judged = {(name, r.backend, r.mode) for name, r in rows if r.verdict in (compare.MATCH, compare.NOISE)}
    assert {c.id for c in op_cases.CASES} == {name for name, b, m in judged if b == "torch" and m == "fwd"}
    for case in ("gatherelements_smaller_indices", "gatherelements_long_axis", "pad_negative_crop",
                 "gridsample_cubic_border", "lstm", "gru", "atan", "nll_loss", "col2im", "det", "gathernd_batch1",
                 "gathernd_negative", "scatternd", "scatternd_add"):
        assert {(case, "torch", m) for m in ("fwd", "vjp", "vjp2")} <= judged, case
        assert (case, "onnxruntime", "fwd") in judged, case
