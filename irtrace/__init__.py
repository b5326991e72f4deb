"""irtrace: find the first op where two frameworks disagree, and write its repro."""
from irtrace.version import __version__  # noqa: F401

from irtrace.errors import IrtraceError  # noqa: E402,F401
# Import the `irtrace.export` package (light: no framework) before defining the function of
# the same name, so later submodule imports never rebind `irtrace.export` to the package.
import irtrace.export as _export_package  # noqa: E402,F401


def export(model, example_inputs, path, train=False, seed=0, loss=None, force=False):
    """Export a torch.nn.Module to a bundle at `path` (see irtrace.export.torch_export.export)."""
    from irtrace.export.torch_export import export as _export
    return _export(model, example_inputs, path, train=train, seed=seed, loss=loss, force=force)


def load(path):
    """Open a bundle (lazy: values stay memory-mapped on disk)."""
    from irtrace.store import load as _load
    return _load(path)
