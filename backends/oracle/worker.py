"""The float64 oracle.

Forward: onnx.reference on the node cast to float64, with overrides where onnx.reference
(1.23) is wrong, and numpy implementations of irtrace's own ops. Gradients: torch's
autograd in float64, cross-checked against central finite differences of the reference
forward along random directions, so the oracle does not silently share torch's bugs: a
gradient that fails the check is returned with `verified: false` and the host does not
arbitrate with it (it says so in a row of the oracle's). The direction is drawn from the node
(the same check in any worker, in any order), moves no input on a kink of the op (where any
one-sided gradient is right and a difference quotient measures none), and a failing check is
tried again at a hundredth of the step (near a kink, a hundredth as many elements cross it).
"""
import zlib

import numpy as np
import torch

from backends._onnx_native import IRTRACE_DOMAIN, NativeAdapter
from backends._runtime.kinks import kinked
from backends._table import Unsupported
from backends.onnxref.worker import ReferenceRunner, reference_ops
from backends.oracle.gradients import TABLE  # at import (torch's op table): a fork server imports it once
from backends.torch.adapter import TorchAdapter

FD_RTOL = 1e-5
# the finite-difference step, times the first and, where the check fails, once more: a step that crosses a kink
# (Relu, Abs, MaxPool's choice) within it makes the difference quotient wrong there, and a hundredth of the step
# crosses a hundredth as many of the elements near one; float64's rounding of the quotient grows to ~1e-8 of it,
# under FD_RTOL
FD_SHRINKS = (1.0, 0.01)


def _overrides():
    from onnx.reference.op_run import OpRun
    from onnx.reference.ops.op_conv import Conv as RefConv
    from onnx.reference.ops.op_conv_transpose import ConvTranspose as RefConvTranspose
    from onnx.reference.ops.op_max_pool import MaxPool as RefMaxPool

    class ConvTranspose(RefConvTranspose):
        # onnx.reference 1.23 mixes up channels for group > 1 with more than one output channel
        # per group; its group == 1 path is right, so run it once per group and concatenate.
        def _run(self, X, W, B=None, **kw):
            group = next((g for g in (kw.get("group"), self.group) if g is not None), 1)
            if group == 1:
                return super()._run(X, W, B, **kw)
            kw = {**kw, "group": 1}
            cin, cout = X.shape[1] // group, W.shape[1]
            ys = [super(ConvTranspose, self)._run(X[:, g * cin:(g + 1) * cin], W[g * cin:(g + 1) * cin],
                                                  None if B is None else B[g * cout:(g + 1) * cout], **kw)[0]
                  for g in range(group)]
            return (np.concatenate(ys, axis=1),)

    class Conv(RefConv):
        # onnx.reference 1.23 is right but slow: its im2col gathers with index arrays as large as the columns
        # (a 3x3 convolution of 2x64x28x28 in float64: 19.8 ms against 7.7 ms here, one thread), and the oracle
        # runs each Conv some eight times (its forward, the finite-difference checks of vjp and vjp2, the rounding
        # model's magnitudes): on ResNet-50 those three took 0.6 CPU s less (benchmarks/where_cpu_goes.py
        # --baseline). The same sums by numpy's matmul over a strided view of the padded input; anything but
        # explicit pads (auto_pad) goes to onnx.reference's own.
        def _run(self, X, W, B=None, auto_pad=None, dilations=None, group=None, kernel_shape=None, pads=None,
                 strides=None):
            plain = (auto_pad in (None, "NOTSET") and X.ndim >= 3 and W.ndim == X.ndim and X.dtype == W.dtype
                     and X.dtype.kind == "f" and (kernel_shape is None or list(kernel_shape) == list(W.shape[2:])))
            y = conv(X, W, B, group or 1, dilations, pads, strides) if plain else None
            return (y,) if y is not None else super()._run(X, W, B, auto_pad, dilations, group, kernel_shape, pads,
                                                           strides)

    class MaxPool(RefMaxPool):
        # onnx.reference 1.23 reads explicit pads of a 2-D MaxPool as [b1, e1, b2, e2] instead of
        # [b1, b2, e1, e2] (so [0, 0, 1, 1] pads one axis twice and the other not at all), which is
        # also its auto_pad=SAME_LOWER stride > 1 bug. Canonical graphs always have explicit pads:
        # compute max pooling directly over a -inf padded input.
        def _run(self, X, auto_pad=None, ceil_mode=None, dilations=None, kernel_shape=None, pads=None,
                 storage_order=None, strides=None):
            if len(self.output) > 1 and self.output[1]:  # its indices are wrong too (reference_fixes.py)
                from backends.oracle.reference_fixes import max_pool_with_indices
                return max_pool_with_indices(X, kernel_shape, strides, pads, dilations, ceil_mode, storage_order)
            return (max_pool(X, kernel_shape, strides, pads, dilations, ceil_mode),)

    class TrainBatchNormalization(OpRun):
        op_domain = "ai.irtrace"

        def _run(self, X, scale, B, mean, var, epsilon=None, momentum=None, running_var_estimator=None):
            axes = (0,) + tuple(range(2, X.ndim))
            shape = [1, -1] + [1] * (X.ndim - 2)
            bm, bv = X.mean(axis=axes), X.var(axis=axes)
            y = (X - bm.reshape(shape)) / np.sqrt(bv.reshape(shape) + epsilon) * scale.reshape(shape) + B.reshape(shape)
            n = X.size // X.shape[1]
            est = bv * n / max(n - 1, 1) if running_var_estimator == "unbiased" else bv
            return (y.astype(X.dtype), (momentum * mean + (1 - momentum) * bm).astype(mean.dtype),
                    (momentum * var + (1 - momentum) * est).astype(var.dtype))

    class RecordedDropout(OpRun):
        op_domain = "ai.irtrace"

        def _run(self, data, mask, ratio=None):
            return ((data * mask.astype(data.dtype) / (1.0 - ratio)).astype(data.dtype),)

    from backends.oracle.reference_fixes import FIXES
    return [Conv, ConvTranspose, MaxPool, TrainBatchNormalization, RecordedDropout, *FIXES]


