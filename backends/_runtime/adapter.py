"""The base every backend adapter extends: lookup through its op table, the shared work of a node
call (run), shape checks. A backend fills fwd / vjp / vjp2 (and chained); what it can do beyond that
is declared here, as class attributes, never discovered."""
import time
from dataclasses import dataclass

from backends._runtime.text import strip_ansi
from backends._table import Unsupported


@dataclass(frozen=True)
class Computed:
    """One node call as it was computed, what an extra answer field (Adapter.extras) is computed from:
    the mode, the op-table entry, the inputs, the node's spec, the cotangents and directions u, which
    inputs are differentiated (`wrt`) and which part of vjp2 (`part`), and the call's own `results`."""
    mode: str
    entry: object
    inputs: list
    spec: object
    cots: list
    us: list
    wrt: object = None
    part: object = None
    results: list = ()


def error_text(e):
    """`e` as "Type: message", without the C++ backtrace MegEngine appends, and with what it was raised from
    where it was chained to another: MegEngine's AsyncError says "See above for the actual cause" and holds
    the actual cause as its __cause__ ("RuntimeError: number of elements do not match in reshape")."""
    text = strip_ansi(f"{type(e).__name__}: {e}".split("\nbacktrace:")[0].strip())
    cause = e.__cause__
    if cause is not None:
        said = strip_ansi((f"{cause}".split("\nbacktrace:")[0].strip().splitlines() or [""])[0])
        if said not in text:  # a cause that repeats the error's own words says nothing more (TensorFlow's)
            text += f" (caused by {type(cause).__name__}: {said})"
    return text


class NodeFailed(Exception):
    """A chained run failed at one node: the framework raised there, or gave a wrong-shaped value."""

    def __init__(self, node, message):
        super().__init__(f"{node}: {message}")
        self.node, self.message = node, message


