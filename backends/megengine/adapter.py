"""MegEngine adapter: forward, vjp through GradManager, vjp2 through nested GradManagers.

MegEngine facts that shape this file (shared/notes/megengine.md): no float64 (refused here as
UNSUPPORTED, never cast silently); attach to a GradManager before computing; `.grad`
accumulates across managers, so it is reset between the inner and the outer backward;
backward does not check the cotangent's shape, so we do; errors are asynchronous unless
async_level = 0."""
import numpy as np

import megengine as mge
from megengine.autodiff import GradManager

from backends._runtime.adapter import Adapter
from backends._table import Unsupported
from backends.megengine.ops import OPS

mge.config.async_level = 0


def to_tensor(a):
    if a is None:
        return None
    a = np.asarray(a)
    if a.dtype == np.float64:
        raise Unsupported("float64 input: MegEngine has no float64 (it would cast to float32 silently)")
    if a.dtype == np.int64:
        info = np.iinfo(np.int32)
        if a.size and (a.min() < info.min or a.max() > info.max):
            return a  # e.g. Slice's INT64_MIN "to the end": int32 would wrap it; ops read it with ints()
        a = a.astype(np.int32)  # MegEngine's widest integer; it would convert the same way
    return mge.tensor(a)


def to_numpy(t):
    return t.numpy() if isinstance(t, mge.Tensor) else np.asarray(t)


def as_tuple(out):
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def is_float(t):
    return isinstance(t, mge.Tensor) and np.dtype(t.dtype).kind == "f"


class MegEngineAdapter(Adapter):
    name = "megengine"
    modes = ("fwd", "vjp", "vjp2")
    table = OPS

    def versions(self):
        return {"megengine": mge.__version__, "numpy": np.__version__}

    def call(self, entry, xs, spec):
        return self.check_outputs(spec, as_tuple(entry.fn(*xs, **spec.attrs)))

    def fwd(self, entry, inputs, spec):
        return [to_numpy(y) for y in self.call(entry, [to_tensor(a) for a in inputs], spec)]

    def _diff(self, entry, xs):
        nondiff = entry.flags.get("nondiff", ())
        return [x if is_float(x) and i not in nondiff else None for i, x in enumerate(xs)]

    @staticmethod
    def _fed(xs, diff):
        """What the op receives: a recorded copy of each attached leaf. An op that returns its
        input unchanged (Identity, astype to the same dtype) would otherwise hand backward the
        attached leaf itself, for which GradManager computes no gradient; in a real network
        that tensor is never a leaf, so the copy puts the op where it would be. The copy is
        `x * 1.0` (exact, keeps -0.0): F.copy turns a 0-d tensor into shape (1,)."""
        return [x * 1.0 if d is not None else x for x, d in zip(xs, diff)]

    @staticmethod
    def _pairs(ys, gs):
        pairs = []
        for y, g in zip(ys, gs):
            if g is None or not is_float(y):
                continue
            if tuple(y.shape) != tuple(g.shape):
                raise ValueError(f"cotangent shape {tuple(g.shape)} does not match output shape {tuple(y.shape)}")
            pairs.append((y, g))
        return pairs

    def vjp(self, entry, inputs, spec, cots):
        xs = [to_tensor(a) for a in inputs]
        diff = self._diff(entry, xs)
        attached = [x for x in diff if x is not None]
        gm = GradManager().attach(attached)
        with gm:
            ys = self.call(entry, self._fed(xs, diff), spec)
            pairs = self._pairs(ys, [to_tensor(c) for c in cots])
            if pairs:
                gm.backward([p[0] for p in pairs], [p[1] for p in pairs])
        return [None if x is None else (to_numpy(x.grad) if x.grad is not None else np.zeros(x.shape, x.dtype))
                for x in diff]

    def vjp2(self, entry, inputs, spec, cots, us):
        xs = [to_tensor(a) for a in inputs]
        diff = self._diff(entry, xs)
        attached = [x for x in diff if x is not None]
        gs = [to_tensor(c) for c in cots]
        g_att = [g for g in gs if g is not None]
        outer = GradManager().attach(attached + g_att)
        inner = GradManager().attach(attached)
        with outer:
            with inner:
                ys = self.call(entry, self._fed(xs, diff), spec)
                pairs = self._pairs(ys, gs)
                if pairs:
                    inner.backward([p[0] for p in pairs], [p[1] for p in pairs])
            hs = [x.grad if x is not None else None for x in diff]
            for t in attached + g_att:
                t.grad = None  # .grad accumulates: the outer backward must start from nothing
            terms = [(h * to_tensor(u)).sum() for h, u in zip(hs, us) if h is not None and u is not None]
            if terms:
                s = terms[0]
                for t in terms[1:]:
                    s = s + t
                outer.backward(s)
        dx = [None if x is None else (to_numpy(x.grad) if x.grad is not None else np.zeros(x.shape, x.dtype))
              for x in diff]
        dg = [None if g is None else (to_numpy(g.grad) if g.grad is not None else np.zeros(g.shape, g.dtype))
              for g in gs]
        return dx, dg
