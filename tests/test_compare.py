"""Verdicts and metrics on hand-made numbers."""
import numpy as np
import pytest

from irtrace import compare


def test_bitwise_equal_is_match():
    x = np.linspace(-1, 1, 10, dtype=np.float32)
    v, m, _ = compare.judge(x, x.copy(), x.astype(np.float64))
    assert v == compare.MATCH and m.max_abs == 0


def test_last_bit_difference_is_match_not_finding():
    x = np.linspace(-1, 1, 10, dtype=np.float32)
    y = np.nextafter(x, np.float32(2))
    v, m, _ = compare.judge(y, x, x.astype(np.float64))
    assert v == compare.MATCH and m.ulp == 1


def test_noise_within_reference_error_times_factor():
    oracle = np.array([1.0, 2.0, 3.0])
    ref = np.float32(oracle + 1e-5)
    actual = np.float32(oracle - 3e-5)      # 3x the reference's own error: NOISE (factor 8)
    v, m, ex = compare.judge(actual, ref, oracle)
    assert v == compare.NOISE
    assert ex["oracle_abs"] == pytest.approx(1e-5, rel=0.1)
    assert ex["closer_to_oracle"] == "reference"


def test_divergent_names_worst_index_values_and_tolerance():
    oracle = np.zeros((2, 3))
    ref = np.zeros((2, 3), np.float32)
    actual = ref.copy()
    actual[1, 2] = 0.5
    v, m, ex = compare.judge(actual, ref, oracle)
    assert v == compare.DIVERGENT
    assert m.worst_index == (1, 2) and m.actual_at_worst == 0.5 and m.ref_at_worst == 0.0
    assert m.min_atol == 0.5 and m.frac_out == pytest.approx(1 / 6)
    assert ex["closer_to_oracle"] == "reference"


def test_nan_pattern_and_shape():
    a = np.array([1.0, np.nan], np.float32)
    b = np.array([1.0, 2.0], np.float32)
    assert compare.judge(a, b)[0] == compare.NAN_MISMATCH
    assert compare.judge(np.array([np.inf], np.float32), np.array([-np.inf], np.float32))[0] == compare.NAN_MISMATCH
    assert compare.judge(np.zeros(3, np.float32), np.zeros(4, np.float32))[0] == compare.SHAPE_MISMATCH


def test_integers_must_be_exact_and_empty_and_scalar():
    assert compare.judge(np.array([1, 2]), np.array([1, 3]))[0] == compare.DIVERGENT
    assert compare.judge(np.zeros((0, 3), np.float32), np.zeros((0, 3), np.float32))[0] == compare.MATCH
    assert compare.judge(np.float32(1.0), np.float32(1.5), np.float64(1.5))[0] == compare.DIVERGENT


def test_fixed_tolerance_overrides_oracle():
    p = compare.Policy(atol=0.1, rtol=0.0, fixed=True)
    assert compare.judge(np.float32([1.05]), np.float32([1.0]), np.array([1.0]), p)[0] == compare.NOISE
    assert compare.judge(np.float32([1.2]), np.float32([1.0]), np.array([1.0]), p)[0] == compare.DIVERGENT


def test_ulp_distance_across_zero():
    assert compare._ulp_distance(np.float32([0.0]), np.float32([-0.0])) == 0
    tiny = np.float32(np.finfo(np.float32).tiny)
    assert compare._ulp_distance(np.float32([tiny]), np.float32([-tiny])) > 0


def test_report_json_takes_numpy_scalars():
    """A tolerance or metric that is an np.float32 (softmax over a length-1 axis gives an exactly-zero
    gradient, whose allowed error came out as np.float32) once crashed the report writer."""
    import json

    from irtrace.report.json_report import clean
    out = clean({"allowed": np.float32(1.5e-7), "n": np.int64(3), "bad": np.float64("nan"), "xs": [np.float32(2)]})
    assert json.loads(json.dumps(out, allow_nan=False)) == {"allowed": float(np.float32(1.5e-7)), "n": 3,
                                                             "bad": None, "xs": [2.0]}
