"""A judge's rating of an image, as every judge backend returns it (the roles' methods:
:mod:`refine.backends.registry`)."""

from __future__ import annotations

from dataclasses import dataclass

from metrics.judge import expected_rating


@dataclass(frozen=True)
class Rating:
    """A judge's rating: the distribution over ``low``, ``low + 1``, ... (1-5 unless said:
    0-10 for quality), its argmax and expectation.

    ``method`` says how the distribution was read: ``logprobs`` (the first answer token's
    probabilities) or ``sampled k=N`` (the frequencies of N sampled answers, whose
    expectation has the standard error ``stderr``)."""

    probabilities: tuple[float, ...]
    method: str = "logprobs"
    stderr: float | None = None
    low: int = 1

    @property
    def argmax(self) -> int:
        return self.low + max(range(len(self.probabilities)), key=lambda k: self.probabilities[k])

    @property
    def expectation(self) -> float:
        return expected_rating(self.probabilities, self.low)
