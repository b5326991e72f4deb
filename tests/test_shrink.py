"""The shrinker alone (irtrace/repro/shrink.py): a plain predicate over numpy arrays, no backend.

Quality tests in Hypothesis' manner: each pins what shrink must reach from a given start, exactly.
How it gets there, read off the code: every cut keeps an axis' leading block (_take), so an
element at index (i, j, k) bounds the reachable shape from below by (i+1, j+1, k+1); sizes are
tried most aggressive first (1, 2, 3, v//2, v-1); shared_dims cuts one size value in every float
input (and every u) at once; simpler_values rounds, then clips to [-2, 2], then zeroes, one float
input at a time; ones_cotangent switches the cotangent style once; the loop restarts from the first
pass after every accepted candidate and stops at a fixpoint or at the budget."""
import time

import numpy as np
import pytest

from irtrace.repro.shrink import Case, Stats, drop_optional, each_axis, ones_cotangent, shared_dims, shrink, \
    simpler_values

RNG = np.random.default_rng(10)


def _small(shape, dtype=np.float32):
    """Values of magnitude in (0.55, 0.9): rounding gives +-1 everywhere, clipping then changes
    nothing, zeroing changes every element (so the simplification steps are deterministic)."""
    return (RNG.uniform(0.55, 0.9, shape) * RNG.choice([-1, 1], shape)).astype(dtype)


def _counting(predicate):
    """The predicate, recording every case it was asked about."""
    asked = []

    def p(case):
        asked.append(case)
        return predicate(case)
    return p, asked


# --- what shrink reaches ---------------------------------------------------------------------------
def test_one_large_element_at_the_origin_shrinks_to_one_element_rounded():
    x = _small((4, 8, 8))
    x[0, 0, 0] = 12.3
    pred = lambda c: c.inputs[0] is not None and bool((c.inputs[0] > 10).any())  # noqa: E731
    small, stats = shrink(Case((x,), ()), pred)
    (a,) = small.inputs
    assert a.shape == (1, 1, 1) and a.dtype == np.float32
    assert a[0, 0, 0] == np.float32(12.0)  # rounded; clipping to 2 or zeroing would lose it
    assert small.cot_style == "ones" and pred(small)
    assert stats.stopped == "fixpoint" and stats.calls <= 300


def test_an_element_inside_bounds_the_shape_by_its_index_plus_one():
    """Leading blocks only: the element at (2, 5, 3) keeps the shape at (3, 6, 4), every other
    element is rounded, and its value is kept exactly as rounded."""
    x = _small((4, 8, 8))
    x[2, 5, 3] = 12.3
    pred = lambda c: bool((c.inputs[0] > 10).any())  # noqa: E731
    small, stats = shrink(Case((x,), ()), pred)
    (a,) = small.inputs
    assert a.shape == (3, 6, 4)
    assert a[2, 5, 3] == np.float32(12.0)
    np.testing.assert_array_equal(a, np.round(x[:3, :6, :4]))  # round accepted, clip and zeros refused
    assert np.count_nonzero(a > 10) == 1 and pred(small)
    assert stats.stopped == "fixpoint"


def test_a_dim_shared_by_two_inputs_shrinks_in_both():
    """x (2, 6) @ w (6, 3) needs the inner dims equal and >= 2: no single-axis cut of the 6 keeps
    them equal, shared_dims cuts both at once to 2; the outer dims go to 1; values go to 0."""
    x, w = _small((2, 6)), _small((6, 3))
    pred = lambda c: c.inputs[0].shape[1] == c.inputs[1].shape[0] >= 2  # noqa: E731
    inner = [c for c in each_axis(Case((x, w), ())) if c.inputs[0].shape[1] != 6 or c.inputs[1].shape[0] != 6]
    assert len(inner) == 8 and not any(pred(c) for c in inner)  # 6 -> 1, 2, 3, 5 in x or in w alone
    small, stats = shrink(Case((x, w), ()), pred)
    a, b = small.inputs
    assert (a.shape, b.shape) == ((1, 2), (2, 1))
    assert not a.any() and not b.any() and pred(small)
    assert stats.stopped == "fixpoint"


