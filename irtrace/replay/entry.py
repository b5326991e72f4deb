"""One entry of BUNDLE.cache/ (irtrace/replay/cache.py): how an answer is kept in a safetensors file and
read back, the same bits. A result that is one of the bundle's values bit for bit (the reference's forward
output is usually the recorded one) is kept as that value's name, and a float64 result whose every element is
a float32 (the oracle's Relu, MaxPool, Reshape and their gradients) in float32: both are read back as they
were. The oracle's float64 result of a call whose reference result is cached too is kept as the int32
difference of their bits (float64's bits minus those of the reference's float32 result, widened): the
reference is within a few float32 ULPs of float64 almost everywhere, and float64's step there is 2^29 times
smaller, so the difference fits 32 bits; the elements where it does not are kept in float64 beside it. Read
back, it is the same bits, from the reference's results as they were when the oracle's was written (a digest
of them is in both entries). An entry is signed under the user's key over its name, metadata and every byte of
its arrays (signer)."""
import hashlib
import json
import os

import numpy as np

from irtrace.envs import trust
from irtrace.replay import backends as registry
from irtrace.store import grad_name, same_bits

REFERENCE_ROLE = registry.reference()
SMALL = 1 << 20  # bytes: a cache entry up to this size is read whole, not memory-mapped


def encode(call, role, answer, values, ref=None):
    """(tensors, the metadata's text, the reference's results' digest or None, how many arrays the entry holds)
    of `role`'s `answer` to `call`: a result the bundle (`values`) holds bit for bit is named, not written again;
    a float64 one whose every element is a float32 is written in float32, or not at all where it is the
    reference's result (a selection, a move: ResNet-50's Relu, MaxPool and their gradients, 0.33x its bundle);
    the oracle's is written as its difference from the reference's result `ref` ((digest, results), where that is
    kept), all read back as they were (decoded)."""
    reply, out = answer.reply, answer.arrays()
    recorded = {str(k): name for k, a in enumerate(out[:len(answer.results)]) if a is not None
                for name in [recorded_name(call, k, a, values)] if name is not None}
    tensors, narrowed, steps_of, apart, same = {}, [], {}, [], []
    for k, a in enumerate(out):
        if a is None or str(k) in recorded:
            continue
        low = narrow(a)
        based = ref is not None and k < min(len(ref[1]), len(answer.results)) and ref[1][k] is not None
        if low is not None and based and same_bits(low, np.asarray(ref[1][k])):
            same.append(k)  # the reference's float32 result, widened: nothing to write
            continue
        steps = delta(a, ref[1][k]) if low is None and based else None
        if low is not None:
            narrowed.append(k)
        elif steps is not None:
            low = steps[0]
            steps_of[str(k)] = None if steps[1] is None else len(out) + len(apart)
            apart += [] if steps[1] is None else [steps[1]]
        # np.array, not np.ascontiguousarray: that makes a 0-d result 1-d
        tensors[str(k)] = np.array(a if low is None else low, order="C")
    tensors.update({str(len(out) + j): r for j, r in enumerate(apart)})
    meta = {"role": role, "status": answer.status.value, "reply": reply, "n": len(out),
            "none": [k for k, a in enumerate(out) if a is None], "recorded": recorded, "narrowed": narrowed}
    if steps_of or same:
        meta.update(delta=steps_of, same=same, base=ref[0], stored=len(out) + len(apart))
    found = digest(answer.results) if role == REFERENCE_ROLE and answer.ok else None
    if found:
        meta["digest"] = found
    return tensors, json.dumps(meta), found, len(out) + len(apart)


