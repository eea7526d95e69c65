"""How an API judge reads answer probabilities, whatever serves the model (the Gemini API,
an OpenAI-compatible server): the transport asks, this module reads.

The judge reads the first answer token's log-probabilities when the model gives them
(``judge_mode="logprobs"``). Many models do not: the server refuses the request ("Logprobs
is not enabled") or answers without them. With ``judge_mode="auto"`` (the default) that is
remembered for the model and endpoint (``probe_key``: for the process, and for 30 days
in the cache folder's ``judge-logprobs.json``, so that a new process does not ask again)
and the judge samples
instead (``judge_mode="sampled"`` always does): answers at temperature 1, one seed each,
structured output restricted to the answer tokens, whose frequencies are the distribution.
A model that fixes its own sampling (Gemini 3.6 Flash and later) is sent no temperature and
answers at its own, 1.0; where it ignores the seed too, a reading is not repeatable, though
its odds are the same (docs/metrics.md, "A model that fixes its sampling").

How many answers a sampled reading takes (:meth:`ProbabilityJudge._sampled`): the first
``agree`` answers go out together; when they are all the same answer the reading is that
answer, else the rest of the ``samples`` (k) go out together and the reading is the
frequencies of all k. ``agree = 0`` always takes k. Every result names its method with the
number of answers it took (``sampled k=2``), and a sampled rating carries the standard
error of its expectation over those answers (the posterior's, never 0 where they agree:
:data:`metrics.judge.PRIOR_MASS`; docs/metrics.md gives the estimator's bias and cost
against k answers). The arithmetic (renormalising, frequencies, the standard error) is
:mod:`metrics.judge`'s. Yes-probabilities
(:meth:`ProbabilityJudge.yes_probability`) always take k answers: their callers count k
calls each.

The readings of one call (several images, several questions) and the answers of each go
out together, at most ``concurrency`` requests in flight for the call.

An answer the model withholds (blocked, cut, empty or not of the answer's form) is asked
once more, from a seed of its own (:data:`RETRY_SEED` above), then left out and counted
(:func:`withheld`); a reading fails only when fewer than :data:`FEWEST` answers remain.

Until a model is known to give log-probabilities or not, one judge call asks at a time
(candidates judged at once send what one by one would); once the first answer has shown
that it gives them, the calls that waited go on together.
"""

from __future__ import annotations

import json
import logging
import math
import os
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

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
from refine import usage
from refine.backends.rating import Rating

# an answer withheld is asked once more from this seed plus its own (far above any
# reading's seeds, fresh ones included: refine.loop.confirm)
RETRY_SEED = 3_000_000
# the fewest answers a sampled reading is read from
FEWEST = 2
_WITHHELD: dict[str, int] = {}  # model -> answers withheld twice and left out
_WITHHELD_LOCK = threading.Lock()


def withheld(model: str | None = None) -> int:
    """How many sampled answers were left out (withheld twice) in this process: the
    model's, or all."""
    with _WITHHELD_LOCK:
        return _WITHHELD.get(model, 0) if model else sum(_WITHHELD.values())


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


def forget() -> None:
    """Forget which models give log-probabilities (a new process's state: the memory file
    is read again)."""
    _NO_LOGPROBS.clear()
    _HAS_LOGPROBS.clear()
    _RECALLED.clear()


# what was found out is remembered across processes: a file in the cache folder, per
# ``probe_key``, whether the model gave log-probabilities and when that was seen; an answer
# older than MEMORY_DAYS is asked again (a model can gain them). REFINE_JUDGE_MEMORY names
# another file, or "off"
MEMORY_DAYS = 30
MEMORY_FILE = "judge-logprobs.json"
_RECALLED: set[str] = set()  # keys read from the file by this process
_MEMORY_LOCK = threading.Lock()


