"""Verdicts and metrics on hand-made numbers."""

import numpy as np
import pytest

from backends.oracle.model import rounding_size
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


def test_nan_mismatch_counts_each_element_once():
    """A NaN where the reference has 1.0 is one element (not two: not finite, and NaN); +inf against
    -inf is one too (not zero)."""
    for oracle in (None, np.array([1.0])):
        verdict, _, details = compare.judge(np.float32([np.nan]), np.float32([1.0]), oracle)
        assert verdict == compare.NAN_MISMATCH and details["message"] == "non-finite pattern differs at 1 element"
    a, r = np.float32([np.nan, np.inf, 2.0, np.nan, -np.inf]), np.float32([1.0, -np.inf, 2.0, np.nan, 3.0])
    assert compare.judge(a, r)[2]["message"] == "non-finite pattern differs at 3 elements"


def test_nans_are_not_ties():
    from irtrace.ir.semantics import kink_tag
    assert kink_tag("ReduceMax", [np.float32([np.nan, np.nan, 1.0])]) is None
    assert kink_tag("MaxPool", [np.float32([np.nan, 2.0, np.nan, 2.0, 2.0])]) == \
        "non-differentiable point: 2 repeated values in input 0 (possible ties)"


def test_the_kinks_each_op_has_element_by_element():
    """backends/_runtime/kinks.kinked, by hand: Relu's exact zeros; MaxPool's repeated values (NaN no tie);
    Max's elements equal to another input's under broadcasting, folded onto each input; Clip's bounds; none."""
    import ml_dtypes

    from backends._runtime.kinks import kinked
    (m,) = kinked("Relu", [np.array([0.0, 1.0, -0.0, -2.0])])
    assert m.tolist() == [True, False, True, False]
    (m,) = kinked("MaxPool", [np.array([[1.0, 2.0, 2.0, np.nan, np.nan, 3.0]])])
    assert m.tolist() == [[False, True, True, False, False, False]]
    a, b, c = kinked("Max", [np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([2.0, 2.0], ml_dtypes.bfloat16), None])
    assert a.tolist() == [[False, True], [False, False]] and b.tolist() == [False, True] and c is None
    m, lo, hi = kinked("Clip", [np.array([0.0, 1.0, 2.0]), np.array(0.0), np.array(2.0)])
    assert m.tolist() == [True, False, True] and lo is None and hi is None
    assert kinked("Relu", [np.ones(3)]) is None and kinked("Conv", [np.zeros(3)]) is None


