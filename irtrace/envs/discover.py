"""Find the backends: every `backends/<name>/declare.py` beside irtrace, and every
`<dir>/<name>/declare.py` for the folders on $IRTRACE_BACKEND_PATH (os.pathsep-separated).

A declaration is standard-library code (backends/_runtime/declare.py), so reading all of them
imports no framework. The host never names a backend: what differs per backend is declared in
its folder, and this module is the only place that looks there."""
import functools
import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path

from irtrace.errors import IrtraceError

ROOT = Path(__file__).resolve().parents[2]   # the folder that holds irtrace/ and backends/
PATH_VARIABLE = "IRTRACE_BACKEND_PATH"


@dataclass(frozen=True)
class Found:
    declaration: object        # backends._runtime.declare.Backend
    folder: Path               # backends/<name>
    package: str               # importable package of the folder ("backends.megengine", or "<name>")
    search_path: tuple = ()    # folders the worker needs on PYTHONPATH besides ROOT

    @property
    def worker(self):
        return f"{self.package}.worker"


def _load(path, module_name):
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as e:  # noqa: BLE001 - a broken declaration must name its file
        raise IrtraceError(f"{path}: cannot read the backend declaration: {type(e).__name__}: {e}") from e
    decl = getattr(module, "BACKEND", None)
    if decl is None or not hasattr(decl, "name"):
        raise IrtraceError(f"{path}: defines no BACKEND = Backend(...) (see backends/_runtime/declare.py)")
    return decl


def _folders():
    yield ROOT / "backends", "backends.", ()
    for extra in filter(None, os.environ.get(PATH_VARIABLE, "").split(os.pathsep)):
        yield Path(extra), "", (str(Path(extra).resolve()),)


def discover():
    """{name: Found} for every declared backend, in a stable order (built-in first, then by path).
    Read once per value of $IRTRACE_BACKEND_PATH: environments and the backend registry both ask."""
    return dict(_discover(os.environ.get(PATH_VARIABLE, "")))


@functools.lru_cache(maxsize=None)
def _discover(_path_variable):
    found = {}
    for base, prefix, search in _folders():
        if not base.is_dir():
            continue
        for path in sorted(base.glob("[!_]*/declare.py")):
            folder = path.parent
            decl = _load(path, f"_irtrace_declared_{prefix.replace('.', '_')}{folder.name}")
            if decl.name in found:
                raise IrtraceError(f"backend {decl.name!r} is declared twice: {found[decl.name].folder} and {folder}")
            found[decl.name] = Found(decl, folder, prefix + folder.name, search)
    return tuple(found.items())
