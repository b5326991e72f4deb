"""Validation of a bundle on open (the store's room; shared/DESIGN.md, "Parts and their rooms").

Every check runs before anything the bundle declares is allocated: the safetensors header is
read only after its length is checked against the file and a limit; every tensor's dtype,
shape and data_offsets are checked against each other, the file and the other tensors (what
safetensors itself checks, and more) before a byte of data is mapped. A failure is an
IrtraceError of one line naming the file and the tensor or field, never a traceback: a bundle
may come from anyone, and a corrupt value must not pass as a recorded one (a zero-length or
overlapping range would otherwise read zeros or another tensor's bytes).
"""
import functools
import json
import keyword
import os
from types import NoneType, UnionType
from typing import Literal, Union, get_args, get_origin, get_type_hints, is_typeddict

import ml_dtypes
import numpy as np

from irtrace.errors import IrtraceError
from irtrace.store.manifest import REQUIRED, Manifest, NonNegativeInt

# safetensors dtype codes <-> numpy (the format's own table)
ST_DTYPES = {
    "F64": np.float64, "F32": np.float32, "F16": np.float16, "I64": np.int64, "I32": np.int32,
    "I16": np.int16, "I8": np.int8, "U8": np.uint8, "U16": np.uint16, "U32": np.uint32,
    "U64": np.uint64, "BOOL": np.bool_, "BF16": ml_dtypes.bfloat16,
}
MAX_HEADER_BYTES = 100_000_000    # safetensors' own limit on the JSON header
MAX_MANIFEST_BYTES = 256_000_000
MAX_NDIM = 64                     # numpy's limit
MAX_JSON_DEPTH = 64
BUDGET_ENV = "IRTRACE_MEMORY_BUDGET"


def quote(name, limit=80):
    """repr of a name from a bundle, one line and bounded, for messages."""
    text = repr(name)
    return text if len(text) <= limit else text[:limit - 4] + "...'"


def memory_budget():
    """Bytes one tensor may declare: $IRTRACE_MEMORY_BUDGET, else the machine's physical memory."""
    text = os.environ.get(BUDGET_ENV)
    if text is not None:
        try:
            value = int(text)
        except ValueError:
            raise IrtraceError(f"${BUDGET_ENV}={quote(text)} is not a number of bytes") from None
        if value <= 0:
            raise IrtraceError(f"${BUDGET_ENV}={value} must be a positive number of bytes")
        return value
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 1 << 40


def _no_nan(text):
    raise ValueError(f"{text} is not a JSON number")


def _unique_keys(pairs):
    seen = dict(pairs)  # made in C; the loop below names a duplicate only where there is one
    if len(seen) != len(pairs):
        keys = set()
        for k, _ in pairs:
            if k in keys:
                raise ValueError(f"duplicate key {quote(k)}")
            keys.add(k)
    return seen


def _depth(value):
    """Nesting depth of parsed JSON, level by level (no recursion on hostile input; each level's
    containers opened by list.extend: a header of thousands of tensors is walked in milliseconds)."""
    depth, level = 0, [value]
    while level:
        depth += 1
        below = []
        for v in level:
            t = type(v)  # json.loads makes dicts and lists, no subclass: one test a value, not two isinstance
            if t is dict:
                below.extend(v.values())
            elif t is list:
                below.extend(v)
        level = below
    return depth


