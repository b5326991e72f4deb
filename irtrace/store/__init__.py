"""The bundle on disk: a folder NAME.irt/ with graph.onnx, values.safetensors, manifest.json.

Nothing in a bundle is pickled. Values are read lazily: opening a bundle maps
values.safetensors into memory and reads only the header; a tensor is a view
into the map until someone copies it.
"""
import functools
import glob
import hashlib
import json
import mmap
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from irtrace.store import manifest as manifest_schema
from irtrace.store import check as store_check
from irtrace.errors import IrtraceError, suggest
from irtrace.store.manifest import SCHEMA, Manifest
from irtrace.store.writer import ValueWriter, write_values  # noqa: F401 - ValueWriter: the streamed export's

GRAPH, VALUES, MANIFEST = "graph.onnx", "values.safetensors", "manifest.json"
# How values are named in the bundle (docs/bundle.md): recording writes these, replay and repro read them.
GRAD_PREFIX = "grad/"   # grad/<value>: the cotangent of <value> under the bundle's loss
SEED_PREFIX = "loss/"   # loss/<output>: the output seed c_o of the loss
U_PREFIX = "u/"         # u/<value>: the seeded double-backward direction for the cotangent of <value>


def grad_name(value):
    """Name of the cotangent of `value` in the bundle."""
    return GRAD_PREFIX + value


def u_name(value):
    """Name of the seeded double-backward direction u for the cotangent of `value`."""
    return U_PREFIX + value


def seed_name(output):
    """Name of the loss's seed c_o for graph output `output`."""
    return SEED_PREFIX + output


# A float initializer of more than this many bytes is stored once, in values.safetensors, and
# graph.onnx refers to it as ONNX external data. Smaller ones (scalars, biases of a few channels) stay
# inline: the external_data entries (location, offset, length) take about as many bytes as they would
# save, and a reader of graph.onnx alone (Netron) sees their values.
EXTERNAL_MIN_BYTES = 64
# Only float tensors read as data by the ops that consume them go out (weights, buffers, recorded
# random draws). Integer and bool initializers (shapes, pads, axes, indices, dropout masks) and any
# initializer read at an input the op's schema marks NonDifferentiable (Reshape's shape, Pad's pads,
# Resize's scales) stay inline: shape inference reads those values when a model is loaded, and
# onnxruntime refuses external ones there ("Cannot parse data from external tensors", e.g. for
# StyleGAN2's Pad). Shape's, Size's and CastLike's such inputs are read for their shape or type
# only (every weight of a torch export feeds a Shape): they do not keep a weight inline.
_EXTERNAL_TYPES = {1, 10, 11, 16}  # FLOAT, FLOAT16, DOUBLE, BFLOAT16
_READ_NO_DATA = {"Shape", "Size", "CastLike"}  # NonDifferentiable inputs they read for shape or type only


def same_bits(a, b):
    """Whether arrays `a` and `b` have the same dtype, shape and bytes (NaN payloads and -0.0 included). A large
    one is compared as 8- or 4-byte words (not one byte at a time), its first few first: a replay's cache asks
    it of every result, and most differ at once."""
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    x, y = np.ascontiguousarray(a).reshape(-1).view(np.uint8), np.ascontiguousarray(b).reshape(-1).view(np.uint8)
    if x.nbytes >= _WORDS_FROM:
        word = np.uint64 if x.nbytes % 8 == 0 else np.uint32 if x.nbytes % 4 == 0 else np.uint8
        x, y = x.view(word), y.view(word)
        if not np.array_equal(x[:64], y[:64]):
            return False
    return bool(np.array_equal(x, y))


_WORDS_FROM = 1 << 16  # bytes: below, the views and the first few's test cost more than the bytes' compare


def initializer_array(tensor, values):
    """The array of initializer `tensor` (an onnx.TensorProto) of a bundle's graph whose value store is
    `values`: a view into the value store when graph.onnx refers to it as external data (validated on
    open: same name, dtype, shape and bytes), else decoded from the proto."""
    from onnx import numpy_helper
    from onnx.external_data_helper import uses_external_data
    if uses_external_data(tensor):
        if values is None:
            raise ValueError(f"initializer {tensor.name!r} is stored in values.safetensors: pass the bundle's values")
        return values[tensor.name]
    return numpy_helper.to_array(tensor)


