"""metrics.stats: correlations equal scipy's, constant inputs undefined exactly as scipy
says, bootstrap intervals equal scipy per resample for a seed, the mean's interval by
hand, and Krippendorff's alpha against the values Krippendorff publishes."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy import stats as sp

from metrics import stats

# "Computing Krippendorff's alpha-reliability" (Krippendorff 2011): 4 coders, 12 units
A = [1, 2, 3, 3, 2, 1, 4, 1, 2, None, None, None]
B = [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, None, 3]
C = [None, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, None]
D = [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, None]
UNITS = [[v for v in row if v is not None] for row in zip(A, B, C, D, strict=True)]
SCIPY = {"spearman": sp.spearmanr, "kendall": sp.kendalltau, "pearson": sp.pearsonr}


@pytest.mark.parametrize(
    "level,value", [("nominal", 0.743), ("ordinal", 0.815), ("interval", 0.849)]
)
def test_alpha_matches_the_published_example(level, value):
    assert stats.krippendorff_alpha(UNITS, level) == pytest.approx(value, abs=5e-4)


def test_alpha_edge_cases():
    assert stats.krippendorff_alpha([[3, 3], [4, 4], [2, 2]]) == pytest.approx(1.0)
    assert stats.krippendorff_alpha([[3], [4]]) is None  # no unit rated twice
    assert stats.krippendorff_alpha([[3, 3], [3, 3]]) is None  # one value: undefined
    with pytest.raises(ValueError, match="level"):
        stats.krippendorff_alpha(UNITS, "ratio")


def test_correlations_equal_scipy_with_ties():
    rng = np.random.default_rng(0)
    x = rng.integers(1, 6, 40).astype(float)
    y = x + rng.normal(0, 1.2, 40).round()
    for name, fn in stats.CORRELATIONS.items():
        assert fn(x, y) == pytest.approx(SCIPY[name](x, y)[0], abs=1e-12)
    with pytest.raises(ValueError, match="NaN"):
        stats.spearman([1, float("nan")], [1, 2])


@pytest.mark.parametrize("value,n", [(0.1, 3), (0.3, 10), (1 / 3, 10), (5.0, 4)])
def test_a_constant_input_is_undefined_as_scipy_says(value, n):
    """The mean of three 0.1s is not exactly 0.1: computed by hand, Pearson came out 0.0
    where scipy says the input is constant and the correlation undefined."""
    x, y = np.full(n, value), np.arange(n, dtype=float)
    for name, fn in stats.CORRELATIONS.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert np.isnan(SCIPY[name](x, y)[0])
        assert fn(x, y) is None and fn(y, x) is None, name
    assert stats.pearson([1.0], [2.0]) is None


@pytest.mark.parametrize("n", [9, 100, 130])  # kendall: numpy (1, 4 chunks), scipy
@pytest.mark.parametrize("name", stats.CORRELATION_NAMES)
@pytest.mark.slow
def test_intervals_equal_scipy_on_each_resample(name, n):
    """The interval of every correlation is the percentiles of scipy's statistic over the
    same resamples (a loop of rng.integers for the seed), constant resamples left out."""
    rng = np.random.default_rng(5)
    x = rng.integers(1, 4, n).astype(float)  # few values: some resamples are constant
    y = rng.integers(1, 6, n).astype(float)
    got = stats.correlation_interval(x, y, name, seed=11, reps=400)
    draw, values = np.random.default_rng(11), []
    for _ in range(400):
        idx = draw.integers(0, n, size=n)
        a, b = x[idx], y[idx]
        if (a == a[0]).all() or (b == b[0]).all():
            continue
        values.append(SCIPY[name](a, b)[0])
    if n == 9:  # few pairs: the case of a constant resample was met
        assert len(values) < 400
    want = np.percentile(values, [2.5, 97.5])
    assert got == pytest.approx(tuple(want), abs=1e-12)
    if name == "kendall":  # divided as scipy divides: the same bits
        assert got == tuple(want)
    assert got == stats.correlation_interval(x, y, name, seed=11, reps=400)
    assert got != stats.correlation_interval(x, y, name, seed=12, reps=400)


def test_interval_edge_cases():
    assert stats.correlation_interval([1, 2], [2, 3], "pearson") is None  # two pairs
    # almost every resample of one distinct pair is constant: fewer than ten defined
    assert stats.correlation_interval([1, 1, 1, 2], [1, 1, 1, 2], "pearson", reps=10) is None
    with pytest.raises(ValueError, match="unknown correlation"):
        stats.correlation_interval([1, 2, 3], [1, 2, 3], "cosine")


def test_the_mean_interval_by_hand():
    values = [0.2, None, 0.5, 0.9, 0.4, 0.7]
    x = np.array([0.2, 0.5, 0.9, 0.4, 0.7])
    rng = np.random.default_rng(42)
    means = [x[rng.integers(0, 5, size=5)].mean() for _ in range(1000)]
    assert stats.mean_interval(values, seed=42) == pytest.approx(
        tuple(np.percentile(means, [2.5, 97.5])), abs=1e-12
    )
    assert stats.mean_interval([0.3]) is None and stats.mean_interval([None, 1.0]) is None


def test_alpha_equals_the_krippendorff_package_on_random_ratings():
    import krippendorff

    rng = np.random.default_rng(3)
    data = rng.integers(1, 6, size=(4, 30)).astype(float)
    data[rng.random(data.shape) < 0.2] = np.nan  # some images not rated by everyone
    units = [[v for v in col if not np.isnan(v)] for col in data.T]
    for level in ("interval", "ordinal", "nominal"):
        want = krippendorff.alpha(reliability_data=data, level_of_measurement=level)
        assert stats.krippendorff_alpha(units, level) == pytest.approx(want, abs=1e-9), level


def test_cohen_kappa_equals_scikit_learn():
    from sklearn.metrics import cohen_kappa_score

    rng = np.random.default_rng(5)
    a = rng.integers(1, 6, size=40)
    b = np.clip(a + rng.integers(-1, 2, size=40), 1, 5)
    for weights in (None, "linear", "quadratic"):
        want = cohen_kappa_score(a, b, weights=weights)
        assert stats.cohen_kappa(list(a), list(b), weights) == pytest.approx(want, abs=1e-12)
    words = ["yes", "no", "maybe", "yes", "no", "yes"]
    other = ["yes", "no", "no", "yes", "maybe", "yes"]
    assert stats.cohen_kappa(words, other, None) == pytest.approx(
        cohen_kappa_score(words, other), abs=1e-12
    )
    assert stats.cohen_kappa([3, 3], [3, 3]) is None  # one category: undefined


def test_fleiss_kappa_equals_statsmodels():
    from statsmodels.stats.inter_rater import aggregate_raters, fleiss_kappa

    rng = np.random.default_rng(7)
    cultures = np.array(["Iranian", "French", "Nigerian", "Thai", "Peruvian"])
    answers = cultures[rng.integers(0, 5, size=(25, 3))]
    answers[:10, 1] = answers[:10, 0]  # some agreement
    table, _ = aggregate_raters(answers)
    want = fleiss_kappa(table, method="fleiss")
    assert stats.fleiss_kappa([list(row) for row in answers]) == pytest.approx(want, abs=1e-12)
    # an item rated by a different number of raters is left out
    uneven = [list(row) for row in answers] + [["Iranian", "Thai"]]
    assert stats.fleiss_kappa(uneven) == pytest.approx(want, abs=1e-12)


@pytest.mark.slow
def test_the_paired_bootstrap_covers_a_known_difference_and_repeats():
    rng = np.random.default_rng(11)
    people = rng.normal(size=200)
    good = people + rng.normal(scale=0.5, size=200)  # agrees with people well
    poor = people + rng.normal(scale=2.0, size=200)  # and less well
    point, interval = stats.correlation_difference(good, poor, people, "pearson", seed=1)
    want = sp.pearsonr(good, people)[0] - sp.pearsonr(poor, people)[0]
    assert point == pytest.approx(want, abs=1e-12)
    assert interval[0] < want < interval[1] and interval[0] > 0  # clearly better
    again = stats.correlation_difference(good, poor, people, "pearson", seed=1)
    assert again == (point, interval)  # the same seed, the same interval
    assert stats.correlation_difference(good, poor, people, "pearson", seed=2)[1] != interval
    # by hand: the same resamples for both metrics
    idx = np.random.default_rng(1).integers(0, 200, size=(1000, 200))
    diffs = [sp.pearsonr(good[i], people[i])[0] - sp.pearsonr(poor[i], people[i])[0] for i in idx]
    lo, hi = np.percentile(diffs, [2.5, 97.5])
    assert interval == pytest.approx((lo, hi), abs=1e-9)
    # a metric against itself: no difference, and an interval of exactly 0
    assert stats.correlation_difference(good, good, people)[0] == 0.0
