"""MegEngine adapter: the op table and backends/megengine/autodiff.py (GradManager)."""
import megengine as mge
import numpy as np

from backends._runtime.adapter import Adapter
from backends._table import Unsupported
from backends.megengine import autodiff
from backends.megengine.ops import OPS

mge.config.async_level = 0  # MegEngine reports errors asynchronously otherwise


class MegEngineAdapter(Adapter):
    name = "megengine"
    modes = ("fwd", "vjp", "vjp2")
    table = OPS
    autodiff = autodiff

    def chained(self, pairs, feeds, outputs, cots, penalty):
        return self._guard(super().chained, pairs, feeds, outputs, cots, penalty)

    def versions(self):
        return {"megengine": mge.__version__, "numpy": np.__version__}

    def script(self):
        """What a repro script needs to run this backend's op without irtrace."""
        import inspect
        import platform
        return {"framework": "megengine", "autodiff": inspect.getsource(autodiff), "python": platform.python_version()}

    def _op(self, entry, spec):
        return lambda *xs, **kw: self.check_outputs(spec, autodiff.as_tuple(entry.fn(*xs, **kw)))

    @staticmethod
    def _guard(fn, *args):
        try:
            return fn(*args)
        except autodiff.Unsupported as e:
            raise Unsupported(str(e)) from e

    def fwd(self, entry, inputs, spec):
        return self._guard(autodiff.fwd, self._op(entry, spec), inputs, spec.attrs)

    def vjp(self, entry, inputs, spec, cots):
        return self._guard(autodiff.vjp, self._op(entry, spec), inputs, spec.attrs, cots, entry.flags.get("nondiff", ()))

    def vjp2(self, entry, inputs, spec, cots, us):
        return self._guard(autodiff.vjp2, self._op(entry, spec), inputs, spec.attrs, cots, us,
                           entry.flags.get("nondiff", ()))
