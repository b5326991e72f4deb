"""Every backend's forward on the ONNX backend node suite (rebuilt from the onnx wheel), for
the ops it claims. Known failures are strict: a fix shows up as an unexpected pass."""
import numpy as np
import pytest

from conformance_known import KNOWN
from irtrace.replay.conformance import ERROR, FAIL, PASS, run, summarize


@pytest.mark.parametrize("backend", ["torch", "onnxruntime", "oracle", "onnxref"])
def test_node_suite(backend):
    results = run(backend)
    counts = summarize(results)
    failing = {r.case: f"{r.status}: {r.detail}" for r in results if r.status in (FAIL, ERROR)}
    known = KNOWN[backend]
    new = {c: d for c, d in failing.items() if c not in known}
    fixed = sorted(c for c in known if c not in failing and any(r.case == c and r.status == PASS for r in results))
    assert not new, f"{backend}: new failures: {new}"
    assert not fixed, f"{backend}: known failures now pass (remove them from tests/conformance_known.py): {fixed}"
    assert counts[PASS] > 500


# --- the table itself, checked against answers computed here ----------------------------------------
# test_node_suite compares each run with KNOWN, and KNOWN was written from such a run: on its own it
# would keep a wrong row (a backend blamed for the suite's own mistake, or a pass that is not one)
# for ever. Here a few cases get their answer computed by hand in numpy float64, from the ONNX spec
# and not from any backend or the suite; the hand answer must equal the suite's expected output, and
# each backend's verdict against the hand answer must be exactly the row KNOWN has (or a pass).
def _maxpool_same(x, k, upper):
    """MaxPool, stride 1, auto_pad SAME_*: total pad k - 1, the odd one at the end (UPPER) or begin."""
    total = k - 1
    lo = total // 2 if upper else total - total // 2
    xp = np.pad(x.astype(np.float64), [(0, 0), (0, 0), (lo, total - lo), (lo, total - lo)], constant_values=-np.inf)
    h, w = x.shape[2:]
    return np.max([xp[:, :, i:i + h, j:j + w] for i in range(k) for j in range(k)], axis=0)


def _resize_nearest(x, sizes):
    """Resize, mode nearest, half_pixel coordinates, round_prefer_floor (the defaults)."""
    out = x.astype(np.float64)
    for axis, (n_in, n_out) in enumerate(zip(x.shape, sizes)):
        src = (np.arange(n_out) + 0.5) * (n_in / n_out) - 0.5
        near = np.where(src - np.floor(src) == 0.5, np.floor(src), np.round(src))  # ties go down
        out = np.take(out, np.clip(near, 0, n_in - 1).astype(int), axis=axis)
    return out


def _topk(x, k):
    """TopK, largest, sorted: equal values in index order (the spec's tie rule)."""
    order = np.argsort(-x.astype(np.float64), kind="stable")[:k]
    return x.astype(np.float64)[order], order


def _softmax(x, axis):
    e = np.exp(x.astype(np.float64) - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


HAND = {
    "test_maxpool_2d_same_upper": lambda x: [_maxpool_same(x, 2, upper=True)],
    "test_maxpool_2d_same_lower": lambda x: [_maxpool_same(x, 2, upper=False)],
    "test_resize_downsample_sizes_nearest": lambda x, sizes: [_resize_nearest(x, sizes)],
    "test_top_k_same_values": lambda x, k: list(_topk(x, int(k[0]))),
    "test_softmax_axis_1": lambda x: [_softmax(x, 1)],
}


@pytest.fixture(scope="module")
def hand_cases():
    """(name, model, inputs, hand outputs cast to the suite's dtypes, rtol, atol) of the HAND cases."""
    from irtrace.replay.conformance import cases
    got = {}
    for name, model, ins, outs, rtol, atol in cases():
        if name in HAND:
            hand = HAND[name](*ins)
            for h, e in zip(hand, outs):  # the suite is right, by a computation it did not make
                assert h.shape == e.shape and np.allclose(h, e, rtol=1e-6, atol=1e-7), name
            got[name] = (model, ins, [np.asarray(h).astype(e.dtype) for h, e in zip(hand, outs)], rtol, atol)
    assert sorted(got) == sorted(HAND)
    return got


@pytest.mark.parametrize("backend", ["torch", "onnxruntime", "oracle", "onnxref"])
def test_known_table_agrees_with_answers_computed_by_hand(backend, hand_cases):
    from irtrace.replay.conformance import _claims, _run_case
    from irtrace.replay import backends as registry
    from irtrace.replay.worker import WorkerProxy
    w = WorkerProxy(registry.get(backend))
    claims = _claims(w.start())
    seen = {}
    try:
        for name, (model, ins, hand, rtol, atol) in hand_cases.items():
            node = model.graph.node[0]
            assert (node.domain, node.op_type) in claims, (backend, node.op_type)
            r = _run_case(w, name, model, ins, hand, rtol, atol)
            seen[name] = PASS if r.status == PASS else f"{r.status}: {r.detail}"
    finally:
        w.close()
    expected = {name: KNOWN[backend].get(name, PASS) for name in HAND}
    assert seen == expected


def test_oracle_fixes_what_onnx_reference_gets_wrong(hand_cases):
    """onnx.reference misreads asymmetric MaxPool pads: its rows in KNOWN are confirmed by the hand
    answers above (test_known_table_agrees_with_answers_computed_by_hand), the oracle has no such
    row, and both observed shapes are what reading the pads [begin_h, begin_w, end_h, end_w] as
    [begin_h, end_h, begin_w, end_w] gives after a 2 x 2 window."""
    assert "test_maxpool_2d_same_upper" not in KNOWN["oracle"]
    assert "test_maxpool_2d_same_lower" not in KNOWN["oracle"]
    for name, pads in (("test_maxpool_2d_same_upper", [0, 0, 1, 1]), ("test_maxpool_2d_same_lower", [1, 1, 0, 0])):
        n, c, h, w = hand_cases[name][1][0].shape
        misread = [n, c, h + pads[0] + pads[1] - 1, w + pads[2] + pads[3] - 1]
        assert KNOWN["onnxref"][name] == f"fail: output 0: shape {misread} vs expected {[n, c, h, w]}"