@pytest.mark.parametrize("start", [(5, 7), (4, 4), (2, 3), (9, 3)])
def test_a_predicate_needing_at_least_2_by_3_stops_exactly_there(start):
    x = _small(start)
    pred = lambda c: c.inputs[0].shape[0] >= 2 and c.inputs[0].shape[1] >= 3  # noqa: E731
    small, stats = shrink(Case((x,), ()), pred)
    (a,) = small.inputs
    assert a.shape == (2, 3) and a.dtype == np.float32
    np.testing.assert_array_equal(a, np.zeros((2, 3), np.float32))  # values do not matter: zeros
    assert small.cot_style == "ones" and stats.stopped == "fixpoint"


def test_the_traced_path_for_5_by_7_costs_exactly_these_calls():
    """(5, 7) -> shared_dims 7: 1, 2 fail, 3 holds; shared_dims 5: 1 fails, 2 holds = (2, 3)  [5 calls]
    (2, 3): cuts to (2, 1), (2, 2) fail, (1, 3) was seen; each_axis: all seen; round holds  [3]
    rounded (+-1): the 3 cuts fail (new values, new keys); clip changes nothing; zeros holds  [4]
    zeros: the 3 cuts fail; ones cotangent holds  [4];  ones: the 3 cuts fail, fixpoint  [3]."""
    x = _small((5, 7))
    pred, asked = _counting(lambda c: c.inputs[0].shape[0] >= 2 and c.inputs[0].shape[1] >= 3)
    small, stats = shrink(Case((x,), ()), pred)
    assert stats.calls == len(asked)
    assert stats.calls == 5 + 3 + 4 + 4 + 3
    assert stats.accepted == 2 + 2 + 1  # two shape cuts, round and zeros, ones cotangent
    assert [tuple(c.inputs[0].shape) for c in asked[:5]] == [(5, 1), (5, 2), (5, 3), (1, 3), (2, 3)]
    assert len({c.key() for c in asked}) == len(asked)  # the seen-set: never the same case twice
    assert Case((x,), ()).key() not in {c.key() for c in asked}  # nor the original


def test_integer_inputs_shrink_by_axis_only_and_keep_their_values():
    """Gather-like: indices (int64) must stay inside data's first dim. shared_dims and
    simpler_values leave integer inputs alone; each_axis cuts them to their leading element."""
    data = _small((5, 4))
    idx = np.array([3, 1, 4], np.int64)
    pred = lambda c: len(c.inputs[1]) >= 1 and bool((c.inputs[1] < c.inputs[0].shape[0]).all())  # noqa: E731
    small, _ = shrink(Case((data, idx), ()), pred)
    d, i = small.inputs
    assert d.shape == (4, 1) and not d.any()
    assert i.dtype == np.int64 and i.tolist() == [3]


def test_vjp2_directions_are_cut_with_their_inputs_and_never_simplified():
    x = _small((5, 7))
    u = np.arange(35, dtype=np.float32).reshape(5, 7) + 0.5
    pred = lambda c: c.inputs[0].shape[0] >= 2 and c.inputs[0].shape[1] >= 3  # noqa: E731
    small, _ = shrink(Case((x,), (u,)), pred)
    assert small.inputs[0].shape == (2, 3)
    np.testing.assert_array_equal(small.us[0], u[:2, :3])


def test_the_result_always_satisfies_the_predicate():
    for seed in range(5):
        rng = np.random.default_rng(seed)
        x = rng.standard_normal((6, 5)).astype(np.float32) * 3
        pred = lambda c: float(np.abs(c.inputs[0]).sum()) > 4.0  # noqa: E731
        assert pred(Case((x,), ()))
        small, _ = shrink(Case((x,), ()), pred)
        assert pred(small) and small.size() <= x.size


def test_a_start_that_does_not_hold_comes_back_unchanged():
    """shrink does not check the original (its caller does); if nothing smaller holds, it returns it."""
    x = _small((3, 2))
    original = Case((x,), ())
    small, stats = shrink(original, lambda c: False)
    assert small is original and stats.accepted == 0 and stats.stopped == "fixpoint"
    # every distinct candidate asked once: shared 3 -> 1, 2; shared 2 -> 1; each_axis: all three
    # seen; round; clip (= round here: seen); zeros; ones cotangent
    assert stats.calls == 3 + 2 + 1


# --- optional inputs -------------------------------------------------------------------------------
def test_an_optional_input_the_predicate_does_not_need_is_dropped():
    x, bias = _small((4, 3)), _small((3,))
    small, _ = shrink(Case((x, bias), ()), lambda c: c.inputs[0].shape[1] >= 2, optional=(1,))
    assert small.inputs[1] is None
    assert small.inputs[0].shape == (1, 2) and not small.inputs[0].any()