class Adapter:
    name = "?"
    modes = ("fwd",)
    table = None
    last_check = None  # set by a backend that verifies its own result (the oracle)
    # abilities, declared
    native = False      # executes the ONNX node itself: `--form original` gives it the original attributes
    script = None       # a method: what a repro script needs to run this backend's ops without irtrace
    op_block = None     # a method: the node as script text (backends that execute ONNX); None: the op's source
    workarounds = None  # a backends._table.Alternatives: other formulations of its ops (backends/<name>/workarounds.py)
    port = None         # the module that runs a user's own port in this framework (backends/<name>/port.py)
    # the framework's message for an op it has no kernel of for a low-precision dtype on this device (Paddle's
    # CPU float16 `add`): a coverage gap it documents, answered UNSUPPORTED, not a failed call (a regex
    # searched in "Type: message"); None: every error is an ERROR
    missing_kernel = None

    def extras(self):
        """name -> a method computing an answer field beyond the results that a call may ask for by that
        name (the oracle's "magnitude" and "rounding"): (Computed, the request's value) -> a list of
        groups of arrays. None here."""
        return {}

    def lookup(self, spec):
        return self.table.lookup(spec.domain, spec.op_type, spec.opset)

    def alternatives(self, spec):
        """The alternatives registered for a node's op at its opset (backends._table.Alternative), in
        registration order; none when the backend declares no `workarounds`."""
        return [] if self.workarounds is None else self.workarounds.for_op(spec.domain, spec.op_type, spec.opset)

    def alternative(self, spec, name):
        """The node's op-table entry with the alternative `name` in place of the table's function."""
        if self.workarounds is None:
            raise Unsupported(f"backend {self.name!r} has no alternative formulations")
        return self.workarounds.entry(spec.domain, spec.op_type, spec.opset, name)

    def run(self, mode, entry, inputs, spec, cots=(), us=(), wrt=None, part=None):
        """One node call: (results, seconds). fwd: one result per output; vjp: per input; vjp2: per
        input (d2x) then per output (d2g), None where `part` leaves it out. `wrt`: the input positions
        that require grad (None: every float input the op differentiates); `part` (vjp2): "x", "g" or
        None (both). Unsupported for a mode this backend does not compute, or for an input the model
        differentiates that this backend's op does not."""
        if mode not in self.modes:
            raise Unsupported(f"backend {self.name!r} does not compute {mode}")
        if len(inputs) != len(spec.inputs):
            raise ValueError(f"{spec.name}: {len(inputs)} inputs for {len(spec.inputs)} declared")
        self.last_check = None
        t = time.perf_counter()
        if mode == "fwd":
            out = list(self.fwd(entry, inputs, spec))
        else:
            nondiff = self.nondiff(self.differentiated_entry(entry, spec), spec, inputs, wrt)
            if mode == "vjp":
                out = list(self.vjp(entry, inputs, spec, cots, nondiff))
            else:
                dx, dg = self.vjp2(entry, inputs, spec, cots, us, nondiff, part)
                out = list(dx) + list(dg)
        return out, time.perf_counter() - t

    def differentiated_entry(self, entry, spec):
        """The op-table entry whose function autodiff differentiates (the oracle's is torch's)."""
        return entry

    def nondiff(self, entry, spec, inputs, wrt=None):
        """The input positions that do not require grad: with `wrt`, every one not in it (an input the
        op's entry cannot differentiate, flag `nondiff`, but the model does is Unsupported, never
        silently left out); without, None: the entry's own."""
        own = tuple(entry.flags.get("nondiff", ())) if entry is not None else ()
        if wrt is None:
            return None
        cannot = [k for k in wrt if k in own]
        if cannot:
            raise Unsupported(f"{self.name}'s {spec.op_type} does not differentiate its input(s) "
                              f"{', '.join(f'{k} ({spec.inputs[k]})' for k in cannot)}, which the model "
                              f"differentiates (they are computed from its parameters or inputs)")
        return tuple(k for k in range(len(inputs)) if k not in wrt)

    def run_many(self, mode, items):
        """Several nodes of one batch in one go, where the backend can do better than one call each
        (onnxruntime: one session for all of them): items are (spec, inputs); returns {item index:
        (results, seconds or None)} for those it computed, the others run one by one. None: none."""
        return {}

    def versions(self):
        return {}

    @staticmethod
    def check_outputs(spec, outs):
        declared = [o for o in spec.outputs if o]
        if len(outs) < len(declared):
            raise Unsupported(f"{spec.op_type} with {len(declared)} outputs: the op function returns {len(outs)}")
        return list(outs[:len(spec.outputs)])

    def chained(self, pairs, feeds, outputs, cots, penalty, shapes=None, leaves=None, progress=None):
        raise Unsupported(f"backend {self.name!r} has no chained mode")



def _as_tuple(out):
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


