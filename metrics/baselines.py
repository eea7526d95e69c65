"""The baselines the AHEaD paper sets beside FAITH that the profile's judge computes: the
MLLM-as-a-judge ALIGN and HAL (Tab. 29-30), asked with the annotators' 1-5 scales and read
at the digit after "score is", each mapped to [0, 1] as (E[r] - 1) / 4 (the map of
``exag:mllm``, Tab. 31, the third of the set). VQAScore is :mod:`metrics.vqascore`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from metrics.computed import Computed
from metrics.judge import Reading

# the judge's prompt of each baseline (assets/prompts/<name>.txt)
JUDGE_RATED = ("judge_align", "judge_hal")


@dataclass(frozen=True)
class JudgeRating:
    """The judge's expected 1-5 rating for one image and one baseline, and how it was read
    (``logprobs``, or ``sampled k=N`` with the rating's standard error)."""

    rating: float
    stderr: float | None = None
    mode: str = "logprobs"


def rating_to_unit(rating: float, stderr: float | None = None) -> tuple[float, float | None]:
    """A 1-5 expected rating on [0, 1]: (E[r] - 1) / 4, the standard error through the same
    map."""
    if not 1.0 - 1e-9 <= rating <= 5.0 + 1e-9:
        raise ValueError(f"an expected 1-5 rating must lie in [1, 5], got {rating!r}")
    return (rating - 1.0) / 4.0, None if stderr is None else stderr / 4.0


def _of(name: str, judge_ratings: Sequence[Mapping[str, JudgeRating] | None]) -> list[Computed]:
    out = []
    for got in judge_ratings:
        r = (got or {}).get(name)
        if r is None:
            out.append(Computed(None, note="not asked for (--baselines)"))
            continue
        value, stderr = rating_to_unit(r.rating, r.stderr)
        out.append(Computed(value, None, Reading.parse(r.mode, stderr)))
    return out


def judge_align_of(judge_ratings: Sequence[Mapping[str, JudgeRating] | None]) -> list[Computed]:
    """The catalog's ``judge_align``: Tab. 29's rating, (E[r] - 1) / 4."""
    return _of("judge_align", judge_ratings)


def judge_hal_of(judge_ratings: Sequence[Mapping[str, JudgeRating] | None]) -> list[Computed]:
    """The catalog's ``judge_hal``: Tab. 30's rating, (E[r] - 1) / 4."""
    return _of("judge_hal", judge_ratings)
