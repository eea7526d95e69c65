"""A close sampled gain is read again on fresh answers before an edit is kept
(refine.loop.confirm): reproduced by an agreeing fresh pair, confirmed or not by all k fresh
answers, the parent kept where the reading fails; a clear gain read from all k answers, a
rejected edit and a gain read by log-probabilities take no answer more."""

from __future__ import annotations

import pytest

from metrics.computed import Computed
from metrics.judge import Reading
from refine import usage
from refine.loop import confirm
from refine.loop.policy import Verdict
from refine.records import Candidate, Feedback, Scores


def read(exag: float, k: int, se: float) -> Candidate:
    """A candidate (ALIGN 0.5, HAL 0.2) whose EXAG was read from k sampled answers."""
    faith = (0.5 + 0.8 + 1 - exag) / 3
    scores = Scores(
        values={"align": 0.5, "hal": 0.2, "exag": exag, "faith": faith},
        readings={"exag": Reading("sampled", k, se), "faith": Reading("sampled", k, se / 3)},
    )
    return Candidate(seed=0, image="x.png", observed={}, scores=scores, feedback=Feedback())


def fresh(exag: float, k: int, se: float) -> Computed:
    return Computed(exag, "exag:mllm", Reading("sampled", k, se))


class Reader:
    """The fresh readings to give, in turn, and what was asked."""

    def __init__(self, *answers):
        self.answers, self.asked, self.pairs = list(answers), [], []

    def __call__(self, pair, seed, every):
        self.pairs.append(list(pair))
        self.asked.append((seed, every))
        got = self.answers.pop(0)
        if isinstance(got, Exception):
            raise got
        return got


PARENT, CHOSEN = read(0.75, 2, 0.1), read(0.5, 2, 0.1)  # FAITH 0.517 -> 0.6: +0.083
ACCEPTED = Verdict(0, "accepted", "FAITH 0.517 -> 0.600 (+0.083; 90% >= +0.029)")


def decide(reader, chosen=CHOSEN, parent=PARENT, verdict=ACCEPTED):
    return confirm.confirmed(verdict, [chosen], parent, 0, 0.01, reader)


def test_an_agreeing_fresh_pair_that_says_the_same_reproduces_the_gain():
    reader = Reader([fresh(0.5, 2, 0.1), fresh(0.75, 2, 0.1)])
    v = decide(reader)
    assert (v.decision, v.reason) == (
        "accepted",
        ACCEPTED.reason + "; reproduced on 4 fresh answers",
    )
    assert reader.asked == [(confirm.FRESH_SEED, False)]
    assert reader.pairs == [[CHOSEN, PARENT]]  # the chosen image, then the one it must beat


def test_a_pair_that_says_otherwise_takes_all_k_fresh_answers_which_decide():
    # the candidate's fresh pair agrees on another rating: all k from fresh seeds again,
    # where the gain is 0.25 x 1/3 = 0.083 with errors 0.04 / 3: bound +0.060
    kept = Reader(
        [fresh(0.25, 2, 0.1), fresh(0.75, 2, 0.1)], [fresh(0.5, 8, 0.04), fresh(0.75, 8, 0.04)]
    )
    v = decide(kept)
    assert kept.asked == [(confirm.FRESH_SEED, False), (confirm.FULL_SEED, True)]
    assert v.decision == "accepted"
    assert v.reason.endswith(
        "; confirmed on 8 fresh answers each, FAITH 0.517 -> 0.600 (+0.083; 90% >= +0.059)"
    )
    # all k fresh answers that see no gain keep the parent, whose round the reason names
    gone = Reader([fresh(0.5, 8, 0.06), fresh(0.5, 8, 0.06)])
    v = decide(gone)
    assert gone.asked == [(confirm.FRESH_SEED, False)]  # both took all k: they decide
    assert v.decision == "rejected" and v.chosen == 0
    assert v.reason.endswith("(+0.000; 90% >= -0.036): kept round 0")
    assert "not confirmed on 8 fresh answers each" in v.reason


def test_a_runs_fresh_answers_stay_within_its_allowance():
    """Confirmations spend at most half the requests a run made otherwise, and at least
    one confirmation's most (4k): a step that could pass that is not taken, the parent
    kept, and what a step spends counts against the allowance."""
    from refine.evaluate.assess import CallCounter

    class Paying(Reader):  # each answer a request, on the run's counter
        def __init__(self, calls, *answers):
            super().__init__(*answers)
            self.calls = calls

        def __call__(self, pair, seed, every):
            got = super().__call__(pair, seed, every)
            self.calls.add(sum(e.reading.k for e in got))
            return got

    def run(n, fresh_spent, *answers):
        calls = CallCounter(n)
        calls.fresh = fresh_spent
        reader = Paying(calls, *answers)
        return confirm.confirmed(ACCEPTED, [CHOSEN], PARENT, 0, 0.01, reader, calls), reader

    pair_then_all = ([fresh(0.25, 2, 0.1), fresh(0.75, 2, 0.1)],
                     [fresh(0.5, 8, 0.04), fresh(0.75, 8, 0.04)])  # fmt: skip
    # early in a run (20 other requests): one confirmation in full, 4 + 16 requests
    v, reader = run(20, 0, *pair_then_all)
    assert v.decision == "accepted" and len(reader.asked) == 2 and reader.calls.fresh == 20
    assert confirm.allowance(reader.calls) == 32  # 4k: 20 fresh of 20 others
    # 100 other requests: 50 may be fresh; 31 spent, the 4 of a pair fit, the 16 of all k not
    v, reader = run(131, 31, *pair_then_all)
    assert reader.asked == [(confirm.FRESH_SEED, False)] and reader.calls.fresh == 35
    assert v.decision == "rejected" and v.reason == ACCEPTED.reason + (
        "; not confirmed: 16 fresh answers would pass the run's allowance for them (35 of 50 "
        "spent): kept round 0"
    )
    # spent already: not even the pair is read
    v, reader = run(147, 47, *pair_then_all)
    assert reader.asked == [] and v.decision == "rejected"
    assert "not confirmed: 4 fresh answers would pass" in v.reason


