"""values.safetensors as irtrace writes it, one value at a time (irtrace/store/writer.py): safetensors'
own reader reads every byte back, and so does the bundle's (LazyValues)."""
import numpy as np
import pytest
from safetensors.numpy import load_file

from irtrace.errors import IrtraceError
from irtrace.store import LazyValues
from irtrace.store.writer import ValueWriter, write_values


def arrays():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((3, 5)).astype(np.float32)
    return {
        "w": a,
        "w.T": a.T,  # not contiguous: written as its C-order copy
        "scalar": np.array(2.5, np.float64),
        "empty": np.zeros((0, 4), np.float32),
        "half": rng.standard_normal(7).astype(np.float16),
        "ids": np.array([[0, -1], [np.iinfo(np.int64).max, 3]], np.int64),
        "mask": np.array([True, False, True]),
        "bytes": np.arange(5, dtype=np.uint8),
        "odd/name:updated": np.array([np.nan, np.inf, -0.0, 1e-45], np.float32),
    }


def test_what_it_writes_reads_back_byte_for_byte_with_safetensors_and_the_bundle_reader(tmp_path):
    given = arrays()
    write_values(tmp_path / "v.safetensors", given, {"schema": "test"})
    theirs, ours = load_file(str(tmp_path / "v.safetensors")), LazyValues(tmp_path / "v.safetensors")
    assert ours.metadata == {"schema": "test"}
    assert sorted(theirs) == sorted(ours.keys()) == sorted(given)
    for name, a in given.items():
        for read in (theirs[name], ours[name]):
            assert read.dtype == a.dtype and read.shape == a.shape
            assert np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(read).tobytes(), name
    # the data starts 8-aligned, as safetensors pads it
    assert int.from_bytes((tmp_path / "v.safetensors").read_bytes()[:8], "little") % 8 == 0


def test_values_come_in_any_order_and_parts_add_up_and_what_never_comes_is_zero(tmp_path):
    specs = {"a": (np.float32, (2, 2)), "b": (np.float32, (3,)), "never": (np.float64, (2,))}
    with ValueWriter(tmp_path / "v.safetensors", specs) as w:
        w["b"] = np.array([1, 2, 3], np.float32)
        w.accumulate("a", np.full((2, 2), 0.25, np.float32))
        w.accumulate("a", np.full((2, 2), 0.5, np.float32))  # a gradient that arrived in two parts
        np.testing.assert_array_equal(w["a"], np.full((2, 2), 0.75, np.float32))
        assert w.written == {"a", "b"}
    got = load_file(str(tmp_path / "v.safetensors"))
    np.testing.assert_array_equal(got["a"], np.full((2, 2), 0.75, np.float32))
    np.testing.assert_array_equal(got["b"], [1, 2, 3])
    np.testing.assert_array_equal(got["never"], [0.0, 0.0])


def test_a_value_not_as_declared_or_of_a_type_the_bundle_cannot_hold_is_refused(tmp_path):
    with ValueWriter(tmp_path / "v.safetensors", {"a": (np.float32, (2,))}) as w:
        with pytest.raises(ValueError, match=r"value 'a' is float64 \(2,\), declared float32 \(2,\)"):
            w["a"] = np.zeros(2)
        with pytest.raises(ValueError, match=r"value 'a' is float32 \(3,\), declared float32 \(2,\)"):
            w["a"] = np.zeros(3, np.float32)
    with pytest.raises(IrtraceError, match=r"a bundle cannot store complex64 values \(it stores BF16, BOOL, F16, F32"):
        ValueWriter(tmp_path / "c.safetensors", {"c": (np.complex64, (1,))})


def _written_as_theirs(tmp_path, given, theirs, save_file):
    """write_values writes `given` as safetensors' `save_file` writes `theirs` (the same values in its
    framework's types), byte for byte, and the bundle's reader gives every value back exactly."""
    save_file(theirs, str(tmp_path / "theirs.safetensors"), metadata={"schema": "test"})
    write_values(tmp_path / "ours.safetensors", given, {"schema": "test"})
    assert (tmp_path / "ours.safetensors").read_bytes() == (tmp_path / "theirs.safetensors").read_bytes()
    back = LazyValues(tmp_path / "ours.safetensors")
    for k, a in given.items():
        assert back[k].dtype == a.dtype and back[k].tobytes() == a.tobytes()


def test_it_writes_the_file_safetensors_writes_byte_for_byte(tmp_path):
    from safetensors.numpy import save_file
    given = {k: np.ascontiguousarray(a) for k, a in arrays().items()}
    _written_as_theirs(tmp_path, given, given, save_file)


def test_bfloat16_values_are_laid_out_as_safetensors_lays_them_out(tmp_path):
    """bfloat16 (ml_dtypes' numpy type; the fuzzer's low-precision cases) is stored as safetensors' BF16, in
    its place among the other dtypes: the same bytes as safetensors' torch writer, and read back exactly."""
    import ml_dtypes
    import torch
    from safetensors.torch import save_file
    rng = np.random.default_rng(3)
    given = {"b": rng.standard_normal((2, 3)).astype(ml_dtypes.bfloat16),
             "h": rng.standard_normal(4).astype(np.float16), "f": rng.standard_normal(2).astype(np.float32),
             "i": np.arange(3, dtype=np.int32)}
    theirs = {k: torch.from_numpy(a.view(np.int16)).view(torch.bfloat16) if k == "b" else torch.from_numpy(a)
              for k, a in given.items()}
    _written_as_theirs(tmp_path, given, theirs, save_file)


def _resident_of(path):
    """Bytes of `path`'s mapping in this process's resident memory (/proc/self/smaps)."""
    total, mine = 0, False
    for line in open("/proc/self/smaps"):
        head = line.split()
        if "-" in head[0] and len(head) >= 5:  # a mapping's first line: addresses, perms, offset, dev, inode, path
            mine = line.rstrip().endswith(str(path))
        elif mine and head[0] == "Rss:":
            total += int(head[1]) * 1024
    return total


@pytest.mark.skipif(not __import__("os").path.exists("/proc/self/smaps"), reason="needs Linux's /proc/self/smaps")
def test_release_gives_back_the_pages_read_once_a_megabyte_of_views_was_handed_out(tmp_path):
    """A replay calls release after each node: the pages its views read leave resident memory, once views of
    RELEASED bytes were handed out since the last time (a one-element node's madvise was a fortieth of its replay)."""
    from irtrace.store import RELEASED
    big = np.arange(4 << 20, dtype=np.uint8)
    small = {f"s{k}": np.full(1024, k, np.float32) for k in range(300)}
    write_values(tmp_path / "v.safetensors", {"big": big, **small})
    values = LazyValues(tmp_path / "v.safetensors")
    assert int(values["big"].sum(dtype=np.int64)) == int(big.sum(dtype=np.int64))  # every page read
    assert _resident_of(tmp_path / "v.safetensors") >= 4 << 20
    values.release()
    assert _resident_of(tmp_path / "v.safetensors") < 64 << 10
    for k in range(200):  # 800 kB of small views: kept until a megabyte was handed out
        assert values[f"s{k}"][0] == k
        values.release()
    held = _resident_of(tmp_path / "v.safetensors")
    assert held >= 700 << 10 and 200 * 4096 < RELEASED
    for k in range(200, 300):
        assert values[f"s{k}"][0] == k
        values.release()
    assert _resident_of(tmp_path / "v.safetensors") < held
