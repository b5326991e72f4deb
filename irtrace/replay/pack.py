"""BUNDLE.cache/<key>.pack: the small answers of BUNDLE.cache/ in one file, read once per replay.

A replay reads the reference's and the oracle's answer of every node: two files a node, each opened,
checked and its two JSON headers parsed, 70-90 us each here, most of what a cached replay spends on a
one-element node (benchmarks/fixed_cost.py). The pack holds the answers of up to PACKED_MAX bytes that
a replay used, parsed: one read and one JSON header at a replay's first answer, then a dict lookup per
answer.

The entries stay where they are, and they decide: the pack serves an entry only when its file has, as the
replay reads the pack, the identity (device, inode, size, modification and change time) it had when it was
packed (ResultCache._packed_entries), which is an
identity whose every byte was verified (ResultCache.seen). An entry computed again, trimmed, or touched is
read from its file, or computed, as without the pack. The pack is signed under this user's key over its
name and header, and the header holds the SHA-256 of its data: one that does not verify is not read.

Layout: the signature (64 hex characters) and a newline, the header's length (8 bytes, little-endian), the
header (JSON: "data", the data's SHA-256; "entries", name -> [identity, the entry's irtrace metadata, its
arrays as [safetensors' dtype, shape, offset] or null]), then the arrays' bytes, each at an 8-aligned offset."""
import hashlib
import json
import logging
import os

import numpy as np

from irtrace.envs import trust
from irtrace.replay.entry import read_file

log = logging.getLogger(__name__)
PACKED_MAX = 64 << 10  # bytes: an entry up to this size is packed
PACK_MAX = 64 << 20    # bytes of arrays a pack holds at most (a model with very many small answers: the first)
_SIG = 64              # hex characters of an HMAC-SHA256


def read(path):
    """name -> (identity, metadata, arrays) of the pack at `path`: {} when there is none, or it does not
    verify (logged). The arrays are read-only views of the bytes read, as a small entry's are."""
    try:
        data = read_file(path)
    except FileNotFoundError:
        return {}
    except OSError as e:
        log.info("%s: cannot read the pack (%s)", path, e)
        return {}
    try:
        sig, n = data[:_SIG].decode(), int.from_bytes(data[_SIG + 1:_SIG + 9], "little")
        header = data[_SIG + 9:_SIG + 9 + n]
        if data[_SIG:_SIG + 1] != b"\n" or not trust.verify(sig, "cache pack", os.path.basename(path), header):
            raise ValueError("not signed by this user's key")
        body = memoryview(data)[_SIG + 9 + n:]
        head = json.loads(header)
        if hashlib.sha256(body).hexdigest() != head["data"]:
            raise ValueError("its data is not what its header says")
        return {name: (identity, meta, [None if a is None else _view(data, _SIG + 9 + n, a) for a in arrays])
                for name, (identity, meta, arrays) in head["entries"].items()}
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as e:
        log.info("%s: not read (%s)", path, e)
        return {}


def _view(data, start, spec):
    from irtrace.store.check import NP_DTYPES
    code, shape, offset = spec
    dtype = NP_DTYPES[code]
    count = int(np.prod(shape, dtype=np.int64))
    return np.frombuffer(data, dtype, count, start + offset).reshape(shape) if count else np.zeros(shape, dtype)


def write(path, entries, write_file):
    """Pack `entries` (name -> (identity, metadata, arrays)) at `path` through `write_file(path, writer)`
    (ResultCache._write: a temporary file renamed); the first ones up to PACK_MAX bytes of arrays."""
    from irtrace.store.writer import dtype_code
    packed, blobs, offset = {}, [], 0
    for name, (identity, meta, arrays) in entries.items():
        specs, size = [], sum(a.nbytes + 8 for a in arrays if a is not None)
        if offset + size > PACK_MAX:
            break
        for a in arrays:
            if a is None:
                specs.append(None)
                continue
            a = np.asarray(a, order="C")  # not np.ascontiguousarray: that makes a 0-d array 1-d
            specs.append([dtype_code(a.dtype), list(a.shape), offset])
            blobs.append(a.reshape(-1).view(np.uint8).data)
            pad = -a.nbytes % 8
            blobs.append(b"\0" * pad)
            offset += a.nbytes + pad
        packed[name] = [identity, meta, specs]
    body = b"".join(blobs)
    header = json.dumps({"data": hashlib.sha256(body).hexdigest(), "entries": packed}).encode()
    sig = trust.sign("cache pack", os.path.basename(path), header)
    if sig is None:
        return False

    def out(tmp):
        with open(tmp, "wb") as f:
            f.write(f"{sig}\n".encode() + len(header).to_bytes(8, "little") + header)
            f.write(body)
    return write_file(path, out)
