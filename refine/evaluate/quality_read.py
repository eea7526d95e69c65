"""The judge's quality readings of images: VIEScore's naturalness and artifacts, each the
expected 0-10 rating (:mod:`metrics.quality`), and the model calls behind them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from metrics.judge import reading_calls
from metrics.quality import HIGH, LOW, quality_stderr
from refine.assets import prompt_template
from refine.records import QualityReading

if TYPE_CHECKING:
    from PIL import Image


def read_quality(
    backends: Any, calls: Any, images: list[Image.Image], together: bool = True
) -> list[QualityReading | None]:
    """Each image's naturalness and artifacts rated by the judge (None for every image when
    it cannot rate on a 0-10 scale), the calls added to ``calls``. An API judge asks both
    questions about every image in one call when ``together``."""
    n = len(images)
    readings: list[QualityReading | None] = [None] * n
    with backends.using("judge") as judge:
        rate_scale = getattr(judge, "rate_scale", None)
        if callable(rate_scale):
            asked = ("quality_naturalness", "quality_artifacts")
            questions = [prompt_template(q) for q in asked]
            if together and getattr(judge, "thread_safe", False):
                # an API judge: both questions about every image in one call, whose
                # readings go out at once
                prompts = [q for q in questions for _ in images]
                ratings = list(rate_scale(images * 2, prompts, LOW, HIGH))
            else:  # a local judge: one batch a question, as many images as candidates
                ratings = []
                for question in questions:
                    ratings += rate_scale(images, [question] * n, LOW, HIGH)
            calls.add(rating_calls(judge, ratings))
            name = getattr(judge, "id", backends.names.get("judge", ""))
            for i in range(n):
                nat, art = ratings[i], ratings[n + i]
                sampled = [r.method for r in (nat, art) if r.method != "logprobs"]
                readings[i] = QualityReading(
                    naturalness=nat.expectation,
                    artifacts=art.expectation,
                    judge=name,
                    method=sampled[0] if sampled else "logprobs",
                    stderr=quality_stderr(nat.expectation, art.expectation, nat.stderr, art.stderr),
                )
    return readings


def rating_calls(judge: Any, ratings: Sequence[Any]) -> int:
    """Model calls behind ratings: one each by log-probabilities, one per answer sampled
    (and the log-probability call before when the judge reads log-probabilities but the
    rating's first token was ambiguous)."""
    judge_sampled = getattr(judge, "method", "logprobs") != "logprobs"
    calls = 0
    for r in ratings:
        calls += reading_calls(r.method)
        if r.method != "logprobs" and not judge_sampled:
            calls += 1
    return calls