def initializers(model, values=None):
    """{name: array} of the graph's initializers (weights, by state_dict key). `values`: the value store
    of the bundle `model` was read from (bundle.values), which holds its external initializers; None
    for a model in memory (export), whose initializers all hold their data."""
    return {t.name: initializer_array(t, values) for t in model.graph.initializer}


def _externalize(model, values):
    """A copy of `model` whose float initializers that are also in the written value store `values`
    (LazyValues; the same dtype, shape and bytes, more than EXTERNAL_MIN_BYTES, not read by shape
    inference) refer to it as ONNX external data instead of holding their bytes, at the offsets the
    store was written with. An initializer that already refers to external data (a streamed export's
    weights, which it never copied into the graph) is the store's value of that name: it gets the
    store's offsets, or its bytes inline where shape inference reads it. onnx.load, onnx.checker,
    Netron and onnxruntime read graph.onnx with its weights; irtrace reads them from the value store."""
    import onnx
    from onnx import numpy_helper
    from onnx.external_data_helper import set_external_data
    from onnx.helper import tensor_dtype_to_np_dtype
    from irtrace.ir.semantics import nondifferentiable_inputs
    opsets = {o.domain: o.version for o in model.opset_import}
    read_by_inference = set()
    for n in model.graph.node:
        if n.op_type in _READ_NO_DATA and n.domain in ("", "ai.onnx"):
            continue
        passive = nondifferentiable_inputs(n.op_type, n.domain, opsets.get(n.domain, opsets.get("", 1)), len(n.input))
        read_by_inference.update(i for k, i in enumerate(n.input) if k in passive)
    out = onnx.ModelProto()
    out.CopyFrom(model)
    for t in out.graph.initializer:
        external = t.data_location == onnx.TensorProto.EXTERNAL
        if t.name not in values:
            if external:
                raise ValueError(f"initializer {t.name!r} refers to external data that is not in the value store")
            continue
        dtype, shape = values.spec(t.name)
        try:
            same_spec = np.dtype(tensor_dtype_to_np_dtype(t.data_type)) == dtype and tuple(t.dims) == shape
        except (KeyError, TypeError, ValueError):  # a type numpy has no dtype for (bfloat16, string...)
            same_spec = False
        offset, length = values.extent(t.name)
        if external:
            if not same_spec:
                raise ValueError(f"initializer {t.name!r} is {t.dims} of type {t.data_type}, the value store's "
                                 f"{dtype} {shape}")
            del t.external_data[:]
            if t.name in read_by_inference or length <= EXTERNAL_MIN_BYTES:
                t.data_location = onnx.TensorProto.DEFAULT
                t.raw_data = np.ascontiguousarray(values[t.name]).tobytes()
            else:  # (set_external_data wants the bytes in raw_data first)
                for key, value in (("location", VALUES), ("offset", offset), ("length", length)):
                    entry = t.external_data.add()
                    entry.key, entry.value = key, str(value)
            continue
        if t.data_type not in _EXTERNAL_TYPES or t.name in read_by_inference or not same_spec \
                or length <= EXTERNAL_MIN_BYTES:
            continue
        array = numpy_helper.to_array(t)
        if not same_bits(np.asarray(values[t.name]), array):
            continue  # the recorded value is not the initializer, bit for bit: it keeps its own copy
        if not t.HasField("raw_data"):  # typed fields (float_data...): set_external_data needs raw_data
            t.CopyFrom(numpy_helper.from_array(array, t.name))
        set_external_data(t, location=VALUES, offset=offset, length=length)
        t.ClearField("raw_data")
    return out


RELEASED = 1 << 20  # bytes of views handed out before LazyValues.release gives their pages back