def test_the_json_depth_counts_every_level_leaves_included():
    from irtrace.store.check import _depth
    assert [_depth(v) for v in (5, [], {}, [1], {"a": [1, {"b": 2}]}, [[[[]]]], {"a": 1, "b": {"c": {}}})] == \
        [1, 1, 1, 2, 4, 4, 3]


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
    gradient, whose allowed error comes out as np.float32) must not crash the report writer."""
    import json

    from irtrace.report.json_report import clean
    out = clean({"allowed": np.float32(1.5e-7), "n": np.int64(3), "bad": np.float64("nan"), "xs": [np.float32(2)]})
    assert json.loads(json.dumps(out, allow_nan=False)) == {"allowed": float(np.float32(1.5e-7)), "n": 3,
                                                             "bad": None, "xs": [2.0]}


def test_report_json_cleans_every_kind_of_value_the_same_way():
    """Python's and numpy's floats, infinities both ways, nested tuples and a float subclass: strict JSON."""
    import json

    from irtrace.report.json_report import clean

    class Seconds(float):
        pass
    value = {"a": (1, [np.float64("-inf"), Seconds("inf"), Seconds(0.5)]), "b": [True, None, "NaN", np.bool_(False)],
             "c": {"d": float("nan"), "e": np.int32(-7), "f": np.float16(0.25), "g": 2.0 ** -1074}}
    out = clean(value)
    assert json.loads(json.dumps(out, allow_nan=False)) == {"a": [1, [None, None, 0.5]], "b": [True, None, "NaN", False],
                                                             "c": {"d": None, "e": -7, "f": 0.25,
                                                                   "g": 2.0 ** -1074}}


def test_a_journal_lines_text_is_the_cleaned_values_text_in_one_pass_or_two():
    """dumps_clean (a journal line) writes what json.dumps(clean(v), allow_nan=False) writes, byte for byte:
    numpy scalars of every kind, a float subclass, nested tuples, integer keys, a result's row; with a NaN or
    an infinity anywhere (taken through clean), and with only a string holding the word."""
    import json

    from irtrace.report.json_report import clean, dumps_clean

    class Seconds(float):
        pass
    row = compare.Result("n", "Conv", "onnxruntime", "vjp", "d:x", compare.DIVERGENT,
                         metrics=compare.judge(np.float32([1, 2.5]), np.float32([1, 2]), np.float64([1, 2]))[1],
                         time_s=np.float64(1e-3), allowed=np.float32(0.1)).to_json()
    values = [{"a": (1, [np.float64(0.5), Seconds(0.25)]), 3: np.int32(-7), "f": np.float16(0.1), "b": np.bool_(True),
               "u": np.uint64(2 ** 63), "s": "NaN is a word", "g": 2.0 ** -1074, "e": []},
              {"x": [np.float32(1.5), {"y": float("nan")}]}, {"z": Seconds("inf")}, {"w": np.float64("-inf")}, row,
              {**row, "max_rel": float("inf")}]
    for v in values:
        assert dumps_clean(v) == json.dumps(clean(v), allow_nan=False)
    assert "NaN" not in dumps_clean(values[1]) and json.loads(dumps_clean(values[1])) == {"x": [1.5, {"y": None}]}


def test_a_nodes_text_is_made_once_for_its_journal_line_report_json_and_report_html():
    """json_report.node_text: the journal line's text (dumps_clean of to_json), made once; report.json's entry of
    the node is json.loads of it, which is what clean made (numpy scalars, NaN, infinity, tuples); node_texts
    gives report.html what json.dumps gives each entry of report["nodes"]; a result added since makes it again."""
    import json
    from types import SimpleNamespace

    from irtrace.replay.engine import NodeReport
    from irtrace.report.json_report import _worst, clean, dumps_clean, node_text, node_texts

    metrics = compare.judge(np.float32([1, 2.5]), np.float32([1, 2]), np.float64([1, 2]))[1]
    rows = [compare.Result("n", "Conv", "onnxruntime", "vjp", "d:x", compare.DIVERGENT, metrics=metrics,
                           time_s=np.float64(1e-3), allowed=np.float32(0.1), tags=("kink",)),
            compare.Result("n", "Conv", "torch", "fwd", "y", compare.MATCH, oracle_abs=float("nan"),
                           rounding_bound=float("inf"), message='a "NaN" </script> word')]
    nodes = [NodeReport("n", "Conv", "", 0, {"module": "a.b", "file_line": "m.py:3"}, rows,
                        [{"mode": "vjp2", "output": "*", "backend": None, "reason": "why"}]),
             NodeReport("m", "Relu", "", 1, {})]
    for n in nodes:
        assert node_text(n) == dumps_clean(n.to_json())
        assert node_text(n) is node_text(n)  # made once
        assert json.loads(node_text(n)) == clean(n.to_json())
    report = {"nodes": [{**json.loads(node_text(n)), "worst": _worst(n)} for n in nodes]}
    assert [e["worst"] for e in report["nodes"]] == ["DIVERGENT", None]
    texts = node_texts(SimpleNamespace(nodes=nodes), report)
    assert texts == [json.dumps(e, allow_nan=True) for e in report["nodes"]]
    before = node_text(nodes[1])
    nodes[1].results.append(rows[0])
    assert node_text(nodes[1]) != before and node_text(nodes[1]) == dumps_clean(nodes[1].to_json())


def test_rounding_model_accepts_a_different_summation_order_and_nothing_more():
    """Float32 dot products whose terms cancel (outputs tiny next to their terms), summed in two
    orders: the other order is within the rounding-error bound c·eps32·sqrt(n_eff)·max(|y|, ||t||)
    of the float64 answer, where a rule of 8x the reference's own error would call it DIVERGENT
    when the reference happens to be exact. One term dropped, or a result scaled, stays DIVERGENT."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((64, 4096)).astype(np.float32) * 100
    b = rng.standard_normal(4096).astype(np.float32)
    a[:, -1] = (-(a[:, :-1].astype(np.float64) @ b[:-1].astype(np.float64)) / b[-1]).astype(np.float32)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    exact = a64 @ b64
    forward = np.array([np.sum(r * b, dtype=np.float32) for r in a], np.float32)
    backward = np.array([np.sum((r * b)[::-1], dtype=np.float32) for r in a], np.float32)
    model = (np.abs(a64) @ np.abs(b64), (a64 * a64) @ (b64 * b64))  # what the oracle computes: M, Q
    ref = exact.astype(np.float32)  # a reference that rounds only once
    assert not np.array_equal(forward, backward)
    assert compare.judge(backward, ref, exact)[0] == compare.DIVERGENT  # without the model: a false alarm
    v, m, ex = compare.judge(backward, ref, exact, model=rounding_size(model, exact))
    assert v == compare.NOISE and 0 < ex["rounding_bound"] < 0.5
    typical_term = float(np.median(np.abs(a64 * b64)))
    dropped = forward.copy()
    k = int(np.argmax(np.abs(a64[3] * b64) > 2 * typical_term))
    dropped[3] -= a[3, k] * b[k]
    assert compare.judge(dropped, ref, exact, model=rounding_size(model, exact))[0] == compare.DIVERGENT
    assert compare.judge(forward + 1, ref, exact, model=rounding_size(model, exact))[0] == compare.DIVERGENT


