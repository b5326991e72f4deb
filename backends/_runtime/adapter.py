"""The base every backend adapter extends: lookup through its op table, shape checks."""
from backends._table import Unsupported


class Adapter:
    name = "?"
    modes = ("fwd",)
    table = None
    last_check = None  # set by a backend that verifies its own result (the oracle)
    magnitudes = False  # whether magnitude() computes the rounding-error model's M (the oracle)

    def lookup(self, spec):
        return self.table.lookup(spec.domain, spec.op_type, spec.opset)

    def versions(self):
        return {}

    @staticmethod
    def check_outputs(spec, outs):
        declared = [o for o in spec.outputs if o]
        if len(outs) < len(declared):
            raise Unsupported(f"{spec.op_type} with {len(declared)} outputs: the op function returns {len(outs)}")
        return list(outs[:len(spec.outputs)])

    def chained(self, pairs, feeds, outputs, cots, penalty):
        raise Unsupported(f"backend {self.name!r} has no chained mode")



def _as_tuple(out):
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


class AutodiffAdapter(Adapter):
    """A backend whose fwd / vjp / vjp2 / chained live in a standalone `autodiff` module (numpy and
    the framework only), which repro scripts inline verbatim. Subclasses set `framework`,
    `autodiff`, `table` and, if the module takes any, `options()` (e.g. torch's dtype)."""
    framework = None
    autodiff = None
    modes = ("fwd", "vjp", "vjp2")

    def options(self):
        return {}

    def script(self):
        """What a repro script needs to run this backend's op without irtrace."""
        import inspect
        import platform
        return {"framework": self.framework, "autodiff": inspect.getsource(self.autodiff),
                "python": platform.python_version()}

    def _op(self, entry, spec):
        return lambda *xs, **kw: self.check_outputs(spec, _as_tuple(entry.fn(*xs, **kw)))

    def _run(self, fn, *args):
        own = getattr(self.autodiff, "Unsupported", None)  # the module's own "cannot express this"
        try:
            return fn(*args, **self.options())
        except Exception as e:
            if own is not None and isinstance(e, own):
                raise Unsupported(str(e)) from e
            raise

    def fwd(self, entry, inputs, spec):
        return self._run(self.autodiff.fwd, self._op(entry, spec), inputs, spec.attrs)

    def vjp(self, entry, inputs, spec, cots):
        return self._run(self.autodiff.vjp, self._op(entry, spec), inputs, spec.attrs, cots,
                         entry.flags.get("nondiff", ()))

    def vjp2(self, entry, inputs, spec, cots, us):
        return self._run(self.autodiff.vjp2, self._op(entry, spec), inputs, spec.attrs, cots, us,
                         entry.flags.get("nondiff", ()))

    def chained(self, pairs, feeds, outputs, cots, penalty):
        """The graph run chained by the framework; pairs = [(entry, spec)] in topological order."""
        steps = [(self._op(e, s), s.attrs, s.inputs, s.outputs, e.flags.get("nondiff", ())) for e, s in pairs]
        return self._run(self.autodiff.chained, steps, feeds, outputs, cots, tuple(penalty))
