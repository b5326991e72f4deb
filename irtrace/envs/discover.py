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


def split_release(name):
    """('paddle', '3.2.0') of 'paddle@3.2.0', (name, None) of a name without '@'."""
    base, at, version = name.partition("@")
    return (base, version) if at else (name, None)


def releases(declaration):
    """The framework versions a backend runs on, its default first; () when it declares none."""
    env = declaration.environment
    if env is None or not env.version:
        return ()
    return (env.version,) + tuple(r.version for r in env.releases)


def release_of(name):
    """(backend, version) of a backend name: the version after its '@', or the default its folder
    declares (None for a backend that declares none, or that is not declared)."""
    base, version = split_release(name)
    if version is not None:
        return base, version
    found = discover().get(base)
    declared = releases(found.declaration) if found is not None else ()
    return base, declared[0] if declared else None


def latest(declaration):
    """The newest of the versions a backend declares (by their numbers), or None."""
    return max(releases(declaration), key=version_key, default=None)


def version_key(version):
    return [(0, int(t), "") if t.isdigit() else (1, 0, t) for t in version.replace("-", ".").split(".")]


def release_pins(declaration, version):
    """The pins that make `version` of this backend's framework (() for its default), or IrtraceError
    naming the versions it declares."""
    from irtrace.errors import suggest
    declared = releases(declaration)
    if version not in declared:
        name = declaration.name
        if not declared:
            raise IrtraceError(f"backend {name!r} declares no versions; use --backend {name}")
        listed = ", ".join([f"{declared[0]} (default)", *declared[1:]])
        raise IrtraceError(f"backend {name!r} declares no version {version!r}; declared: {listed}."
                           f"{suggest(version, declared)}")
    return next((tuple(r.pins) for r in declaration.environment.releases if r.version == version), ())
