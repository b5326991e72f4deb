"""Verdicts and metrics on hand-made numbers."""
import numpy as np
import pytest

from irtrace import compare as C


def test_bitwise_equal_is_match():
    x = np.linspace(-1, 1, 10, dtype=np.float32)
    v, m, _ = C.judge(x, x.copy(), x.astype(np.float64))
    assert v == C.MATCH and m.max_abs == 0


def test_last_bit_difference_is_match_not_finding():
    x = np.linspace(-1, 1, 10, dtype=np.float32)
    y = np.nextafter(x, np.float32(2))
    v, m, _ = C.judge(y, x, x.astype(np.float64))
    assert v == C.MATCH and m.ulp == 1


def test_noise_within_reference_error_times_factor():
    oracle = np.array([1.0, 2.0, 3.0])
    ref = np.float32(oracle + 1e-5)
    actual = np.float32(oracle - 3e-5)      # 3x the reference's own error: NOISE (factor 8)
    v, m, ex = C.judge(actual, ref, oracle)
    assert v == C.NOISE
    assert ex["oracle_abs"] == pytest.approx(1e-5, rel=0.1)
    assert ex["closer_to_oracle"] == "reference"


def test_divergent_names_worst_index_values_and_tolerance():
    oracle = np.zeros((2, 3))
    ref = np.zeros((2, 3), np.float32)
    actual = ref.copy()
    actual[1, 2] = 0.5
    v, m, ex = C.judge(actual, ref, oracle)
    assert v == C.DIVERGENT
    assert m.worst_index == (1, 2) and m.actual_at_worst == 0.5 and m.ref_at_worst == 0.0
    assert m.min_atol == 0.5 and m.frac_out == pytest.approx(1 / 6)
    assert ex["closer_to_oracle"] == "reference"


def test_nan_pattern_and_shape():
    a = np.array([1.0, np.nan], np.float32)
    b = np.array([1.0, 2.0], np.float32)
    assert C.judge(a, b)[0] == C.NAN_MISMATCH
    assert C.judge(np.array([np.inf], np.float32), np.array([-np.inf], np.float32))[0] == C.NAN_MISMATCH
    assert C.judge(np.zeros(3, np.float32), np.zeros(4, np.float32))[0] == C.SHAPE_MISMATCH


def test_integers_must_be_exact_and_empty_and_scalar():
    assert C.judge(np.array([1, 2]), np.array([1, 3]))[0] == C.DIVERGENT
    assert C.judge(np.zeros((0, 3), np.float32), np.zeros((0, 3), np.float32))[0] == C.MATCH
    assert C.judge(np.float32(1.0), np.float32(1.5), np.float64(1.5))[0] == C.DIVERGENT


def test_fixed_tolerance_overrides_oracle():
    p = C.Policy(atol=0.1, rtol=0.0, fixed=True)
    assert C.judge(np.float32([1.05]), np.float32([1.0]), np.array([1.0]), p)[0] == C.NOISE
    assert C.judge(np.float32([1.2]), np.float32([1.0]), np.array([1.0]), p)[0] == C.DIVERGENT


def test_ulp_distance_across_zero():
    assert C._ulp_distance(np.float32([0.0]), np.float32([-0.0])) == 0
    tiny = np.float32(np.finfo(np.float32).tiny)
    assert C._ulp_distance(np.float32([tiny]), np.float32([-tiny])) > 0
