"""Every backend's forward on the ONNX backend node suite (rebuilt from the onnx wheel), for
the ops it claims. Known failures are strict: a fix shows up as an unexpected pass."""
import pytest

from conformance_known import KNOWN
from irtrace.conformance import ERROR, FAIL, PASS, run, summarize


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


def test_oracle_fixes_what_onnx_reference_gets_wrong():
    """onnx.reference misreads asymmetric MaxPool pads; the oracle must not."""
    assert "test_maxpool_2d_same_upper" in KNOWN["onnxref"]
    assert "test_maxpool_2d_same_upper" not in KNOWN["oracle"]