def test_rounding_model_for_same_sign_sums():
    """A long sum of positive terms (a variance, a mean of squares) in float32, summed one by one:
    its error grows like sqrt(n) eps |y|; the model allows that (1.35e-4 relative at n = 20,000), and not
    a 5e-4 relative error."""
    rng = np.random.default_rng(1)
    t = rng.random((8, 20000)).astype(np.float32)
    exact = t.astype(np.float64).sum(axis=1)
    running = np.zeros(8, np.float32)
    for k in range(t.shape[1]):  # recursive summation, the worst common order
        running += t[:, k]
    t64 = t.astype(np.float64)
    model = (np.abs(t64).sum(axis=1), (t64 * t64).sum(axis=1))
    ref = exact.astype(np.float32)
    assert compare.judge(running, ref, exact)[0] == compare.DIVERGENT
    assert compare.judge(running, ref, exact, model=rounding_size(model, exact))[0] == compare.NOISE
    assert compare.judge(ref * np.float32(1 + 5e-4), ref, exact, model=rounding_size(model, exact))[0] == compare.DIVERGENT


def test_reference_is_judged_against_float64():
    exact = np.array([1.0, -2.0, 3.0])
    v, _, _ = compare.judge_reference(exact.astype(np.float32), exact)
    assert v == compare.MATCH
    v, m, ex = compare.judge_reference(np.float32([1.0, -2.0, 3.5]), exact)
    assert v == compare.DIVERGENT and m.max_abs == 0.5
    assert compare.judge_reference(np.float32([1.0, np.nan, 3.0]), exact)[0] == compare.NAN_MISMATCH


def test_verdicts_carry_severity_failing_and_colour_in_one_place():
    assert compare.Verdict.CRASH.severity > compare.Verdict.DIVERGENT.severity > compare.Verdict.MATCH.severity
    assert compare.Verdict.DIVERGENT.failing and not compare.Verdict.NOISE.failing
    assert not compare.Verdict.UNSUPPORTED.failing  # fails only with --strict
    assert compare.MATCH == "MATCH" and f"{compare.NOISE}" == "NOISE"  # report.json keeps the names
    assert all(v.color[1].startswith("#") for v in compare.Verdict)


