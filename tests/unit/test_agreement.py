"""metrics.agreement: correlations against scipy, Krippendorff's alpha against the values
Krippendorff publishes for his reliability example, bootstrap intervals by seed."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from metrics import agreement as ag

# "Computing Krippendorff's alpha-reliability" (Krippendorff 2011): 4 coders, 12 units
A = [1, 2, 3, 3, 2, 1, 4, 1, 2, None, None, None]
B = [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, None, 3]
C = [None, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, None]
D = [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, None]
UNITS = [[v for v in row if v is not None] for row in zip(A, B, C, D, strict=True)]


@pytest.mark.parametrize(
    "level,value", [("nominal", 0.743), ("ordinal", 0.815), ("interval", 0.849)]
)
def test_alpha_matches_the_published_example(level, value):
    assert ag.krippendorff_alpha(UNITS, level) == pytest.approx(value, abs=5e-4)


def test_alpha_edge_cases():
    assert ag.krippendorff_alpha([[3, 3], [4, 4], [2, 2]]) == pytest.approx(1.0)
    assert ag.krippendorff_alpha([[3], [4]]) is None  # no unit rated twice
    assert ag.krippendorff_alpha([[3, 3], [3, 3]]) is None  # one value: undefined
    with pytest.raises(ValueError, match="level"):
        ag.krippendorff_alpha(UNITS, "ratio")


def test_correlations_equal_scipy_with_ties():
    rng = np.random.default_rng(0)
    x = rng.integers(1, 6, 40).astype(float)
    y = x + rng.normal(0, 1.2, 40).round()
    assert ag.spearman(x, y) == pytest.approx(stats.spearmanr(x, y)[0], abs=1e-12)
    assert ag.kendall_tau_b(x, y) == pytest.approx(stats.kendalltau(x, y)[0], abs=1e-12)
    assert ag.pearson(x, y) == pytest.approx(stats.pearsonr(x, y)[0], abs=1e-12)
    assert ag.pearson([1, 1, 1], [1, 2, 3]) is None
    with pytest.raises(ValueError, match="NaN"):
        ag.spearman([1, float("nan")], [1, 2])


def test_bootstrap_is_reproducible_with_its_seed():
    x, y = np.arange(20.0), np.arange(20.0) ** 1.5 + np.sin(np.arange(20.0)) * 30
    a = ag.bootstrap(x, y, ag.spearman, seed=3)
    assert a == ag.bootstrap(x, y, ag.spearman, seed=3)
    assert a != ag.bootstrap(x, y, ag.spearman, seed=4)
    rng = np.random.default_rng(3)
    vals = []
    for _ in range(1000):
        idx = rng.integers(0, 20, size=20)
        v = ag.spearman(x[idx], y[idx])
        if v is not None:
            vals.append(v)
    assert a == pytest.approx(tuple(np.percentile(vals, [2.5, 97.5])))