class LazyValues:
    """Read-only mapping name -> np.ndarray over a safetensors file, memory-mapped.

    safetensors' own `get_tensor` returns a copy; a replay reads each tensor many
    times, so this maps the data section once and hands out views at the header's
    offsets (8-byte little-endian header length, JSON header, raw buffer).
    """

    def __init__(self, path):
        self.path = Path(path)
        # validated completely (store_check.read_header) before anything is mapped or allocated
        self.metadata, self._header, self._start = store_check.read_header(self.path)
        self._map = self._plain = None
        self._given = 0  # bytes of the views handed out since the last release

    def _mm(self):
        if self._map is None:
            size = os.path.getsize(self.path)
            self._map = np.memmap(self.path, dtype=np.uint8, mode="r") if size > self._start else np.zeros(0, np.uint8)
            # views handed out are plain ndarrays over the map (np.memmap runs a Python __array_finalize__
            # for every view and slice made of it: 13 us each, thousands per replay); wire.file_region
            # still finds the file through their base
            self._plain = self._map.view(np.ndarray)
        return self._plain

    def release(self):
        """Let the pages read so far leave this process's resident memory: they are the file's, clean,
        and stay in the page cache; a view handed out before reads them again from there. Called after
        each node of a replay, so its resident memory does not grow with the depth of the model: once views of
        RELEASED bytes or more were handed out since the last time (madvise takes 5-8 us even when the
        pages are few, a fortieth of a one-element node's replay)."""
        if self._given < RELEASED:
            return
        self._given = 0
        if self._map is not None and self._map.size:
            try:
                self._map._mmap.madvise(mmap.MADV_DONTNEED)
            except (AttributeError, OSError, ValueError):
                pass  # a platform without madvise: the pages stay, as before

    def __contains__(self, name):
        return name in self._header

    def __iter__(self):
        return iter(self._header)

    def __len__(self):
        return len(self._header)

    def keys(self):
        return self._header.keys()

    def spec(self, name):
        """(numpy dtype, shape) of `name` without reading it."""
        dtype, shape, _, _ = self._entry(name)
        return dtype, shape

    def extent(self, name):
        """(offset, length) of `name`'s bytes in the file: offset from the file's first byte, as ONNX
        external data counts it."""
        _, _, begin, end = self._entry(name)
        return self._start + begin, end - begin

    def _entry(self, name):
        try:
            return self._header[name]
        except KeyError:
            raise IrtraceError(f"value {name!r} is not in {self.path}.{suggest(name, self._header)}") from None

    def __getitem__(self, name):
        dtype, shape, b, e = self._entry(name)
        if e == b:  # only an empty tensor: read_header checked end - begin == prod(shape) * itemsize
            return np.zeros(shape, dtype)
        self._given += e - b
        return self._mm()[self._start + b:self._start + e].view(dtype).reshape(shape)

    def get(self, name, default=None):
        return self[name] if name in self._header else default


@dataclass
class Bundle:
    """An opened bundle: the canonical graph, the manifest, lazily read values."""
    path: Path
    manifest: Manifest
    values: LazyValues
    _model: object = field(default=None, repr=False)

    @property
    def model(self):
        """The canonical graph as an onnx.ModelProto (parsed and checked by `load`, else on first use)."""
        if self._model is None:
            self._model = _read_graph(self.path / GRAPH, self.values)
        return self._model

    @functools.cached_property
    def specs(self):
        """The model's NodeSpecs (irtrace.ir.spec.node_specs), in graph order: decoded once per opened bundle. A
        replay's plan, its workaround search and its report's findings each walked them, 10 us a node each
        (benchmarks/fixed_cost.py)."""
        from irtrace.ir.spec import node_specs
        return tuple(node_specs(self.model))

    @property
    def state(self):
        """Names of the model's parameters and buffers (the manifest's lists; empty for foreign ONNX)."""
        return set(self.manifest.get("parameters", [])) | set(self.manifest.get("buffers", []))

    def node_source(self, node_name):
        return self.manifest["nodes"].get(node_name, {})

    @functools.cached_property
    def content_key(self):
        """The bundle's identity for what is computed from it (a journal, the reference cache): a SHA-256
        of its manifest, its graph and every byte of its value store (values_digest). Read once per
        opened bundle."""
        h = hashlib.sha256()
        for name in (MANIFEST, GRAPH):
            data = (Path(self.path) / name).read_bytes()
            h.update(len(data).to_bytes(8, "little"))
            h.update(data)
        h.update(values_digest(Path(self.path) / VALUES).encode())
        return h.hexdigest()


DIGESTS = "digests"      # the user's cache folder: the value stores' remembered digests
_SETTLED_NS = 2 * 10**9  # a file changed this recently is hashed again next time (see values_digest)


