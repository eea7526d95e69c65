"""CAIRE's pure parts: pooling retrieved entities, re-ranking them, and the diversity
summary of 1-5 relevance scores over a set of images.

Conventions (as in CAIRE): an image's embedding retrieves the top-K knowledge-base images;
the entities behind them are pooled and ranked either by how often they were hit
(``frequency``) or by the cosine between the image and the entity's name
(``similarity``). A judge rates each culture label 1-5; the score is the argmax of the
probabilities of "1".."5". Over a set of images, diversity is the pairwise Jensen-Shannon
distance (natural logarithm, as ``scipy.spatial.distance.jensenshannon``) between the
images' score rows normalised to sum 1.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

RANKINGS = ("similarity", "frequency")


def unit_score(score: float) -> float:
    """A 1-5 relevance score on a 0-1 scale, (score - 1) / 4, to be drawn beside the
    0-1 metrics."""
    return (score - 1.0) / 4.0


@dataclass(frozen=True)
class EntityHit:
    """An entity found by retrieval: how many of the top-K images were its own, the best
    of their similarities, and the score it is ranked by."""

    entity: int
    hits: int
    best_image_similarity: float
    score: float


def pool_entities(
    image_entities: Sequence[int],
    image_similarities: Sequence[float],
    name_similarity: dict[int, float] | None = None,
    ranking: str = "similarity",
) -> list[EntityHit]:
    """The entities behind retrieved images, best first.

    ``image_entities[i]`` is the entity of the i-th retrieved image and
    ``image_similarities[i]`` its similarity to the query. ``ranking="frequency"`` ranks by
    the number of hits (ties: the best image similarity); ``"similarity"`` ranks by
    ``name_similarity[entity]``, the cosine between the query image and the entity's name
    (ties: hits).
    """
    if ranking not in RANKINGS:
        raise ValueError(f"unknown ranking {ranking!r}; use one of {', '.join(RANKINGS)}")
    if len(image_entities) != len(image_similarities):
        raise ValueError(
            f"{len(image_entities)} entities but {len(image_similarities)} similarities"
        )
    hits: dict[int, int] = {}
    best: dict[int, float] = {}
    for e, s in zip(image_entities, image_similarities, strict=True):
        e = int(e)
        hits[e] = hits.get(e, 0) + 1
        best[e] = max(best.get(e, -math.inf), float(s))
    if ranking == "similarity":
        if name_similarity is None or any(e not in name_similarity for e in hits):
            raise ValueError("similarity ranking needs the name similarity of every entity")
        pooled = [EntityHit(e, hits[e], best[e], float(name_similarity[e])) for e in hits]
        pooled.sort(key=lambda h: (-h.score, -h.hits, -h.best_image_similarity, h.entity))
    else:
        pooled = [EntityHit(e, hits[e], best[e], float(hits[e])) for e in hits]
        pooled.sort(key=lambda h: (-h.hits, -h.best_image_similarity, h.entity))
    return pooled


def js_distance(p: Sequence[float], q: Sequence[float]) -> float:
    """Jensen-Shannon distance with the natural logarithm: sqrt of the mean of
    KL(p || m) and KL(q || m), m = (p + q) / 2. Both are normalised to sum 1 first."""
    a = np.asarray(p, dtype=np.float64)
    b = np.asarray(q, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"rows must be vectors of one length, got {a.shape} and {b.shape}")
    if (a < 0).any() or (b < 0).any() or a.sum() <= 0 or b.sum() <= 0:
        raise ValueError("rows must be non-negative with a positive sum")
    a, b = a / a.sum(), b / b.sum()
    m = (a + b) / 2.0

    def kl(x: np.ndarray) -> float:
        nz = x > 0
        return float(np.sum(x[nz] * np.log(x[nz] / m[nz])))

    return math.sqrt(max(0.0, (kl(a) + kl(b)) / 2.0))


def diversity(labels: Sequence[str], scores: Sequence[Sequence[float]]) -> dict[str, Any]:
    """The batch summary of a set of images' 1-5 scores (one row per image, one column per
    label): the mean score per label, the share of labels that some image rates 4 or more,
    and the pairwise Jensen-Shannon distances between rows normalised to sum 1 (mean,
    population std, min, max; None with fewer than two images)."""
    labels = list(labels)
    if not labels:
        raise ValueError("no labels")
    rows = np.asarray(scores, dtype=np.float64)
    if rows.ndim != 2 or rows.shape[0] == 0:
        raise ValueError("scores must be a non-empty list of rows, one per image")
    if rows.shape[1] != len(labels):
        raise ValueError(f"each row must hold {len(labels)} scores (one per label)")
    if not np.isfinite(rows).all():
        raise ValueError("scores contain NaN or infinite values")
    if ((rows < 1) | (rows > 5)).any():
        raise ValueError("scores must lie in 1..5")
    n = rows.shape[0]
    distances = [js_distance(rows[i], rows[j]) for i in range(n) for j in range(i + 1, n)]
    d = np.asarray(distances)
    covered = [lab for k, lab in enumerate(labels) if (rows[:, k] >= 4).any()]
    return {
        "images": n,
        "labels": labels,
        "mean_per_label": {lab: float(rows[:, k].mean()) for k, lab in enumerate(labels)},
        "coverage": len(covered) / len(labels),
        "covered_labels": covered,
        "pairs": len(distances),
        "js_mean": float(d.mean()) if len(d) else None,
        "js_std": float(d.std()) if len(d) else None,
        "js_min": float(d.min()) if len(d) else None,
        "js_max": float(d.max()) if len(d) else None,
    }


def debiased_nll(nll: float, base: float, lam: float, floor: float) -> float:
    """CAIRE App. B.1's affine debiasing of a label's negative log-likelihood:
    L'(c, (D, I, p)) = L(c, (D, I, p)) - lambda x max(L(c, (empty, empty, p)), floor): the
    label's base rate ``base`` (its negative log-likelihood after the prompt alone) is
    subtracted, raised to ``floor`` where it is smaller, so that a label the model expects
    anyway (a small base NLL) is not credited for it, nor one whose base is tiny corrected
    by next to nothing (Zhao et al., 2021). Lower is more relevant. B.1's equation has this
    ``max`` (a floor), where its prose says "capping its contribution at a threshold" (a
    ``min``): the equation is followed."""
    for name, v in (("nll", nll), ("base", base), ("lambda", lam), ("floor", floor)):
        if not math.isfinite(v):
            raise ValueError(f"{name} must be a finite number, got {v!r}")
    return nll - lam * max(base, floor)


def threshold_scores(
    scores: Sequence[Sequence[float]],
    truth: Sequence[Sequence[bool]],
    thresholds: Sequence[int] = (2, 3, 4, 5),
) -> dict[int, dict[str, Any]]:
    """CAIRE's specific-set evaluation (Sec. 5.4, Tab. 1 and 14): each image-label pair is
    called relevant when its 1-5 score reaches the threshold (Tab. 1's "greater than 3" is
    threshold 4), and set against the pair's true label; precision, recall and F1 over all
    pairs (micro-averaged; the paper does not say how it averages), with the counts. None
    where a ratio has no denominator."""
    if len(scores) != len(truth) or any(
        len(a) != len(b) for a, b in zip(scores, truth, strict=True)
    ):
        raise ValueError("one true label per score: the same images and labels in both")
    out: dict[int, dict[str, Any]] = {}
    for t in thresholds:
        tp = fp = fn = 0
        for row, true in zip(scores, truth, strict=True):
            for s, y in zip(row, true, strict=True):
                called = s >= t
                tp += called and y
                fp += called and not y
                fn += (not called) and y
        p = tp / (tp + fp) if tp + fp else None
        r = tp / (tp + fn) if tp + fn else None
        f1 = 2 * p * r / (p + r) if p is not None and r is not None and p + r else None
        out[t] = {"precision": p, "recall": r, "f1": f1, "tp": tp, "fp": fp, "fn": fn}
    return out
