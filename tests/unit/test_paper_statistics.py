"""The papers' statistics against hand computations on small tables: CAIRE C.9's
image-level Pearson averaged per country, AHEaD's regional alpha (the mean of its
countries' alphas), and each correlation's p-value against scipy's."""

from __future__ import annotations

from pathlib import Path

import krippendorff
import numpy as np
import pytest
from scipy import stats as sp

from metrics.stats import correlation_p
from refine.evaluate.caire.human import image_level, per_rater_country
from refine.human.groups import countries_alpha
from refine.human.ratings import Rating

LABELS = ["Brazil", "India", "Nigeria"]


def test_each_correlations_p_value_is_scipys():
    rng = np.random.default_rng(0)
    x = rng.normal(size=12)
    y = x + rng.normal(scale=1.5, size=12)
    assert correlation_p(x, y, "pearson") == pytest.approx(sp.pearsonr(x, y).pvalue, rel=1e-12)
    assert correlation_p(x, y, "spearman") == pytest.approx(sp.spearmanr(x, y).pvalue, rel=1e-12)
    assert correlation_p(x, y, "kendall") == pytest.approx(sp.kendalltau(x, y).pvalue, rel=1e-12)
    assert correlation_p([1, 2, 3], [4, 4, 4], "pearson") is None  # undefined
    assert correlation_p([1, 2], [3, 4], "pearson") is None  # too few pairs
    with pytest.raises(ValueError, match="unknown correlation"):
        correlation_p(x, y, "cosine")


def test_caire_tab2_is_the_image_level_pearson_averaged_over_each_countrys_images():
    # 4 images: two of Brazil's prompts, one of India's and one of Nigeria's; each scored
    # for the 3 countries, and rated by each country's raters (their mean)
    scores = [[5, 2, 1], [4, 4, 2], [1, 5, 3], [2, 2, 2]]
    origins = ["Brazil", "Brazil", "India", "Nigeria"]
    ratings = [[4.5, 2.0, 1.5], [3.0, 3.5, 3.0], [2.0, 4.0, 4.5], [1.0, 3.0, 5.0]]
    human = {(i, c): ratings[i][k] for i in range(4) for k, c in enumerate(LABELS)}
    columns, per_image = image_level(scores, LABELS, origins, human)
    by_hand = [float(np.corrcoef(s, r)[0, 1]) for s, r in zip(scores[:3], ratings[:3], strict=True)]
    assert per_image[:3] == pytest.approx(by_hand, abs=1e-12)
    assert per_image[3] is None  # its scores do not vary: undefined, left out
    assert columns["Brazil"].value == pytest.approx((by_hand[0] + by_hand[1]) / 2, abs=1e-12)
    assert columns["Brazil"].n == 2
    assert columns["India"].value == pytest.approx(by_hand[2], abs=1e-12)
    assert columns["Nigeria"].value is None and "none of its 1 images" in columns["Nigeria"].note
    want_avg = ((by_hand[0] + by_hand[1]) / 2 + by_hand[2]) / 2
    assert columns["Avg"].value == pytest.approx(want_avg, abs=1e-12)
    assert columns["Avg"].n == 2
    # Avg's interval: Brazil's two images resampled within Brazil, India's one kept, by hand
    rng = np.random.default_rng(0)
    brazil = np.array(by_hand[:2])[rng.integers(0, 2, size=(1000, 2))].mean(axis=1)
    india = np.array(by_hand[2:3])[rng.integers(0, 1, size=(1000, 1))].mean(axis=1)
    lo, hi = np.percentile((brazil + india) / 2, [2.5, 97.5])
    assert columns["Avg"].interval == pytest.approx((lo, hi), abs=1e-12)
    assert lo < want_avg < hi
    # an image rated by raters of only two countries is left out (a Pearson of two
    # pairs is always +-1)
    fewer = {k: v for k, v in human.items() if k != (2, "Nigeria")}
    columns, per_image = image_level(scores, LABELS, origins, fewer)
    assert per_image[2] is None and columns["India"].value is None

    # the other figure: per rater country, over the images, as scipy computes it
    other = per_rater_country(scores, LABELS, human)
    for k, c in enumerate(LABELS):
        x, y = [s[k] for s in scores], [r[k] for r in ratings]
        want = sp.pearsonr(x, y)
        assert other[c].value == pytest.approx(want.statistic, abs=1e-12)
        assert other[c].p == pytest.approx(want.pvalue, rel=1e-9)
        assert other[c].n == 4


class _NoBench:
    def meta(self, rating):  # ratings that carry their own country
        return None


def test_a_regions_alpha_is_the_mean_of_its_countries_alphas_with_the_pooled_beside():
    rng = np.random.default_rng(3)
    rows, data = [], {}
    # three Global South countries, 8 images each, raters who agree more or less
    for country, noise in (("Iran", 0.3), ("India", 1.0), ("Nigeria", 2.0)):
        truth = rng.integers(1, 6, size=8)
        given = np.clip(np.round(truth + rng.normal(scale=noise, size=(2, 8))), 1, 5)
        data[country] = given
        for w in range(2):
            for i in range(8):
                rows.append(
                    Rating(
                        Path(f"/x/{country}-{i}.png"),
                        f"{country}{i}",
                        f"r{w}",
                        {"faithfulness": float(given[w, i])},
                        country=country,
                    )  # fmt: skip
                )
    table = {"iran": "Global South", "india": "Global South", "nigeria": "Global South"}
    got = countries_alpha(rows, _NoBench(), table)
    each = {
        c: krippendorff.alpha(reliability_data=d, level_of_measurement="interval")
        for c, d in data.items()
    }
    for c, a in each.items():
        assert got["alpha_countries"][c]["faithfulness"] == pytest.approx(a, abs=1e-9)
    assert got["alpha"]["faithfulness"] == pytest.approx(np.mean(list(each.values())), abs=1e-9)
    pooled = np.concatenate(list(data.values()), axis=1)
    want = krippendorff.alpha(reliability_data=pooled, level_of_measurement="interval")
    assert got["alpha_pooled"]["faithfulness"] == pytest.approx(want, abs=1e-9)
    assert abs(got["alpha"]["faithfulness"] - want) > 0.01  # the two figures differ here
    ordinal = [
        krippendorff.alpha(reliability_data=d, level_of_measurement="ordinal")
        for d in data.values()
    ]
    assert got["alpha_ordinal"]["faithfulness"] == pytest.approx(np.mean(ordinal), abs=1e-9)