def parse_json(data, where):
    """Strict JSON of `data` (bytes): UTF-8, no NaN/Infinity, no duplicate keys, bounded nesting."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise IrtraceError(f"{where}: not UTF-8 text (byte {e.start}: {data[e.start:e.start + 1]!r})") from None
    try:
        value = json.loads(text, parse_constant=_no_nan, object_pairs_hook=_unique_keys)
    except RecursionError:
        raise IrtraceError(f"{where}: JSON nested too deeply") from None
    except ValueError as e:
        raise IrtraceError(f"{where}: not valid JSON ({quote(str(e), 120)[1:-1]})") from None
    if _depth(value) > MAX_JSON_DEPTH:
        raise IrtraceError(f"{where}: JSON nested deeper than {MAX_JSON_DEPTH} levels")
    return value


def read_header(path):
    """(metadata, {name: (numpy dtype, shape, begin, end)}, data start) of the safetensors file at `path`.

    Checks, in this order and before any allocation: the file holds 8 bytes; the header length fits
    the file and MAX_HEADER_BYTES; the header is a UTF-8 JSON object; __metadata__ maps strings to
    strings; every tensor has a known dtype, a shape of non-negative ints (at most 64 dims), no larger
    than the memory budget, and data_offsets [begin, end] with 0 <= begin <= end <= data size and
    end - begin == prod(shape) * itemsize; the ranges, sorted, tile the data section exactly
    (no overlap, no gap, nothing after the last)."""
    where = str(path)
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            head = f.read(8)
            if len(head) < 8:
                raise IrtraceError(f"{where}: {size} bytes, too short for a safetensors file (8-byte header length)")
            n = int.from_bytes(head, "little")
            if n > MAX_HEADER_BYTES:
                raise IrtraceError(f"{where}: header length {n} is over the {MAX_HEADER_BYTES} byte limit "
                                   f"(the file has {size} bytes); not a safetensors file or corrupt")
            if n > size - 8:
                raise IrtraceError(f"{where}: header length {n} is larger than the file's remaining {size - 8} bytes")
            raw = f.read(n)
    except OSError as e:
        raise IrtraceError(f"{where}: cannot read ({e.strerror})") from None
    header = parse_json(raw, f"{where} header")
    if not isinstance(header, dict):
        raise IrtraceError(f"{where}: header is a JSON {type(header).__name__}, expected an object of tensors")
    metadata = header.pop("__metadata__", None)
    if metadata is None:
        metadata = {}
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise IrtraceError(f"{where}: __metadata__ must map strings to strings")
    data_size = size - 8 - n
    budget = memory_budget()
    entries = {name: _entry(where, name, info, data_size, budget) for name, info in header.items()}
    _check_tiling(where, entries, data_size)
    return metadata, entries, 8 + n


_FIELDS = frozenset(("dtype", "shape", "data_offsets"))
NP_DTYPES = {code: np.dtype(t) for code, t in ST_DTYPES.items()}  # ST_DTYPES' as numpy dtypes, made once


def _entry(where, name, info, data_size, budget):
    # every check as before; a message is made only for the entry it rejects (a bundle's header has an entry per
    # recorded value: 3000 for a 3000-node chain, whose load took 12-20 us a value)
    def at():
        return f"{where}: tensor {quote(name)}"
    if not isinstance(info, dict):
        raise IrtraceError(f"{at()}: entry is a JSON {type(info).__name__}, expected an object "
                           f"with dtype, shape, data_offsets")
    if info.keys() != _FIELDS:
        missing = [k for k in ("dtype", "shape", "data_offsets") if k not in info]
        if missing:
            raise IrtraceError(f"{at()}: missing {', '.join(missing)}")
        raise IrtraceError(f"{at()}: unknown field {quote(sorted(set(info) - _FIELDS)[0])}")
    code = info["dtype"]
    dtype = NP_DTYPES.get(code) if isinstance(code, str) else None
    if dtype is None:
        raise IrtraceError(f"{at()}: dtype {quote(code)} is not supported (supported: {', '.join(sorted(ST_DTYPES))})")
    shape = info["shape"]
    # type() is int: JSON's integers are ints, and a bool (true) is not one
    if type(shape) is not list or len(shape) > MAX_NDIM or not all(type(d) is int and d >= 0 for d in shape):
        raise IrtraceError(f"{at()}: shape {quote(shape)} is not a list of at most {MAX_NDIM} non-negative integers")
    offsets = info["data_offsets"]
    if type(offsets) is not list or len(offsets) != 2 or not all(type(o) is int for o in offsets):
        raise IrtraceError(f"{at()}: data_offsets {quote(offsets)} is not a pair of integers [begin, end]")
    begin, end = offsets
    if not 0 <= begin <= end <= data_size:
        raise IrtraceError(f"{at()}: data_offsets [{begin}, {end}] outside the data section of {data_size} bytes "
                           f"(need 0 <= begin <= end <= {data_size})")
    count = 1
    for d in shape:
        count *= d
    nbytes = count * dtype.itemsize
    if nbytes > budget:
        raise IrtraceError(f"{at()}: {code} {shape} declares {nbytes} bytes, over the memory budget of {budget} "
                           f"(set ${BUDGET_ENV} to raise it)")
    if end - begin != nbytes:
        raise IrtraceError(f"{at()}: {code} {shape} needs {nbytes} bytes but data_offsets [{begin}, {end}] "
                           f"hold {end - begin}")
    return dtype, tuple(shape), begin, end


def _check_tiling(where, entries, data_size):
    """The ranges, sorted, must cover [0, data_size) exactly. Overlaps are named first (one value
    would read another's bytes), then gaps and a tail (bytes no value owns)."""
    ranges = sorted(((begin, end, name) for name, (_, _, begin, end) in entries.items()))
    reach, owner = 0, None  # the furthest end so far, and whose
    for begin, end, name in ranges:
        if begin < reach:
            raise IrtraceError(f"{where}: tensors {quote(owner)} and {quote(name)} overlap "
                               f"(bytes [{begin}, {min(end, reach)}) of the data section)")
        if end > reach or owner is None:
            reach, owner = end, name
    pos = 0
    for begin, end, name in ranges:
        if begin > pos:
            raise IrtraceError(f"{where}: bytes [{pos}, {begin}) of the data section belong to no tensor "
                               f"(before {quote(name)})")
        pos = max(pos, end)
    if pos != data_size:
        raise IrtraceError(f"{where}: bytes [{pos}, {data_size}) at the end of the data section belong to no tensor")


def check_manifest(where, m):
    """Every field of the manifest (`m`, a JSON object) against its schema, irtrace.store.manifest.Manifest:
    the required ones present, each of its type. The first wrong one is named, with its path, what it
    must be and what it is."""
    absent = [k for k in REQUIRED if k not in m]
    if absent:
        raise IrtraceError(f"{where}: missing keys {', '.join(absent)}")
    wrong = _wrong("", m, Manifest)
    if wrong:
        raise IrtraceError(f"{where}: {wrong}")


def _wrong(path, value, kind):
    """What is wrong with `value` at `path` for the schema type `kind` (a type of irtrace.store.manifest), or
    None. A record (TypedDict) names its first wrong field; one that is required is named together
    with what the record must be. A list or an object of records names the entry. Anything else is
    named as a whole (a list of strings with a number in it is not a list of strings)."""
    if is_typeddict(kind):
        if not isinstance(value, dict):
            return _must(path, kind, value)
        for key, sub in _fields(kind).items():
            required = key in kind.__required_keys__
            if key not in value:
                if required:
                    return _must(path, kind, value)
                continue
            wrong = _wrong(f"{path}.{key}" if path else key, value[key], sub)
            if wrong:
                return f"field {path} must be {_want(kind)}; {wrong}" if required and path else wrong
        return None
    origin, args = get_origin(kind), get_args(kind)
    if origin in (list, dict) and is_typeddict(args[-1]):
        if not isinstance(value, origin):
            return _must(path, kind, value)
        entries = enumerate(value) if origin is list else ((quote(k), v) for k, v in value.items())
        return next((w for k, v in entries if (w := _wrong(f"{path}[{k}]", v, args[-1]))), None)
    return None if _holds(value, kind) else _must(path, kind, value)


def _holds(value, kind):
    """Whether `value` (parsed JSON) is of the schema type `kind`, which holds no record."""
    origin, args = get_origin(kind), get_args(kind)
    if kind in _SCALARS:
        return _SCALARS[kind][0](value)
    if origin is Literal:
        return any(type(value) is type(a) and value == a for a in args)
    if origin in (Union, UnionType):
        return any(value is None if a is NoneType else _holds(value, a) for a in args)
    if origin is list:
        return isinstance(value, list) and all(_holds(v, args[0]) for v in value)
    if origin is dict:
        return isinstance(value, dict) and all(_holds(v, args[1]) for v in value.values())
    raise TypeError(f"irtrace.store.manifest uses a type the checker does not know: {kind!r}")


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


# schema type -> (test, what a value must be, what values must be)
_SCALARS = {
    str: (lambda v: isinstance(v, str), "a string", "strings"),
    bool: (lambda v: isinstance(v, bool), "a boolean", "booleans"),
    int: (_is_int, "an integer", "integers"),
    NonNegativeInt: (lambda v: _is_int(v) and v >= 0, "a non-negative integer", "non-negative integers"),
    float: (lambda v: isinstance(v, (int, float)) and not isinstance(v, bool), "a number", "numbers"),
    dict: (lambda v: isinstance(v, dict), "an object", "objects"),
}


def _want(kind, plural=False):
    """What a value of the schema type `kind` must be, in words: 'a list of strings'."""
    origin, args = get_origin(kind), get_args(kind)
    if kind in _SCALARS:
        return _SCALARS[kind][2 if plural else 1]
    if is_typeddict(kind):
        if plural:
            return "objects"
        required = [f"{_want(sub)} {key!r}" for key, sub in _fields(kind).items() if key in kind.__required_keys__]
        return "an object" + (" with " + _and(required) if required else "")
    if origin is Literal:
        return " or ".join(repr(a) for a in args)
    if origin in (Union, UnionType):
        return " or ".join("null" if a is NoneType else _want(a, plural) for a in args)
    if origin is list:
        return ("lists" if plural else "a list") + " of " + _want(args[0], plural=True)
    if origin is dict:
        return ("objects" if plural else "an object") + " of " + _want(args[1], plural=True)
    raise TypeError(f"irtrace.store.manifest uses a type the checker does not know: {kind!r}")


def _must(path, kind, value):
    return f"field {path} must be {_want(kind)}, got {quote(value, 60)}"


def _and(words):
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


@functools.cache
def _fields(record):
    """Key -> schema type of a TypedDict, in declaration order, NotRequired taken off."""
    return get_type_hints(record)


def check_values(where, manifest, values):
    """Manifest inputs and outputs are recorded in the values file, with the declared dtype and shape."""
    for spec in manifest["inputs"]:
        if spec["name"] not in values:
            raise IrtraceError(f"{where}: input {quote(spec['name'])} of manifest.json has no recorded value")
        dtype, shape = values.spec(spec["name"])
        if str(dtype) != spec["dtype"] or list(shape) != spec["shape"]:
            raise IrtraceError(f"{where}: input {quote(spec['name'])} is {dtype}{list(shape)} but manifest.json "
                               f"declares {quote(spec['dtype'])}{spec['shape']}")
    for name in manifest["outputs"]:
        if name not in values:
            raise IrtraceError(f"{where}: output {quote(name)} of manifest.json has no recorded value")


def parse_graph(path, data, values=None):
    """The onnx.ModelProto in `data` (bytes of graph.onnx), checked: it decodes, every string in it is
    UTF-8, node names are present and unique, and no tensor keeps its data outside the file except a
    graph initializer stored in the bundle's value store `values` (check_external). External data is
    never read: such an initializer stays without data in the model, the value store serves it."""
    import onnx
    from google.protobuf.message import DecodeError
    where = str(path)
    try:
        model = onnx.load_model_from_string(data)
    except (DecodeError, RuntimeError, ValueError) as e:
        raise IrtraceError(f"{where}: not an ONNX model ({quote(str(e), 120)[1:-1]})") from None
    if not model.HasField("graph"):
        raise IrtraceError(f"{where}: the ONNX model has no graph")
    try:
        _check_message(where, model, "model", values)
    except RecursionError:
        raise IrtraceError(f"{where}: subgraphs nested too deeply") from None
    check_opsets(where, model)
    seen = set()
    for i, n in enumerate(model.graph.node):
        if not n.name:
            raise IrtraceError(f"{where}: node {i} ({n.op_type}) has no name; bundles name every node")
        if n.name in seen:
            raise IrtraceError(f"{where}: two nodes are named {quote(n.name)}; bundles name every node uniquely")
        seen.add(n.name)
        for a in n.attribute:
            # a repro script passes attributes by name: a name that is not an identifier is not ONNX's
            if not a.name.isidentifier() or keyword.iskeyword(a.name):
                raise IrtraceError(f"{where}: node {quote(n.name)} ({quote(n.op_type)}) has an attribute named "
                                   f"{quote(a.name)}, not an identifier; ONNX attribute names are identifiers")
    return model


def check_opsets(where, model):
    """The default ONNX domain's opset is one this onnx knows: a newer one names ops and semantics no
    backend can be trusted to read (the graph is from a newer exporter)."""
    import onnx
    newest = onnx.defs.onnx_opset_version()
    for o in model.opset_import:
        if o.domain in ("", "ai.onnx") and o.version > newest:
            raise IrtraceError(f"{where}: opset {o.version} of the ONNX domain is newer than this onnx "
                               f"({onnx.__version__}) knows (up to {newest}); re-export it at opset {newest} or "
                               f"below, or update onnx")
        if o.version < 1:
            raise IrtraceError(f"{where}: opset {o.version} of domain {quote(o.domain)} is not a version")


def check_claims(where, manifest, model):
    """The manifest's claims about the graph (docs/bundle.md): `parameters` name graph initializers and
    `buffers` initializers or graph inputs that stand for buffers (an op case's running statistics);
    `differentiable` names graph inputs or initializers, and holds every float graph input that is not a
    buffer and every parameter (what the model differentiates: a gradient not on a path from one of them
    is not judged, so a list that drops a weight would silently stop judging its gradients)."""
    from irtrace.ir.graph import gradient_sources
    inits = {t.name: t for t in model.graph.initializer}
    inputs = {i.name for i in model.graph.input}
    for name in manifest.get("parameters") or []:
        if name not in inits:
            raise IrtraceError(f"{where}: parameters names {quote(name)}, which is not an initializer of graph.onnx")
    for name in manifest.get("buffers") or []:
        if name not in inits and name not in inputs:
            raise IrtraceError(f"{where}: buffers names {quote(name)}, which is not an input or an initializer "
                               f"of graph.onnx")
    declared = manifest.get("differentiable")
    if declared is None:
        return
    for name in declared:
        if name not in inits and name not in inputs:
            raise IrtraceError(f"{where}: differentiable names {quote(name)}, which is not an input or an "
                               f"initializer of graph.onnx")
    params = manifest.get("parameters")
    needed = gradient_sources(model, params if params is not None else [])
    missing = sorted(needed - set(declared) - set(manifest.get("buffers") or []))
    if missing:
        what = "parameter" if params is not None and missing[0] in params else "float graph input"
        raise IrtraceError(f"{where}: differentiable omits the {what} {quote(missing[0])}"
                           + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else "") +
                           "; the model differentiates every parameter and float input, and their gradients "
                           "would go unjudged")