def values_digest(path):
    """SHA-256 (hex) of every byte of the file at `path` (a value store: 538 MB for ResNet-50, so
    hashing it is worth remembering). Remembered, signed with the user's key (irtrace/envs/trust.py), in the user's cache folder
    under the file's identity: device, inode, size, modification time and change time. Any write to the
    file, and any os.utime that puts its modification time back (cp -p, tar x), sets its change time to
    the clock's now, which no user can choose: an edited file is hashed again. A file changed less than
    2 s before it is hashed is not remembered (a write in the same clock tick would keep its identity)."""
    import time
    from irtrace.envs import trust
    path = Path(os.path.abspath(path))

    def identity():
        st = os.stat(path)
        return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]
    before = identity()
    memo = trust.cache_root() / DIGESTS / (hashlib.sha256(os.fsencode(path)).hexdigest()[:40] + ".json")
    try:
        saved = json.loads(memo.read_text())
        if saved["identity"] == before and trust.verify(saved["sig"], "values digest", str(path),
                                                        json.dumps(before), saved["sha256"]):
            return saved["sha256"]
    except (OSError, ValueError, KeyError, TypeError):
        pass
    h = hashlib.sha256()
    buf = bytearray(8 << 20)
    view = memoryview(buf)
    with open(path, "rb", buffering=0) as f:
        while True:
            n = f.readinto(buf)
            if not n:
                break
            h.update(view[:n])
    digest = h.hexdigest()
    settled = time.time_ns() - max(before[3], before[4]) > _SETTLED_NS
    if settled and identity() == before and trust.available():
        text = json.dumps({"identity": before, "sha256": digest,
                           "sig": trust.sign("values digest", str(path), json.dumps(before), digest)})
        tmp = memo.with_name(f".{memo.name}.{os.getpid()}.tmp")
        try:
            memo.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_text(text)
            os.replace(tmp, memo)
        except OSError:  # a read-only cache folder: hashed again next time
            try:
                tmp.unlink()
            except OSError:
                pass
    return digest


def _read_graph(path, values):
    from irtrace.ir.schemas import register_schemas
    register_schemas()
    try:
        data = path.read_bytes()
    except OSError as e:
        raise IrtraceError(f"{path}: cannot read ({e.strerror})") from None
    return store_check.parse_graph(path, data, values)


def load(path):
    """Open the bundle at `path`, validating all of it before use (store_check): the manifest's
    fields and types, the values file's header against its size and a memory budget, and the
    graph (decodes, UTF-8, external data only into values.safetensors at a value's own bytes, unique
    node names, the same nodes as the manifest). Values stay on disk, weights included: the model's
    external initializers hold no data (read them with `initializers(model, bundle.values)`). Anything wrong is an IrtraceError naming the file and the field."""
    path = Path(path)
    if not path.is_dir():
        raise IrtraceError(f"{path}: no such bundle (expected a folder NAME.irt/ made by `irtrace export`)")
    missing = [f for f in (GRAPH, VALUES, MANIFEST) if not (path / f).is_file()]
    if missing:
        raise IrtraceError(f"{path}: not a complete bundle, missing {', '.join(missing)}")
    where = path / MANIFEST
    try:
        size = where.stat().st_size
        if size > store_check.MAX_MANIFEST_BYTES:
            raise IrtraceError(f"{where}: {size} bytes, over the {store_check.MAX_MANIFEST_BYTES} byte limit")
        manifest = store_check.parse_json(where.read_bytes(), where)
    except OSError as e:
        raise IrtraceError(f"{where}: cannot read ({e.strerror})") from None
    if not isinstance(manifest, dict):
        raise IrtraceError(f"{where}: a JSON {type(manifest).__name__}, expected an object")
    schema = manifest.get("schema")
    if schema != SCHEMA:
        raise IrtraceError(f"{where}: bundle schema {store_check.quote(schema)} is not supported (this irtrace reads "
                           f"{SCHEMA!r}); re-export it with this version of irtrace")
    store_check.check_manifest(where, manifest)
    values = LazyValues(path / VALUES)
    store_check.check_values(path / VALUES, manifest, values)
    model = _read_graph(path / GRAPH, values)
    graph_nodes = [n.name for n in model.graph.node]
    names = set(graph_nodes)
    extra = [n for n in graph_nodes if n not in manifest["nodes"]]
    lost = [n for n in manifest["nodes"] if n not in names]
    if extra or lost:
        raise IrtraceError(f"{path / GRAPH}: {len(graph_nodes)} nodes, manifest.json lists {len(manifest['nodes'])} "
                           f"(first " + (f"not in the manifest: {store_check.quote(extra[0])}" if extra else
                                         f"not in the graph: {store_check.quote(lost[0])}") +
                           "); the graph is truncated or from another bundle")
    store_check.check_claims(where, manifest, model)
    return Bundle(path, manifest, values, model)


