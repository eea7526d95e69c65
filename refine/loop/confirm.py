"""A close decision confirmed on fresh answers.

Where FAITH was read from sampled answers, an edit is accepted when its gain's one-sided
90% lower bound reaches the margin (:func:`refine.loop.policy.decide_edit`). That bound is
computed on the readings that chose the candidate: the better of several candidates is
chosen on the same noise that then seems to favour it, and a reading whose first two
answers agreed records an error that covers the truth too rarely (a torn, flat or bimodal
judge's pair agrees often, on a gain as on none). So an accepted edit whose gain is not
beyond doubt (:func:`close`) is read again: the judge's EXAG of the chosen candidate and of
the image it must beat (the sampled term of FAITH, the only one with a sampling error), with
seeds neither reading used before and the same seeds for both images (their errors cancel
where the model follows seeds):

1. a fresh reading of each (two answers, all k unless they agree): where every fresh
   reading stopped at two agreeing answers that say what its first reading said, the gain
   is reproduced, and the edit is kept;
2. else, where both fresh readings took all k answers, they decide; where one stopped at
   an agreeing pair that says something else, all k answers each from fresh seeds again.
   The edit is kept only when the gain on these fresh answers alone, which the choice never
   saw, has a one-sided 90% lower bound at the margin. Otherwise the parent is kept.

A gain clear at 99% takes no answer more, and no answer is spent on a rejected edit. A
reading stopped at agreeing answers counts there at the largest standard error any judge's
such reading can have (:func:`short_reading_sd`): a gain as large as a red scene turned green
(FAITH +0.4) is kept at once, and close gains are read again.

The fresh answers of a run stay within :data:`FRESH_SHARE` of the requests it made
otherwise (:func:`affordable`): a step that could pass that is not taken, and the parent is
kept. Where edits change nothing, a run's close gains were otherwise read again in full
round after round (1.7 times the requests of the rule before, in two of six runs).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from metrics.ahead import faith
from metrics.judge import ONE_SIDED_90, SAMPLED
from refine import usage
from refine.loop.policy import Verdict, faith_of, faith_se

if TYPE_CHECKING:
    from metrics.computed import Computed
    from refine.records import Candidate

# a gain whose one-sided 99% lower bound reaches the margin is beyond doubt
CLEAR_Z = 2.3263478740408408
# the bound the fresh answers' gain must clear
CONFIRM_Z = ONE_SIDED_90
# a reading of fewer answers stopped early, its first answers agreeing: the judge's k
# (Reread.full), 8 by default
FULL = 8
# the first seeds of the fresh answers (two, then all k): far above any reading's own
FRESH_SEED, FULL_SEED = 1_000_000, 2_000_000

# confirmations spend at most this share of the requests a run made otherwise
FRESH_SHARE = 0.5

# (candidates, first seed, all k answers) -> their EXAG read afresh (None: not possible)
Reread = Callable[[Sequence["Candidate"], int, bool], "Sequence[Computed] | None"]


def answers_of(c: Candidate) -> int | None:
    """The answers a candidate's sampled FAITH was read from (None: not sampled)."""
    reading = c.scores.readings.get("faith")
    return reading.k if reading is not None and reading.method == SAMPLED else None


def short_reading_sd(full: int = FULL) -> float:
    """The largest standard deviation of a sampled EXAG reading (on its 0-1 scale) that
    stops at two agreeing answers and else takes all ``full``, over every distribution of
    the judge's answers: a judge split evenly between the scale's ends (1 and 5), whose
    pair agrees half the time (0 or 1) and else reads the mean of ``full`` answers, two of
    them 0 and 1: variance 1/8 + (full - 2) / (8 full^2), 0.370 at k = 8 (a numerical
    search over 200,000 distributions on the five ratings found no larger). Readings that
    stop at more agreeing answers vary less."""
    return math.sqrt(1 / 8 + (full - 2) / (8 * full * full))


def close(chosen: Candidate, parent: Candidate, margin: float, full: int = FULL) -> bool:
    """Whether ``chosen``'s FAITH gain over ``parent`` was read from sampled answers and
    is not beyond doubt: its one-sided 99% lower bound is below ``margin``, a reading that
    stopped before ``full`` answers (the judge's k) counted at :func:`short_reading_sd`
    (over 3, FAITH's share of EXAG) where its own error may cover the truth too rarely."""
    taken = [answers_of(chosen), answers_of(parent)]
    if all(k is None for k in taken):
        return False
    short = short_reading_sd(full) / 3.0
    se = math.hypot(
        *(short if k is not None and k < full else faith_se(c)
          for c, k in zip((chosen, parent), taken, strict=True))
    )  # fmt: skip
    return faith_of(chosen) - faith_of(parent) - CLEAR_Z * se < margin


def fresh_faith(c: Candidate, exag: Computed) -> tuple[float, float]:
    """``c``'s FAITH with EXAG read afresh, and its standard error (EXAG's over 3)."""
    value, _ = faith(c.scores.align, c.scores.hal, exag.value)
    stderr = exag.reading.stderr if exag.reading is not None else None
    return value, (stderr or 0.0) / 3.0


def reproduced(pair: Sequence[Candidate], fresh: Sequence[Computed], full: int = FULL) -> bool:
    """Whether every fresh reading stopped at agreeing answers (fewer than ``full``) that
    say what the first reading of its image said (the same EXAG, itself so read)."""
    for c, e in zip(pair, fresh, strict=True):
        first = c.scores.readings.get("exag")
        if e.reading is None or first is None or first.k is None or e.reading.k is None:
            return False
        if max(e.reading.k, first.k) >= full or e.value != c.scores.exag:
            return False
    return True


