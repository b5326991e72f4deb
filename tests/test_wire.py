"""The wire's frames give back exactly what was sent, through a stream (write/read) and as header plus
arrays (split/join, what a Ray task carries): dtype, shape and every byte, for the awkward arrays too."""
import fcntl
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from backends._runtime import wire

ARRAYS = [np.arange(6, dtype=np.float32).reshape(2, 3), None, np.array(3.5), np.zeros((0, 3)),
          np.array([[1, 2], [3, -4]], ml_dtypes.bfloat16), np.arange(12).reshape(3, 4).T,  # not C-contiguous
          np.array([np.nan, -np.inf, 2.0 ** -149], np.float32), np.array([2 ** 64 - 1], np.uint64)]


def _same(sent, got):
    assert len(got) == len(sent)
    for a, b in zip(sent, got):
        if a is None:
            assert b is None
            continue
        assert (b.dtype, b.shape) == (a.dtype, a.shape)
        assert np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes()


def test_write_then_read_gives_every_byte_back():
    stream = io.BytesIO()
    wire.write(stream, {"kind": "run", "x": [1, 2]}, ARRAYS)
    stream.seek(0)
    msg, got = wire.read(stream)
    assert msg == {"kind": "run", "x": [1, 2]}
    _same(ARRAYS, got)


def test_split_then_join_gives_every_byte_back_without_copying():
    header, blobs = wire.split({"kind": "run"}, ARRAYS)
    assert blobs[0] is ARRAYS[0]  # a C-contiguous array goes as it is
    msg, got = wire.join(header, blobs)
    assert msg == {"kind": "run"}
    _same(ARRAYS, got)


def test_a_large_array_crosses_a_real_pipe_whole_and_writable():
    """Read straight into the array's memory, across the many short reads a pipe gives."""
    child = ("import sys, numpy as np\nfrom backends._runtime import wire\nwire.widen_pipes(sys.stdout.buffer)\n"
             "wire.write(sys.stdout.buffer, {'n': 1}, [np.arange(3 << 20, dtype=np.float64), None, np.arange(5.)])\n")
    root = Path(__file__).resolve().parents[1]
    proc = subprocess.Popen([sys.executable, "-c", child], stdout=subprocess.PIPE, cwd=str(root))
    msg, (big, none, small) = wire.read(proc.stdout)
    assert proc.wait() == 0 and msg == {"n": 1} and none is None
    assert big.dtype == np.float64 and np.array_equal(big, np.arange(3 << 20)) and np.array_equal(small, np.arange(5.))
    big[0] = -1.0  # the host's own memory, as it was with a copy
    assert big[0] == -1.0


def test_a_frame_cut_short_is_the_end_of_the_stream():
    stream = io.BytesIO()
    wire.write(stream, {"kind": "run"}, [np.arange(1000, dtype=np.float32)])
    stream = io.BytesIO(stream.getvalue()[:-1])
    with pytest.raises(EOFError):
        wire.read(stream)


def test_a_widened_pipe_holds_a_megabyte():
    r, w = os.pipe()
    with os.fdopen(r, "rb") as rf, os.fdopen(w, "wb") as wf:
        wire.widen_pipes(rf, wf, io.BytesIO())  # not a pipe: left as it is
        assert fcntl.fcntl(w, getattr(fcntl, "F_GETPIPE_SZ", 1032)) == 1 << 20


@pytest.mark.parametrize("mapped_min", [0, None])
def test_a_value_sent_by_where_it_lies_is_viewed_in_the_file_mapped_copy_on_write(tmp_path, monkeypatch, mapped_min):
    """A memory-mapped value (a bundle's value store) goes as its file and offset; the reader gets the same
    dtype, shape and bytes, writable, aligned, the file unchanged by a write: a value of MAPPED_MIN bytes or more
    as a view of the file mapped copy-on-write (here every one, MAPPED_MIN 0), a smaller one (MAPPED_MIN as it is)
    and one at an offset the dtype's alignment does not divide in an array of its own; an offset past the file's
    end is not a frame."""
    if mapped_min is not None:
        monkeypatch.setattr(wire, "MAPPED_MIN", mapped_min)
    path = tmp_path / "values.bin"
    data = np.arange(1000, dtype=np.float32)
    path.write_bytes(b"\0" * 12 + data.tobytes())  # the values start at an offset that is not 8-aligned
    mapped = np.memmap(path, dtype=np.uint8, mode="r").view(np.ndarray)
    sent = [mapped[12:12 + 400].view(np.float32).reshape(10, 10),
            mapped[12 + 4 * 999:].view(np.float32), mapped[12:].view(ml_dtypes.bfloat16)[:6],
            mapped[13:13 + 8].view(np.float32)]  # 4 bytes into the value 0, 1 into the next: not aligned
    stream = io.BytesIO()
    wire.write(stream, {"kind": "run"}, sent, by_reference=True)
    assert stream.tell() < 1000  # the header alone: no value's bytes went through the stream
    stream.seek(0)
    _, got = wire.read(stream)
    _same(sent, got)
    assert all(g.flags.writeable and g.flags.aligned for g in got)
    # views of the map; the unaligned one read (and all of them, below MAPPED_MIN)
    assert [g.flags.owndata for g in got] == ([False, False, False, True] if mapped_min == 0 else [True] * 4)
    got[0][0, 0] = -1.0
    got[3][0] = -1.0
    assert np.memmap(path, dtype=np.float32, mode="r", offset=12)[0] == 0.0  # this process's copy of the page only
    with pytest.raises(ValueError, match="ends before"):
        wire.read(io.BytesIO(_frame({"kind": "run", "arrays": [
            {"dtype": "<f4", "shape": [8], "file": str(path), "offset": path.stat().st_size - 8}]})))