def _clean_leftovers(path):
    """Remove what a killed export to `path` left: `.NAME.PID.*.partial` (a bundle half written) and
    `.NAME.PID.*.old` (the bundle it replaced, put back first when it was killed between the renames),
    for processes that no longer run."""
    for p in path.parent.glob(f".{glob.escape(path.name)}.*"):
        pid, _, rest = p.name[len(path.name) + 2:].partition(".")
        if not (pid.isdigit() and rest.endswith((".partial", ".old")) and p.is_dir()) or _alive(int(pid)):
            continue
        if rest.endswith(".old") and not path.exists():
            os.replace(p, path)
        else:
            shutil.rmtree(p, ignore_errors=True)


def _alive(pid):
    try:
        os.kill(pid, 0)  # PermissionError: it runs, as another user
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


BUNDLE_FILES = (GRAPH, VALUES, MANIFEST)


def check_destination(path, force=False):
    """Refuse, before any work, a bundle path that export may not write; returns the folder it goes in.
    `force` replaces only what is surely a bundle: a folder holding nothing but bundle files whose
    manifest.json names an irtrace bundle schema, or an empty folder. Anything else (a folder of other
    files, a file, a symbolic link, the current folder or one holding it) is an IrtraceError, and stays
    as it is."""
    path = Path(path)
    parent = path.parent if str(path.parent) else Path(".")
    at = f"cannot write {path}"
    if not parent.is_dir():
        above = next((p for p in [parent, *parent.parents] if os.path.lexists(p)), None)
        if above is not None and not above.is_dir():
            raise IrtraceError(f"{at}: {above} is a file, not a folder")
        raise IrtraceError(f"{at}: folder {parent} does not exist")
    if not os.path.lexists(path):
        if path.name in ("", ".", ".."):
            raise IrtraceError(f"{at}: give the bundle a name (e.g. -o model.irt)")
        return parent
    keep = "; give another -o (--force replaces only an irtrace bundle or an empty folder)"
    if path.is_symlink():
        raise IrtraceError(f"{at}: it is a symbolic link{keep}")
    if not path.is_dir():
        raise IrtraceError(f"{at}: it exists and is a file, not a bundle{keep}")
    here, cwd = Path(os.path.abspath(path)), Path(os.path.abspath(os.getcwd()))
    if here == cwd or here in cwd.parents:
        raise IrtraceError(f"{at}: it is the current folder or holds it{keep}")
    try:
        entries = sorted(os.listdir(path))
    except OSError as e:
        raise IrtraceError(f"{at}: cannot list it ({e.strerror})") from None
    foreign = [e for e in entries if e not in BUNDLE_FILES]
    if foreign:
        raise IrtraceError(f"{at}: it holds {store_check.quote(foreign[0])}, which is not part of an irtrace "
                           f"bundle{keep}")
    if entries and not _is_bundle(path):
        raise IrtraceError(f"{at}: its manifest.json does not name an irtrace bundle{keep}")
    if not force:
        raise IrtraceError(f"{path} already exists; pass --force to overwrite it")
    return parent


def _is_bundle(path):
    """Whether `path`/manifest.json is a JSON object whose schema is an irtrace bundle's (any version)."""
    try:
        where = Path(path) / MANIFEST
        if where.is_symlink() or where.stat().st_size > store_check.MAX_MANIFEST_BYTES:
            return False
        manifest = store_check.parse_json(where.read_bytes(), where)
    except (OSError, IrtraceError):
        return False
    schema = manifest.get("schema") if isinstance(manifest, dict) else None
    return isinstance(schema, str) and schema.startswith(SCHEMA.split("/")[0] + "/")


