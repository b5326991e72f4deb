"""The wire's frames give back exactly what was sent, through a stream (write/read) and as header plus
arrays (split/join, what a Ray task carries): dtype, shape and every byte, for the awkward arrays too."""
import io

import ml_dtypes
import numpy as np

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