def test_tolerances_follow_the_result_dtype():
    """A float16 backend is judged in float16 ULPs: its own rounding of an exact value is MATCH (8 ULPs
    of float16 at the output's scale: 8 * 2^-10 * 2), a real error beyond that is DIVERGENT, and the
    same rounding error in a float32 result is DIVERGENT (8 float32 ULPs is 1.9e-6 there)."""
    exact = np.linspace(1.0, 2.0, 101)
    ref = exact.astype(np.float32)
    half = exact.astype(np.float16)
    assert compare.eps_of(np.float16) == 2.0 ** -10 and compare.eps_of(np.float32, np.float64) == compare.EPS32
    v, m, _ = compare.judge(half, ref, exact)
    assert v == compare.MATCH and 0 < m.max_abs <= 2.0 ** -10
    wrong = half.copy()
    wrong[7] += np.float16(0.05)
    assert compare.judge(wrong, ref, exact)[0] == compare.DIVERGENT
    assert compare.judge(half.astype(np.float32), ref, exact)[0] == compare.DIVERGENT
    v, _, details = compare.judge_reference(half, exact)
    assert v == compare.MATCH and details["allowed"] == pytest.approx(8 * 2.0 ** -10 * 2.0)


def test_a_passing_result_gets_max_abs_and_max_rel_by_hand():
    """full=False (the replay's fast path): a passing result carries max abs and max rel, computed by
    hand here, equal to what the full metrics give; the other metrics are left out. A failing one
    gets every metric."""
    ref = np.array([1.0, -4.0, 0.5], np.float32)
    actual = ref + np.array([0.0, 2.0 ** -21, -2.0 ** -24], np.float32)   # 1 ULP at 4, 1 ULP at 0.5
    oracle = ref.astype(np.float64)
    v, m, _ = compare.judge(actual, ref, oracle, full=False)
    assert v == compare.MATCH
    assert m.max_abs == 2.0 ** -21 and m.max_rel == pytest.approx(2.0 ** -23)  # 2^-21/4 = 2^-24/0.5 = 2^-23
    assert m.ulp is None and m.cosine is None and m.worst_index is None
    full = compare.judge(actual, ref, oracle)[1]
    assert (full.max_abs, full.max_rel) == (m.max_abs, pytest.approx(m.max_rel))
    v, m, _ = compare.judge_reference(actual, oracle, full=False)
    assert v == compare.MATCH and m.max_abs == 2.0 ** -21 and m.max_rel == pytest.approx(2.0 ** -23)
    wrong = ref + np.array([0.0, 0.5, 0.0], np.float32)
    v, m, _ = compare.judge(wrong, ref, oracle, full=False)
    assert v == compare.DIVERGENT and m.ulp is not None and m.worst_index == (1,) and m.max_rel == 0.125


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64"])
@pytest.mark.parametrize("repeat", [1, 1000])
def test_a_result_with_the_references_bits_is_judged_as_the_sweep_judges_it(monkeypatch, dtype, repeat):
    """judge(full=False) takes a result that is the reference's bits for MATCH without its sweep: the same
    verdict, metrics and details the sweep gives (with the shortcut turned off), with NaN, infinities, -0.0 and a
    subnormal among the elements, with and without an oracle, for a small result (its bytes compared) and a large
    one (7000 elements: compared as unsigned integers); a result one bit away, or of another dtype, is swept, and
    so is a large one that is not contiguous."""
    import ml_dtypes
    dt = ml_dtypes.bfloat16 if dtype == "bfloat16" else np.dtype(dtype)
    x = np.tile(np.array([1.5, -0.0, np.nan, np.inf, -np.inf, 3e-39 if dtype != "float16" else 3e-8, -2.25],
                         np.float32), repeat).astype(dt)
    assert (x.size > compare.SAME_BITS_MAX) == (repeat > 1)
    oracles = [None, np.array(x, np.float64) + 1e-9]
    swept = {}
    bits = compare._same_bits
    for on in (True, False):
        monkeypatch.setattr(compare, "_same_bits", bits if on else lambda a, r: False)
        swept[on] = [compare.judge(x, x.copy(), o, full=False) for o in oracles]
    assert swept[True] == swept[False]
    assert all(v == compare.MATCH and (m.max_abs, m.max_rel, m.min_atol, m.min_rtol) == (0.0,) * 4 and d == {}
               for v, m, d in swept[False])
    monkeypatch.setattr(compare, "_same_bits", bits)
    assert bits(x, x.copy()) and not bits(x, x.astype(np.float64) if dtype != "float64" else x.astype(np.float32))
    apart = x.copy()
    apart[-1] = np.nextafter(np.float32(-2.25), np.float32(-3)).astype(dt) if dtype == "float32" else -2.5
    assert not bits(apart, x)
    v, m, _ = compare.judge(apart, x, None, full=False)
    assert v != compare.MATCH or m.max_abs > 0
    strided = np.repeat(x, 2)[::2]  # x's elements, not contiguous
    assert not bits(strided, x) if repeat > 1 else bits(strided, x)
    assert compare.judge(strided, x, oracles[1], full=False) == swept[True][1]
    v, m, _ = compare.judge(x.astype(np.float64) if dtype != "float64" else x.astype(np.float32), x, None, full=False)
    assert v == compare.MATCH  # another dtype with the same values: swept, and equal