def allowance(calls: Any, full: int = FULL) -> float:
    """The requests a run's confirmations may spend in all: :data:`FRESH_SHARE` of the
    requests it made otherwise (``calls``: its :class:`refine.evaluate.assess.CallCounter`),
    and at least one confirmation's most (two readings of all ``full`` answers, twice), so
    that a close gain early in a run can be confirmed."""
    return max(FRESH_SHARE * (calls.n - calls.fresh), 4.0 * full)


def affordable(calls: Any, more: int, full: int = FULL) -> bool:
    """Whether ``more`` requests of fresh answers keep a run's confirmations within their
    :func:`allowance` (``calls`` None: no limit)."""
    return calls is None or calls.fresh + more <= allowance(calls, full)


def _counted(reread: Reread, calls: Any) -> Reread:
    """``reread``, its requests counted as fresh answers on ``calls``."""
    if calls is None:
        return reread

    def counted(cs: Sequence[Candidate], seed: int, every: bool) -> Sequence[Computed] | None:
        before = calls.n
        try:
            return reread(cs, seed, every)
        finally:
            calls.fresh += calls.n - before

    return counted


def confirmed(
    verdict: Verdict,
    candidates: Sequence[Candidate],
    parent: Candidate,
    parent_index: int,
    margin: float,
    reread: Reread,
    calls: Any = None,
) -> Verdict:
    """``verdict``, or where it accepted a close edit (:func:`close`), the decision on
    fresh answers (the module's steps); ``reread`` gives the pair's EXAG read afresh (None:
    nothing fresh can be read, and the verdict stands). A reading that fails, or one that
    the run's allowance (``calls``: see :func:`affordable`) cannot pay for, keeps the
    parent."""
    if verdict.decision != "accepted":
        return verdict
    pair = [candidates[verdict.chosen], parent]
    if answers_of(pair[0]) is None and answers_of(pair[1]) is None:
        return verdict  # read by log-probabilities: nothing to confirm
    full = int(getattr(reread, "full", FULL))  # the judge's k
    if not close(*pair, margin, full):
        return verdict

    def unaffordable(more: int) -> Verdict | None:
        if affordable(calls, more, full):
            return None
        return Verdict(
            verdict.chosen,
            "rejected",
            f"{verdict.reason}; not confirmed: {more} fresh answers would pass the run's "
            f"allowance for them ({calls.fresh} of {allowance(calls, full):.0f} spent): "
            f"kept round {parent_index}",
        )

    read = _counted(reread, calls)
    try:
        if (refused := unaffordable(2 * len(pair))) is not None:  # two answers each, at least
            return refused
        fresh = read(pair, FRESH_SEED, False)
        if fresh is not None and reproduced(pair, fresh, full):
            k = sum(e.reading.k for e in fresh if e.reading is not None)
            return Verdict(
                verdict.chosen, "accepted", f"{verdict.reason}; reproduced on {k} fresh answers"
            )
        if fresh is not None and any(
            e.reading is None or (e.reading.k or 0) < full for e in fresh
        ):  # an agreeing pair that says something else: all k, from fresh seeds again
            if (refused := unaffordable(full * len(pair))) is not None:
                return refused
            fresh = read(pair, FULL_SEED, True)
    except (usage.BudgetExhausted, usage.QuotaSpent, usage.StopRequested):
        raise  # the run's limits and a stop end the round as anywhere else in it
    except Exception as err:  # paid for, but not confirmed: the parent stays
        return Verdict(
            verdict.chosen,
            "rejected",
            f"{verdict.reason}; not confirmed: reading it again failed ({err}); "
            f"kept round {parent_index}",
        )
    if fresh is None:
        return verdict
    (now, now_se), (before, before_se) = (
        fresh_faith(c, e) for c, e in zip(pair, fresh, strict=True)
    )
    gain = now - before
    bound = gain - CONFIRM_Z * math.hypot(now_se, before_se)
    k = fresh[0].reading.k if fresh[0].reading is not None else None
    said = (
        f"on {k} fresh answers each, FAITH {before:.3f} -> {now:.3f} "
        f"({gain:+.3f}; 90% >= {bound:+.3f})"
    )
    if bound >= margin - 1e-12:  # 1e-12: the rounding of a gain equal to the margin
        return Verdict(verdict.chosen, "accepted", f"{verdict.reason}; confirmed {said}")
    return Verdict(
        verdict.chosen,
        "rejected",
        f"{verdict.reason}; not confirmed {said}: kept round {parent_index}",
    )


class rereading:  # noqa: N801 (a function's role: the loop's Reread)
    """The loop's :data:`Reread`: EXAG of candidates' images (files in ``store``) read
    afresh by ``assessor`` (:func:`refine.evaluate.assess.fresh_exag`); ``full``: the
    judge's k, the answers a reading takes when its first ones do not agree."""

    def __init__(self, assessor: Any, store: Any, refs: Any) -> None:
        self.assessor, self.store, self.refs = assessor, store, refs

    @property
    def full(self) -> int:
        with self.assessor.backends.using("judge") as judge:
            return int(getattr(judge, "samples", FULL))

    def __call__(
        self, cs: Sequence[Candidate], seed: int, every: bool
    ) -> Sequence[Computed] | None:
        from refine.evaluate.assess import fresh_exag

        images = [self.store.load_image(c.image) for c in cs]
        return fresh_exag(self.assessor, images, self.refs, seed, every)
