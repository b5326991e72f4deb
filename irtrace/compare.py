"""Metrics, tolerances, oracle arbitration, verdicts. Results are data.

For one output of one node, mode and backend: `actual` from the backend, `ref` from the
reference (torch), `oracle` from float64. The verdict:
- MATCH: bitwise equal, or within `match_ulps` float32 ULPs of the output's scale;
- NOISE: differs from the oracle by no more than the reference itself does, times
  `noise_factor` (with a floor of `match_ulps` ULPs at scale, so exact ops don't make
  last-bit differences findings);
- DIVERGENT otherwise; NAN_MISMATCH / SHAPE_MISMATCH for NaN-Inf pattern / shape.
Without an oracle (or with --atol/--rtol): allclose(actual, ref, rtol, atol * scale).
"""
from dataclasses import asdict, dataclass, field

import numpy as np

MATCH, NOISE, DIVERGENT = "MATCH", "NOISE", "DIVERGENT"
NAN_MISMATCH, SHAPE_MISMATCH = "NAN_MISMATCH", "SHAPE_MISMATCH"
ERROR, CRASH, TIMEOUT, UNSUPPORTED = "ERROR", "CRASH", "TIMEOUT", "UNSUPPORTED"
VERDICTS = (MATCH, NOISE, DIVERGENT, NAN_MISMATCH, SHAPE_MISMATCH, ERROR, CRASH, TIMEOUT, UNSUPPORTED)
FAILING = (DIVERGENT, NAN_MISMATCH, SHAPE_MISMATCH, ERROR, CRASH, TIMEOUT)
SEVERITY = {v: i for i, v in enumerate((MATCH, UNSUPPORTED, NOISE, DIVERGENT, NAN_MISMATCH, SHAPE_MISMATCH,
                                        ERROR, TIMEOUT, CRASH))}
EPS32 = float(np.finfo(np.float32).eps)


@dataclass(frozen=True)
class Policy:
    """How verdicts are decided. Defaults: noise_factor=8, match_ulps=8, fallback rtol=1e-4,
    atol=1e-5 (relative to the output's scale); atol/rtol set by the user override the oracle."""
    noise_factor: float = 8.0
    match_ulps: float = 8.0
    rtol: float = 1e-4
    atol: float = 1e-5
    fixed: bool = False


@dataclass(frozen=True)
class Metrics:
    max_abs: float
    max_rel: float
    ulp: float
    cosine: float
    frac_out: float
    worst_index: tuple
    actual_at_worst: float
    ref_at_worst: float
    min_atol: float        # the smallest atol (rtol = 0) that would pass
    min_rtol: float        # the smallest rtol (atol = 0) that would pass


@dataclass(frozen=True)
class Result:
    node: str
    op_type: str
    backend: str
    mode: str
    output: str
    verdict: str
    metrics: Metrics = None
    oracle_abs: float = None         # max |ref - oracle|: the reference's own error
    backend_oracle_abs: float = None  # max |actual - oracle|
    closer_to_oracle: str = None      # "backend" | "reference" | "tie" | None
    allowed: float = None             # the tolerance the verdict used
    message: str = ""
    tags: tuple = ()
    time_s: float = None
    ref_time_s: float = None

    def to_json(self):
        d = asdict(self)
        if self.metrics is not None:
            d.update(asdict(self.metrics))
        d.pop("metrics")
        d["tags"] = list(self.tags)
        d["worst_index"] = list(d["worst_index"]) if d.get("worst_index") is not None else None
        return d


def _ulp_distance(a, b):
    """Max distance in float32 ULPs (as ordered integers)."""
    a32, b32 = np.asarray(a, np.float32).ravel(), np.asarray(b, np.float32).ravel()
    ia, ib = a32.view(np.int32).astype(np.int64), b32.view(np.int32).astype(np.int64)
    ia = np.where(ia < 0, -(ia & 0x7FFFFFFF), ia)
    ib = np.where(ib < 0, -(ib & 0x7FFFFFFF), ib)
    finite = np.isfinite(a32) & np.isfinite(b32)
    return float(np.max(np.abs(ia - ib)[finite])) if finite.any() else 0.0


def metrics(actual, ref, rtol=1e-4, atol=0.0):
    with np.errstate(invalid="ignore", over="ignore"):
        return _metrics(actual, ref, rtol, atol)