def memory_file() -> Path | None:
    """Where models' log-probabilities are remembered (None: nowhere)."""
    env = os.environ.get("REFINE_JUDGE_MEMORY", "")
    if env.casefold() == "off":
        return None
    if env:
        return Path(env)
    from refine.io.files import cache_dir

    return cache_dir() / MEMORY_FILE


def _read_memory(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as err:  # unreadable: found out again, and rewritten
        log.info("%s cannot be read (%s); the judges' models are asked again", path, err)
        return {}
    return data if isinstance(data, dict) else {}


def _recall(key: str) -> None:
    """Load what the memory file says about ``key``, once per process."""
    if key in _RECALLED or key in _NO_LOGPROBS or key in _HAS_LOGPROBS:
        return
    _RECALLED.add(key)
    path = memory_file()
    if path is None:
        return
    entry = _read_memory(path).get(key)
    if not isinstance(entry, dict) or not isinstance(entry.get("logprobs"), bool):
        return
    try:
        age = time.time() - float(entry["seen"])
    except (KeyError, TypeError, ValueError):
        return
    if 0 <= age <= MEMORY_DAYS * 86400:
        (_HAS_LOGPROBS if entry["logprobs"] else _NO_LOGPROBS).add(key)


def _remember(key: str, logprobs: bool) -> None:
    """Write what was found out about ``key`` to the memory file (never fails a reading)."""
    path = memory_file()
    if path is None:
        return
    with _MEMORY_LOCK:
        try:
            data = _read_memory(path)
            data[key] = {"logprobs": logprobs, "seen": time.time()}
            path.parent.mkdir(parents=True, exist_ok=True)
            from refine.io.files import atomic_write_text

            atomic_write_text(path, json.dumps(data, indent=1, sort_keys=True))
        except OSError as err:
            log.info("could not remember %s's log-probabilities in %s: %s", key, path, err)


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


def check_judge_options(judge_mode: str, samples: Any, agree: Any = 0) -> None:
    if judge_mode not in JUDGE_MODES:
        raise ValueError(f"judge_mode {judge_mode!r}: use one of {', '.join(JUDGE_MODES)}")
    if not isinstance(samples, int) or samples < 2:
        raise ValueError(f"samples must be an integer of at least 2, got {samples!r}")
    if not isinstance(agree, int) or agree < 0 or agree == 1 or agree > samples:
        raise ValueError(
            f"agree must be 0 (always {samples} answers) or an integer from 2 to samples "
            f"({samples}), got {agree!r}"
        )


class Sampled(NamedTuple):
    """A sampled reading: the answers' frequencies and how many answers they are."""

    probabilities: list[float]
    k: int

    @property
    def mode(self) -> str:
        return Reading(SAMPLED, self.k).mode

    def stderr(self) -> float:
        return rating_stderr(self.probabilities, self.k)


class SampledAnswers:
    """A judge's sampled readings: answers drawn one per seed (``_sample_answer``, each
    request holding the call's gate), read as frequencies, the first ``agree`` and the rest
    of k unless they agree, or in stages up to a most; :class:`ProbabilityJudge`'s
    way where the model gives no log-probabilities."""

    model: str
    samples: int
    agree: int = 0

    def _sample_answer(
        self, image: Image.Image, text: str, answers: Sequence[str], seed: int, purpose: str
    ) -> str:
        raise NotImplementedError

    def _error(self, message: str) -> Exception:
        return RuntimeError(message)

    def _prefetched(self) -> bool:
        """Whether this judge cannot wait for a reading's first answers before it sends the
        rest (a batch job's answers come together): it then sends all of them at once, and
        reads them as a judge that waits does (:meth:`_sampled`)."""
        return False

    def _answers(
        self,
        image: Image.Image,
        text: str,
        answers: Sequence[str],
        seeds: Sequence[int],
        purpose: str,
        gate: threading.Semaphore,
        sent: bool = False,
    ) -> list[str]:
        """One sampled answer per seed, sent together (each holding ``gate``); an answer
        withheld is asked once more from its retry seed, and withheld again, left out (see
        the module). ``sent``: a batch job's answers, all sent at once before it is known
        which will be read: none asked again (:meth:`_asked_again` asks those read), each
        withheld one ``""`` in its seed's place."""

        def one(seed: int) -> str:
            with gate:
                answer = self._sample_answer(image, text, answers, seed, f"{purpose}_sampled")
                if not answer and not sent:
                    answer = self._sample_answer(
                        image, text, answers, RETRY_SEED + seed, f"{purpose}_sampled"
                    )
            if not answer and not sent:
                self._left_out(seed)
            return answer

        each = usage.at_once(one, seeds, len(seeds))
        return each if sent else [a for a in each if a]

    def _asked_again(
        self,
        image: Image.Image,
        text: str,
        answers: Sequence[str],
        each: list[str],
        at: range,
        purpose: str,
        gate: threading.Semaphore,
        start: int = 0,
    ) -> list[str]:
        """The answers of a batch job's ``each`` (one per seed, from seed ``start``) at the
        seeds ``at`` that a reading reads: a withheld one asked once more from its retry
        seed, as a live reading asks it (in place), and withheld again, left out."""
        missing = [s for s in at if not each[s - start]]
        if missing:
            again = [RETRY_SEED + s for s in missing]
            for s, got in zip(missing, self._answers(image, text, answers, again, purpose, gate,
                                                     True), strict=True):  # fmt: skip
                each[s - start] = got
                if not got:
                    self._left_out(s)
        return [a for a in each[at.start - start : at.stop - start] if a]

    def _left_out(self, seed: int) -> None:
        """An answer withheld from ``seed`` and from its retry seed: counted, and said."""
        with _WITHHELD_LOCK:
            _WITHHELD[self.model] = _WITHHELD.get(self.model, 0) + 1
        log.warning(
            "%s: no answer from seeds %d and %d (blocked or empty); the reading goes on "
            "without it", self.model, seed, RETRY_SEED + seed,
        )  # fmt: skip

    def _enough_answers(self, given: Sequence[str], asked: int) -> None:
        if len(given) < FEWEST:
            raise self._error(
                f"{self.model}: {asked - len(given)} of {asked} sampled answers withheld "
                f"(blocked or empty), fewer than {FEWEST} left to read"
            )

    def _sampled(
        self,
        image: Image.Image,
        text: str,
        answers: Sequence[str],
        purpose: str,
        gate: threading.Semaphore,
        adaptive: bool = True,
        most: int | None = None,
        enough: Callable[[Sampled], bool] | None = None,
        first_seed: int = 0,
    ) -> Sampled:
        """The frequencies of sampled answers restricted to ``answers``: the first
        ``agree`` when they agree (``adaptive``), else ``samples`` (k) in all, their seeds
        from ``first_seed`` (another reading of the same image, where it is not 0). With
        ``most``: ``most`` answers in stages of k, until ``enough`` says the answers so far
        decide what they are read for (all ``most`` at once where ``agree`` is 0); the same
        seeds for every image, so that two images' errors cancel where the model follows
        seeds. A judge that cannot wait for its first answers (a batch job's) sends all of
        them at once and reads them as one that waits does (:meth:`_prefetched`): the first
        ``agree`` decide whether the rest are read, the stages whether the next is, so that
        a reading sent live and one sent as a batch job are one estimator, the same reading
        where the model follows seeds."""
        k, rule = self.samples, self.agree
        if most is not None:
            if rule and self._prefetched():
                each = self._answers(image, text, answers, range(most), purpose, gate, True)
                some = lambda seeds: self._asked_again(image, text, answers, each, seeds,  # noqa: E731
                                                       purpose, gate)  # fmt: skip
            else:
                some = lambda seeds: self._answers(image, text, answers, seeds, purpose, gate)  # noqa: E731
            return self._staged(some, answers, most, enough)
        first = min(rule, k) if adaptive and rule else k
        seeds = range(first_seed, first_seed + k)
        if first < k and self._prefetched():
            # all k sent at once, then read as a live reading reads them
            each = self._answers(image, text, answers, seeds, purpose, gate, True)
            read = lambda at: self._asked_again(image, text, answers, each, at, purpose,  # noqa: E731
                                                gate, first_seed)  # fmt: skip
            given = read(seeds[:first])
            agreed = len(given) == first and len({a.casefold() for a in given}) == 1
            if not agreed:
                given += read(seeds[first:])
            asked = first if agreed else k
        else:
            given = self._answers(image, text, answers, seeds[:first], purpose, gate)
            asked = first
            if first < k and (len(given) < first or len({a.casefold() for a in given}) > 1):
                given += self._answers(image, text, answers, seeds[first:], purpose, gate)
                asked = k
        self._enough_answers(given, asked)
        try:
            return Sampled(frequencies(given, answers), len(given))
        except ValueError as err:
            raise self._error(f"{self.model}: {err}") from None

    def _staged(
        self,
        some: Callable[[range], list[str]],
        answers: Sequence[str],
        most: int,
        enough: Callable[[Sampled], bool] | None,
    ) -> Sampled:
        """``most`` answers (``some(seeds)``) in stages of k, until ``enough``."""
        stage = self.samples if self.agree else most
        given: list[str] = []
        asked = 0
        try:
            while asked < most:
                seeds = range(asked, min(asked + stage, most))
                given += some(seeds)
                asked = seeds.stop
                if len(given) < FEWEST:
                    continue
                read = Sampled(frequencies(given, answers), len(given))
                if enough is not None and asked < most and enough(read):
                    break
        except ValueError as err:
            raise self._error(f"{self.model}: {err}") from None
        self._enough_answers(given, asked)
        return read


class ProbabilityJudge(SampledAnswers):
    """The judge's reading, for a transport that provides:

    * ``model``, ``judge_mode``, ``samples``, ``agree`` and ``concurrency`` (the most
      requests one call has in flight);
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
    agree: int = 0
    concurrency: int = 4

    @property
    def probe_key(self) -> str:
        return self.model

    def _answer_logprobs(
        self, image: Image.Image, text: str, purpose: str
    ) -> tuple[list[dict[str, float]], list[str]]:
        raise NotImplementedError

    @property
    def sampling(self) -> bool:
        if self.judge_mode == "sampled":
            return True
        if self.judge_mode != "auto":
            return False
        _recall(self.probe_key)
        return self.probe_key in _NO_LOGPROBS

    @property
    def method(self) -> str:
        """How this judge reads probabilities now: ``logprobs`` or ``sampled k=N`` (N the
        most answers a reading takes)."""
        return Reading(SAMPLED, self.samples).mode if self.sampling else LOGPROBS

    # -- one call's readings, at once -------------------------------------------------

    def _readings(self, n: int, one: Callable[[int, threading.Semaphore], Any]) -> list[Any]:
        """``one(k, gate)`` for each of ``n`` readings, in order, started together: every
        request they send holds ``gate`` (at most ``concurrency`` in flight)."""
        width = self._width()
        gate = threading.BoundedSemaphore(width)
        return usage.at_once(lambda k: one(k, gate), range(n), width)

    def _width(self) -> int:
        """The most requests one call has in flight (a transport may lift it)."""
        return self.concurrency

    def _by_logprobs_first(
        self,
        image: Image.Image,
        text: str,
        answers: Sequence[str],
        purpose: str,
        read: Reader | None,
        gate: threading.Semaphore,
    ) -> list[float] | None:
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
                    return self._by_logprobs(image, text, answers, purpose, read, gate)
        return self._by_logprobs(image, text, answers, purpose, read, gate)

    def _by_logprobs(
        self,
        image: Image.Image,
        text: str,
        answers: Sequence[str],
        purpose: str,
        read: Reader | None,
        gate: threading.Semaphore,
    ) -> list[float] | None:
        """The answers' distribution from the answer's log-probabilities; None when the
        model gives none and the judge is in ``auto`` mode (it samples from then on)."""
        try:
            with gate:
                positions, chosen = self._answer_logprobs(image, text, purpose)
        except LogprobsUnavailable as err:
            if self.judge_mode != "auto":
                raise (err.original or self._error(str(err))) from None
            _HAS_LOGPROBS.discard(self.probe_key)
            if self.probe_key not in _NO_LOGPROBS:
                _NO_LOGPROBS.add(self.probe_key)
                _remember(self.probe_key, False)
                log.warning(
                    "%s gives no log-probabilities; judging by sampled answers from now on "
                    "(up to %d a reading)",
                    self.model,
                    self.samples,
                )
            return None
        if self.probe_key not in _HAS_LOGPROBS:
            _HAS_LOGPROBS.add(self.probe_key)
            _remember(self.probe_key, True)
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

    def _rating(
        self,
        image: Image.Image,
        text: str,
        answers: Sequence[str],
        purpose: str,
        read: Reader | None,
        gate: threading.Semaphore,
        low: int = 1,
        first_seed: int | None = None,
        every: bool = False,
    ) -> Rating:
        """A rating by log-probabilities where the model gives them and ``read`` can read
        them, else sampled (with its number of answers and standard error; with
        ``first_seed``, its seeds from that seed on: a fresh reading; ``every``: all k
        answers, agreeing or not)."""
        dist = self._by_logprobs_first(image, text, answers, purpose, read, gate)
        if dist is not None:
            return Rating(tuple(dist), low=low)
        got = self._sampled(
            image, text, answers, purpose, gate, adaptive=not every, first_seed=first_seed or 0
        )
        return Rating(tuple(got.probabilities), got.mode, got.stderr(), low)

    # -- what the judge answers --------------------------------------------------------

    def yes_probability(
        self, images: Sequence[Image.Image], questions: Sequence[str]
    ) -> list[float]:
        """P("Yes") of each (image, question): by log-probabilities, else the share of
        "Yes" among k sampled answers (always k: callers count k calls)."""
        check_pairs(images, questions)
        answers = ("Yes", "No")

        def one(k: int, gate: threading.Semaphore) -> float:
            prompt = f'{questions[k]} Please answer "Yes" or "No".'
            got = self._by_logprobs_first(images[k], prompt, answers, "judge_yes", None, gate)
            if got is None:
                got = self._sampled(images[k], prompt, answers, "judge_yes", gate, False)[0]
            return got[0]

        return self._readings(len(images), one)

    def rate(self, images: Sequence[Image.Image], prompts: Sequence[str]) -> list[Rating]:
        check_pairs(images, prompts)
        answers = ("1", "2", "3", "4", "5")

        def one(k: int, gate: threading.Semaphore) -> Rating:
            return self._rating(images[k], prompts[k], answers, "judge_rate", None, gate)

        return self._readings(len(images), one)

    def rate_scale(
        self, images: Sequence[Image.Image], prompts: Sequence[str], low: int, high: int
    ) -> list[Rating]:
        """A ``low``..``high`` rating distribution per (image, prompt): from the first
        answer token's log-probabilities (see :func:`metrics.quality.rating_distribution`;
        "10" written as "1" then "0" is split by the second position when the answer began
        with "1"), else, or when "1" cannot be told from "10", from sampled answers."""

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

        def one(k: int, gate: threading.Semaphore) -> Rating:
            return self._rating(images[k], prompts[k], answers, "judge_scale", read, gate, low)

        return self._readings(len(images), one)

    def vqa_score(
        self,
        images: Sequence[Image.Image],
        texts: Sequence[str],
        most: int | None = None,
        enough: Callable[[int, VqaAnswer], bool] | None = None,
    ) -> list[VqaAnswer]:
        """VQAScore of each (image, text): P("Yes") over the full first-token distribution
        for VQAScore's question (:func:`metrics.vqascore.yes_mass`), where the model gives
        log-probabilities; else the share of "Yes" among sampled answers, read as
        ``sampled k=N`` (N answers). ``most``: sampled readings take up to ``most``
        answers, k at a time, until ``enough(j, answer so far)`` holds for reading j (see
        :meth:`_sampled`)."""
        check_pairs(images, texts)
        answers = ("Yes", "No")

        def read(positions: list[dict[str, float]], chosen: list[str]) -> list[float]:
            return [yes_mass(positions[0])]

        def one(k: int, gate: threading.Semaphore) -> VqaAnswer:
            prompt = vqa_question(texts[k])
            got = self._by_logprobs_first(images[k], prompt, answers, "judge_vqa", read, gate)
            if got is not None:
                return VqaAnswer(texts[k], got[0], LOGPROBS)
            decided = None
            if enough is not None:

                def decided(read: Sampled) -> bool:
                    return enough(k, VqaAnswer(texts[k], read.probabilities[0], read.mode))

            sampled = self._sampled(
                images[k], prompt, answers, "judge_vqa", gate, most=most, enough=decided
            )
            return VqaAnswer(texts[k], sampled.probabilities[0], sampled.mode)

        return self._readings(len(images), one)

    def rate_prefixed(
        self,
        images: Sequence[Image.Image],
        prompts: Sequence[str],
        prefix: str,
        first_seed: int | None = None,
        every: bool = False,
    ) -> list[Rating]:
        """A 1-5 rating per (image, prompt) whose answer format is ``prefix`` then the digit
        ("score is 3", AHEaD Tab. 31). Where the model gives log-probabilities, the digit's
        distribution is read at the position after ``prefix`` when the answer begins with
        it (what a local judge made to begin with the prefix reads: one call), else at the
        first position whose chosen token is a digit 1-5 (a model that answers "3" alone);
        else the answers are sampled in that format, their frequencies the distribution,
        with the standard error. ``first_seed``: a fresh sampled reading, its answers' seeds
        from that seed on (the same seeds for every image); ``every``: all k answers."""
        check_pairs(images, prompts)
        digits = ("1", "2", "3", "4", "5")
        answers = tuple(f"{prefix}{v}" for v in digits)
        target = "".join(prefix.split()).casefold()

        def read(positions: list[dict[str, float]], chosen: list[str]) -> list[float] | None:
            at = digit_after(chosen, target)
            if at is None:  # not in the format: the digit where the model wrote it
                at = next((i for i, t in enumerate(chosen) if t.strip() in digits), None)
            if at is None:
                return None
            try:
                return renormalise(positions[at], digits)
            except ValueError:
                return None

        def one(k: int, gate: threading.Semaphore) -> Rating:
            return self._rating(
                images[k], prompts[k], answers, "judge_prefixed", read, gate,
                first_seed=first_seed, every=every,
            )  # fmt: skip

        return self._readings(len(images), one)


def digit_after(chosen: Sequence[str], target: str) -> int | None:
    """The position of the first token after an answer's opening ``target`` (blanks left
    out, compared without case: "score is" then the digit), or None when the answer does
    not begin with it."""
    said = ""
    for i, token in enumerate(chosen):
        written = "".join(token.split()).casefold()
        if said == target:
            if not written:
                continue  # the space before the digit, a token of its own
            return i
        said += written
        if not target.startswith(said):
            return None
    return None


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
    """As many images as questions, and every image decoded: an image opened from a file
    decodes on first use, which several threads at once (its readings, their answers) must
    not do."""
    if len(images) != len(texts):
        raise ValueError(f"{len(images)} images but {len(texts)} questions")
    for image in images:
        load = getattr(image, "load", None)
        if callable(load):
            load()