def decoded(meta, out, values, base=None):
    """The Answer an entry holds: its arrays as they were put, the recorded values it names read from the
    bundle's `values`, the float64 arrays kept in float32 widened again and those kept as differences
    from `base` (the reference's results) or as the same numbers ("same") computed again; None where a value
    it names is not in the bundle. `out` holds the `n` results and extras, then the elements the differences
    keep apart."""
    from irtrace.replay.execute import answer_of
    out, n = list(out), meta["n"]
    for k, rest in meta.get("delta", {}).items():
        k = int(k)
        out[k] = undelta(out[k], None if rest is None else out[rest], base[k])
    for k in meta.get("same", []):
        out[k] = np.asarray(base[k], np.float32).astype(np.float64)
    out = out[:n]
    for k, name in meta.get("recorded", {}).items():
        if name not in values:
            return None
        out[int(k)] = values[name]
    for k in meta.get("narrowed", []):
        out[k] = out[k].astype(np.float64)
    return answer_of({**meta["reply"], "status": meta["status"]}, out)


STEP_MAX = 2**31 - 1  # |the difference of bits| an int32 holds; -2^31 marks an element kept in float64


def delta(o, base):
    """float64 `o` as (int32 differences of its bits from those of `base`, the float32 result of the same
    call widened, with -2^31 where one does not fit; those elements in float64, or None when there are
    none), or None when `base` is not such a result or half of them or more do not fit (4 bytes each and 8
    for each apart is fewer bytes than float64's 8 each below half: a convolution's outputs near 0 cancel,
    and a quarter of them are apart, 6 bytes an element). Integers wrap modulo 2^64, so bits(base) +
    difference is bits(o) for any two values, NaN and infinities too."""
    base = None if base is None else np.asarray(base)
    if o.dtype != np.float64 or base is None or base.dtype != np.float32 or base.shape != o.shape:
        return None
    # four passes over the elements where a plainer spelling made eight (ResNet-50's oracle sends 1.1 GB of float64
    # in all modes; its replay's differences 0.83 -> 0.53 CPU s, benchmarks/where_cpu_goes.py --baseline): the
    # difference made in the widened base's own memory; |d| <= STEP_MAX tested as one unsigned comparison of
    # d + STEP_MAX (integers wrap: a d beyond int64's range either way comes out above 2 * STEP_MAX)
    d = base.astype(np.float64).view(np.int64)
    # np.asarray(order="C"), not np.ascontiguousarray: that makes a 0-d result 1-d
    np.subtract(np.asarray(o, order="C").view(np.int64), d, out=d)
    step = d.astype(np.int32)
    np.add(d, STEP_MAX, out=d)
    apart = d.view(np.uint64) > 2 * STEP_MAX
    n_out = int(np.count_nonzero(apart))
    if n_out * 2 >= d.size:
        return None
    if n_out:
        step[apart] = -STEP_MAX - 1
    return step, (np.array(o[apart], order="C") if n_out else None)


def digest(results, h=None):
    """A digest of a reference's results (dtype, shape and bytes of each): what the oracle's entry kept as
    differences from them names (its "base"), so that the reference computed again, the same bits, still
    serves it (its entry's signature would not: its reply's timings differ). `h`: the hash, SHA-256 by default:
    1.55 GB/s here (the CPU's SHA instructions); an older irtrace's was blake2b (digest_size 16), 0.77 GB/s. An
    entry kept against a blake2b digest is read against its reference's entry, which names that digest; where
    the reference is computed again, the entry is too."""
    h = hashlib.sha256() if h is None else h
    for a in results:
        if a is None:
            h.update(b"none;")
            continue
        a = np.asarray(a)
        h.update(f"{a.dtype.str} {list(a.shape)};".encode())
        h.update(np.ascontiguousarray(a).reshape(-1).view(np.uint8))
    return h.hexdigest()[:32]


def read_file(path):
    """The bytes of the file at `path`, read with os.open and os.read: pathlib's read_bytes and read_text and a
    buffered open() make twice the system calls, each one a point where the replay's other threads take the
    interpreter (benchmarks/fixed_cost.py). OSError as they raise it."""
    fd = os.open(path, os.O_RDONLY)
    try:
        return b"".join(iter(lambda: os.read(fd, 1 << 24), b""))
    finally:
        os.close(fd)


