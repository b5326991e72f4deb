"""Framed messages between the host and a worker: no pickle.

A frame is: 8-byte little-endian length of a JSON header, the header, then the raw
bytes of each array it lists ({"dtype", "shape", "nbytes"} or null for None), in order.
An array that is a view of a file mapped into memory (a bundle's value store, a cache entry) is sent
by the host as where it lies ({"dtype", "shape", "file", "offset"}; write(..., by_reference=True)):
the worker views the same bytes in the file, mapped copy-on-write (its page cache), or reads a small value
from it by pread (_region), instead of receiving a copy through the pipe.
"""
import json
import math
import mmap
import os
import struct
import sys
import threading
from enum import Enum

import numpy as np

class Status(str, Enum):
    """The status of an answer, end to end: the "status" of every reply frame (OK, UNSUPPORTED, ERROR)
    and what the host makes of a call no reply came for (CRASH: the worker died; TIMEOUT: it did not
    answer in time). A str: it is written, compared and cached as its value; the report's verdict of
    an answer that failed is its name (irtrace.compare.Verdict.of)."""
    OK = "ok"
    UNSUPPORTED = "unsupported"   # the backend cannot express this node or mode: a coverage gap
    ERROR = "error"               # the framework raised; "message" says what
    SHAPE_MISMATCH = "shape_mismatch"  # the output's shape is not the reference's: no cotangent applies
    CRASH = "crash"               # the worker process died (a signal, an abort) before it answered
    TIMEOUT = "timeout"           # no answer within the timeout: the worker was killed and restarted

    def __str__(self):
        return self.value


_LEN = struct.Struct("<Q")
MAX_HEADER = 1 << 26  # a JSON header is kilobytes; more means the stream is not frames


def file_region(a):
    """(file, byte offset) of a C-contiguous array that is a view of a memory-mapped file, else None."""
    if not isinstance(a, np.ndarray) or not a.flags.c_contiguous or not a.size:
        return None
    root = a
    while isinstance(root.base, np.ndarray):
        root = root.base
    if not isinstance(root, np.memmap) or not isinstance(root.base, mmap.mmap) or not root.filename:
        return None
    # the root memmap's first byte lies at root.offset in the file (numpy maps from a page boundary
    # and starts the array inside that map)
    start = a.__array_interface__["data"][0] - root.__array_interface__["data"][0]
    return str(root.filename), root.offset + start


def dtype_tag(dt):
    """How a frame names a dtype: numpy's own string, or the name of an ml_dtypes type (bfloat16,
    float8_*): their numpy string is a bare 'V2', which would read back as raw bytes."""
    return dt.name if dt.kind == "V" else dt.str


def is_float(dt):
    """numpy's floats and ml_dtypes' (bfloat16, float8_*: numpy kind "V", which `dt.kind == "f"` leaves out)."""
    dt = np.dtype(dt)
    return dt.kind == "f" or (dt.kind == "V" and dt.name.startswith(("bfloat", "float")))


def dtype_of(tag):
    """The dtype a frame names (dtype_tag); ml_dtypes is imported only for its names."""
    try:
        return np.dtype(tag)
    except TypeError:
        import ml_dtypes  # noqa: F401 - registers bfloat16 and the float8 types with numpy
        return np.dtype(tag)


def split(msg, arrays=(), by_reference=False):
    """(the JSON header of a frame of `msg` and `arrays`, the arrays whose bytes follow it, C-contiguous):
    what write() sends, for a transport that carries arrays itself (a Ray task)."""
    specs, blobs = [], []
    for a in arrays:
        if a is None:
            specs.append(None)
            continue
        where = file_region(a) if by_reference else None
        if where is not None:
            specs.append({"dtype": dtype_tag(a.dtype), "shape": list(a.shape), "file": where[0], "offset": where[1]})
            continue
        a = np.asarray(a)
        if a.dtype == object:
            raise TypeError("object arrays cannot cross the wire")
        a = a if a.flags.c_contiguous else np.array(a, order="C")  # (ascontiguousarray makes a 0-d array 1-d)
        specs.append({"dtype": dtype_tag(a.dtype), "shape": list(a.shape), "nbytes": a.nbytes})
        blobs.append(a)
    return json.dumps({**msg, "arrays": specs}, allow_nan=True), blobs


