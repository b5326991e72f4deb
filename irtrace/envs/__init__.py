"""Environments irtrace manages for frameworks that cannot live in the host venv.

Each is a venv built from pinned requirements kept beside its backend, cached outside the
checkout (like pre-commit's hook envs) in $IRTRACE_CACHE or ~/.cache/irtrace, in a folder
keyed by a hash of the requirements and the interpreter version, so CI and repeated runs
reuse it. A `.irtrace-ok` marker is written only after the import check passes.
"""
import fcntl
import functools
import glob
import hashlib
import os
import re
import shutil
import subprocess

from dataclasses import dataclass, field, replace
from pathlib import Path

from irtrace.errors import IrtraceError, suggest

ROOT = Path(__file__).resolve().parents[2]
MARKER = ".irtrace-ok"


@dataclass(frozen=True)
class ManagedEnv:
    name: str
    requirements: Path
    python_version: str          # "3.10"
    override: str                # env var naming an interpreter to use instead
    check: str                   # python code that must run in the env
    check_env: dict = field(default_factory=dict)
    library_dirs: tuple = ()     # globs under the env root prepended to LD_LIBRARY_PATH
    pip_args: tuple = ()
    pins: tuple = ()             # a declared release's pins, in place of the same packages' lines

    @property
    def backend(self):
        """The backend the env belongs to ('paddle' for 'paddle@3.2.0'): its folder is named after it."""
        return self.name.partition("@")[0]

    def requirement_text(self):
        """The requirements installed: the file beside the backend, with the release's pins put in place
        of the lines pinning the same packages (added where the file names none)."""
        text = self.requirements.read_bytes()
        if not self.pins:
            return text
        pinned = {_package(p): p for p in self.pins}
        lines = [pinned.pop(_package(ln), ln) for ln in text.decode().splitlines()]
        return ("\n".join(lines + list(pinned.values())) + "\n").encode()

    def variables(self, root=None):
        """Environment variables for a process of this env: the declared ones, and LD_LIBRARY_PATH
        with the env's own shared-library folders (e.g. CUDA runtime wheels) first."""
        out = dict(self.check_env)
        root = Path(root) if root is not None else self.path()
        libs = [d for g in self.library_dirs for d in sorted(glob.glob(str(root / g)))]
        if libs:
            out["LD_LIBRARY_PATH"] = os.pathsep.join(libs + [p for p in [os.environ.get("LD_LIBRARY_PATH")] if p])
        return out

    def cache_root(self):
        from irtrace.envs.trust import cache_root
        return cache_root() / "envs"

    def interpreter(self):
        """The base interpreter to build the env with, or IrtraceError saying how to get one."""
        exe = os.environ.get(self.override)
        if exe:
            if _version(exe) != self.python_version:
                raise IrtraceError(f"{self.override}={exe} is not a Python {self.python_version} "
                                   f"(it reports {_version(exe) or 'nothing'})")
            return exe
        candidates = [shutil.which(f"python{self.python_version}")]
        root = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
        candidates += sorted(glob.glob(os.path.join(root, "versions", f"{self.python_version}.*", "bin", "python")),
                             key=_natural, reverse=True)
        for c in candidates:
            if c and _version(c) == self.python_version:
                return c
        raise IrtraceError(f"no Python {self.python_version} found for {self.name} (needed: {self.name} has no wheel "
                           f"for newer Pythons); install one (e.g. `pyenv install {self.python_version}`) or set "
                           f"{self.override}=/path/to/python{self.python_version}")

    def path(self, interpreter=None):
        interpreter = interpreter or self.interpreter()
        key = hashlib.sha256(self.requirement_text() + _full_version(interpreter).encode()).hexdigest()[:12]
        return self.cache_root() / f"{self.backend}-{key}"

    def python(self):
        """The env's interpreter if it is built and checked, else IrtraceError naming the fix."""
        p = self.path()
        exe = p / "bin" / "python"
        if not (p / MARKER).is_file() or not exe.exists():
            raise IrtraceError(f"the {self.name} environment is not set up — run: irtrace setup {self.name}")
        return str(exe)

    def framework_version(self, module):
        """(distribution, version, the env's folder) of what provides import `module` in this env, read from
        its installed package metadata (the framework is not imported); IrtraceError when it is not set up."""
        code = ("import importlib.metadata as m, sys; d = m.packages_distributions().get(sys.argv[1], [sys.argv[1]])[0]; "
                "print(d, m.version(d))")
        exe = self.python()
        r = _run([exe, "-c", code, module], f"reading {module}'s version in the {self.name} environment")
        dist, _, version = r.stdout.strip().partition(" ")
        return dist, version, Path(exe).parents[1]

    def setup(self, log=print):
        base = self.interpreter()
        p = self.path(base)
        p.parent.mkdir(parents=True, exist_ok=True)
        with open(str(p) + ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if (p / MARKER).is_file():
                log(f"{self.name}: using cached environment {p}")
                return str(p / "bin" / "python")
            if p.exists():
                shutil.rmtree(p)
            pins = f" with {', '.join(self.pins)}" if self.pins else ""
            log(f"{self.name}: building {p} with {base} (pinned: {self.requirements.relative_to(ROOT)}{pins})")
            _run([base, "-m", "venv", str(p)], f"creating the {self.name} venv")
            exe = str(p / "bin" / "python")
            requirements = self.requirements
            if self.pins:  # the release's own requirements, kept in the env they built
                requirements = p / "requirements.txt"
                requirements.write_bytes(self.requirement_text())
            _run([exe, "-m", "pip", "install", "-q", "--disable-pip-version-check", "-r", str(requirements),
                  *self.pip_args], f"installing {self.requirements.name} for {self.name}")
            _run([exe, "-c", self.check], f"importing {self.name} in its environment", env=self.variables(p))
            (p / MARKER).write_text(_full_version(exe) + "\n")
            log(f"{self.name}: ready: {exe}")
            return exe


def _run(cmd, what, env=None):
    r = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **(env or {})})
    if r.returncode != 0:
        tail = " | ".join([ln for ln in (r.stderr or r.stdout).strip().splitlines() if ln.strip()][-3:])
        raise IrtraceError(f"{what} failed (exit {r.returncode}): {tail}")
    return r