def conv(x, w, b, group, dilations, pads, strides):
    """N-d convolution, ONNX semantics (explicit pads [begins..., ends...]), as one matmul per group over the
    windows of the zero-padded input (numpy's strided view: the only copy is the windows' columns); None where
    the shapes do not fit together (onnx.reference's own says how)."""
    from numpy.lib.stride_tricks import sliding_window_view
    r, (n, c), (m, cg) = x.ndim - 2, x.shape[:2], w.shape[:2]
    kernel = w.shape[2:]
    dilations = dilations if dilations is not None else [1] * r
    strides = strides if strides is not None else [1] * r
    pads = pads if pads is not None else [0] * (2 * r)
    if c != cg * group or m % group or len(pads) != 2 * r or len(strides) != r or len(dilations) != r:
        return None
    xp = np.pad(x, [(0, 0), (0, 0)] + [(pads[i], pads[i + r]) for i in range(r)])
    eff = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
    out = [(xp.shape[2 + i] - eff[i]) // strides[i] + 1 for i in range(r)]
    if min(out + [n, m, c]) <= 0:
        return None
    win = sliding_window_view(xp, eff, axis=tuple(range(2, 2 + r)))  # (n, c, positions..., window...)
    win = win[(slice(None), slice(None)) + tuple(slice(0, (o - 1) * s + 1, s) for o, s in zip(out, strides))
              + tuple(slice(None, None, d) for d in dilations)]  # (n, c, out..., kernel...)
    k = int(np.prod(kernel, dtype=np.int64))
    # (group, n, out..., cg, kernel...) -> the columns (group, n * out, cg * k)
    cols = win.reshape((n, group, cg) + tuple(out) + tuple(kernel))
    cols = cols.transpose((1, 0) + tuple(range(3, 3 + r)) + (2,) + tuple(range(3 + r, 3 + 2 * r)))
    cols = cols.reshape(group, n * int(np.prod(out, dtype=np.int64)), cg * k)
    y = cols @ w.reshape(group, m // group, cg * k).transpose(0, 2, 1)  # (group, n * out, m / group)
    y = y.reshape((group, n) + tuple(out) + (m // group,))
    y = y.transpose((1, 0, 2 + r) + tuple(range(2, 2 + r))).reshape((n, m) + tuple(out))
    if b is not None:
        y = y + b.reshape((1, -1) + (1,) * r)
    return np.ascontiguousarray(y, dtype=x.dtype)


def max_pool(x, kernel, strides, pads, dilations, ceil_mode):
    """N-d max pooling, ONNX semantics: pads [begins..., ends...]; with ceil_mode a last window
    is kept only if it starts inside the input or the begin padding."""
    import math

    from numpy.lib.stride_tricks import sliding_window_view
    r = len(kernel)
    strides = strides if strides is not None else [1] * r
    dilations = dilations if dilations is not None else [1] * r
    pads = pads if pads is not None else [0] * (2 * r)
    eff = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
    out = []
    for i in range(r):
        n = x.shape[2 + i] + pads[i] + pads[i + r]
        o = (n - eff[i]) / strides[i] + 1
        o = math.ceil(o) if ceil_mode else math.floor(o)
        if ceil_mode and (o - 1) * strides[i] >= x.shape[2 + i] + pads[i]:
            o -= 1
        out.append(int(o))
    fill = -np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).min
    xp = np.pad(x, [(0, 0), (0, 0)] + [(pads[i], pads[i + r]) for i in range(r)], constant_values=fill)
    extra = [max(0, (out[i] - 1) * strides[i] + eff[i] - xp.shape[2 + i]) for i in range(r)]
    xp = np.pad(xp, [(0, 0), (0, 0)] + [(0, e) for e in extra], constant_values=fill)
    win = sliding_window_view(xp, eff, axis=tuple(range(2, 2 + r)))
    index = [slice(None)] * 2 + [slice(0, (out[i] - 1) * strides[i] + 1, strides[i]) for i in range(r)] + \
        [slice(None, None, dilations[i]) for i in range(r)]
    return win[tuple(index)].max(axis=tuple(range(2 + r, 2 + 2 * r))).astype(x.dtype)


# Unique's outputs grow when a perturbation splits equal values: no finite difference to check against
_RESHAPED = "an output's shape changes under the finite-difference perturbation (equal values split)"


def _nondifferentiable(spec):
    """Input positions the ONNX schema of the node marks NonDifferentiable."""
    import onnx
    try:
        formal = list(onnx.defs.get_schema(spec.op_type, spec.opset, spec.domain).inputs)
    except onnx.defs.SchemaError:
        return set()
    nd = onnx.defs.OpSchema.DifferentiationCategory.NonDifferentiable
    return {k for k in range(len(spec.inputs))
            if formal and formal[min(k, len(formal) - 1)].differentiation_category == nd}


class _Unchecked(Exception):
    """No finite difference can be taken at this node (its reference forward fails, or its shape moves)."""


def _off_kinks(spec, inputs, direction):
    """`direction` with no move of an element on a non-differentiable point of the op (backends/_runtime/
    kinks.py), or None where it moves none."""
    masks = kinked(spec.op_type, inputs)
    if masks is None or not any(m is not None and v is not None and np.any(m) for m, v in zip(masks, direction)):
        return None
    return [v if v is None or m is None else np.where(np.broadcast_to(m, np.shape(v)), 0.0, v)
            for v, m in zip(direction, list(masks) + [None] * (len(direction) - len(masks)))]


def _agrees_with(dg):
    """vjp2's test of J u = `dg` against finite differences, per element, with its largest difference."""
    def agrees(fd):
        ok, worst = True, 0.0
        for a, b in zip(dg, fd):
            if a is not None and b is not None and np.size(a):
                err = float(np.max(np.abs(a - b)))
                worst = max(worst, err)
                ok &= err <= 1e-4 * max(float(np.max(np.abs(b))), 1e-6)
        return ok, {"fd_max_abs": worst}
    return agrees


def _checkable(spec, inputs, direction):
    """`direction` without the moves a step cannot check (an input on a kink of the op, or infinite), or None
    where it has none."""
    moved = _finite_moves(_off_kinks(spec, inputs, direction) or direction, inputs)
    same = all(v is w or ((v is None) == (w is None) and np.array_equal(v, w)) for v, w in zip(moved, direction))
    return None if same else moved


def _finite_moves(direction, inputs):
    """`direction` with no move of an infinite input element (a mask's -inf): no step moves it, so its
    gradient cannot be checked by one."""
    out = []
    for v, a in zip(direction, inputs):
        if v is not None and a is not None and np.asarray(a).dtype.kind == "f":
            finite = np.isfinite(a)
            if not finite.all():  # else the same direction, not a copy of it (_checkable tells it by identity)
                v = np.where(np.broadcast_to(finite, np.shape(v)), v, 0.0)
        out.append(v)
    return out


def _reshaped(results, fd):
    return any(a is not None and b is not None and np.shape(a) != np.shape(b) for a, b in zip(results, fd))


class OracleRunner(ReferenceRunner):
    """onnx.reference on the node cast to float64, with irtrace's own ops and the overrides."""
    name = "oracle"
    cast = np.float64
    own_ops = True

    def __init__(self):
        super().__init__()
        self._new_ops = _overrides()

    def ops(self):
        return reference_ops() | {(IRTRACE_DOMAIN, "TrainBatchNormalization", 1), (IRTRACE_DOMAIN, "RecordedDropout", 1)}

    def new_ops(self, spec):
        # onnx.reference wants op names unique across domains: pass only this node's override
        return [c for c in self._new_ops if c.__name__ == spec.op_type and getattr(c, "op_domain", "") == spec.domain
                and spec.opset >= getattr(c, "oracle_since", 1)]

    def versions(self):
        return {"onnx": self.onnx.__version__, "torch": torch.__version__, "dtype": "float64"}


class OracleAdapter(NativeAdapter):
    modes = ("fwd", "vjp", "vjp2")
    script = None  # the arbiter, not a backend under test: it writes no repro scripts

    def __init__(self):
        super().__init__(OracleRunner())
        self.grad = TorchAdapter(TABLE, dtype=torch.float64)

    def _torch_entry(self, spec):
        try:
            return self.grad.table.lookup(spec.domain, spec.op_type, spec.opset)
        except Unsupported as e:
            raise Unsupported(f"oracle gradients come from torch float64, and {e}") from e

    def _directional(self, spec, inputs, direction, eps):
        """(f(x + eps v) - f(x - eps v)) / 2 eps with the reference forward, per output."""
        def shifted(sign):
            xs = [None if a is None else (np.asarray(a, np.float64) + sign * eps * v if v is not None else a)
                  for a, v in zip(inputs, direction)]
            return self.fwd(None, xs, spec)
        plus, minus = shifted(1.0), shifted(-1.0)

        def quotient(p, m):  # an output the same at both ends (an infinity a mask writes) does not move: 0
            p, m = np.asarray(p, np.float64), np.asarray(m, np.float64)
            with np.errstate(invalid="ignore"):
                return np.where(p == m, 0.0, (p - m) / (2 * eps))
        return [None if p is None or np.asarray(p).dtype.kind != "f" else quotient(p, m) for p, m in zip(plus, minus)]

    @staticmethod
    def _eps(inputs, direction):
        # the largest finite magnitude (a mask's -inf would make the step infinite)
        scale = max([float(np.max(np.abs(a), initial=0.0, where=np.isfinite(a))) for a, v in zip(inputs, direction)
                     if v is not None and np.size(a)] + [1.0])
        return 1e-6 * scale

    def differentiated_entry(self, entry, spec):
        return self._torch_entry(spec)

    def vjp(self, entry, inputs, spec, cots, nondiff=None):
        grads = self.grad.vjp(self._torch_entry(spec), inputs, spec, cots, nondiff)
        # the check moves the inputs whose gradients are judged: not those the schema marks
        # NonDifferentiable (Pad's value, Clip's bounds), which an op may read as numbers (.item())
        fixed = _nondifferentiable(spec)
        # the direction is drawn from the call itself, not from this process's history: a node's check is the
        # same whichever worker set, order or --nodes selection asks it
        # torch's float32 normals, widened: any direction checks a gradient, and these are drawn in a quarter of the
        # CPU of numpy's float64 ones (6 against 26 ns an element here; ResNet-50's vjp apart from its autograd and
        # checks 0.55 -> 0.30 CPU s, benchmarks/where_cpu_goes.py --baseline)
        rng = torch.Generator().manual_seed(zlib.crc32(f"{spec.name} {spec.op_type} {list(spec.inputs)}".encode()))
        direction = [torch.randn(np.shape(g), generator=rng).numpy().astype(np.float64)
                     if g is not None and k not in fixed else None for k, g in enumerate(grads)]
        direction = _checkable(spec, inputs, direction) or direction

        def agrees(fd):  # <g, v> against <cotangent, (f(x + eps v) - f(x - eps v)) / 2 eps>
            lhs = sum(float(np.sum(g * v)) for g, v in zip(grads, direction) if g is not None and v is not None)
            rhs = sum(float(np.sum(np.asarray(c, np.float64) * d)) for c, d in zip(cots, fd)
                      if c is not None and d is not None)
            return abs(lhs - rhs) <= FD_RTOL * max(abs(lhs), abs(rhs), 1e-12) + 1e-9, {"fd": rhs, "autograd": lhs}
        try:
            ok, details = self._check_along(spec, inputs, direction, cots, agrees)
        except _Unchecked as e:
            self.last_check = {"verified": None, "why": str(e)}
            return grads
        self.last_check = {"verified": bool(ok), **details}
        return grads

    def vjp2(self, entry, inputs, spec, cots, us, nondiff=None, part=None):
        dx, dg = self.grad.vjp2(self._torch_entry(spec), inputs, spec, cots, us, nondiff, part)
        # ds/dg is J u, a forward-mode product: check it against finite differences along u
        own = self._torch_entry(spec).flags.get("nondiff", ()) if nondiff is None else nondiff
        direction = [np.asarray(u, np.float64) if u is not None and k not in own and np.asarray(a).dtype.kind == "f"
                     else None for k, (u, a) in enumerate(zip(us, inputs))]
        details = {"fd_max_abs": 0.0}
        if part != "x" and any(v is not None for v in direction):
            try:
                ok, details = self._check_along(spec, inputs, direction, dg, _agrees_with(dg))
                off = _checkable(spec, inputs, direction) if not ok else None
                if off is not None:  # u moves inputs on a kink or infinite: J u checked along u without those moves
                    own_dg = self.grad.vjp2(self._torch_entry(spec), inputs, spec, cots, off, nondiff, "g")[1]
                    ok, details = self._check_along(spec, inputs, off, own_dg, _agrees_with(own_dg))
            except _Unchecked as e:
                self.last_check = {"verified": None, "why": str(e)}
                return dx, dg
            self.last_check = {"verified": bool(ok), **details}
        else:
            self.last_check = {"verified": True, **details}
        return dx, dg

    def _check_along(self, spec, inputs, direction, shaped, agrees):
        """(ok, details) of `agrees(fd)` on the finite differences `fd` along `direction` (one per output), at
        FD_SHRINKS' steps until one agrees (the last one's details); _Unchecked where none can be taken: the
        reference forward cannot run the node, or an output's shape is not that of `shaped` (the cotangents or
        the results it is compared with)."""
        ok, details = True, {}
        for shrink in FD_SHRINKS:
            try:
                fd = self._directional(spec, inputs, direction, self._eps(inputs, direction) * shrink)
            except Exception as e:  # the reference forward cannot run this node in float64
                raise _Unchecked(f"{type(e).__name__}: {e}"[:200]) from e
            if _reshaped(shaped, fd):
                raise _Unchecked(_RESHAPED)
            ok, details = agrees(fd)
            if ok:
                break
        return ok, details

    def extras(self):
        return {"magnitude": self.magnitude, "rounding": self.rounding}

    def magnitude(self, c, fixed=()):
        """The rounding-error model's size of every result (backends/oracle/model.py), as one group: from
        M, Q and N, this mode of the op in float64 on the absolute values, on the squares, and on the
        indicators of nonzero values of every float operand (inputs, cotangents, directions u), and the
        call's results (`c`: the call as computed, adapter.Computed). For a sum of products t_k = a_k b_k
        these are exactly sum |t_k|, sum t_k^2 and the number of nonzero terms per element (each a float32
        addition that rounds); for other accumulating ops, magnitudes of the terms; without N where the op
        cannot run on indicators. Each size rounded up to float32 where it fits (model.rounded_up); None
        for a result it cannot size. `fixed`: input positions that are not operands but parameters of the
        op (Resize's scales, Clip's bounds, Pad's value): left as they are."""
        from backends.oracle.model import rounded_up, rounding_size
        kinds = self._magnitudes(c, tuple(fixed))
        count = _averaged(c)
        if count:  # an average of `count` terms t_k = x_k / count: the op on the squares and the indicators
            # gives count * sum t_k^2 and the count's fraction (model.rounding_size wants sum t_k^2 and N)
            kinds = [kinds[0], [None if q is None else q / count for q in kinds[1]]] + \
                    [[None if n is None else n * count for n in kinds[2]]] * (len(kinds) > 2)
        sizes = []
        for k, y in enumerate(c.results):
            mags = [group[k] if k < len(group) else None for group in kinds]
            ok = y is not None and mags[0] is not None and mags[1] is not None
            sizes.append(rounded_up(rounding_size([g for g in mags if g is not None], y)) if ok else None)
        return [sizes]

    def _magnitudes(self, c, fixed):
        """[Ms, Qs, Ns] (a list per result), or [Ms, Qs] when the op cannot run on indicators."""
        def run(transform):
            def each(xs, keep=()):
                return [transform(np.asarray(a, np.float64)) if a is not None and np.asarray(a).dtype.kind == "f"
                        and k not in keep else a for k, a in enumerate(xs)]
            if c.mode == "fwd":
                return list(self.fwd(c.entry, each(c.inputs, fixed), c.spec))
            return self._differentiated(c, each(c.inputs, fixed), each(c.cots), each(c.us))
        kinds = [run(np.abs), run(np.square)]
        try:
            counts = run(lambda a: (a != 0).astype(np.float64))
        except Exception:  # noqa: BLE001 - an op that cannot run on indicators: no count, the model uses M and Q
            return kinds
        return kinds + [counts]

    def _differentiated(self, c, inputs, cots, us, entry=None):
        """c's vjp or vjp2 (c.mode) by torch's op in float64 (or `entry`, an op table's entry), on these
        operands: its results in order."""
        entry = entry or self._torch_entry(c.spec)
        nondiff = self.nondiff(entry, c.spec, c.inputs, c.wrt)
        if c.mode == "vjp":
            return list(self.grad.vjp(entry, inputs, c.spec, cots, nondiff))
        dx, dg = self.grad.vjp2(entry, inputs, c.spec, cots, us, nondiff, c.part)
        return list(dx) + list(dg)

    def rounding(self, c, samples=4):
        """Per result, how far float32 rounding of the op's own formula can move it at these inputs (`c`:
        the call as computed): the largest deviation of `samples` Monte Carlo arithmetic runs of torch in
        float64 from the exact result (backends/oracle/rounding.py), as one group, the larger of torch's
        formula's and the other formula's where rounding.py knows one. None for a result without a float value."""
        from backends.oracle.rounding import formula, spread

        def run(entry):
            if c.mode == "fwd":
                return list(self.grad.fwd(entry, c.inputs, c.spec))
            return self._differentiated(c, c.inputs, c.cots, c.us, entry)
        # the other formula differs in its gradients only: its forward is torch's, measured once
        torch_entry, other = self._torch_entry(c.spec), None if c.mode == "fwd" else formula(c.spec)
        exact = run(torch_entry)
        moved = spread(lambda: run(torch_entry), int(samples), exact=exact)
        if other is not None:
            also = spread(lambda: run(other), int(samples), exact=exact)
            moved = [a if a is None or b is None else np.maximum(a, b) for a, b in zip(moved, also)]
        return [moved]

    def chained(self, pairs, feeds, outputs, cots, penalty, shapes=None, leaves=None, progress=None):
        """The float64 chain: torch's op table in float64 (the oracle for chained errors)."""
        return self.grad.chained([(self._torch_entry(s), s) for _, s in pairs], feeds, outputs, cots, penalty,
                                 shapes, leaves, progress)


    def chained_rounding(self, pairs, feeds, outputs, cots, penalty, shapes=None, samples=2, leaves=None):
        """The chain's values and gradients as `chained` names them, each replaced by how far float32
        rounding of the whole chain can move it (Monte Carlo arithmetic, see `rounding`)."""
        from backends.oracle.rounding import spread
        values, grads = self.chained(pairs, feeds, outputs, cots, penalty, shapes, leaves)
        vnames, gnames = sorted(values), sorted(grads)

        def run():
            v, g = self.chained(pairs, feeds, outputs, cots, penalty, shapes, leaves)
            return [v.get(k) for k in vnames] + [g.get(k) for k in gnames]
        moved = spread(run, samples, exact=[values[k] for k in vnames] + [grads[k] for k in gnames])
        return dict(zip(vnames, moved[:len(vnames)])), dict(zip(gnames, moved[len(vnames):]))


def make_adapter():
    return OracleAdapter()


_AVERAGES = ("ReduceMean", "GlobalAveragePool", "AveragePool")


def _averaged(c):
    """How many terms each result of an averaging op's forward averages (ReduceMean, the average pools:
    a sum whose terms are x_k / count), or None for any other call. An AveragePool window that is partly
    padding without count_include_pad averages fewer: its count is taken as the kernel's (a wider bound)."""
    if c.mode != "fwd" or c.spec.op_type not in _AVERAGES or not c.results or c.inputs[0] is None:
        return None
    if c.spec.op_type == "AveragePool":
        return float(np.prod(c.spec.attrs.get("kernel_shape") or [1]))
    y = c.results[0]
    return float(np.size(c.inputs[0])) / max(float(np.size(y)), 1.0) if y is not None and np.size(y) else None
