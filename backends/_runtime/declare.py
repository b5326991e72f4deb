"""How a backend declares itself: `backends/<name>/declare.py` defines `BACKEND = Backend(...)`.

Standard library only: the host reads every declaration at start-up (to list backends, build
environments, label findings) without importing any framework. The folder is the backend:
the host discovers `backends/*/declare.py` (and folders on $IRTRACE_BACKEND_PATH) and names
no backend itself. Its worker module is `<package>.worker`, whose `make_adapter()` returns the
adapter (see backends/_runtime/adapter.py).
"""
from dataclasses import dataclass, field

# roles: what the host does with a backend's results
REFERENCE = "reference"   # the results backends are compared with (and that are judged against float64)
ORACLE = "oracle"         # float64: arbitrates who is right; never a backend under test
UNDER_TEST = "test"       # a framework whose results are judged


@dataclass(frozen=True)
class Release:
    """Another release of the framework that a backend runs on (`--backend NAME@VERSION`), in a managed
    environment of its own: the backend's requirements with `pins` in place of the lines that pin the same
    packages (a pin of a package the file does not name is added)."""
    version: str                             # "3.2.0", as the user writes it after the '@'
    pins: tuple = ()                         # ("paddlepaddle==3.2.0", "numpy==1.26.4")


@dataclass(frozen=True)
class Environment:
    """A managed virtual environment (Python version, pinned requirements) for a framework that
    cannot live in the host venv. Built by `irtrace setup <name>`, cached outside the checkout."""
    python: str                              # "3.10": the interpreter version the env is built with
    requirements: str = "requirements.txt"   # pinned, beside declare.py
    check: str = ""                          # Python code that must run in the env once built
    variables: dict = field(default_factory=dict)   # environment variables for the check and the worker
    library_dirs: tuple = ()                 # globs under the env root prepended to LD_LIBRARY_PATH
    pip_args: tuple = ()                     # extra arguments for `pip install -r requirements`
    version: str = ""                        # the framework release the requirements pin (the default)
    releases: tuple = ()                     # Release: the other releases it supports, each in its own env


@dataclass(frozen=True)
class Backend:
    """One backend. `display` is the framework's own name (used in repro titles), `module` what a
    repro script imports (`megengine`), `modes` what its adapter computes, `chained` whether it can
    run a whole graph with its own autograd, `environment` None for the host's own interpreter
    (then `needs` lists the modules that must import there)."""
    name: str
    display: str
    description: str
    module: str = ""
    modes: tuple = ("fwd",)
    chained: bool = False
    role: str = UNDER_TEST
    environment: Environment = None
    needs: tuple = ()
    variables: dict = field(default_factory=dict)  # environment variables for the worker (host interpreter)
    demo: bool = True                               # replayed by `irtrace demo`
    port: bool = False                              # runs a user's own port: backends/<name>/port.py
    # the float dtypes its adapter takes and gives back as they are (`irtrace fuzz --dtypes` draws cases of
    # them): a dtype it declares may still lack a kernel of an op on this device, which it answers as
    # UNSUPPORTED (Adapter.missing_kernel)
    dtypes: tuple = ("float32",)