def test_a_passing_results_max_rel_is_its_exact_relative_error():
    """judge and judge_reference compute a passing result's max abs / max rel in their one sweep:
    the numbers a hand computation gives, with an infinity and a 0-d result."""
    from irtrace.compare import EPS32, judge, judge_reference
    r = np.array([1.0, -2.0, 0.0], np.float32)
    o = np.array([1.0, -2.0 - 2.0 ** -20, 1e-30])
    verdict, m, _ = judge_reference(r, o, full=False)
    assert verdict == compare.MATCH
    # |r - o| = [0, 2^-20, 1e-30]; relative to max(|o|, EPS32 * max|o|) elementwise
    assert m.max_abs == 2.0 ** -20 and m.max_rel == 2.0 ** -20 / (2.0 + 2.0 ** -20)
    r = np.array([np.inf, 1.0], np.float32)
    verdict, m, _ = judge_reference(r, np.array([np.inf, 1.0 + 2.0 ** -22]), full=False)
    assert verdict == compare.MATCH and m.max_abs == 2.0 ** -22 and m.max_rel == 2.0 ** -22 / (1.0 + 2.0 ** -22)
    verdict, m, _ = judge_reference(np.float32(4.0), np.float64(4.0 + 2.0 ** -20), full=False)
    assert verdict == compare.MATCH and m.max_rel == 2.0 ** -20 / (4.0 + 2.0 ** -20)
    # a backend against the reference: relative to the reference, floored at EPS32 times its largest
    a = np.array([3.0, 1e-9], np.float32)
    ref = np.array([3.0, 0.0], np.float32)
    verdict, m, _ = judge(a, ref, ref.astype(np.float64), full=False)
    assert verdict == compare.MATCH
    floor = EPS32 * 3.0
    assert m.max_abs == float(np.float32(1e-9)) and m.max_rel == float(np.float32(1e-9)) / floor


def test_an_empty_result_matches():
    """A result with no elements (a 0-size slice) is a sweep of no block: MATCH, by the replay's and the
    reference's rule alike."""
    empty = np.zeros((0, 3), np.float32)
    assert compare.judge(empty, empty, empty.astype(np.float64), compare.Policy())[0] is compare.MATCH
    assert compare.judge_reference(empty, empty.astype(np.float64), compare.Policy())[0] is compare.MATCH


def test_non_finite_elements_are_left_out_where_the_patterns_agree():
    """One path for every result: a NaN or an infinity the backend shares with the reference and float64
    is left out of the maxima, block by block (a result over several blocks, the NaN in the second),
    and the finite elements are judged as if alone; a 0-d result shows the same allowance as a 1-d one."""
    n = compare.BLOCK + 5
    r = np.ones(n, np.float32)
    r[compare.BLOCK + 2] = np.nan
    r[3] = np.inf
    o = r.astype(np.float64)
    a = r.copy()
    a[7] = np.float32(1.5)
    v, m, details = compare.judge(a, r, o, full=False)
    assert v == compare.DIVERGENT
    assert m.max_abs == 0.5 and details["backend_oracle_abs"] == 0.5 and details["oracle_abs"] == 0.0
    assert details["allowed"] == 8 * compare.EPS32 * 1.0   # the ULP floor at the finite scale, 1
    a[7] = np.float32(1.0)
    assert compare.judge(a, r, o, full=False)[0] == compare.MATCH
    assert compare.judge_reference(r, o, full=False)[0] == compare.MATCH
    # the rounding bound is the allowance shown, 0-d or not: c eps sqrt(n) max(|y|, sqrt(Q)), n = M^2/Q = 4
    y, mag = np.float64(2.0), (np.float64(4.0), np.float64(4.0))
    for shape in ((), (1,)):
        got = np.full(shape, 2.0 + 2.0 ** -18, np.float32)
        v, _, details = compare.judge(got, np.full(shape, y, np.float32), np.full(shape, y), model=rounding_size(
            tuple(np.full(shape, x) for x in mag), np.full(shape, y)))
        assert v == compare.NOISE and details["allowed"] == details["rounding_bound"] == 8 * compare.EPS32 * 2 * 2.0


