"""How an API judge reads answer probabilities, whatever serves the model (the Gemini API,
an OpenAI-compatible server): the transport asks, this module reads.

The judge reads the first answer token's log-probabilities when the model gives them
(``judge_mode="logprobs"``). Many models do not: the server refuses the request ("Logprobs
is not enabled") or answers without them. With ``judge_mode="auto"`` (the default) that is
remembered for the model for the life of the process and the judge samples instead:
``samples`` answers (k calls at temperature 1, one seed each, structured output restricted
to the answer tokens), whose frequencies are the distribution (``judge_mode="sampled"``
always does this). Every result names its method, and a sampled rating carries the
standard error of its expectation. The arithmetic (renormalising, frequencies, the
standard error) is :mod:`metrics.judge`'s.

Until a model is known to give log-probabilities or not, one judge call asks at a time
(candidates judged at once send what one by one would); once the first answer has shown
that it gives them, the calls that waited go on together.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from metrics.judge import (
    LOGPROBS,
    SAMPLED,
    Reading,
    frequencies,
    merge_case,
    rating_stderr,
    renormalise,
)
from metrics.quality import AmbiguousRating, rating_distribution
from metrics.vqascore import VqaAnswer, vqa_question, yes_mass
from refine.backends.protocols import Rating

if TYPE_CHECKING:
    from PIL import Image

log = logging.getLogger(__name__)

JUDGE_MODES = ("auto", "logprobs", "sampled")
# models (by the judge's ``probe_key``) that gave no log-probabilities, and that gave them,
# for the life of the process
_NO_LOGPROBS: set[str] = set()
_HAS_LOGPROBS: set[str] = set()
_PROBES: dict[str, threading.Lock] = {}  # per model: one thread finds out which it is
_PROBES_GUARD = threading.Lock()

# turns an answer's positions (most likely tokens and their log-probabilities) and the
# tokens chosen into the answers' distribution (None: it cannot, the judge samples)
Reader = Callable[[list[dict[str, float]], list[str]], "list[float] | None"]


class LogprobsUnavailable(Exception):
    """The model gives no log-probabilities (refused, or answered without them);
    ``original`` is the transport's own error, raised as is outside ``auto`` mode."""

    def __init__(self, message: str, original: Exception | None = None) -> None:
        super().__init__(message)
        self.original = original


def _probe_lock(key: str) -> threading.Lock:
    with _PROBES_GUARD:
        return _PROBES.setdefault(key, threading.Lock())


def answer_schema(answers: Sequence[str]) -> dict[str, Any]:
    """The JSON schema of a sampled judgement: one of ``answers``."""
    return {
        "type": "object",
        "properties": {"answer": {"type": "string", "enum": list(answers)}},
        "required": ["answer"],
    }


def check_judge_options(judge_mode: str, samples: Any) -> None:
    if judge_mode not in JUDGE_MODES:
        raise ValueError(f"judge_mode {judge_mode!r}: use one of {', '.join(JUDGE_MODES)}")
    if not isinstance(samples, int) or samples < 2:
        raise ValueError(f"samples must be an integer of at least 2, got {samples!r}")


