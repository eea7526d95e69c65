"""How well a metric agrees with people: rank and linear correlations with bootstrap
intervals, and Krippendorff's alpha between raters (the ceiling a metric can reach).

* Pearson r: covariance over the product of standard deviations.
* Spearman rho: Pearson r of the ranks (ties get their average rank).
* Kendall tau-b: ``(concordant - discordant) / sqrt((n0 - n1) (n0 - n2))`` over all pairs,
  ``n0 = n (n - 1) / 2``, ``n1`` / ``n2`` the pairs tied in x / in y (a pair tied in both
  counts in both).
* A correlation is None when either side is constant (it is undefined).
* Bootstrap: ``reps`` resamples of the (x, y) pairs with replacement drawn with
  ``numpy.random.default_rng(seed)``; the 2.5th and 97.5th percentiles of the statistic
  over the resamples where it is defined.
* Krippendorff's alpha (interval metric by default, ordinal or nominal on request):
  ``1 - D_o / D_e`` from the coincidences of values within units; only units rated by two
  or more raters count.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np


def _pair(x: Sequence[float], y: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    a, b = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if a.ndim != 1 or a.shape != b.shape:
        raise ValueError(f"x and y must be vectors of one length, got {a.shape} and {b.shape}")
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        raise ValueError("x and y must hold finite numbers (no NaN)")
    return a, b


def pearson(x: Sequence[float], y: Sequence[float]) -> float | None:
    a, b = _pair(x, y)
    if a.size < 2:
        return None
    a, b = a - a.mean(), b - b.mean()
    den = math.sqrt(float((a * a).sum()) * float((b * b).sum()))
    if den == 0.0:
        return None
    return float(max(-1.0, min(1.0, float((a * b).sum()) / den)))


def ranks(x: Sequence[float]) -> np.ndarray:
    """1-based ranks, ties sharing their average rank."""
    a = np.asarray(x, dtype=float)
    order = np.argsort(a, kind="mergesort")
    out = np.empty(a.size)
    i = 0
    while i < a.size:
        j = i
        while j + 1 < a.size and a[order[j + 1]] == a[order[i]]:
            j += 1
        out[order[i : j + 1]] = (i + j) / 2 + 1
        i = j + 1
    return out


def spearman(x: Sequence[float], y: Sequence[float]) -> float | None:
    a, b = _pair(x, y)
    return pearson(ranks(a), ranks(b))


def kendall_tau_b(x: Sequence[float], y: Sequence[float]) -> float | None:
    a, b = _pair(x, y)
    n = a.size
    if n < 2:
        return None
    dx = np.sign(a[:, None] - a[None, :])
    dy = np.sign(b[:, None] - b[None, :])
    upper = np.triu_indices(n, 1)
    sx, sy = dx[upper], dy[upper]
    s = float((sx * sy).sum())
    n0 = n * (n - 1) / 2
    n1 = float((sx == 0).sum())
    n2 = float((sy == 0).sum())
    den = math.sqrt((n0 - n1) * (n0 - n2))
    if den == 0.0:
        return None
    return float(s / den)


CORRELATIONS: dict[str, Callable[[Sequence[float], Sequence[float]], float | None]] = {
    "spearman": spearman,
    "kendall": kendall_tau_b,
    "pearson": pearson,
}


def bootstrap(
    x: Sequence[float],
    y: Sequence[float],
    statistic: Callable[[np.ndarray, np.ndarray], float | None],
    seed: int = 0,
    reps: int = 1000,
) -> tuple[float, float] | None:
    """The 95% percentile bootstrap interval of ``statistic`` over resampled pairs (None
    with fewer than three pairs or fewer than ten resamples where it is defined)."""
    a, b = _pair(x, y)
    if a.size < 3:
        return None
    rng = np.random.default_rng(seed)
    values = []
    for _ in range(reps):
        idx = rng.integers(0, a.size, size=a.size)
        v = statistic(a[idx], b[idx])
        if v is not None:
            values.append(v)
    if len(values) < 10:
        return None
    lo, hi = np.percentile(values, [2.5, 97.5])
    return float(lo), float(hi)


def krippendorff_alpha(units: Sequence[Sequence[float]], level: str = "interval") -> float | None:
    """Krippendorff's alpha of ``units`` (one list of the values raters gave per unit; a
    unit with fewer than two values is left out). ``level``: interval (squared
    difference), ordinal (cumulative ranks of the values seen) or nominal. None when no
    unit has two values or every value is the same."""
    if level not in ("interval", "ordinal", "nominal"):
        raise ValueError(f"level must be interval, ordinal or nominal, got {level!r}")
    pairable = [np.asarray(u, dtype=float) for u in units if len(u) >= 2]
    if not pairable:
        return None
    values = np.concatenate(pairable)
    if not np.isfinite(values).all():
        raise ValueError("ratings must be finite numbers")
    n = values.size
    cats = np.unique(values)
    if cats.size < 2:
        return None
    # coincidence matrix o[c, k]: pairs of values within units, each unit weighted 1/(m-1)
    index = {c: i for i, c in enumerate(cats)}
    o = np.zeros((cats.size, cats.size))
    for u in pairable:
        m = u.size
        for i in range(m):
            for j in range(m):
                if i != j:
                    o[index[u[i]], index[u[j]]] += 1.0 / (m - 1)
    marg = o.sum(axis=1)
    if level == "interval":
        delta = (cats[:, None] - cats[None, :]) ** 2
    elif level == "nominal":
        delta = (cats[:, None] != cats[None, :]).astype(float)
    else:  # ordinal: the squared sum of the marginals between the two values
        cum = np.cumsum(marg)
        delta = np.zeros_like(o)
        for i in range(cats.size):
            for j in range(cats.size):
                lo, hi = min(i, j), max(i, j)
                between = cum[hi] - (cum[lo - 1] if lo > 0 else 0.0)
                delta[i, j] = (between - (marg[i] + marg[j]) / 2) ** 2
    d_o = float((o * delta).sum()) / n
    d_e = float((marg[:, None] * marg[None, :] * delta).sum()) / (n * (n - 1))
    if d_e == 0.0:
        return None
    return 1.0 - d_o / d_e