EXTERNAL_KEYS = ("location", "offset", "length")


def check_external(where, t, at, values):
    """Initializer `t`, stored as ONNX external data, refers to exactly the bytes of the value of its
    own name in the value store `values` (store.LazyValues, its header already checked): location
    "values.safetensors", decimal offset and length equal to that value's, the dtype and shape the
    tensor declares equal to the value's, no data of its own. Anything else is refused: a bundle reads
    no other file, and a weight never reads another value's bytes."""
    from onnx import TensorProto
    from onnx.helper import tensor_dtype_to_np_dtype
    at = f"{where}: tensor {quote(t.name)} at {at}"
    entries = {}
    for e in t.external_data:
        if e.key not in EXTERNAL_KEYS or e.key in entries:
            raise IrtraceError(f"{at}: external data key {quote(e.key)} " +
                               ("twice" if e.key in entries else f"is not one of {', '.join(EXTERNAL_KEYS)}"))
        entries[e.key] = e.value
    location = entries.get("location")
    if values is None:
        raise IrtraceError(f"{at} keeps its data outside the file (external data {quote(location)}) and no "
                           f"value store was given to read it from")
    store = values.path.name
    if t.data_location != TensorProto.EXTERNAL:
        raise IrtraceError(f"{at}: has external_data entries but data_location is not EXTERNAL")
    if location != store:
        raise IrtraceError(f"{at}: external data location {quote(location)}; a bundle's graph may only refer "
                           f"to {store!r} beside it")
    missing = [k for k in EXTERNAL_KEYS if k not in entries]
    if missing:
        raise IrtraceError(f"{at}: external data without {', '.join(missing)}")
    if t.HasField("raw_data") or any(len(getattr(t, f)) for f in (
            "float_data", "int32_data", "string_data", "int64_data", "double_data", "uint64_data")):
        raise IrtraceError(f"{at}: holds data of its own and external data; one of them must go")
    offset, length = entries["offset"], entries["length"]
    for k, v in (("offset", offset), ("length", length)):
        if not (0 < len(v) <= 20 and v.isascii() and v.isdigit()):
            raise IrtraceError(f"{at}: external data {k} {quote(v)} is not a non-negative integer")
    if t.name not in values:
        raise IrtraceError(f"{at}: external data in {store}, which holds no value {quote(t.name)}")
    dtype, shape = values.spec(t.name)
    try:
        declared = np.dtype(tensor_dtype_to_np_dtype(t.data_type))
    except (KeyError, TypeError, ValueError):
        declared = None
    if declared != dtype or tuple(t.dims) != shape:
        declared_text = declared if declared is not None else f"data_type {t.data_type}"
        raise IrtraceError(f"{at}: declares {declared_text}{list(t.dims)} but {store} holds "
                           f"{dtype}{list(shape)} under that name")
    want = values.extent(t.name)
    if (int(offset), int(length)) != want:
        raise IrtraceError(f"{at}: external data offset {offset}, length {length}, but the value "
                           f"{quote(t.name)} is at offset {want[0]}, length {want[1]} of {store}")


