"""The bundle on disk: a folder NAME.irt/ with graph.onnx, values.safetensors, manifest.json.

Nothing in a bundle is pickled. Values are read lazily: opening a bundle maps
values.safetensors into memory and reads only the header; a tensor is a view
into the map until someone copies it.
"""
import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from irtrace.errors import IrtraceError, suggest

SCHEMA = "irtrace.bundle/1"
GRAPH, VALUES, MANIFEST = "graph.onnx", "values.safetensors", "manifest.json"
# How values are named in the bundle (docs/bundle.md): recording writes these, replay and repro read them.
GRAD_PREFIX = "grad/"   # grad/<value>: the cotangent of <value> under the bundle's loss
SEED_PREFIX = "loss/"   # loss/<output>: the output seed c_o of the loss
U_PREFIX = "u/"         # u/<value>: the seeded double-backward direction for the cotangent of <value>
REQUIRED_MANIFEST_KEYS = ("schema", "source", "versions", "mode", "seed", "loss", "inputs", "outputs", "nodes")

# safetensors dtype codes <-> numpy (the format's own table)
_ST_DTYPES = {
    "F64": np.float64, "F32": np.float32, "F16": np.float16, "I64": np.int64, "I32": np.int32,
    "I16": np.int16, "I8": np.int8, "U8": np.uint8, "U16": np.uint16, "U32": np.uint32,
    "U64": np.uint64, "BOOL": np.bool_,
}


def grad_name(value):
    """Name of the cotangent of `value` in the bundle."""
    return GRAD_PREFIX + value


def u_name(value):
    """Name of the seeded double-backward direction u for the cotangent of `value`."""
    return U_PREFIX + value


def seed_name(output):
    """Name of the loss's seed c_o for graph output `output`."""
    return SEED_PREFIX + output


def initializers(model):
    """{name: array} of the graph's initializers (weights, by state_dict key)."""
    from onnx import numpy_helper
    return {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}


class LazyValues:
    """Read-only mapping name -> np.ndarray over a safetensors file, memory-mapped.

    safetensors' own `get_tensor` returns a copy; a replay reads each tensor many
    times, so this maps the data section once and hands out views at the header's
    offsets (8-byte little-endian header length, JSON header, raw buffer).
    """

    def __init__(self, path):
        self.path = Path(path)
        try:
            with open(self.path, "rb") as f:
                n = int.from_bytes(f.read(8), "little")
                header = json.loads(f.read(n))
        except (OSError, ValueError) as e:
            raise IrtraceError(f"cannot read {self.path}: not a safetensors file ({e})") from e
        self.metadata = header.pop("__metadata__", {}) or {}
        self._header = header
        self._start = 8 + n
        self._map = None

    def _mm(self):
        if self._map is None:
            size = os.path.getsize(self.path)
            self._map = np.memmap(self.path, dtype=np.uint8, mode="r") if size > self._start else np.zeros(0, np.uint8)
        return self._map

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
        h = self._entry(name)
        return np.dtype(_ST_DTYPES[h["dtype"]]), tuple(h["shape"])

    def _entry(self, name):
        try:
            return self._header[name]
        except KeyError:
            raise IrtraceError(f"value {name!r} is not in {self.path}.{suggest(name, self._header)}") from None

    def __getitem__(self, name):
        h = self._entry(name)
        dtype, shape = np.dtype(_ST_DTYPES[h["dtype"]]), tuple(h["shape"])
        b, e = h["data_offsets"]
        if e == b:
            return np.zeros(shape, dtype)
        return self._mm()[self._start + b:self._start + e].view(dtype).reshape(shape)

    def get(self, name, default=None):
        return self[name] if name in self._header else default


@dataclass
class Bundle:
    """An opened bundle: the canonical graph, the manifest, lazily read values."""
    path: Path
    manifest: dict
    values: LazyValues
    _model: object = field(default=None, repr=False)

    @property
    def model(self):
        """The canonical graph as an onnx.ModelProto (parsed on first use)."""
        if self._model is None:
            import onnx
            from irtrace.ir.schemas import register_schemas
            register_schemas()
            self._model = onnx.load(str(self.path / GRAPH))
        return self._model

    def node_source(self, node_name):
        return self.manifest["nodes"].get(node_name, {})


def load(path):
    """Open the bundle at `path`, validating its manifest; values stay on disk."""
    path = Path(path)
    if not path.is_dir():
        raise IrtraceError(f"{path}: no such bundle (expected a folder NAME.irt/ made by `irtrace export`)")
    missing = [f for f in (GRAPH, VALUES, MANIFEST) if not (path / f).is_file()]
    if missing:
        raise IrtraceError(f"{path}: not a complete bundle, missing {', '.join(missing)}")
    try:
        manifest = json.loads((path / MANIFEST).read_text())
    except ValueError as e:
        raise IrtraceError(f"{path / MANIFEST}: not valid JSON ({e})") from e
    schema = manifest.get("schema") if isinstance(manifest, dict) else None
    if schema != SCHEMA:
        raise IrtraceError(f"{path}: bundle schema {schema!r} is not supported (this irtrace reads {SCHEMA!r}); "
                           f"re-export it with this version of irtrace")
    absent = [k for k in REQUIRED_MANIFEST_KEYS if k not in manifest]
    if absent:
        raise IrtraceError(f"{path / MANIFEST}: missing keys {', '.join(absent)}")
    return Bundle(path, manifest, LazyValues(path / VALUES))


def write(path, model, values, manifest, force=False):
    """Write a bundle atomically: into a temporary sibling folder, then rename.

    An existing bundle is refused unless `force`; a failure leaves nothing behind.
    """
    import onnx
    from safetensors.numpy import save_file

    path = Path(path)
    if path.exists() and not force:
        raise IrtraceError(f"{path} already exists; pass --force to overwrite it")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise IrtraceError(f"cannot write {path}: folder {parent} does not exist")
    try:
        tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=parent))
    except OSError as e:
        raise IrtraceError(f"cannot write {path}: {e.strerror} ({parent})") from e
    try:
        onnx.save(model, str(tmp / GRAPH))
        save_file({k: np.array(v, order="C") for k, v in values.items()}, str(tmp / VALUES),
                  metadata={"schema": SCHEMA})
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=False) + "\n")
        if path.exists():
            shutil.rmtree(path)
        os.replace(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return load(path)