def _asked(exe, code, timeout=None):
    """What interpreter `exe` prints for `code` (None where it fails), asked once per process for each
    file as it is (its path, size and time): every worker's start resolves its env's interpreter, and a
    Python started to say its version costs a framework's worker start a tenth of a second or more."""
    try:
        st = os.stat(exe)  # the file a link names
    except OSError:
        return None
    return _asked_once(exe, st.st_ino, st.st_size, st.st_mtime_ns, code, timeout)


@functools.lru_cache(maxsize=64)
def _asked_once(exe, inode, size, mtime, code, timeout):
    try:
        r = subprocess.run([exe, "-c", code], capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return r.stdout.strip() if r.returncode == 0 else None


# one start of `exe` says both: a pyenv shim takes 0.15 s to start here, and a replay asks each base interpreter
_ABOUT = "import sys, platform; print('%d.%d' % sys.version_info[:2]); print(sys.version, platform.machine())"


def _version(exe):
    """"3.10" of interpreter `exe`, or None."""
    said = _asked(exe, _ABOUT, timeout=30)
    return said.split("\n", 1)[0] if said else None


def _full_version(exe):
    """Its sys.version and machine ("" where it says nothing): what names the environments built with it."""
    said = _asked(exe, _ABOUT, timeout=30)
    return said.split("\n", 1)[1].strip() if said and "\n" in said else ""


def _package(line):
    """The normalised package name a requirement line pins ('' for a comment or an option)."""
    m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", line)
    return re.sub(r"[-_.]+", "-", m.group(1)).lower() if m and not line.lstrip().startswith("-") else ""


def _natural(path):
    return [int(t) if t.isdigit() else t for t in path.replace("/", ".").split(".")]


def _declared():
    from irtrace.envs.discover import discover
    out = {}
    for name, found in discover().items():
        e = found.declaration.environment
        if e is not None:
            out[name] = ManagedEnv(name, found.folder / e.requirements, e.python, f"IRTRACE_PYTHON_{name.upper()}",
                                   e.check, dict(e.variables), tuple(e.library_dirs), tuple(e.pip_args))
    return out


def all_envs():
    """{name: ManagedEnv} of every backend that declares an environment, and of every other release
    one declares ('paddle@3.2.0'), each after its backend's."""
    from irtrace.envs.discover import discover, releases
    found, out = discover(), {}
    for name, env in _declared().items():
        out[name] = env
        for version in releases(found[name].declaration)[1:]:
            out[f"{name}@{version}"] = get(f"{name}@{version}")
    return out


def get(name):
    """The env of a backend, or of a release it declares ('paddle@3.2.0'): that backend's env with the
    release's pins, in a folder of its own (the default release's is the backend's own)."""
    from irtrace.envs.discover import discover, release_pins, split_release
    envs = _declared()
    base, version = split_release(name)
    if base not in envs:
        raise IrtraceError(f"irtrace manages no environment {base!r}; known: {', '.join(envs)}.{suggest(base, envs)}")
    if version is None:
        return envs[base]
    return replace(envs[base], name=name, pins=release_pins(discover()[base].declaration, version))
