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