def _check_message(where, msg, at, values=None, external_ok=False):
    """Walk string, bytes-attribute and message fields only (never copying tensor data). External
    data is accepted only on the main graph's initializers (`external_ok`), checked against `values`.
    `at`: where `msg` is, "model" or (its parent's at, field name, index or None, msg): its text (_path) is made
    only for a message that fails (a graph of 3000 nodes has 18,000 messages)."""
    FD, AttributeProto, GraphProto, ModelProto, TensorProto = _protos()
    if isinstance(msg, TensorProto) and (msg.data_location == TensorProto.EXTERNAL or len(msg.external_data)):
        if not external_ok:
            location = next((e.value for e in msg.external_data if e.key == "location"), "?")
            raise IrtraceError(f"{where}: tensor {quote(msg.name)} at {_path(at)} keeps its data outside the file "
                               f"(external data {quote(location)}); only the graph's initializers may be "
                               f"stored in values.safetensors")
        check_external(where, msg, _path(at), values)
    for fd, values_ in msg.ListFields():  # the fields set (an unset one is empty: nothing to check)
        kind, repeated = _field(fd)
        if kind == FD.TYPE_STRING:
            for v in (values_ if repeated else [values_]):
                if not isinstance(v, str):
                    raise IrtraceError(f"{where}: {_path(at)}.{fd.name} {quote(v)} is not UTF-8")
        elif kind == FD.TYPE_BYTES and isinstance(msg, AttributeProto) and fd.name in ("s", "strings"):
            for v in (values_ if repeated else [values_]):
                try:
                    v.decode("utf-8")
                except UnicodeDecodeError:
                    raise IrtraceError(f"{where}: attribute {quote(msg.name)} at {_path(at)} holds {quote(v)}, "
                                       f"not UTF-8") from None
        elif kind == FD.TYPE_MESSAGE:
            # the main graph (model.graph), and its initializers: the only tensors external data may hold
            main = (isinstance(msg, ModelProto) and fd.name == "graph") or \
                   (external_ok and isinstance(msg, GraphProto) and fd.name == "initializer")
            if repeated:
                for k, sub in enumerate(values_):
                    _check_message(where, sub, (at, fd.name, k, sub), values, main)
            else:
                _check_message(where, values_, (at, fd.name, None, values_), values, main)


def _path(at):
    """The text of _check_message's `at`: model.graph.node['n0'].attribute['axis'] (a repeated message by its
    name where it has one, else by its index)."""
    steps = []
    while isinstance(at, tuple):
        at, name, k, sub = at
        if k is None:
            steps.append(f".{name}")
        else:
            named = getattr(sub, "name", "")
            steps.append(f".{name}[{quote(named)}]" if named and isinstance(named, str) else f".{name}[{k}]")
    return at + "".join(reversed(steps))


@functools.cache
def _field(fd):
    """(its type, whether it is repeated) of a field descriptor, asked once per field of the schema."""
    return fd.type, (fd.is_repeated if hasattr(fd, "is_repeated") else fd.label == fd.LABEL_REPEATED)


@functools.cache
def _protos():
    """(FieldDescriptor, AttributeProto, GraphProto, ModelProto, TensorProto): imported once, not per message."""
    from google.protobuf.descriptor import FieldDescriptor
    from onnx import AttributeProto, GraphProto, ModelProto, TensorProto
    return FieldDescriptor, AttributeProto, GraphProto, ModelProto, TensorProto