def join(header, blobs):
    """(msg, arrays) of split()'s header and arrays (each array's bytes as given, not copied)."""
    msg = json.loads(header)
    blobs = iter(blobs)
    arrays = [None if s is None else _region(s) if "file" in s else next(blobs) for s in msg.pop("arrays", [])]
    return msg, arrays


def write(stream, msg, arrays=(), by_reference=False):
    header, blobs = split(msg, arrays, by_reference)
    header = header.encode()
    stream.write(_LEN.pack(len(header)))
    stream.write(header)
    for b in blobs:
        if b.nbytes:
            stream.write(b.reshape(-1).view(np.uint8).data)  # its bytes, not a copy of them
    stream.flush()


MAPS_KEPT = 4        # files a process keeps mapped for values sent by where they lie (_mapped)
_MAPS = {}           # (path, device, inode, size, modification time) -> the file's copy-on-write map, oldest first
_MAPS_LOCK = threading.Lock()
MAPPED_MIN = 64 << 10  # bytes: a smaller value is read by pread (_read_region), a larger one viewed in a kept map
_viewed = {}         # id of a view handed out and not let go since -> [(map, offset, bytes)] (release_mapped)
_VIEWED_LOCK = threading.Lock()
# Linux's madvise(MADV_DONTNEED) drops a copy-on-write map's written pages (release_mapped); elsewhere it may only
# advise, and every value is read (_read_region)
_DROPS_COPIES = sys.platform.startswith("linux") and hasattr(mmap, "MADV_DONTNEED")


