"""CAIRE's pure parts: entity pooling and ranking, Jensen-Shannon distance, diversity."""

from __future__ import annotations

import math

import pytest

from metrics.caire import diversity, js_distance, pool_entities


def test_frequency_ranking_counts_hits_and_breaks_ties_by_best_similarity():
    pooled = pool_entities([3, 1, 3, 2, 1, 3], [0.5, 0.9, 0.4, 0.95, 0.2, 0.3], ranking="frequency")
    assert [(h.entity, h.hits) for h in pooled] == [(3, 3), (1, 2), (2, 1)]
    assert pooled[0].best_image_similarity == 0.5 and pooled[0].score == 3.0
    tie = pool_entities([1, 2], [0.3, 0.8], ranking="frequency")
    assert [h.entity for h in tie] == [2, 1]  # one hit each: the closer image wins


def test_similarity_ranking_follows_the_name_similarity():
    pooled = pool_entities([3, 1, 3, 2], [0.5, 0.9, 0.4, 0.95], {1: 0.2, 2: 0.1, 3: 0.6})
    assert [h.entity for h in pooled] == [3, 1, 2]
    assert [h.score for h in pooled] == [0.6, 0.2, 0.1]
    assert pooled[0].hits == 2
    with pytest.raises(ValueError, match="name similarity of every entity"):
        pool_entities([1, 4], [0.1, 0.2], {1: 0.3})
    with pytest.raises(ValueError, match="unknown ranking"):
        pool_entities([1], [0.1], ranking="votes")


def test_js_distance_by_hand_and_against_scipy():
    from scipy.spatial.distance import jensenshannon

    # p = (1, 0), q = (0, 1): m = (1/2, 1/2), each KL = ln 2, distance = sqrt(ln 2)
    assert js_distance([1, 0], [0, 1]) == pytest.approx(math.sqrt(math.log(2)))
    assert js_distance([2, 2, 2], [5, 5, 5]) == pytest.approx(0.0, abs=1e-12)
    p, q = [5, 1, 2], [1, 4, 4]
    assert js_distance(p, q) == pytest.approx(float(jensenshannon(p, q)), abs=1e-12)
    with pytest.raises(ValueError, match="non-negative"):
        js_distance([0, 0], [1, 1])


def test_diversity_summary_by_hand():
    from scipy.spatial.distance import jensenshannon

    labels = ["Iran", "Turkey", "India"]
    rows = [[5, 1, 1], [1, 5, 1], [5, 1, 1]]
    d = diversity(labels, rows)
    assert d["mean_per_label"] == pytest.approx({"Iran": 11 / 3, "Turkey": 7 / 3, "India": 1.0})
    assert d["coverage"] == pytest.approx(2 / 3) and d["covered_labels"] == ["Iran", "Turkey"]
    # rows 0 and 2 are the same (distance 0); the two other pairs are (5,1,1)/7 vs (1,5,1)/7
    # m = (3, 3, 1)/7: KL = 5/7 ln(5/3) + 1/7 ln(1/3), the same both ways
    kl = 5 / 7 * math.log(5 / 3) + 1 / 7 * math.log(1 / 3)
    far = math.sqrt(kl)
    assert far == pytest.approx(float(jensenshannon(rows[0], rows[1])))
    assert d["pairs"] == 3
    assert d["js_mean"] == pytest.approx(2 * far / 3)
    # population std of (far, 0, far)
    assert d["js_std"] == pytest.approx(math.sqrt(((far / 3) ** 2 * 2 + (2 * far / 3) ** 2) / 3))
    assert d["js_min"] == pytest.approx(0.0, abs=1e-12) and d["js_max"] == pytest.approx(far)


def test_diversity_of_one_image_and_bad_rows():
    one = diversity(["Iran"], [[3]])
    assert one["pairs"] == 0 and one["js_mean"] is None and one["coverage"] == 0.0
    with pytest.raises(ValueError, match="2 scores"):
        diversity(["a", "b"], [[1, 2, 3]])
    with pytest.raises(ValueError, match="1..5"):
        diversity(["a"], [[0]])