class AutodiffAdapter(Adapter):
    """A backend whose fwd / vjp / vjp2 / chained live in a standalone `autodiff` module (numpy and
    the framework only), which repro scripts inline verbatim. Subclasses set `framework`,
    `autodiff`, `table` and, if the module takes any, `options()` (e.g. torch's dtype)."""
    framework = None
    autodiff = None
    recipe = None       # backends/<name>/repro.py's RECIPE: the straight-line script of one op call
    modes = ("fwd", "vjp", "vjp2")

    def options(self):
        return {}

    def script(self):
        """What a repro script needs to run this backend's op without irtrace."""
        import inspect
        import platform
        return {"framework": self.framework, "autodiff": inspect.getsource(self.autodiff),
                "python": platform.python_version(), "recipe": self.recipe}

    def _op(self, entry, spec):
        return lambda *xs, **kw: self.check_outputs(spec, _as_tuple(entry.fn(*xs, **kw)))

    def _run(self, fn, *args, **kw):
        own = getattr(self.autodiff, "Unsupported", None)  # the module's own "cannot express this"
        try:
            return fn(*args, **kw, **self.options())
        except Exception as e:
            if own is not None and isinstance(e, own):
                raise Unsupported(str(e)) from e
            # a chained run's failing node is the worker's to name (it substitutes that node, not the chain)
            why = None if isinstance(e, NodeFailed) else self.no_kernel(error_text(e))
            if why:
                raise Unsupported(why) from e
            raise

    def no_kernel(self, said):
        """UNSUPPORTED's message where the framework's error `said` is its own "no kernel of this op for
        these dtypes on this device" (missing_kernel), else None: a gap the framework documents, not a bug."""
        m = self.missing_kernel.search(said) if self.missing_kernel is not None else None
        if m is None:
            return None
        start = said.rfind("\n", 0, m.start()) + 1
        line, at = said[start:].split("\n")[0], m.start() - start  # the line the framework's words are on
        if len(line) > 300:  # they may be in what it was raised from, at its end (MegEngine's AsyncError): kept
            line = f"{line[:120]} ... {line[max(120, at - 40):][:160]}"
        return f"{self.framework} has no kernel of this op for these dtypes on this device ({line})"

    def fwd(self, entry, inputs, spec):
        return self._run(self.autodiff.fwd, self._op(entry, spec), inputs, spec.attrs)

    def vjp(self, entry, inputs, spec, cots, nondiff=None):
        nondiff = entry.flags.get("nondiff", ()) if nondiff is None else nondiff
        return self._run(self.autodiff.vjp, self._op(entry, spec), inputs, spec.attrs, cots, nondiff)

    def vjp2(self, entry, inputs, spec, cots, us, nondiff=None, part=None):
        nondiff = entry.flags.get("nondiff", ()) if nondiff is None else nondiff
        return self._run(self.autodiff.vjp2, self._op(entry, spec), inputs, spec.attrs, cots, us, nondiff,
                         part=part)

    def chained(self, pairs, feeds, outputs, cots, penalty, shapes=None, leaves=None, progress=None):
        """The graph run chained by the framework; pairs = [(entry, spec)] in topological order.
        `shapes`: value name -> the recorded shape; a node that raises or gives another shape stops
        the run with NodeFailed naming it (the host then substitutes its recorded value). `leaves`: the
        feeds that require grad (None: every float feed). `progress`: a file that gets a line before and
        after each node's forward (a crash there names its node; one after the last is in the backward)."""
        mark = _Progress(progress)
        steps = [(self._checked(self._op(e, s), s, shapes or {}, mark), s.attrs, s.inputs, s.outputs,
                  e.flags.get("nondiff", ())) for e, s in pairs]
        kw = {} if leaves is None else {"leaves": set(leaves)}
        return self._run(self.autodiff.chained, steps, feeds, outputs, cots, tuple(penalty), **kw)

    @staticmethod
    def _checked(op, spec, shapes, mark=None):
        def run(*xs, **kw):
            if mark is not None:
                mark("forward", spec.name)
            try:
                outs = op(*xs, **kw)
            except Unsupported:
                raise
            except Exception as e:  # noqa: BLE001 - the framework's own error, named by node
                raise NodeFailed(spec.name, error_text(e)[:1000]) from e
            for name, y in zip(spec.outputs, outs):
                want = shapes.get(name)
                if want is not None and hasattr(y, "shape") and tuple(y.shape) != tuple(want):
                    raise NodeFailed(spec.name, f"{name} has shape {list(y.shape)}, the recorded value {list(want)}")
            if mark is not None:
                mark("done", spec.name)
            return outs
        return run


class _Progress:
    """Lines "forward NODE" / "done NODE" appended to a file as a chained run goes (unbuffered: they must
    be on disk when the framework kills the process); nothing without a file."""

    def __init__(self, path):
        self.file = open(path, "a", buffering=1) if path else None

    def __call__(self, phase, node):
        if self.file is not None:
            self.file.write(f"{phase} {node}\n")