def test_a_difference_within_the_subnormal_range_is_a_match():
    """A framework that flushes subnormals to zero (TensorFlow on CPU) gives 0 where the reference has
    7.7e-43: below float32's smallest normal number, MATCH; at the smallest normal (1.18e-38) and above, the
    usual judgement (DIVERGENT here: float64 agrees with the reference)."""
    ref = np.array([7.7e-43, 1.0e-45, 0.5], np.float32)
    oracle = ref.astype(np.float64)
    flushed = np.array([0.0, 0.0, 0.5], np.float32)
    assert compare.judge(flushed, ref, oracle)[0] == compare.MATCH
    assert compare.judge(flushed, ref)[0] == compare.MATCH  # without float64 too
    ref2 = np.array([2.0e-38, 3.0e-38], np.float32)
    assert compare.judge(np.zeros(2, np.float32), ref2, ref2.astype(np.float64))[0] == compare.DIVERGENT


def test_backends_judged_on_one_reference_share_its_sweep_and_get_the_same_verdicts():
    """judge(shared=...) computes what the reference and the oracle alone give (their scales, max |r - o|)
    for the first backend and reads it for the rest: every verdict, metric and detail is what judging
    each backend alone gives; max |r - o| is the float64 one computed here directly."""
    rng = np.random.default_rng(3)
    for finite in (True, False):
        o = rng.standard_normal(3 * compare.BLOCK + 17)
        r = o.astype(np.float32)
        r[::97] += np.float32(3e-6)
        if not finite:
            o[5] = r[5] = np.inf
            o[7] = r[7] = np.nan
        backends = [r.copy(), r + np.float32(1e-7), r * np.float32(1.01), np.where(o > 2, np.float32(0), r)]
        shared = {}
        for a in backends:
            alone = compare.judge(a, r, o, full=False)
            assert compare.judge(a, r, o, full=False, shared=shared) == alone
        fin = np.isfinite(o)
        assert shared["ref_err"] == np.max(np.abs(r[fin].astype(np.float64) - o[fin])) > 2e-6


def test_relative_error_of_a_float16_result_is_taken_at_float16_resolution():
    """max rel is relative to |ref|, never to values below the dtype's resolution at the output's scale: a
    float16 result of scale 1000 whose element 0.01 is 0.5 (0.49 off, under 8 float16 ULPs at that scale:
    MATCH) has max rel 0.49 / (2^-10 * 1000), not 0.49 / 0.01 = 49 (float32's resolution: a MATCH printed
    with "max rel 49" reads as a contradiction; a chained float16 run showed 354)."""
    r = np.array([1000.0, 0.01], np.float16)
    a = np.array([1000.0, 0.5], np.float16)
    d = float(a[1]) - float(r[1])
    for full in (True, False):
        verdict, m, _ = compare.judge(a, r, r.astype(np.float64), full=full)
        assert verdict == compare.MATCH and m.max_rel == pytest.approx(d / (2.0 ** -10 * 1000.0)), (full, m)
    verdict, m, _ = compare.judge(a * np.float16(40), r, r.astype(np.float64))  # past 8 ULPs: every metric
    assert verdict == compare.DIVERGENT and m.max_rel == pytest.approx((40000.0 - 1000.0) / 1000.0)