def write_failure(error):
    """What the system said when a write failed (an OSError, or safetensors' error wrapping one: "I/O
    error: No space left on device (os error 28)"), or None for anything else."""
    if isinstance(error, OSError):
        return error.strerror or str(error)
    if type(error).__name__ == "SafetensorError":
        import re
        m = re.search(r"I/O error: (.*?) \(os error \d+\)", str(error))
        return m.group(1) if m else None
    return None


def write(path, model, values, manifest, force=False):
    """Write a bundle atomically: into a temporary sibling folder, then rename.

    An existing bundle is refused unless `force`; with `force` it is moved aside (renamed), the new one
    renamed into place, and only then the old one removed: a failure at any point leaves the old bundle
    as it was, and nothing else. Folders a killed export left are cleaned by the next export there.
    """
    return write_while(path, values, lambda: (model, manifest), force=force)


def write_while(path, values, build, force=False):
    """write(), with the graph and manifest made by `build()` -> (model, manifest) in this thread while
    values.safetensors is written in another: the value store is the bundle's bulk (538 MB for
    ResNet-50) and its write releases the GIL, so an exporter's last checks run beside it. `values`
    must not change once handed over. An error in either leaves nothing, as in write()."""
    from concurrent.futures import ThreadPoolExecutor

    def produce(file):
        # leaving the executor waits for the write, also on an error: the folder is removed only then
        with ThreadPoolExecutor(1, thread_name_prefix="irtrace-values-write") as writer:
            written = writer.submit(write_values, file, values, {"schema": SCHEMA})
            made = build()
            written.result()  # the writer's error, raised here
        return made
    return _write_bundle(path, produce, force)


def write_streamed(path, record, build, force=False):
    """write(), with values.safetensors written by `record(file)` (a ValueWriter at `file`, filled as the
    values are made: none is held in memory for the write), then the graph and manifest made by
    `build(values)` -> (model, manifest), `values` the written file read as a bundle's are (LazyValues).
    An error in either leaves nothing, as in write()."""
    def produce(file):
        record(file)
        return build(LazyValues(file))
    return _write_bundle(path, produce, force)


def _write_bundle(path, produce, force):
    """Write a bundle at `path` from `produce(values file) -> (model, manifest)`, atomically (see write)."""
    import onnx

    path = Path(path)
    parent = check_destination(path, force)
    _clean_leftovers(path)
    try:
        tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.{os.getpid()}.", suffix=".partial", dir=parent))
    except OSError as e:
        raise IrtraceError(f"cannot write {path}: {e.strerror} ({parent})") from e
    old = None
    try:
        model, manifest = produce(tmp / VALUES)
        try:
            manifest_text = manifest_schema.dumps(manifest)
        except ValueError as e:  # strict JSON, as load() reads it: refused before the bundle is in place
            raise IrtraceError(f"cannot write {path}: the manifest holds a value JSON cannot ({e})") from None
        # a team on a shared machine reads the bundle as the user's umask allows (mkdtemp: 0700; the values: 0600)
        from irtrace.envs.trust import shared_mode
        shared_mode(tmp, folder=True)
        shared_mode(tmp / VALUES, folder=False)
        # weights are stored once: graph.onnx refers to their bytes in values.safetensors
        onnx.save(_externalize(model, LazyValues(tmp / VALUES)), str(tmp / GRAPH))
        (tmp / MANIFEST).write_text(manifest_text)
        if path.exists():
            old = tmp.with_name(tmp.name[:-len(".partial")] + ".old")
            os.replace(path, old)
        os.replace(tmp, path)
    except BaseException as e:
        if old is not None and not path.exists():
            os.replace(old, path)  # the new one never arrived: the old one goes back
            old = None
        shutil.rmtree(tmp, ignore_errors=True)
        why = write_failure(e)
        if why:  # a full disk, a quota, a folder made read-only meanwhile: not a bug
            raise IrtraceError(f"cannot write {path}: {why} ({getattr(e, 'filename', None) or parent}); "
                               f"nothing was changed") from e
        raise
    finally:
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    return load(path)