def _mapped(path):
    """The whole file at `path` mapped copy-on-write (mmap.ACCESS_COPY), kept while it is one of the last MAPS_KEPT
    files read this way; None for an empty file. Its identity is asked at every call: a file replaced or changed
    since is mapped again, and its old map let go (an array still viewing it keeps it alive). A worker that one
    process keeps warm between its replays (worker.keep_warm) holds its last files mapped until it ends: a bundle
    removed meanwhile keeps its disk space until then."""
    st = os.stat(path)
    key = (path, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    with _MAPS_LOCK:
        m = _MAPS.pop(key, None)
        if m is None:
            if not st.st_size:
                return None
            for old in [k for k in _MAPS if k[0] == path]:
                del _MAPS[old]
            with open(path, "rb") as f:
                m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
        _MAPS[key] = m  # the most recent last
        while len(_MAPS) > MAPS_KEPT:
            del _MAPS[next(iter(_MAPS))]
        return m


def _region(s):
    """The host's memory-mapped value a frame names by where it lies. One of MAPPED_MIN bytes or more is a view
    of the same file mapped here copy-on-write and kept (_mapped), no byte copied or read until the framework
    reads it; writable, and a write changes this process's copy of the page, never the file, nor a later call's
    input (release_mapped). A cached
    onnxruntime forward replay of ResNet-50 reads 306 MB of inputs: read into arrays of its own by pread, the
    worker spent 222 ms in it, the critical path once the host was faster. A smaller value, one at an offset the
    dtype's alignment does not divide, or one past the file's end is read by pread (_read_region): a 1 kB value
    costs about the same either way (5.2-5.8 us viewed, with its file's identity asked, against 6.1-6.3 read,
    each with a sum of it), and each view is a range release_mapped lets go by a system call of its own."""
    dtype, shape, offset = dtype_of(s["dtype"]), tuple(s["shape"]), int(s["offset"])
    nbytes = math.prod(shape) * dtype.itemsize  # a shape's ints from JSON: math.prod, 0.1 us (np.prod 3.5)
    if nbytes >= MAPPED_MIN and offset % dtype.alignment == 0 and _DROPS_COPIES:
        m = _mapped(s["file"])
        if m is not None and offset + nbytes <= len(m):
            view = np.frombuffer(m, dtype, nbytes // dtype.itemsize, offset).reshape(shape)
            with _VIEWED_LOCK:  # a list: the id of a view gone may be a later one's
                _viewed.setdefault(id(view), []).append((m, offset, nbytes))
            return view
    return _read_region(s["file"], dtype, shape, offset)


def release_mapped(arrays=None):
    """Let go the pages of the views handed out (_region): those of `arrays` (the inputs of one call of a batch), or
    all of them. A worker calls it after each call it answered. The map is copy-on-write: a call that writes into an
    input (an op computed in place, a user's port whose training step updates a buffer it was given) changes this
    process's copy of the page, which every later view of the range in this process would read, another node's
    input as the call left it. madvise(MADV_DONTNEED) drops that copy: each call reads its inputs as the file holds
    them, as it did when each was read into an array of its own. It also keeps the worker's resident memory from
    growing with the bundle it reads (a 26 GB bundle's, docs/scale.md); the file's pages stay in the page cache.
    One system call per view (64 KB or more each), as many as when the pages were let go 16 MB at a time (the
    views a later call makes of the same range fault its pages in again: benchmarks/polygraphy_compare.py)."""
    with _VIEWED_LOCK:
        if arrays is None:
            ranges = [r for held in _viewed.values() for r in held]
            _viewed.clear()
        else:
            ranges = [r for a in arrays if a is not None for r in _viewed.pop(id(a), ())]
    for m, offset, nbytes in ranges:
        start = offset - offset % mmap.PAGESIZE
        try:
            m.madvise(mmap.MADV_DONTNEED, start, min(offset + nbytes, len(m)) - start)
        except (OSError, ValueError):  # a map closed meanwhile, or one madvise refuses: no later view reads it
            with _MAPS_LOCK:
                for key in [k for k, kept in _MAPS.items() if kept is m]:
                    del _MAPS[key]


def _read_region(path, dtype, shape, offset):
    """A value (`dtype`, `shape`) read from the file at `path` at byte `offset` into numpy's own memory (an aligned, writable array of the
    worker's own, as through the pipe): one pread from the page cache. Not by a map made for the value: a map
    made and let go for each array cost a 1 kB value's read 18 us (2.6 us this way) and a 256 kB one's twice the
    time; a 16 MB one's is the same (benchmarks/wire.py)."""
    a = np.empty(shape, dtype)
    view = a.reshape(-1).view(np.uint8)
    fd = os.open(path, os.O_RDONLY)
    try:
        got = 0
        while got < view.nbytes:
            n = os.preadv(fd, [view[got:]], offset + got)
            if n <= 0:
                raise ValueError(f"not a frame: {path} ends before the {view.nbytes} bytes at offset {offset}")
            got += n
    finally:
        os.close(fd)
    return a


def _read_exact(stream, n):
    chunks, got = [], 0
    while got < n:
        c = stream.read(n - got)
        if not c:
            raise EOFError("stream closed")
        chunks.append(c)
        got += len(c)
    return b"".join(chunks)


def read(stream):
    """(msg, arrays); EOFError when the other side is gone."""
    (n,) = _LEN.unpack(_read_exact(stream, _LEN.size))
    if n > MAX_HEADER:
        raise ValueError(f"not a frame: header length {n}")
    msg = json.loads(_read_exact(stream, n))
    if not isinstance(msg, dict):
        raise ValueError(f"not a frame: header is a {type(msg).__name__}")
    arrays = []
    for s in msg.pop("arrays", []):
        if s is None:
            arrays.append(None)
            continue
        if "file" in s:
            arrays.append(_region(s))
            continue
        dtype = dtype_of(s["dtype"])
        if s["nbytes"] != int(np.prod(s["shape"], dtype=np.int64)) * dtype.itemsize:
            raise ValueError(f"not a frame: {s['nbytes']} bytes for shape {s['shape']} of {s['dtype']}")
        arrays.append(_read_array(stream, dtype, s["shape"], s["nbytes"]))
    return msg, arrays


def _read_array(stream, dtype, shape, nbytes):
    """An array of `nbytes` read from `stream` straight into its own memory (readinto: no bytes objects
    joined and copied again; a 128 MB float64 array crosses a pipe in half the CPU, benchmarks/wire.py)."""
    a = np.empty(shape, dtype)
    view, got = memoryview(a.reshape(-1).view(np.uint8)), 0
    while got < nbytes:
        k = stream.readinto(view[got:])
        if not k:
            raise EOFError("stream closed")
        got += k
    return a


def widen_pipes(*streams, size=1 << 20):
    """Ask the kernel for `size`-byte buffers on these pipes (Linux; 64 KB by default): a large result
    crosses in 16x fewer turns of writer and reader. Anything else (not a pipe, not Linux, over the
    user's limit) keeps its buffer."""
    try:
        import fcntl
    except ImportError:  # not a POSIX system
        return
    for s in streams:
        try:
            fcntl.fcntl(s.fileno(), getattr(fcntl, "F_SETPIPE_SZ", 1031), size)
        except (OSError, ValueError, AttributeError):
            pass