def read_known(path, seen):
    """(its irtrace metadata, arrays) of the small entry at `path` when its identity is `seen`, the one it had
    when its every byte was verified (ResultCache.seen): one read of the file, and its header parsed without
    safetensors' checks, which a file this user's key signed and nothing changed since passed then (the checks
    and the mapping cost more than the read: benchmarks/fixed_cost.py); None for any other (the slow path
    verifies it). The arrays are views of the bytes read (read-only, as a mapped entry's are)."""
    if seen is None:
        return None
    # os.open and os.read, not open(): a buffered file makes 11 system calls of these 5, each one a point where
    # the replay's other threads take the interpreter (benchmarks/fixed_cost.py)
    fd = os.open(path, os.O_RDONLY)
    try:
        st = os.fstat(fd)
        if st.st_size > SMALL or [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns] != seen:
            return None
        data = os.read(fd, st.st_size)
        if os.fstat(fd).st_ctime_ns != st.st_ctime_ns or len(data) != st.st_size:
            return None  # written while it was read
    finally:
        os.close(fd)
    from irtrace.store.check import NP_DTYPES
    n = int.from_bytes(data[:8], "little")
    header, start, out = json.loads(data[8:8 + n]), 8 + n, {}
    metadata = header.pop("__metadata__", {})
    for name, info in header.items():
        dtype, (b, e) = NP_DTYPES[info["dtype"]], info["data_offsets"]
        out[name] = np.frombuffer(data, dtype, (e - b) // dtype.itemsize, start + b).reshape(info["shape"]) \
            if e > b else np.zeros(info["shape"], dtype)
    meta = json.loads(metadata["irtrace"])
    return meta, [out.get(str(k)) for k in range(stored(meta))]


def stored(meta):
    """How many arrays an entry holds: its `n` results and extras, then the elements kept apart (delta)."""
    return meta.get("stored", meta["n"])


def undelta(step, rest, base):
    """delta's `o` again, from its differences `step`, the elements kept apart `rest` and `base`."""
    out = np.asarray(base, np.float32).astype(np.float64)
    bits = out.view(np.int64)
    with np.errstate(over="ignore"):
        np.add(bits, step, out=bits, casting="unsafe")  # in place: no int64 copy of the differences
    if rest is not None:
        out[step == -STEP_MAX - 1] = rest
    return out


def recorded_name(call, k, a, values):
    """The name of the bundle's value that result k of `call` is bit for bit (its recorded output, in
    fwd; the recorded gradient of its input, in vjp), or None."""
    names = call.spec.outputs if call.mode == "fwd" else call.spec.inputs if call.mode == "vjp" else ()
    if k >= len(names) or not names[k]:
        return None
    name = names[k] if call.mode == "fwd" else grad_name(names[k])
    return name if name in values and same_bits(a, values[name]) else None


def narrow(a):
    """`a` in float32 where it is float64 and every element is a float32 (a selection, a move, a sum of
    what rounds to nothing: Relu, MaxPool, Reshape and their gradients): the same numbers in half the
    bytes, widened again when read; None otherwise. NaN is kept as it was (its payload)."""
    if a.dtype != np.float64:
        return None
    head = a.flat[:64]  # most results are not float32 at their first elements already (flat: no whole copy made)
    with np.errstate(over="ignore", invalid="ignore"):
        if not np.array_equal(head.astype(np.float32), head):
            return None
        low = a.astype(np.float32)
    return low if np.array_equal(low, a) else None


def signer(name, meta, arrays):
    """The HMAC of an answer entry: its file name, its metadata text and each array's dtype, shape and
    bytes (None: no array at that position); None without a key."""
    h = trust.signer("answer", name, meta)
    if h is None:
        return None
    for k, a in enumerate(arrays):
        if a is None:
            h.update(f"{k} none;".encode())
            continue
        a = np.asarray(a)
        h.update(f"{k} {a.dtype.str} {list(a.shape)};".encode())
        h.update(np.ascontiguousarray(a).reshape(-1).view(np.uint8))
    return h
