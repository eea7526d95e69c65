"""One protocol per backend role.

Every backend has an ``id`` (model, revision when known, dtype, device) that the loop
records in each round, and a ``load()`` that imports heavy packages and loads weights
(idempotent; calls made before ``load()`` load on first use).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypeVar, runtime_checkable

from metrics.judge import expected_rating

if TYPE_CHECKING:
    from PIL import Image
    from pydantic import BaseModel

T = TypeVar("T", bound="BaseModel")


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


@runtime_checkable
class Generator(Protocol):
    id: str

    def generate(self, prompt: str, seeds: Sequence[int]) -> list[Image.Image]:
        """One image per seed; the same seed gives the same image."""
        ...


@runtime_checkable
class Editor(Protocol):
    id: str

    def edit(self, image: Image.Image, instruction: str, seeds: Sequence[int]) -> list[Image.Image]:
        """One edited image per seed, the size of the input."""
        ...


@runtime_checkable
class Observer(Protocol):
    id: str

    def describe(
        self, image: Image.Image, dimensions: Sequence[str], max_per_dimension: int = 10
    ) -> dict[str, list[str]]:
        """The descriptors the model sees in the image, per dimension."""
        ...


@runtime_checkable
class Judge(Protocol):
    id: str

    def yes_probability(
        self, images: Sequence[Image.Image], questions: Sequence[str]
    ) -> list[float]:
        """P("Yes") / (P("Yes") + P("No")) for each (image, question) pair."""
        ...

    def rate(self, images: Sequence[Image.Image], prompts: Sequence[str]) -> list[Rating]:
        """A 1-5 rating distribution for each (image, prompt) pair."""
        ...

    # optional: rate_scale(images, prompts, low, high) -> list[Rating], a rating on another
    # scale (quality's 0-10, see metrics.quality); a judge without it gives no quality.
    # needed for EXAG: vqa_score(images, texts) -> list[metrics.vqascore.VqaAnswer]
    # (VQAScore: P("Yes") over the full next-token distribution, exag:ita and vqascore) and
    # rate_prefixed(images, prompts, prefix) -> list[Rating] (a 1-5 rating answered as
    # "score is N", exag:mllm); a judge without them names what it lacks when asked


@runtime_checkable
class LanguageModel(Protocol):
    id: str

    def complete_json(self, prompt: str, schema: type[T]) -> T:
        """An answer validated against ``schema`` (a pydantic model); the bundled backends
        also take ``temperature=`` for one request (AHEaD's proposer-refiner)."""
        ...