def test_a_failed_reading_keeps_the_parent_and_nothing_fresh_leaves_the_verdict():
    v = decide(Reader(RuntimeError("503 UNAVAILABLE")))
    assert v.decision == "rejected" and "reading it again failed (503 UNAVAILABLE)" in v.reason
    assert decide(Reader(None)) == ACCEPTED


@pytest.mark.parametrize(
    "stop",
    [usage.CallBudgetSpent("--budget-calls 20 spent"), usage.StopRequested("stop"),
     usage.QuotaSpent("daily quota")],
)  # fmt: skip
def test_the_runs_limits_and_a_stop_end_the_round_as_anywhere_else(stop):
    with pytest.raises(type(stop)):
        decide(Reader(stop))


def test_a_reading_is_full_at_the_judges_k():
    """With k = 4 a reading of 4 answers took all k: a clear gain so read is not read again;
    with the default 8 it stopped early, and is."""
    chosen, parent = read(0.25, 4, 0.02), read(0.75, 4, 0.02)
    reader = Reader([fresh(0.25, 8, 0.02), fresh(0.75, 8, 0.02)])
    reader.full = 4
    assert decide(reader, chosen, parent) == ACCEPTED and reader.asked == []
    assert confirm.close(chosen, parent, 0.01)  # at the default k of 8


@pytest.mark.parametrize(
    ("chosen", "parent", "verdict"),
    [
        # every reading took all k answers and the gain is clear at 99%: +0.083 against
        # errors of 0.01 / 3
        (read(0.5, 8, 0.01), read(0.75, 8, 0.01), ACCEPTED),
        # rejected edits are not read again
        (CHOSEN, PARENT, Verdict(0, "rejected", "FAITH ...")),
    ],
)
def test_clear_gains_and_rejected_edits_take_no_answer_more(chosen, parent, verdict):
    reader = Reader()
    assert decide(reader, chosen, parent, verdict) == verdict and reader.asked == []


def test_close_needs_sampled_readings_and_counts_early_stops():
    exact = Candidate(
        seed=0, image="x.png", observed={}, feedback=Feedback(),
        scores=Scores(values={"align": 0.5, "hal": 0.2, "exag": 0.5, "faith": 0.6}),
    )  # fmt: skip
    assert not confirm.close(exact, exact, 0.01)  # log-probabilities: nothing to confirm
    assert confirm.close(read(0.5, 8, 0.01), read(0.75, 2, 0.1), 0.01)  # the parent stopped
    # all k, but the bound at 99% (0.083 - 2.33 x 0.047) is below the margin
    assert confirm.close(read(0.5, 8, 0.1), read(0.75, 8, 0.1), 0.01)


def test_a_large_gain_from_agreeing_answers_is_clear_at_the_largest_error_they_can_have():
    """A red scene turned green: EXAG 1 -> 0 (FAITH +0.333), the chosen image read from an
    agreeing pair. At the largest error such a reading can have (0.370 / 3) and the
    parent's own (0.02 / 3), the 99% bound is +0.046: kept without another answer. With
    the parent stopped early too (both at 0.123), +0.333 - 2.33 x 0.174 < 0: read again."""
    assert not confirm.close(read(0.0, 2, 0.05), read(1.0, 8, 0.02), 0.01)
    assert confirm.close(read(0.0, 2, 0.05), read(1.0, 2, 0.05), 0.01)


def agree_two_variance(p, k: int) -> float:
    """The variance of a reading of EXAG (answers 0, 1/4, ..., 1 at odds ``p``) that is
    its first two answers where they agree and else the mean of all k (exact)."""
    values = [v / 4 for v in range(5)]
    mean = sum(v * q for v, q in zip(values, p, strict=True))
    var = sum((v - mean) ** 2 * q for v, q in zip(values, p, strict=True))
    m1 = m2 = 0.0
    for i, (a, pa) in enumerate(zip(values, p, strict=True)):
        for j, (b, pb) in enumerate(zip(values, p, strict=True)):
            if i == j:
                m1, m2 = m1 + pa * pa * a, m2 + pa * pb * a * a
                continue
            e = (a + b + (k - 2) * mean) / k  # the other k - 2 answers drawn at the odds
            m1, m2 = m1 + pa * pb * e, m2 + pa * pb * (e * e + (k - 2) * var / k**2)
    return m2 - m1 * m1


@pytest.mark.parametrize("k", [4, 8])
def test_the_largest_error_of_a_reading_stopped_at_agreeing_answers(k):
    import numpy as np

    # the judge split evenly between the scale's ends reaches it ...
    even = agree_two_variance([0.5, 0, 0, 0, 0.5], k)
    assert confirm.short_reading_sd(k) == pytest.approx(even**0.5, rel=1e-12)
    assert confirm.short_reading_sd(8) == pytest.approx(0.3698, abs=1e-4)
    # ... and no other distribution of the five answers exceeds it
    rng = np.random.default_rng(0)
    for p in rng.dirichlet([0.3] * 5, size=3000):
        assert agree_two_variance(p, k) <= even + 1e-12