def test_an_optional_input_the_predicate_needs_is_kept():
    """The predicate needs a bias with a value above 0.5 in the first place: kept, one element,
    rounded to 1 (clipping keeps 1 too; zeros loses it)."""
    x, bias = _small((4, 3)), np.array([0.7, -0.3, 0.2], np.float32)
    pred = lambda c: c.inputs[1] is not None and c.inputs[1].size >= 1 and c.inputs[1][0] > 0.5  # noqa: E731
    small, _ = shrink(Case((x, bias), ()), pred, optional=(1,))
    assert small.inputs[1] is not None and small.inputs[1].tolist() == [1.0]
    assert small.inputs[0].shape == (1, 1)


def test_an_optional_input_is_only_dropped_when_named_optional():
    x, bias = _small((4, 3)), _small((3,))
    small, _ = shrink(Case((x, bias), ()), lambda c: True, optional=())
    assert small.inputs[1] is not None and small.inputs[1].shape == (1,)


# --- the budget ------------------------------------------------------------------------------------
@pytest.mark.parametrize("budget", [0, 1, 7, 20])
def test_the_call_budget_is_respected_exactly(budget):
    x = _small((4, 8, 8))
    pred, asked = _counting(lambda c: False)
    small, stats = shrink(Case((x,), ()), pred, budget=budget)
    assert stats.calls == len(asked) == budget
    assert stats.accepted == 0 and stats.stopped == "budget" and small.inputs[0] is x


def test_accepted_steps_count_against_the_budget_too():
    x = _small((4, 8, 8))
    pred, asked = _counting(lambda c: True)
    small, stats = shrink(Case((x,), ()), pred, budget=3)
    assert stats.calls == stats.accepted == len(asked) == 3 and stats.stopped == "budget"
    assert small.inputs[0].shape == (1, 1, 1)  # (4, 1, 1), (1, 1, 1), then rounded


@pytest.mark.parametrize("budget, stopped", [(20, "budget"), (21, "fixpoint"), (300, "fixpoint")])
def test_a_budget_of_exactly_the_distinct_candidates_reaches_the_fixpoint(budget, stopped):
    """Nothing holds from (4, 8, 8): shared 8 -> 1, 2, 3, 4, 7 and 4 -> 1, 2, 3 (8 calls); each_axis
    axis 0 seen, axes 1 and 2 -> 1, 2, 3, 4, 7 (10); round (clip = round: seen), zeros (2); ones (1)."""
    x = _small((4, 8, 8))
    _, stats = shrink(Case((x,), ()), lambda c: False, budget=budget)
    assert stats.calls == min(budget, 21) and stats.stopped == stopped


def test_always_true_reaches_one_zero_element_in_five_calls():
    x = _small((4, 8, 8))
    small, stats = shrink(Case((x,), ()), lambda c: True, budget=300)
    assert stats.stopped == "fixpoint" and stats.calls == stats.accepted == 5
    assert small.inputs[0].shape == (1, 1, 1) and small.inputs[0][0, 0, 0] == 0.0 and small.cot_style == "ones"


def test_the_time_budget_stops_the_loop():
    x = _small((4, 8, 8))

    def slow(c):
        time.sleep(0.05)
        return True
    small, stats = shrink(Case((x,), ()), slow, budget=1000, seconds=0.12)
    assert stats.stopped == "budget" and 1 <= stats.calls <= 4 and stats.seconds >= 0.12
    assert small.size() < x.size


# --- the passes, one at a time ---------------------------------------------------------------------
def test_shared_dims_cuts_each_size_value_everywhere_in_float_inputs_and_us():
    x, w, i = _small((2, 6)), _small((6, 6)), np.zeros(6, np.int64)
    u = _small((2, 6))
    cands = list(shared_dims(Case((x, w, i), (u, None, None))))
    # sizes largest first: 6 -> 1, 2, 3, 5; then 2 -> 1 (ints are never cut)
    assert [(c.inputs[0].shape, c.inputs[1].shape, c.inputs[2].shape) for c in cands] == [
        ((2, 1), (1, 1), (6,)), ((2, 2), (2, 2), (6,)), ((2, 3), (3, 3), (6,)), ((2, 5), (5, 5), (6,)),
        ((1, 6), (6, 6), (6,))]
    assert [c.us[0].shape for c in cands] == [(2, 1), (2, 2), (2, 3), (2, 5), (1, 6)]
    np.testing.assert_array_equal(cands[1].inputs[1], w[:2, :2])


