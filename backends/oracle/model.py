"""The rounding-error model's size of each element: what float32 rounding of an accumulating op can
move it by, in units of c·ε (docs/report.md, "The rounding-error model"):

    size = √n · max(|y|, √Q),   n = max(N, M² / Q)

M = Σ|t_k|, Q = Σ t_k² and N the number of nonzero terms summed into the element (the oracle's
magnitudes), y the float64 result. The host's bound is c · ε · size (irtrace/compare.py), so the oracle
answers one array per result instead of its three magnitudes and the result again."""
import numpy as np

_F32_MAX = float(np.finfo(np.float32).max)


def rounding_size(magnitude, exact):
    """size (float64; 0 where it is not finite: the model says nothing there) from `magnitude`, (M, Q)
    or (M, Q, N), and the float64 result `exact`; None where M and Q are not shaped like it."""
    mags = [np.abs(np.asarray(x, np.float64)) for x in magnitude]
    m, q = mags[:2]
    if m.shape != q.shape or m.shape != np.shape(exact):
        return None
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        n = np.where(q > 0, m * m / np.where(q > 0, q, 1.0), 1.0)
        if len(mags) > 2 and mags[2].shape == m.shape:
            n = np.maximum(n, np.where(np.isfinite(mags[2]), mags[2], 0.0))
        size = np.maximum(np.abs(np.asarray(exact, np.float64)), np.sqrt(q))
        size = np.sqrt(np.maximum(n, 1.0)) * np.where(np.isfinite(size), size, 0.0)
    return np.where(np.isfinite(size), size, 0.0)


def rounded_up(size):
    """`size` in float32, each element rounded up to the next float32 (a bound is never narrowed, and
    widened by at most one float32 ULP), where every element fits; float64 as it is where one does not.
    Half the bytes of a result's model, in the answer and in the cache."""
    if size is None or not size.size or float(size.max()) > _F32_MAX:
        return size
    low = size.astype(np.float32)
    return np.where(low.astype(np.float64) < size, np.nextafter(low, np.float32(np.inf)), low)
