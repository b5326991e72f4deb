"""values.safetensors written one value at a time, as a recording makes them.

safetensors' own writer (safetensors.numpy.save_file) takes every array at once and copies each into
a bytes object before it writes the first: a bundle's values are then held twice, and all of them
before anything is on disk. A 1.1B-parameter model's recording (its weights, their transposes, every
gradient and double-backward direction: 25 GB) cannot be held even once on a 24 GB machine. So this
writes the same format itself (8-byte little-endian header length, the JSON header padded with spaces
to 8 bytes, the raw little-endian data at the header's offsets): the header first, from the values'
dtypes and shapes known before any is made, then each value's bytes at its offset as it comes.
safetensors' own reader reads the result (tests/test_store_writer.py)."""
import json
import os

import numpy as np

from irtrace.errors import IrtraceError
from irtrace.store.check import ST_DTYPES

_CODES = {np.dtype(t): code for code, t in ST_DTYPES.items()}
# safetensors' file order: by dtype, in the reverse of its Dtype enum's order, then by name; the same order
# makes the same file, byte for byte, as safetensors.numpy.save_file (tests/test_store_writer.py)
_ORDER = ("U64", "I64", "F64", "F32", "U32", "I32", "BF16", "F16", "U16", "I16", "I8", "U8", "BOOL")


def dtype_code(dtype):
    """safetensors' name of numpy `dtype` ("F32"), or an IrtraceError."""
    try:
        return _CODES[np.dtype(dtype)]
    except KeyError:
        raise IrtraceError(f"a bundle cannot store {np.dtype(dtype)} values (it stores "
                           f"{', '.join(sorted(_CODES.values()))})") from None


class ValueWriter:
    """A values.safetensors at `path` holding the values `specs` names ({name: (numpy dtype, shape)}, laid
    out in safetensors' order): `writer[name] = array` writes one (its dtype and shape as declared), `accumulate` adds to
    what was written (a gradient that arrives in parts). A value never written reads as zeros (the file
    is made at its full size). close() before reading the file."""

    def __init__(self, path, specs, metadata=None):
        self.path = str(path)
        self._entries, header, offset = {}, {}, 0
        if metadata:
            header["__metadata__"] = dict(metadata)
        specs = {name: (np.dtype(dtype), shape) for name, (dtype, shape) in specs.items()}
        for name in sorted(specs, key=lambda n: (_ORDER.index(dtype_code(specs[n][0])), n)):
            dtype, shape = specs[name][0], tuple(int(d) for d in specs[name][1])
            nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
            header[name] = {"dtype": dtype_code(dtype), "shape": list(shape), "data_offsets": [offset, offset + nbytes]}
            self._entries[name] = (dtype, shape, offset)
            offset += nbytes
        text = json.dumps(header, separators=(",", ":")).encode()
        text += b" " * (-len(text) % 8)  # safetensors pads its header so the data starts 8-aligned
        self._start = 8 + len(text)
        self.written = set()
        # 0666, less what the umask takes (as any file the user makes gets: trust.shared_mode), from the start:
        # a chmod after would read the umask from /proc (0.3 ms a file; a replay's cache writes thousands)
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o666)
        try:
            os.ftruncate(self._fd, self._start + offset)  # zeros, without writing them (a sparse file)
            self._write_at(0, len(text).to_bytes(8, "little") + text)
        except BaseException:
            self.close()
            raise

    def __contains__(self, name):
        return name in self._entries

    def _write_at(self, offset, data):
        view = memoryview(data).cast("B")
        while view.nbytes:
            n = os.pwrite(self._fd, view, offset)
            view, offset = view[n:], offset + n

    def _checked(self, name, array):
        dtype, shape, offset = self._entries[name]
        array = np.asarray(array)
        if array.dtype != dtype or array.shape != shape:
            raise ValueError(f"value {name!r} is {array.dtype} {array.shape}, declared {dtype} {shape}")
        return np.ascontiguousarray(array), offset

    def __setitem__(self, name, array):
        array, offset = self._checked(name, array)
        if array.size:
            self._write_at(self._start + offset, array.view(np.uint8).reshape(-1))
        self.written.add(name)

    def __getitem__(self, name):
        """A copy of what was written of `name` (zeros where nothing was)."""
        dtype, shape, offset = self._entries[name]
        out = np.zeros(shape, dtype)
        if out.size:
            buf = out.view(np.uint8).reshape(-1)
            got = os.preadv(self._fd, [buf], self._start + offset)
            if got != buf.nbytes:
                raise OSError(f"{self.path}: read {got} of {buf.nbytes} bytes of {name!r}")
        return out

    def accumulate(self, name, array):
        """Write `array`, or add it to what an earlier call wrote of `name`."""
        self[name] = (self[name] + array).astype(self._entries[name][0]) if name in self.written else array

    def close(self):
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def write_values(path, values, metadata=None):
    """Write the mapping `values` (name -> array) to the safetensors file at `path`."""
    arrays = {k: np.asarray(v) for k, v in values.items()}
    with ValueWriter(path, {k: (a.dtype, a.shape) for k, a in arrays.items()}, metadata) as w:
        for k, a in arrays.items():
            w[k] = a