def test_a_file_replaced_or_changed_is_mapped_again_and_few_maps_are_kept(tmp_path, monkeypatch):
    """A value's file is asked its identity at every read: a file replaced at the same path (a bundle exported
    again), or changed in place, gives its new bytes, and its old map is let go (an array still viewing it keeps
    its bytes); at most MAPS_KEPT files stay mapped."""
    monkeypatch.setattr(wire, "MAPPED_MIN", 0)  # these values are small
    path = tmp_path / "values.bin"

    def value(path, n=4):
        return wire._region({"dtype": "<f4", "shape": [n], "file": str(path), "offset": 8})
    path.write_bytes(b"\0" * 8 + np.arange(4, dtype=np.float32).tobytes())
    first = value(path)
    assert first.tolist() == [0, 1, 2, 3]
    other = tmp_path / "new.bin"
    other.write_bytes(b"\0" * 8 + np.full(4, 7, np.float32).tobytes())
    os.replace(other, path)  # another file at the same path
    assert value(path).tolist() == [7, 7, 7, 7] and first.tolist() == [0, 1, 2, 3]
    assert sum(k[0] == str(path) for k in wire._MAPS) == 1
    with open(path, "r+b") as f:  # changed in place, one value longer
        f.seek(8)
        f.write(np.full(5, 9, np.float32).tobytes())
    assert value(path, 5).tolist() == [9] * 5
    for k in range(wire.MAPS_KEPT + 2):
        p = tmp_path / f"{k}.bin"
        p.write_bytes(b"\0" * 8 + np.full(4, k, np.float32).tobytes())
        assert value(p).tolist() == [k] * 4
    assert len(wire._MAPS) == wire.MAPS_KEPT and str(path) not in {k[0] for k in wire._MAPS}


def test_a_write_into_a_viewed_input_is_gone_once_its_call_is_answered(tmp_path, monkeypatch):
    """A worker calls release_mapped after each call it answered (with the call's inputs, in a batch): the pages of
    the ranges those views cover are let go (madvise(MADV_DONTNEED) on a copy-on-write map), so what the call wrote
    into an input in this process's copy of a page (an op computed in place) reads as the file's bytes again, in
    that view and in any later one of the range, another call's input; a page only another view covers keeps its
    write until release_mapped() lets every view go. Where madvise cannot drop a written page (not Linux), no
    value is viewed: each is read into an array of its own."""
    monkeypatch.setattr(wire, "MAPPED_MIN", 0)
    monkeypatch.setattr(wire, "_viewed", {})
    path = tmp_path / "values.bin"
    n = 1 << 18  # 1 MB of values, then a page of others
    path.write_bytes(b"\0" * 8 + np.arange(n + 2048, dtype=np.float32).tobytes())

    def value(offset, count):
        return wire._region({"dtype": "<f4", "shape": [count], "file": str(path), "offset": 8 + 4 * offset})
    whole, apart = value(0, n), value(n + 1024, 4)  # apart: its own page, past the large value's
    whole[0] = apart[0] = -1.0
    assert value(0, 4)[0] == -1.0  # the same page of the same map: what a later call would read, unreleased
    wire.release_mapped([whole])
    assert whole[0] == 0.0 and value(0, 4)[0] == 0.0  # this process's copy let go: the file's again
    assert apart[0] == -1.0  # another call's input, not let go yet
    wire.release_mapped()
    assert apart[0] == n + 1024 and wire._viewed == {}
    monkeypatch.setattr(wire, "_DROPS_COPIES", False)
    read = value(0, 4)
    assert read.flags.owndata and read.tolist() == [0, 1, 2, 3] and wire._viewed == {}


def _frame(msg):
    header = json.dumps(msg).encode()
    return len(header).to_bytes(8, "little") + header
