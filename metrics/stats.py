"""Statistics of the benchmarks and of agreement with people, on scipy.

* Correlations: ``scipy.stats.pearsonr``, ``spearmanr`` and ``kendalltau`` (tau-b). A
  correlation is None (undefined) with fewer than two pairs or when either side is
  constant, tested exactly as scipy tests it (every value equal to the first), so no
  float rounding in a mean can turn a constant input into a number.
* p-values (:func:`correlation_p`): scipy's own, two-sided, against no correlation.
* Ranks: ``scipy.stats.rankdata`` (ties share their average rank).
* Bootstrap intervals: ``reps`` resamples with replacement drawn with
  ``numpy.random.default_rng(seed)`` (one row of indices per resample), the 2.5th and
  97.5th percentiles of the statistic over the resamples where it is defined. Drawn by
  hand rather than by ``scipy.stats.bootstrap``, whose resampling order differs: the
  intervals stay those of every bench and agree file already written for the same seed.
  Pearson and Spearman are computed for all resamples at once (one matrix operation
  instead of 1,000 scipy calls); Kendall's tau-b too for up to 100 pairs (scipy's
  formula, the same bits), scipy's per resample above.
* One paired bootstrap (:func:`paired_bootstrap`) for every paired comparison: means,
  correlations, the difference between two metrics' correlations with people on the
  same images, a bench's generators on the same prompts.
* Cohen's (weighted) kappa and Fleiss' kappa, by their formulas in numpy; the values equal
  scikit-learn's ``cohen_kappa_score`` and statsmodels' ``fleiss_kappa``
  (tests/unit/test_stats.py).
* Krippendorff's alpha (interval, ordinal or nominal): ``1 - D_o / D_e`` from the
  coincidences of values within units; only units with two or more values count. scipy
  has no alpha; the values equal the ``krippendorff`` package's (tests/unit/test_stats.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

BOOTSTRAP = 1000
CORRELATION_NAMES = ("spearman", "kendall", "pearson")


def _pair(x: Sequence[float], y: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    a, b = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if a.ndim != 1 or a.shape != b.shape:
        raise ValueError(f"x and y must be vectors of one length, got {a.shape} and {b.shape}")
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        raise ValueError("x and y must hold finite numbers (no NaN)")
    return a, b


def constant(a: np.ndarray) -> bool:
    """scipy's own test of a constant input: every value equals the first."""
    return bool((a == a[0]).all())


def _defined(a: np.ndarray, b: np.ndarray) -> bool:
    return a.size >= 2 and not constant(a) and not constant(b)


def pearson(x: Sequence[float], y: Sequence[float]) -> float | None:
    from scipy import stats

    a, b = _pair(x, y)
    return float(stats.pearsonr(a, b).statistic) if _defined(a, b) else None


def spearman(x: Sequence[float], y: Sequence[float]) -> float | None:
    from scipy import stats

    a, b = _pair(x, y)
    return float(stats.spearmanr(a, b).statistic) if _defined(a, b) else None


