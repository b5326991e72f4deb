"""How the cache keeps an answer (irtrace/replay/entry.py) and tells bits apart (irtrace.store.same_bits), by hand:
the oracle's float64 result as int32 differences of its bits from the reference's float32 result (the elements whose
difference does not fit kept apart, in float64), read back the same bits; a float64 result kept in float32 only where
every element is a float32; and same_bits on NaN payloads, -0.0 and the last byte of a large array."""
import numpy as np

from irtrace.replay.entry import STEP_MAX, delta, narrow, undelta
from irtrace.store import same_bits


def _bits_plus(base, steps):
    """float64 values whose bits are those of `base` widened, plus `steps`."""
    return (base.astype(np.float64).view(np.int64) + np.asarray(steps, np.int64)).view(np.float64)


def test_delta_keeps_what_fits_in_int32_and_the_rest_apart_by_hand():
    base = np.array([1.0, -2.5, 3.0, 0.0, 7.0], np.float32)
    steps = [0, STEP_MAX, -STEP_MAX, STEP_MAX + 1, -STEP_MAX - 1]  # the last two do not fit
    o = _bits_plus(base, steps)
    step, rest = delta(o, base)
    assert step.dtype == np.int32 and step.tolist() == [0, STEP_MAX, -STEP_MAX, -STEP_MAX - 1, -STEP_MAX - 1]
    assert rest.dtype == np.float64 and rest.view(np.int64).tolist() == o[3:].view(np.int64).tolist()
    assert np.array_equal(undelta(step, rest, base).view(np.int64), o.view(np.int64))


def test_delta_of_differences_beyond_int64_nan_and_infinity_reads_back_the_same_bits():
    base = np.array([1.0, np.inf, np.nan, -0.0, 1e-30, 2.0, 3.0], np.float32)
    o = np.array([1.0, np.inf, np.nan, 0.0, 1e-30, -1e300, 3.0 + 2 ** -40])  # -1e300: the sign's bit flips
    step, rest = delta(o, base)
    assert np.array_equal(undelta(step, rest, base).view(np.int64), o.view(np.int64))
    assert rest.size == 2  # -0.0 -> 0.0 and 2.0 -> -1e300 differ beyond int32 in their bits


def test_delta_refuses_what_it_cannot_keep_in_fewer_bytes():
    base = np.ones(4, np.float32)
    assert delta(np.full(4, -1.0), base) is None  # every element apart: float64 alone is fewer bytes
    assert delta(np.ones(4, np.float32), base) is None  # not float64
    assert delta(np.ones(3), base) is None  # another shape
    assert delta(np.array(1.0), np.array(1.0, np.float32))[0].shape == ()  # a 0-d result stays 0-d


def test_narrow_keeps_float32_only_where_every_element_is_one():
    exact = np.arange(100_000, dtype=np.float32).astype(np.float64) / 4
    low = narrow(exact)
    assert low.dtype == np.float32 and np.array_equal(low, exact)
    late = exact.copy()
    late[-1] = 0.1  # the first elements are float32, the last is not
    assert narrow(late) is None
    assert narrow(np.array([0.1])) is None and narrow(np.float64(0.5).reshape(())).shape == ()
    assert narrow(np.array([np.nan, 1.0])) is None  # NaN is kept as it was (its payload)


def test_same_bits_tells_nan_payloads_signed_zeros_and_the_last_byte():
    quiet, other = np.array([np.nan]), np.array([0x7FF8000000000001], np.uint64).view(np.float64)
    assert same_bits(quiet, quiet.copy()) and not same_bits(quiet, other)
    assert not same_bits(np.zeros(3), -np.zeros(3)) and not same_bits(np.zeros(3), np.zeros(3, np.float32))
    assert not same_bits(np.zeros((2, 3)), np.zeros((3, 2)))
    for n in (7, 1 << 16, (1 << 16) + 1, 3 << 18):  # below and above the 64 kB where words are compared
        a = np.arange(n, dtype=np.uint8)
        b = a.copy()
        assert same_bits(a, b)
        b[-1] ^= 1
        assert not same_bits(a, b)
        b[-1] ^= 1
        b[0] ^= 1
        assert not same_bits(a, b)
    big = np.arange(1 << 20, dtype=np.float32).reshape(1024, 1024)
    assert same_bits(big.T, np.ascontiguousarray(big.T)) and not same_bits(big, big.T)
