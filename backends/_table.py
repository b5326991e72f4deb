"""Op tables: one explicit table per backend, filled by a decorator keyed by
(domain, op type, since opset). Registering a key twice fails at import."""
from dataclasses import dataclass, field


class Unsupported(Exception):
    """The backend has no implementation for this op at this opset (a coverage gap)."""


@dataclass(frozen=True)
class OpEntry:
    domain: str
    op_type: str
    since: int
    fn: object
    flags: dict = field(default_factory=dict)


class OpTable:
    def __init__(self, backend):
        self.backend = backend
        self._ops = {}

    def register(self, op_type, since=1, domain="", **flags):
        """Decorator: `fn(*inputs, **attrs)` implements `op_type` from opset `since` on.
        Flags describe per-op needs so the replay loop never branches on an op name:
        nondiff=(i, ...) inputs that are never differentiated (e.g. shapes as floats)."""
        def deco(fn):
            versions = self._ops.setdefault((domain, op_type), {})
            if since in versions:
                raise RuntimeError(f"{self.backend}: {domain or 'ai.onnx'}::{op_type} since {since} is registered "
                                   f"twice ({versions[since].fn.__module__}.{versions[since].fn.__name__} and "
                                   f"{fn.__module__}.{fn.__name__})")
            versions[since] = OpEntry(domain, op_type, since, fn, dict(flags))
            return fn
        return deco

    def derive(self, backend):
        """A copy of this table under another name (a variant backend overrides some entries)."""
        t = OpTable(backend)
        t._ops = {k: dict(v) for k, v in self._ops.items()}
        return t

    def replace(self, op_type, since, domain="", **flags):
        """Decorator: replace an existing entry (only on a derived table)."""
        def deco(fn):
            versions = self._ops.get((domain, op_type), {})
            if since not in versions:
                raise RuntimeError(f"{self.backend}: nothing to replace at {op_type} since {since}")
            versions[since] = OpEntry(domain, op_type, since, fn, {**versions[since].flags, **flags})
            return fn
        return deco

    def lookup(self, domain, op_type, opset):
        """The entry with the largest `since` <= opset, or Unsupported with what exists."""
        domain = "" if domain == "ai.onnx" else domain
        versions = self._ops.get((domain, op_type))
        if not versions:
            raise Unsupported(f"no {op_type!r} implementation in backend {self.backend!r}")
        ok = [s for s in versions if s <= opset]
        if not ok:
            raise Unsupported(f"no {op_type!r} implementation for opset {opset} in backend {self.backend!r} "
                              f"(registered: since {', '.join(map(str, sorted(versions)))})")
        return versions[max(ok)]

    def keys(self):
        """(domain, op_type, since) for every registration: the backend's capability."""
        return sorted((d, o, s) for (d, o), v in self._ops.items() for s in v)

    def op_types(self):
        return sorted({(d, o) for (d, o) in self._ops})


@dataclass(frozen=True)
class Alternative:
    """One alternative formulation of an op: `fn` has the signature of the op-table function it
    stands in for; `name` is the function's own name, `description` one line saying what it does."""
    domain: str
    op_type: str
    since: int
    name: str
    fn: object
    description: str


class Alternatives:
    """Alternative formulations per op, beside a backend's op table: what a porter writes instead of
    the table's call when that call fails (a missing second derivative, a crash), in the same
    framework's public API. Keyed by (domain, op type, since, name); registering a key twice, or a
    function whose signature differs from the table entry it stands in for, fails at import."""

    def __init__(self, table):
        self.table = table
        self._alts = {}   # (domain, op_type) -> {name: {since: Alternative}}, in registration order

    def register(self, op_type, since=1, domain=""):
        """Decorator: `fn` computes `op_type` (opset `since` on) another way. Its name is the
        function's, its description the first line of its docstring."""
        import inspect

        def params(f):
            return [(p.name, p.kind, p.default) for p in inspect.signature(f).parameters.values()]

        def deco(fn):
            entry = self.table.lookup(domain, op_type, since)  # the entry it stands in for must exist
            if params(fn) != params(entry.fn):
                raise RuntimeError(f"{self.table.backend}: alternative {fn.__name__} of {op_type} has the signature "
                                   f"{inspect.signature(fn)}, the op-table function {entry.fn.__name__} "
                                   f"{inspect.signature(entry.fn)}: they must be the same")
            description = (inspect.getdoc(fn) or "").split("\n")[0].strip()
            if not description:
                raise RuntimeError(f"{self.table.backend}: alternative {fn.__name__} of {op_type} has no docstring "
                                   f"(its first line is the one-line description)")
            versions = self._alts.setdefault((domain, op_type), {}).setdefault(fn.__name__, {})
            if since in versions:
                raise RuntimeError(f"{self.table.backend}: alternative {fn.__name__} of {op_type} since {since} "
                                   f"is registered twice")
            versions[since] = Alternative(domain, op_type, since, fn.__name__, fn, description)
            return fn
        return deco

    def for_op(self, domain, op_type, opset):
        """The alternatives of `op_type` at `opset` (per name, the largest `since` <= opset), in
        registration order."""
        domain = "" if domain == "ai.onnx" else domain
        out = []
        for versions in self._alts.get((domain, op_type), {}).values():
            ok = [s for s in versions if s <= opset]
            if ok:
                out.append(versions[max(ok)])
        return out

    def entry(self, domain, op_type, opset, name):
        """The op-table entry of `op_type` at `opset` with alternative `name` in place of its function
        (the entry's flags kept); Unsupported naming what exists when there is no such alternative."""
        alts = {a.name: a for a in self.for_op(domain, op_type, opset)}
        if name not in alts:
            raise Unsupported(f"no alternative {name!r} of {op_type!r} at opset {opset} in backend "
                              f"{self.table.backend!r} (registered: {', '.join(alts) or 'none'})")
        base = self.table.lookup(domain, op_type, opset)
        return OpEntry(base.domain, base.op_type, base.since, alts[name].fn, dict(base.flags))

    def keys(self):
        """(domain, op_type, since, name) for every registration, in registration order per op (the
        order in which they are tried, and the first that matches is applied)."""
        return [(d, o, s, n) for (d, o), names in sorted(self._alts.items()) for n, v in names.items() for s in sorted(v)]