def kendall(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Kendall's tau-b."""
    from scipy import stats

    a, b = _pair(x, y)
    return float(stats.kendalltau(a, b).statistic) if _defined(a, b) else None


def ranks(x: Sequence[float]) -> np.ndarray:
    """1-based ranks, ties sharing their average rank."""
    from scipy import stats

    return stats.rankdata(np.asarray(x, dtype=float))


CORRELATIONS: dict[str, Callable[[Sequence[float], Sequence[float]], float | None]] = {
    "spearman": spearman,
    "kendall": kendall,
    "pearson": pearson,
}


# -- bootstrap -----------------------------------------------------------------------
def resamples(n: int, seed: int, reps: int) -> np.ndarray:
    """``reps`` rows of ``n`` indices drawn with replacement: the same draws, row by row,
    as ``reps`` calls of ``rng.integers(0, n, size=n)``."""
    return np.random.default_rng(seed).integers(0, n, size=(reps, n))


def _percentiles(values: np.ndarray) -> tuple[float, float]:
    lo, hi = np.percentile(values, [2.5, 97.5])
    return float(lo), float(hi)


def paired_bootstrap(
    statistic: Callable[..., np.ndarray],
    *columns: Sequence[float],
    seed: int = 0,
    reps: int = BOOTSTRAP,
    least: int = 1,
) -> tuple[float, float] | None:
    """The product's one paired bootstrap: the rows of ``columns`` (one value a row each,
    the same rows: prompts, images) resampled with replacement ``reps`` times, the same
    indices for every column; ``statistic`` gives one value per resample from the
    resampled columns (arrays of ``reps`` x n, NaN where it is undefined); the 95%
    percentile interval of its defined values. None with fewer than two rows, or fewer than
    ``least`` defined values."""
    cols = [np.asarray(c, dtype=float) for c in columns]
    n = cols[0].size
    if any(c.size != n for c in cols):
        raise ValueError("paired columns have one value a row each")
    if n < 2:
        return None
    idx = resamples(n, seed, reps)
    values = np.asarray(statistic(*(c[idx] for c in cols)), dtype=float)
    values = values[~np.isnan(values)]
    if values.size < least:
        return None
    return _percentiles(values)


def mean_interval(
    values: Sequence[float | None], seed: int = 42, reps: int = BOOTSTRAP
) -> tuple[float, float] | None:
    """The 95% percentile bootstrap interval of the mean of the values given (None left
    out; None with fewer than two)."""
    x = [v for v in values if v is not None]
    return paired_bootstrap(lambda r: r.mean(axis=1), x, seed=seed, reps=reps)


def mean_of(values: Sequence[float | None]) -> float | None:
    """The mean of the values given (None left out); None where none is."""
    got = [v for v in values if v is not None]
    return sum(got) / len(got) if got else None


def mean_stat(values: Sequence[float | None], seed: int = 42) -> dict[str, Any]:
    """``{"mean", "interval"}``: the mean of the values given (None left out) and its 95%
    percentile bootstrap interval (:func:`mean_interval`, drawn with ``seed``)."""
    return {"mean": mean_of(values), "interval": mean_interval(values, seed)}


def paired_difference(diffs: Sequence[float], seed: int = 42) -> dict[str, Any]:
    """One thing against another on their common prompts, from the differences of each
    prompt's values (other - base): how many, their mean, its 95% bootstrap interval and
    the share of prompts improved."""
    return {
        "prompts": len(diffs),
        "mean_difference": mean_of(diffs),
        "interval": mean_interval(diffs, seed),
        "share_improved": (sum(d > 0 for d in diffs) / len(diffs)) if diffs else None,
    }


# how a catalog metric's values are pooled over prompts or cells (metrics.catalog.Metric's
# ``pool``, read by metrics.catalog.pooled): each ``(values, seed) -> {"mean", "interval"}``
POOLS: dict[str, Callable[[Sequence[float | None], int], dict[str, Any]]] = {"mean": mean_stat}


def mean_of_means_interval(
    groups: Sequence[Sequence[float]], seed: int = 0, reps: int = BOOTSTRAP
) -> tuple[float, float] | None:
    """The 95% percentile bootstrap interval of the mean of the groups' means (CAIRE C.9's
    Avg over countries): each resample draws every group's values anew within the group
    (one generator, group after group), so each group keeps its size. None where no group
    has two values."""
    kept = [np.asarray(g, dtype=float) for g in groups if len(g)]
    if not kept or all(g.size < 2 for g in kept):
        return None
    rng = np.random.default_rng(seed)
    means = np.stack([g[rng.integers(0, g.size, size=(reps, g.size))].mean(axis=1) for g in kept])
    return _percentiles(means.mean(axis=0))


def _rows_pearson(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Pearson r of each row pair, NaN where a row is constant (every value equal to
    the row's first, as scipy tests it)."""
    defined = ~((a == a[:, :1]).all(axis=1) | (b == b[:, :1]).all(axis=1))
    am = a - a.mean(axis=1, keepdims=True)
    bm = b - b.mean(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = (am * bm).sum(axis=1) / np.sqrt((am * am).sum(axis=1) * (bm * bm).sum(axis=1))
    return np.where(defined, np.clip(r, -1.0, 1.0), np.nan)


def _rows_kendall(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Kendall's tau-b of each row pair, NaN where a row is constant: over the pairs
    i < j, the sum of sign(a_i - a_j) sign(b_i - b_j) over the root of the products of
    the pairs untied in a and untied in b (scipy's tau-b, to the last bit). Rows of up
    to 100 values go through numpy at once, in chunks of about 4 MB: for 1000 resamples
    of 40 pairs that is 0.02 s against 0.14 s for scipy's kendalltau row by row, and the
    two meet near 120 values, past which scipy's n log n per row is the faster."""
    n = a.shape[1]
    if n > 100:
        return np.array(
            [kendall(p, q) if _defined(p, q) else np.nan for p, q in zip(a, b, strict=True)],
            dtype=float,
        )
    i, j = np.triu_indices(n, k=1)
    out = np.empty(a.shape[0])
    step = max(1, 500_000 // max(1, i.size))
    for start in range(0, a.shape[0], step):
        ra, rb = a[start : start + step], b[start : start + step]
        sa, sb = np.sign(ra[:, i] - ra[:, j]), np.sign(rb[:, i] - rb[:, j])
        nx, ny = np.count_nonzero(sa, axis=1), np.count_nonzero(sb, axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            # divided as scipy divides, so that the two agree to the last bit
            tau = (sa * sb).sum(axis=1) / np.sqrt(nx.astype(float)) / np.sqrt(ny.astype(float))
        out[start : start + step] = np.where(nx * ny > 0, np.clip(tau, -1.0, 1.0), np.nan)
    return out


def correlation_interval(
    x: Sequence[float], y: Sequence[float], name: str, seed: int = 0, reps: int = BOOTSTRAP
) -> tuple[float, float] | None:
    """The 95% percentile bootstrap interval of a correlation (``spearman``, ``kendall``
    or ``pearson``) over resampled pairs; None with fewer than three pairs or fewer than
    ten resamples where it is defined."""
    if name not in CORRELATIONS:
        raise ValueError(f"unknown correlation {name!r} (one of {', '.join(CORRELATIONS)})")
    a, b = _pair(x, y)
    if a.size < 3:
        return None
    return paired_bootstrap(
        lambda ra, rb: rows_correlation(ra, rb, name), a, b, seed=seed, reps=reps, least=10
    )


def correlation_p(x: Sequence[float], y: Sequence[float], name: str) -> float | None:
    """The two-sided p-value of a correlation (``spearman``, ``kendall`` or ``pearson``)
    against none, as scipy's ``pearsonr``, ``spearmanr`` and ``kendalltau`` give it (the
    t distribution for Pearson and Spearman, the exact or normal one for Kendall's tau-b);
    None where the correlation is undefined or with fewer than three pairs."""
    from scipy import stats

    if name not in CORRELATIONS:
        raise ValueError(f"unknown correlation {name!r} (one of {', '.join(CORRELATIONS)})")
    a, b = _pair(x, y)
    if a.size < 3 or not _defined(a, b):
        return None
    test = {"pearson": stats.pearsonr, "spearman": stats.spearmanr, "kendall": stats.kendalltau}
    return float(test[name](a, b).pvalue)


def rows_correlation(a: np.ndarray, b: np.ndarray, name: str) -> np.ndarray:
    """A correlation (``spearman``, ``kendall`` or ``pearson``) of each row pair of two
    matrices, NaN where a row is constant."""
    from scipy import stats

    if name == "pearson":
        return _rows_pearson(a, b)
    if name == "spearman":
        # a row constant before ranking is constant after it, and only then
        return _rows_pearson(stats.rankdata(a, axis=1), stats.rankdata(b, axis=1))
    return _rows_kendall(a, b)


def correlation_difference(
    x1: Sequence[float],
    x2: Sequence[float],
    y: Sequence[float],
    name: str = "spearman",
    seed: int = 0,
    reps: int = BOOTSTRAP,
) -> tuple[float | None, tuple[float, float] | None]:
    """How much better one metric (``x1``) agrees with people (``y``) than another
    (``x2``) on the same images: corr(x1, y) - corr(x2, y), and the paired bootstrap's
    interval of that difference (the images resampled once for both)."""
    a, b, c = (np.asarray(v, dtype=float) for v in (x1, x2, y))
    if not (a.size == b.size == c.size):
        raise ValueError("x1, x2 and y need one value per image each")
    fn = CORRELATIONS[name]
    first, second = fn(a, c), fn(b, c)
    point = None if first is None or second is None else first - second
    if a.size < 3:
        return point, None
    interval = paired_bootstrap(
        lambda r1, r2, ry: rows_correlation(r1, ry, name) - rows_correlation(r2, ry, name),
        a, b, c, seed=seed, reps=reps, least=10,
    )  # fmt: skip
    return point, interval


# -- agreement between raters ----------------------------------------------------------
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
    # coincidence matrix o[c, k]: pairs of values within units, each unit weighted 1/(m-1):
    # per unit, the outer product of its category counts less its own pairs of a value
    o = np.zeros((cats.size, cats.size))
    for u in pairable:
        counts = np.bincount(np.searchsorted(cats, u), minlength=cats.size).astype(float)
        o += (np.outer(counts, counts) - np.diag(counts)) / (u.size - 1)
    marg = o.sum(axis=1)
    if level == "interval":
        delta = (cats[:, None] - cats[None, :]) ** 2
    elif level == "nominal":
        delta = (cats[:, None] != cats[None, :]).astype(float)
    else:  # ordinal: the squared sum of the marginals between the two values
        cum = np.concatenate([[0.0], np.cumsum(marg)])
        lo = np.minimum.outer(np.arange(cats.size), np.arange(cats.size))
        hi = np.maximum.outer(np.arange(cats.size), np.arange(cats.size))
        delta = (cum[hi + 1] - cum[lo] - (marg[:, None] + marg[None, :]) / 2) ** 2
    d_o = float((o * delta).sum()) / n
    d_e = float((marg[:, None] * marg[None, :] * delta).sum()) / (n * (n - 1))
    if d_e == 0.0:
        return None
    return 1.0 - d_o / d_e


def cohen_kappa(
    a: Sequence[Any], b: Sequence[Any], weights: str | None = "quadratic"
) -> float | None:
    """Cohen's kappa of two raters' answers to the same items, weighted (``linear`` or
    ``quadratic``: by the distance between the categories' places in their sorted order,
    as scikit-learn weighs them) or not (None). None with no item, or when the expected
    disagreement is 0 (one category only)."""
    if len(a) != len(b):
        raise ValueError("two raters' answers to the same items")
    if not len(a):
        return None
    cats = sorted(set(a) | set(b))
    k = len(cats)
    place = {c: i for i, c in enumerate(cats)}
    o = np.zeros((k, k))
    for x, y in zip(a, b, strict=True):
        o[place[x], place[y]] += 1
    e = np.outer(o.sum(axis=1), o.sum(axis=0)) / o.sum()
    i, j = np.indices((k, k))
    if weights is None:
        w = (i != j).astype(float)
    elif weights == "linear":
        w = np.abs(i - j).astype(float)
    elif weights == "quadratic":
        w = ((i - j) ** 2).astype(float)
    else:
        raise ValueError(f"weights: linear, quadratic or None, not {weights!r}")
    expected = float((w * e).sum())
    if expected == 0.0:
        return None
    return 1.0 - float((w * o).sum()) / expected


def fleiss_kappa(units: Sequence[Sequence[Any]]) -> float | None:
    """Fleiss' kappa of nominal answers: one list of the answers an item got per item,
    every item rated by the same number of raters (items with another number are left
    out: the most common number is kept). None when fewer than two items remain or every
    answer is the same."""
    from collections import Counter

    rated = [list(u) for u in units if len(u) >= 2]
    if not rated:
        return None
    m = Counter(len(u) for u in rated).most_common(1)[0][0]
    rated = [u for u in rated if len(u) == m]
    if len(rated) < 2:
        return None
    cats = sorted({x for u in rated for x in u}, key=str)
    if len(cats) < 2:
        return None
    table = np.array([[u.count(c) for c in cats] for u in rated], dtype=float)
    n_items = table.shape[0]
    p_j = table.sum(axis=0) / (n_items * m)
    p_i = ((table * table).sum(axis=1) - m) / (m * (m - 1))
    p_bar, p_e = float(p_i.mean()), float((p_j * p_j).sum())
    if p_e == 1.0:
        return None
    return (p_bar - p_e) / (1.0 - p_e)
