"""The backends irtrace knows, read from their own folders (irtrace/envs/discover.py): where each
one's worker runs, what it computes, and how to make it available. Nothing here names one."""
import importlib.util
import os
import sys
from dataclasses import dataclass, field, replace

from backends._runtime.declare import ORACLE, REFERENCE, UNDER_TEST
from irtrace.envs.discover import release_of, split_release
from irtrace.errors import IrtraceError, suggest

HOST_INSTALL = "make env  (or: pip install -r requirements-host.txt)"


@dataclass(frozen=True)
class BackendInfo:
    name: str
    worker: str                 # module with make_adapter(), e.g. backends.torch.worker
    needs: tuple = ()           # modules that must import in the host environment
    install: str = ""           # the exact command that makes it available
    description: str = ""
    python: object = None       # callable -> interpreter path; None: this interpreter
    extra_path: tuple = ()      # folders prepended to the worker's PYTHONPATH
    env: dict = field(default_factory=dict)
    display: str = ""           # the framework's own name ("PyTorch")
    module: str = ""            # what a repro script imports
    modes: tuple = ("fwd",)
    chained: bool = False
    role: str = UNDER_TEST
    demo: bool = True
    env_variables: object = None  # callable -> {var: value} of a managed environment (e.g. LD_LIBRARY_PATH)
    port: bool = False          # runs a user's own port (`irtrace port`)
    dtypes: tuple = ("float32",)  # the float dtypes its adapter takes (declare.Backend.dtypes)

    def interpreter(self):
        return self.python() if self.python is not None else sys.executable

    def variables(self):
        """Environment variables of this backend's worker process."""
        return {**self.env, **(self.env_variables() if self.env_variables is not None else {})}

    def unavailable(self):
        """None when available, else the reason."""
        if not self.modes:
            return "it declares no modes (an environment only)"
        if self.python is not None:
            try:
                exe = self.python()
            except IrtraceError as e:
                return str(e)
            return None if os.path.exists(exe) else f"{exe} does not exist"
        missing = [m for m in self.needs if importlib.util.find_spec(m) is None]
        return f"cannot import {', '.join(missing)}" if missing else None


BACKENDS = {}


def register(info):
    """Add a backend (a test may register a planted-bug one). Re-registering a name replaces it."""
    BACKENDS[info.name] = info
    return info


def _info(found):
    from irtrace import envs
    d = found.declaration
    python = install = env_vars = None
    if d.environment is not None:
        managed = envs.get(d.name)
        python, install = managed.python, f"irtrace setup {d.name}"
        env_vars = managed.variables
    return BackendInfo(d.name, found.worker, tuple(d.needs), install or HOST_INSTALL, d.description, python,
                       found.search_path, {**d.variables, **(d.environment.variables if d.environment else {})},
                       d.display, d.module or d.name, tuple(d.modes), d.chained, d.role, d.demo, env_vars, d.port,
                       tuple(d.dtypes))


def _discover():
    from irtrace.envs.discover import discover
    found = discover()
    order = sorted(found, key=lambda n: ({REFERENCE: 0, UNDER_TEST: 1, ORACLE: 2}.get(found[n].declaration.role, 1),
                                         found[n].declaration.environment is not None, n))
    for name in order:
        register(_info(found[name]))


_discover()


_RELEASES = {}  # 'paddle@3.2.0' -> its BackendInfo, made on first ask (BACKENDS lists the declared backends)


def get(name):
    """A backend by name; 'paddle@3.2.0' is a release its folder declares."""
    if name in BACKENDS:
        return BACKENDS[name]
    if name not in _RELEASES:
        base, version = split_release(name)
        if base not in BACKENDS or version is None:
            raise IrtraceError(f"unknown backend {base!r}; known: {', '.join(BACKENDS)}.{suggest(base, BACKENDS)}")
        _RELEASES[name] = _release(BACKENDS[base], version)
    return _RELEASES[name]


def known(name):
    """The backend `name` names (a declared release too), or None: a wrong name is said later."""
    try:
        return get(name.strip())
    except IrtraceError:
        return None


def _release(info, version):
    """`info`'s backend at another declared release of its framework, in that release's managed env."""
    from irtrace import envs
    from irtrace.envs.discover import discover
    found = discover().get(info.name)
    if found is None or found.declaration.environment is None:
        raise IrtraceError(f"backend {info.name!r} runs in the host's interpreter and declares no versions; "
                           f"use --backend {info.name}")
    managed = envs.get(f"{info.name}@{version}")  # IrtraceError naming the declared versions
    return replace(info, name=managed.name, python=managed.python, install=f"irtrace setup {managed.name}",
                   env_variables=managed.variables, description=f"{info.description}; here at {version}")


def with_role(role):
    """Names of the registered backends with this role (reference, oracle, test)."""
    return [n for n, i in BACKENDS.items() if i.role == role]


def reference():
    (name,) = with_role(REFERENCE) or [None]
    return name


def oracle():
    (name,) = with_role(ORACLE) or [None]
    return name


def parse_list(text):
    names = [b.strip() for b in text.split(",") if b.strip()]
    if not names:
        raise IrtraceError(f"--backend {text!r} names no backend; known: {', '.join(BACKENDS)}")
    releases = {}  # (backend, version) -> the name that asked for it
    for n in names:
        get(n)
        release = release_of(n)
        if releases.setdefault(release, n) != n:
            raise IrtraceError(f"--backend {text!r} names one release twice: {releases[release]} and {n} are both "
                               f"{release[0]} {release[1]}")
    return names

