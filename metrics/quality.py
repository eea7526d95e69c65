"""Perceptual quality: a judge's 0-10 ratings (VIEScore's PQ) and CLIP-IQA.

VIEScore (Ku et al., 2024) asks a vision-language model two questions about an image,
naturalness and absence of artifacts, each rated 0-10; the perceptual quality is
``min(naturalness, artifacts) / 10``. A rating is read here as an expectation:

* from the first answer token's log-probabilities, renormalised over the valid rating
  tokens (:func:`rating_distribution`). Tokenizers that split numbers into digits write
  "10" as "1" then "0": the probability of "1" is then shared between 1 and 10 by the
  probability of "0" after "1" (``ten_after_one``), which a local model computes exactly.
  Without it, and with more than :data:`AMBIGUOUS` of the mass on "1", the first token
  cannot tell 1 from 10 and the rating is :class:`AmbiguousRating` (the judge samples);
* else from k sampled answers: their mean and its standard error
  (:func:`metrics.judge.rating_stderr`).

CLIP-IQA (Wang et al., 2023) compares an image with the antonym prompts "Good photo." and
"Bad photo.": the softmax of the two cosine similarities at CLIP's logit scale, the share
of "Good photo." (:func:`clip_iqa`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

LOW, HIGH = 0, 10
# share of the first-token mass on "1" below which its split between 1 and 10 cannot move
# the quality score (rating / 10) by more than 0.001
AMBIGUOUS = 1e-3
GOOD, BAD = "Good photo.", "Bad photo."


class AmbiguousRating(ValueError):
    """The first answer token cannot tell the rating 1 from 10."""


def rating_distribution(
    logprobs: Mapping[str, float],
    low: int = LOW,
    high: int = HIGH,
    ten_after_one: float | None = None,
) -> list[float]:
    """P(rating = low..high) from the first answer token's log-probabilities, renormalised
    over the valid rating tokens (others, "N/A" or a space, are dropped).

    A rating of two digits (10) is taken from its own token when the model has one;
    otherwise from "1" times ``ten_after_one`` (P("0" | "1")). Raises ValueError when no
    rating token is among ``logprobs``, :class:`AmbiguousRating` when "10" is not a token,
    ``ten_after_one`` is unknown and "1" holds more than :data:`AMBIGUOUS` of the mass."""
    if not low <= high or low < 0:
        raise ValueError(f"a rating scale needs 0 <= low <= high, got {low}..{high}")
    if ten_after_one is not None and not 0.0 <= ten_after_one <= 1.0:
        raise ValueError(f"P('0' after '1') must be in [0, 1], got {ten_after_one}")
    values = list(range(low, high + 1))
    found = {v: logprobs[str(v)] for v in values if str(v) in logprobs}
    if not found:
        top = ", ".join(list(logprobs)[:8]) or "none"
        raise ValueError(f"no rating token {low}..{high} among the first tokens ({top})")
    peak = max(found.values())
    weights = {v: math.exp(lp - peak) for v, lp in found.items()}
    split = [v for v in values if v >= 10 and v not in found and v // 10 in values]
    if split:
        if split != [10]:
            raise ValueError(f"ratings above 10 need their own tokens ({split})")
        one = weights.get(1, 0.0)
        if ten_after_one is not None:
            weights[1], weights[10] = one * (1.0 - ten_after_one), one * ten_after_one
        elif one / sum(weights.values()) > AMBIGUOUS:
            raise AmbiguousRating(
                f"the first token '1' ({one / sum(weights.values()):.3f} of the mass) may "
                "begin 1 or 10, and this model writes 10 as two tokens"
            )
    total = sum(weights.values())
    return [weights.get(v, 0.0) / total for v in values]


def viescore_quality(naturalness: float, artifacts: float, high: int = HIGH) -> float:
    """VIEScore's perceptual quality: the lower of the two ratings over the scale's top."""
    for name, v in (("naturalness", naturalness), ("artifacts", artifacts)):
        if not 0.0 <= v <= high or math.isnan(v):
            raise ValueError(f"{name} rating {v} is outside 0..{high}")
    return min(naturalness, artifacts) / high


def quality_stderr(
    naturalness: float,
    artifacts: float,
    naturalness_se: float | None,
    artifacts_se: float | None,
    high: int = HIGH,
) -> float | None:
    """The standard error of :func:`viescore_quality`: the lower rating's, over the
    scale's top (None when the lower rating was not sampled)."""
    se = naturalness_se if naturalness <= artifacts else artifacts_se
    return None if se is None else se / high


def clip_iqa(image_embeddings, good, bad, logit_scale: float) -> list[float]:
    """CLIP-IQA of each image: softmax over (good, bad) of logit_scale x cosine, the good
    share. Embeddings are L2-normalised rows (images n x d; good and bad d)."""
    x = np.asarray(image_embeddings, dtype=np.float64)
    if x.ndim == 1:
        x = x[None]
    pair = np.stack([np.asarray(good, np.float64), np.asarray(bad, np.float64)])
    logits = logit_scale * x @ pair.T
    logits -= logits.max(axis=1, keepdims=True)
    e = np.exp(logits)
    return (e[:, 0] / e.sum(axis=1)).tolist()


def clip_iqa_of(image_embeddings, antonym_embeddings, logit_scale: float) -> list[float]:
    """:func:`clip_iqa` from the embeddings of the images and of the antonym prompts
    (:data:`GOOD`, :data:`BAD`, in that order): the form the metric catalog computes it in."""
    good, bad = antonym_embeddings
    return clip_iqa(image_embeddings, good, bad, logit_scale)


def quality_of(quality_ratings) -> list[float | None]:
    """VIEScore's perceptual quality of each image from the judge's expected 0-10 ratings
    (objects with ``naturalness`` and ``artifacts``; None: not rated), each rating held to
    the scale first: the form the metric catalog computes it in."""
    out: list[float | None] = []
    for r in quality_ratings:
        if r is None:
            out.append(None)
            continue
        nat = min(max(r.naturalness, LOW), HIGH)
        art = min(max(r.artifacts, LOW), HIGH)
        out.append(viescore_quality(nat, art))
    return out