def test_each_axis_cuts_one_axis_of_one_input_and_its_u():
    x, i = _small((3, 2)), np.array([5, 6, 7], np.int32)
    s = np.array(1.5, np.float32)  # 0-d: nothing to cut
    u = _small((3, 2))
    cands = list(each_axis(Case((x, s, i), (u, None, None))))
    assert [(c.inputs[0].shape, c.inputs[2].tolist()) for c in cands] == [
        ((1, 2), [5, 6, 7]), ((2, 2), [5, 6, 7]), ((3, 1), [5, 6, 7]), ((3, 2), [5]), ((3, 2), [5, 6])]
    assert [c.us[0].shape for c in cands] == [(1, 2), (2, 2), (3, 1), (3, 2), (3, 2)]


def test_drop_optional_tries_the_last_optional_first_and_skips_absent_ones():
    a, b, c = _small(2), _small(2), _small(2)
    cands = list(drop_optional(Case((a, b, c), ()), optional=[1, 2, 5]))
    assert [[x is None for x in cand.inputs] for cand in cands] == [[False, False, True], [False, True, False]]
    assert list(drop_optional(Case((a, None), ()), optional=[1])) == []


def test_simpler_values_rounds_then_clips_then_zeroes_one_float_input_at_a_time():
    x = np.array([0.4, 1.6, -3.2], np.float32)
    y = np.array([2.0, -1.0], np.float64)   # already small integers: round and clip skip it
    i = np.array([7, 9], np.int64)          # not a float: never touched
    cands = list(simpler_values(Case((x, y, i), ())))
    got = [[None if a is None else a.tolist() for a in c.inputs] for c in cands]
    assert got == [
        [[0.0, 2.0, -3.0], [2.0, -1.0], [7, 9]],     # round x
        [[0.0, 2.0, -2.0], [2.0, -1.0], [7, 9]],     # clip x to [-2, 2]
        [[0.0, 0.0, 0.0], [2.0, -1.0], [7, 9]],      # zeros x
        [[0.4000000059604645, 1.600000023841858, -3.200000047683716], [0.0, 0.0], [7, 9]],  # zeros y
    ]
    assert all(c.inputs[0].dtype == np.float32 and c.inputs[1].dtype == np.float64 for c in cands)


def test_simpler_values_while_the_predicate_holds_stops_at_the_simplest_that_holds():
    """'some element >= 2': round keeps 3.7 -> 4, clip keeps it at 2, zeros loses it."""
    x = np.array([[3.7, 0.3, -0.6]], np.float32)
    small, _ = shrink(Case((x,), ()), lambda c: bool((c.inputs[0] >= 2).any()))
    assert small.inputs[0].tolist() == [[2.0]]


def test_simpler_values_never_applies_when_the_predicate_needs_the_exact_values():
    x = np.array([[0.25, 0.75]], np.float32)
    small, _ = shrink(Case((x,), ()), lambda c: c.inputs[0].size >= 2 and c.inputs[0][0, 1] == np.float32(0.75))
    np.testing.assert_array_equal(small.inputs[0], x)


def test_ones_cotangent_proposed_once_and_kept_when_refused():
    case = Case((_small(2),), ())
    (c,) = list(ones_cotangent(case))
    assert c.cot_style == "ones" and list(ones_cotangent(c)) == []
    small, _ = shrink(case, lambda k: k.cot_style == "slice")
    assert small.cot_style == "slice"


# --- Case ------------------------------------------------------------------------------------------
def test_case_key_tells_apart_dtype_shape_absence_and_cotangent_style():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    keys = {Case((a,), ()).key(), Case((a.astype(np.float64),), ()).key(), Case((a.reshape(3, 2),), ()).key(),
            Case((a, None), ()).key(), Case((a,), (), "ones").key(), Case((a,), (a,)).key()}
    assert len(keys) == 6
    assert Case((a,), ()).key() == Case((np.asfortranarray(a),), ()).key()  # layout is not identity
    assert Case((a, None), ()).shapes() == [[2, 3], None] and Case((a, None), ()).size() == 6
    assert Stats() == Stats(calls=0, accepted=0, seconds=0.0, stopped="fixpoint")