class ProbabilityJudge:
    """The judge's reading, for a transport that provides:

    * ``model``, ``judge_mode``, ``samples`` and ``_each(items, one)`` (calls at once);
    * ``probe_key``: what log-probabilities are remembered under (the model, and the
      server where more than one may serve it);
    * ``_answer_logprobs(image, text, purpose) -> (positions, chosen)``: the most likely
      tokens at each answer position with their log-probabilities, and the tokens chosen,
      or :class:`LogprobsUnavailable`;
    * ``_sample_answer(image, text, answers, seed, purpose) -> str``: one answer sampled at
      temperature 1, restricted to ``answers``;
    * ``_error(message) -> Exception``: the transport's error for a message.
    """

    model: str
    judge_mode: str
    samples: int
    _each: Callable[..., list[Any]]

    @property
    def probe_key(self) -> str:
        return self.model

    def _answer_logprobs(
        self, image: Image.Image, text: str, purpose: str
    ) -> tuple[list[dict[str, float]], list[str]]:
        raise NotImplementedError

    def _sample_answer(
        self, image: Image.Image, text: str, answers: Sequence[str], seed: int, purpose: str
    ) -> str:
        raise NotImplementedError

    def _error(self, message: str) -> Exception:
        return RuntimeError(message)

    @property
    def sampling(self) -> bool:
        return self.judge_mode == "sampled" or (
            self.judge_mode == "auto" and self.probe_key in _NO_LOGPROBS
        )

    @property
    def method(self) -> str:
        """How this judge reads probabilities now: ``logprobs`` or ``sampled k=N``."""
        return Reading(SAMPLED, self.samples).mode if self.sampling else LOGPROBS

    def _first_token_logprobs(
        self, image: Image.Image, text: str, purpose: str
    ) -> dict[str, float]:
        return self._answer_logprobs(image, text, purpose)[0][0]

    def _sampled(
        self, image: Image.Image, text: str, answers: Sequence[str], purpose: str
    ) -> list[float]:
        """The frequencies of ``samples`` answers restricted to ``answers``."""
        given = [
            self._sample_answer(image, text, answers, seed, f"{purpose}_sampled")
            for seed in range(self.samples)
        ]
        try:
            return frequencies(given, answers)
        except ValueError as err:
            raise self._error(f"{self.model}: {err}") from None

    def _probabilities(
        self,
        image: Image.Image,
        text: str,
        answers: Sequence[str],
        purpose: str,
        read: Reader | None = None,
    ) -> list[float]:
        """The answers' distribution: by log-probabilities where the model gives them
        (``read`` turns the answer's positions into it; by default the first token's), else
        by sampling."""
        got = self._by_logprobs_first(image, text, answers, purpose, read)
        return got if got is not None else self._sampled(image, text, answers, purpose)

    def _by_logprobs_first(self, image, text, answers, purpose, read) -> list[float] | None:
        if self.sampling:
            return None
        if self.judge_mode == "auto" and self.probe_key not in _HAS_LOGPROBS:
            # until the model is known to give log-probabilities or not, one thread asks
            # at a time (candidates judged at once send what one by one would); once the
            # first answer has shown that it gives them, the judges that waited for it go
            # on together, outside the lock (each used to ask in its turn here, one answer
            # at a time: the first wave of a 12-worker bench judged in line)
            with _probe_lock(self.probe_key):
                if self.sampling:
                    return None
                if self.probe_key not in _HAS_LOGPROBS:
                    return self._by_logprobs(image, text, answers, purpose, read)
        return self._by_logprobs(image, text, answers, purpose, read)

    def _by_logprobs(
        self,
        image: Image.Image,
        text: str,
        answers: Sequence[str],
        purpose: str,
        read: Reader | None = None,
    ) -> list[float] | None:
        """The answers' distribution from the answer's log-probabilities; None when the
        model gives none and the judge is in ``auto`` mode (it samples from then on)."""
        try:
            positions, chosen = self._answer_logprobs(image, text, purpose)
        except LogprobsUnavailable as err:
            if self.judge_mode != "auto":
                raise (err.original or self._error(str(err))) from None
            _NO_LOGPROBS.add(self.probe_key)
            log.warning(
                "%s gives no log-probabilities; judging by %d sampled answers from now on",
                self.model,
                self.samples,
            )
            return None
        _HAS_LOGPROBS.add(self.probe_key)
        if read is not None:
            return read(positions, chosen)
        lp = positions[0]
        if answers == ("Yes", "No"):
            lp = merge_case(lp, answers)
        return self._distribution(lp, answers)

    def _distribution(self, logprobs: dict[str, float], answers: Sequence[str]) -> list[float]:
        try:
            return renormalise(logprobs, answers)
        except ValueError as err:
            raise self._error(f"{self.model}: {err}") from None

    def yes_probability(
        self, images: Sequence[Image.Image], questions: Sequence[str]
    ) -> list[float]:
        check_pairs(images, questions)

        def one(k: int) -> float:
            prompt = f'{questions[k]} Please answer "Yes" or "No".'
            return self._probabilities(images[k], prompt, ("Yes", "No"), "judge_yes")[0]

        # several pairs: up to ``concurrency`` requests at once, answers in order
        return self._each(range(len(images)), one)

    def rate(self, images: Sequence[Image.Image], prompts: Sequence[str]) -> list[Rating]:
        check_pairs(images, prompts)

        def one(k: int) -> Rating:
            dist = self._probabilities(
                images[k], prompts[k], ("1", "2", "3", "4", "5"), "judge_rate"
            )
            if self.sampling:
                return Rating(tuple(dist), self.method, rating_stderr(dist, self.samples))
            return Rating(tuple(dist))

        return self._each(range(len(images)), one)

    def rate_scale(
        self, images: Sequence[Image.Image], prompts: Sequence[str], low: int, high: int
    ) -> list[Rating]:
        """A ``low``..``high`` rating distribution per (image, prompt): from the first
        answer token's log-probabilities (see :func:`metrics.quality.rating_distribution`;
        "10" written as "1" then "0" is split by the second position when the answer began
        with "1"), else, or when "1" cannot be told from "10", from k sampled answers."""

        check_pairs(images, prompts)
        answers = tuple(str(v) for v in range(low, high + 1))

        def read(positions: list[dict[str, float]], chosen: list[str]) -> list[float] | None:
            ten = None
            if len(positions) > 1 and chosen[:1] == ["1"]:
                after = positions[1]
                zero = after.get("0")
                ten = 0.0 if zero is None else math.exp(zero)
            try:
                return rating_distribution(positions[0], low, high, ten)
            except AmbiguousRating as err:
                log.info("%s: %s; this rating is sampled", self.model, err)
                return None
            except ValueError as err:
                raise self._error(f"{self.model}: {err}") from None

        def one(k: int) -> Rating:
            dist = self._by_logprobs_first(images[k], prompts[k], answers, "judge_scale", read)
            if dist is not None:
                return Rating(tuple(dist), low=low)
            dist = self._sampled(images[k], prompts[k], answers, "judge_scale")
            method = Reading(SAMPLED, self.samples).mode
            return Rating(tuple(dist), method, rating_stderr(dist, self.samples), low)

        return self._each(range(len(images)), one)

    def vqa_score(self, images: Sequence[Image.Image], texts: Sequence[str]) -> list[VqaAnswer]:
        """VQAScore of each (image, text): P("Yes") over the full first-token distribution
        for VQAScore's question (:func:`metrics.vqascore.yes_mass`), where the model gives
        log-probabilities; else the share of "Yes" among ``samples`` sampled answers (k
        calls per question), read as ``sampled k=N``."""
        check_pairs(images, texts)

        def read(positions: list[dict[str, float]], chosen: list[str]) -> list[float]:
            return [yes_mass(positions[0])]

        def one(k: int) -> VqaAnswer:
            prompt = vqa_question(texts[k])
            got = self._by_logprobs_first(images[k], prompt, ("Yes", "No"), "judge_vqa", read)
            if got is not None:
                return VqaAnswer(texts[k], got[0], LOGPROBS)
            share = self._sampled(images[k], prompt, ("Yes", "No"), "judge_vqa")[0]
            return VqaAnswer(texts[k], share, Reading(SAMPLED, self.samples).mode)

        return self._each(range(len(images)), one)

    def rate_prefixed(
        self, images: Sequence[Image.Image], prompts: Sequence[str], prefix: str
    ) -> list[Rating]:
        """A 1-5 rating per (image, prompt) whose answer format is ``prefix`` then the digit
        ("score is 3", AHEaD Tab. 31). Where the model gives log-probabilities and its
        answer begins with ``prefix``, the digit's distribution is read at the position
        after it (what a local judge made to begin with the prefix reads: one call); else
        ``samples`` answers are sampled in that format (k calls), their frequencies the
        distribution, with the standard error."""
        check_pairs(images, prompts)
        digits = ("1", "2", "3", "4", "5")
        answers = tuple(f"{prefix}{v}" for v in digits)
        target = "".join(prefix.split()).casefold()

        def read(positions: list[dict[str, float]], chosen: list[str]) -> list[float] | None:
            said = ""
            for i, token in enumerate(chosen):
                written = "".join(token.split()).casefold()
                if said == target:
                    if not written:
                        continue  # the space before the digit, a token of its own
                    try:
                        return renormalise(positions[i], digits)
                    except ValueError:
                        return None
                said += written
                if not target.startswith(said):
                    return None
            return None

        def one(k: int) -> Rating:
            dist = self._by_logprobs_first(images[k], prompts[k], answers, "judge_prefixed", read)
            if dist is not None:
                return Rating(tuple(dist))
            dist = self._sampled(images[k], prompts[k], answers, "judge_prefixed")
            method = Reading(SAMPLED, self.samples).mode
            return Rating(tuple(dist), method, rating_stderr(dist, self.samples))

        return self._each(range(len(images)), one)


def pooled(logprobs: dict[str, float]) -> dict[str, float]:
    """A position's log-probabilities by token text without its surrounding spaces: "Yes"
    and " Yes" are one answer, their probabilities added (blank tokens left out)."""
    out: dict[str, float] = {}
    for token, lp in logprobs.items():
        key = token.strip()
        if not key:
            continue
        prev = out.get(key)
        out[key] = lp if prev is None else max(prev, lp) + math.log1p(math.exp(-abs(prev - lp)))
    return out


def answer_tokens(limit: int, purpose: str) -> int:
    """How many answer tokens to ask for: ``limit``, and at least 8 where the answer has a
    format before its digit ("score is 4" is four tokens for many tokenizers)."""
    return max(limit, 8) if purpose.startswith("judge_prefixed") else limit


def check_pairs(images: Sequence[Any], texts: Sequence[str]) -> None:
    if len(images) != len(texts):
        raise ValueError(f"{len(images)} images but {len(texts)} questions")
