"""How a judge's answers become numbers: one home for the arithmetic every judge shares,
whatever serves the model (a local model, the Gemini API, an OpenAI-compatible server).

A judge answers a question with one of a few answers ("Yes"/"No", "1".."5", "0".."10").
Its distribution over them is read one of two ways, named by :class:`Reading`:

* ``logprobs``: the first answer token's log-probabilities, renormalised over the valid
  answers (:func:`renormalise`; "yes", "Yes" and "YES" pooled by :func:`merge_case`). A
  local model's softmax over the answer tokens' logits is the same renormalisation;
* ``sampled``: k answers sampled at temperature 1, whose frequencies are the distribution
  (:func:`frequencies`). A rating's expectation, or a share of "Yes", then carries a standard
  error: the spread of what the answers leave possible, the posterior standard deviation
  under Perks' prior (:data:`PRIOR_MASS`; :func:`rating_stderr`, :func:`sampled_stderr`),
  never 0 because a few answers agreed.

A rating's value is its expectation (:func:`expected_rating`), the yes-probability the
share of "Yes".
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

LOGPROBS, SAMPLED = "logprobs", "sampled"


@dataclass(frozen=True)
class Reading:
    """How a number was read from the judge: by log-probabilities (its sampling error 0:
    the model's own probabilities, read once), or from ``k`` samples with the standard
    error of the number (None: not recorded)."""

    method: str = LOGPROBS
    k: int | None = None
    stderr: float | None = None

    def __post_init__(self) -> None:
        if self.method not in (LOGPROBS, SAMPLED):
            raise ValueError(f"a reading is {LOGPROBS!r} or {SAMPLED!r}, got {self.method!r}")
        if self.method == SAMPLED and (self.k is None or self.k < 2):
            raise ValueError(f"a sampled reading needs k >= 2 samples, got {self.k!r}")
        if self.method == LOGPROBS:  # a record written before: null
            if self.stderr not in (None, 0, 0.0):
                raise ValueError(
                    f"a reading by log-probabilities has no sampling error, got {self.stderr!r}"
                )
            object.__setattr__(self, "stderr", 0.0)
        # a record read from a file is shown ± its error: a finite number at least 0
        if self.stderr is not None and not (
            isinstance(self.stderr, int | float) and math.isfinite(self.stderr) and self.stderr >= 0
        ):
            raise ValueError(f"a reading's standard error is a number >= 0, got {self.stderr!r}")

    @classmethod
    def parse(cls, mode: str | None, stderr: float | None = None) -> Reading | None:
        """The reading a judge names itself by: ``logprobs`` or ``sampled k=N``."""
        if mode is None:
            return None
        if mode == LOGPROBS:
            return cls()
        head, _, k = mode.partition(" k=")
        if head != SAMPLED or not k.isdigit():
            raise ValueError(f"unknown judge reading {mode!r} (logprobs or 'sampled k=N')")
        return cls(SAMPLED, int(k), stderr)

    @property
    def calls(self) -> int:
        """The model calls behind it: one by log-probabilities, k sampled."""
        return 1 if self.method == LOGPROBS else int(self.k or 1)

    @property
    def mode(self) -> str:
        """The judge's own name for it: ``logprobs`` or ``sampled k=N``."""
        return LOGPROBS if self.method == LOGPROBS else f"{SAMPLED} k={self.k}"


def reading_calls(mode: str | None) -> int:
    """The model calls behind a reading named ``mode`` (``logprobs``: 1, ``sampled k=N``:
    N)."""
    reading = Reading.parse(mode)
    return 1 if reading is None else reading.calls


def merge_case(logprobs: Mapping[str, float], answers: Sequence[str]) -> dict[str, float]:
    """Pool the casings of each answer ("yes", "Yes", "YES" into "Yes"): the log-sum-exp of
    their log-probabilities."""
    merged: dict[str, float] = {}
    for token, lp in logprobs.items():
        for answer in answers:
            if token.lower() == answer.lower():
                prev = merged.get(answer)
                merged[answer] = (
                    lp if prev is None else max(prev, lp) + math.log1p(math.exp(-abs(prev - lp)))
                )
    return merged


def renormalise(logprobs: Mapping[str, float], answers: Sequence[str]) -> list[float]:
    """P(answer) for each of ``answers`` from first-token log-probabilities, renormalised
    over the answers found (an answer not among them gets 0). Raises ValueError when none
    of the answers is among ``logprobs``."""
    found = {a: logprobs[a] for a in answers if a in logprobs}
    if not found:
        top = ", ".join(list(logprobs)[:8]) or "none"
        raise ValueError(
            f"none of the answer tokens {list(answers)} is among the most likely first "
            f"tokens ({top})"
        )
    peak = max(found.values())
    weights = [math.exp(found[a] - peak) if a in found else 0.0 for a in answers]
    total = sum(weights)
    return [w / total for w in weights]


def frequencies(given: Sequence[str], answers: Sequence[str]) -> list[float]:
    """The share of each of ``answers`` among the sampled answers ``given`` (matched
    without regard to case). Raises ValueError for an answer that is none of them."""
    counts = dict.fromkeys(answers, 0)
    for answer in given:
        matched = next((a for a in answers if a.casefold() == answer.casefold()), None)
        if matched is None:
            raise ValueError(f"a sampled answer {answer[:40]!r} is none of {list(answers)}")
        counts[matched] += 1
    return [counts[a] / len(given) for a in answers]


def expected_rating(probabilities: Sequence[float], low: int = 1) -> float:
    """The expectation of a rating distribution over low, low + 1, ..."""
    return float(sum((low + k) * p for k, p in enumerate(probabilities)))


# The prior of a sampled reading's error: Perks' (a total weight of one answer spread
# evenly over the scale's answers: 1/5 each on 1-5, Jeffreys' Beta(1/2, 1/2) for yes or
# no). The error is the posterior's standard deviation of the number read (a rating's
# expectation, a share of "Yes"), so answers that agree leave the spread their number can
# still hide: two answers "3" on 1-5 give 0.41 (the sample standard deviation gave 0),
# eight give 0.15; two "Yes" give 0.19 on P(Yes), eight 0.072. Where the answers differ it
# is near the sample standard error (six "Yes" of eight: 0.142 against 0.164). Jeffreys'
# half an answer for each of 0-10's eleven answers outweighed eight answers: 0.65 where
# the sample's error was 0.32, against Perks' 0.49 (docs/metrics.md, "How many answers a
# sampled reading takes").
PRIOR_MASS = 1.0

# the one-sided 90% quantile of the normal distribution (scipy.stats.norm.ppf(0.9)): a
# difference read from sampled answers counts where its 90% lower bound, the difference less
# this many of its standard errors, clears the threshold (refine.loop.policy, EXAG's list of
# exaggerated candidates)
ONE_SIDED_90 = 1.2815515655446004


def dirichlet_sd(counts: Sequence[float], values: Sequence[float]) -> float:
    """The standard deviation of sum(values[i] * theta[i]) for theta drawn from the
    posterior Dirichlet(counts + PRIOR_MASS / len(counts)): the error of a number read
    from sampled answers counted ``counts``."""
    if len(counts) != len(values) or not counts:
        raise ValueError(f"{len(counts)} counts for {len(values)} values")
    alpha = [c + PRIOR_MASS / len(counts) for c in counts]
    total = sum(alpha)
    mean = sum(v * a for v, a in zip(values, alpha, strict=True)) / total
    square = sum(v * v * a for v, a in zip(values, alpha, strict=True)) / total
    return math.sqrt(max(square - mean * mean, 0.0) / (total + 1.0))


def rating_stderr(probabilities: Sequence[float], k: int) -> float:
    """The standard error of a rating's expectation read from k sampled answers whose
    frequencies are ``probabilities`` (one per answer of the scale): the posterior standard
    deviation of the expected rating (:func:`dirichlet_sd`; where the scale starts does
    not matter, how many answers it has does)."""
    if k < 1:
        raise ValueError(f"a sampled reading has at least one answer, got k={k!r}")
    return dirichlet_sd([p * k for p in probabilities], range(len(probabilities)))


def sampled_stderr(p: float, k: int) -> float:
    """The standard error of a share ``p`` of "Yes" among k sampled answers: the posterior
    standard deviation of P(Yes) (Beta(p k + 1/2, (1 - p) k + 1/2))."""
    if k < 1:
        raise ValueError(f"a sampled reading has at least one answer, got k={k!r}")
    return dirichlet_sd([p * k, (1.0 - p) * k], [1.0, 0.0])