def _metrics(actual, ref, rtol, atol):
    a, r = np.asarray(actual, np.float64), np.asarray(ref, np.float64)
    if a.size == 0:
        return Metrics(0.0, 0.0, 0.0, 1.0, 0.0, (), 0.0, 0.0, 0.0, 0.0)
    finite = np.isfinite(a) & np.isfinite(r)
    d = np.where(finite, np.abs(a - r), 0.0)
    # relative to |ref|, but never to values below float32 resolution at the output's scale
    scale = float(np.max(np.abs(np.where(finite, r, 0.0)))) if r.size else 0.0
    rel = np.where(finite, d / np.maximum(np.abs(r), max(EPS32 * scale, 1e-30)), 0.0)
    rel = np.where(d == 0, 0.0, rel)
    worst = np.unravel_index(int(np.argmax(d)), a.shape) if a.ndim else ()
    na, nr = np.linalg.norm(np.where(finite, a, 0)), np.linalg.norm(np.where(finite, r, 0))
    cos = float(np.sum(np.where(finite, a * r, 0)) / (na * nr)) if na > 0 and nr > 0 else (1.0 if na == nr else 0.0)
    out = d > atol + rtol * np.abs(r)
    return Metrics(float(d.max()), float(rel.max()), _ulp_distance(a, r), cos, float(out.mean()),
                   tuple(int(i) for i in worst), float(a[worst]), float(r[worst]), float(d.max()), float(rel.max()))


def _nonfinite_pattern_differs(a, r):
    return not (np.array_equal(np.isnan(a), np.isnan(r)) and np.array_equal(np.isposinf(a), np.isposinf(r))
                and np.array_equal(np.isneginf(a), np.isneginf(r)))


def judge(actual, ref, oracle=None, policy=Policy()):
    """(verdict, metrics, extras dict) for one output."""
    a, r = np.asarray(actual), np.asarray(ref)
    if a.shape != r.shape:
        return SHAPE_MISMATCH, None, {"message": f"shape {list(a.shape)} vs reference {list(r.shape)}"}
    if a.dtype.kind in "biu" or r.dtype.kind in "biu" or a.dtype == np.bool_:
        m = metrics(a.astype(np.float64), r.astype(np.float64))
        return (MATCH if np.array_equal(a, r) else DIVERGENT), m, {}
    a64, r64 = a.astype(np.float64), r.astype(np.float64)
    if _nonfinite_pattern_differs(a64, r64):
        m = metrics(a64, r64)
        n = int(np.sum(np.isfinite(a64) != np.isfinite(r64)) + np.sum(np.isnan(a64) != np.isnan(r64)))
        return NAN_MISMATCH, m, {"message": f"non-finite pattern differs at {n} elements"}
    m = metrics(a64, r64, policy.rtol)
    if np.array_equal(a64, r64, equal_nan=True):
        return MATCH, m, {}
    finite = np.isfinite(r64)
    if oracle is not None and np.shape(oracle) != r64.shape:
        oracle = None  # an oracle that cannot say anything about this shape does not arbitrate
    base = oracle if oracle is not None else r64
    scale = float(np.max(np.abs(np.where(finite, base, 0)))) if r64.size else 0.0
    floor = policy.match_ulps * EPS32 * max(scale, np.finfo(np.float32).tiny)
    extras = {}
    if policy.fixed or oracle is None:
        ok = np.allclose(a64, r64, rtol=policy.rtol, atol=policy.atol * (1.0 if policy.fixed else max(scale, 1.0)),
                         equal_nan=True)
        extras["allowed"] = policy.atol
        if not policy.fixed and m.max_abs <= floor:
            return MATCH, m, extras
        return (NOISE if ok else DIVERGENT), m, extras
    o = np.asarray(oracle, np.float64)
    fin = np.isfinite(o) & finite
    ref_err = float(np.max(np.abs(np.where(fin, r64 - o, 0)))) if o.size else 0.0
    b_err = float(np.max(np.abs(np.where(fin, a64 - o, 0)))) if o.size else 0.0
    allowed = max(policy.noise_factor * ref_err, floor)
    extras.update(oracle_abs=ref_err, backend_oracle_abs=b_err, allowed=allowed,
                  closer_to_oracle="tie" if abs(b_err - ref_err) <= floor else
                  ("backend" if b_err < ref_err else "reference"))
    if m.max_abs <= floor:
        return MATCH, m, extras
    return (NOISE if b_err <= allowed else DIVERGENT), m, extras


def close(actual, expected, rtol=1e-4, atol=1e-5):
    """(ok, max abs) for export checks and alignment: allclose with `atol` relative to the expected
    value's scale (at least 1), NaN equal to NaN; a shape mismatch is (False, inf)."""
    a, e = np.asarray(actual, np.float64), np.asarray(expected, np.float64)
    if a.shape != e.shape:
        return False, float("inf")
    if e.size == 0:
        return True, 0.0
    scale = max(float(np.max(np.abs(np.where(np.isfinite(e), e, 0.0)))), 1.0)
    with np.errstate(invalid="ignore"):
        d = np.where(np.isnan(a) & np.isnan(e), 0.0, np.abs(a - e))
    return bool(np.allclose(a, e, rtol=rtol, atol=atol * scale, equal_nan=True)), float(np.nanmax(d))


@dataclass
class Finding:
    id: str
    backend: str
    op_type: str
    mode: str
    verdict: str
    signature: str
    nodes: list = field(default_factory=list)
    first_node: str = ""
    module: str = ""
    file_line: str = ""
    worst: dict = field(default_factory=dict)
    tags: list = field(default_factory=list)
    message: str = ""
