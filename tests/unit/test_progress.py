"""The run's progress from its events: the bar's fraction, the words, the time left."""

from __future__ import annotations

import pytest

from refine.events import (
    ModelsLoading,
    ReviewWaiting,
    RoundDecided,
    RunFinished,
    RunStarted,
    StageStarted,
    StepDone,
)
from refine.progress import Countdown, RunProgress, duration_text


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_fraction_words_and_time_left_through_a_run():
    clock = Clock()
    p = RunProgress(clock)
    p.see(ModelsLoading(roles=("generator", "observer")))
    assert p.describe() == "loading models: generator, observer" and p.fraction() == 0.0
    p.see(RunStarted(run="r", dir="d", first=0, last=2))  # round 0 and 2 editing rounds
    p.see(StageStarted(round=0, stage="generate", n=1))
    p.see(StepDone(round=0, stage="generate", step=10, total=20))
    # half the making of round 0 (its 45%) of 3 rounds
    assert p.fraction() == pytest.approx(0.45 * 0.5 / 3)
    words = "round 0 (first image) \u00b7 generating the first image, step 10 of 20"
    assert p.describe().startswith(words)
    assert p.eta_s() is None  # no round done yet: no estimate
    p.see(StageStarted(round=0, stage="observe", candidate=0))
    assert p.fraction() == pytest.approx(0.45 / 3)
    clock.now = 110.0
    p.see(RoundDecided(round=0, decision="initial"))
    assert p.fraction() == pytest.approx(1 / 3)
    assert p.eta_s() == pytest.approx(20.0)  # two more rounds like round 0 (10 s each)
    p.see(StageStarted(round=1, stage="edit", n=2))
    assert "round 1 of 2 \u00b7 editing, 2 candidates \u00b7 10 s elapsed" in p.describe()
    p.see(StageStarted(round=1, stage="observe", candidate=1))
    assert p.fraction() == pytest.approx((1 + 0.45 + 0.45 / 2) / 3)
    assert "candidate 2 of 2" in p.describe()
    clock.now = 114.0
    p.see(RoundDecided(round=1, decision="accepted"))
    # editing rounds set the pace once there is one: 4 s for the last round
    assert p.eta_s() == pytest.approx(4.0)
    clock.now = 115.0
    assert p.eta_s() == pytest.approx(3.0)
    assert p.describe().endswith("about 3 s left at most")
    p.see(RunFinished(run="r", stop_reason="target reached"))
    assert p.fraction() == 1.0 and p.eta_s() is None
    assert p.describe() == "finished: target reached \u00b7 15 s elapsed"


def test_review_time_is_not_work():
    clock = Clock()
    p = RunProgress(clock)
    p.see(RunStarted(run="r", dir="d", first=0, last=3))
    clock.now = 105.0
    p.see(RoundDecided(round=0, decision="initial"))
    p.see(ReviewWaiting(round=1, instruction="add a sofreh"))
    assert p.stage == "waiting for your review of the instruction"
    clock.now = 505.0  # the user took 400 s to answer
    assert p.eta_s() == pytest.approx(15.0)  # the waiting does not eat into the estimate
    p.see(StageStarted(round=1, stage="edit", n=1))
    clock.now = 508.0
    p.see(RoundDecided(round=1, decision="accepted"))
    assert p.durations == {0: 5.0, 1: 3.0}
    assert p.eta_s() == pytest.approx(6.0)


def test_a_rolled_back_run_counts_only_its_own_rounds():
    p = RunProgress(Clock())
    p.see(RunStarted(run="r", dir="d", first=3, last=5))  # rounds 0-2 copied from the parent
    assert p.total == 3 and p.fraction() == 0.0
    p.see(RoundDecided(round=3, decision="accepted"))
    assert p.fraction() == pytest.approx(1 / 3)
    p.see(RoundDecided(round=5, decision="rejected"))
    assert p.round_text() == "round 5 of 5"  # never "round 6 of 5"


def test_steps_of_another_round_are_ignored_and_durations_read_well():
    p = RunProgress(Clock())
    p.see(RunStarted(run="r", dir="d", first=0, last=1))
    p.see(StepDone(round=1, stage="edit", step=5, total=10))
    assert p.fraction() == 0.0
    assert [duration_text(s) for s in (0.4, 42, 185, 3720)] == [
        "0 s",
        "42 s",
        "3 min 05 s",
        "1 h 02 min",
    ]


def test_a_call_in_flight_is_abandoned_on_a_stop():
    """usage.abandonable: a stop ends the wait at once, the late answer is dropped; a
    worker under usage.inherited sees the same stop; without a stop the call just runs."""
    import threading
    import time

    import pytest

    from refine import usage

    assert usage.abandonable(lambda: 7) == 7
    stop, answered = threading.Event(), []

    def slow():
        time.sleep(1.5)
        answered.append("late")
        return "late"

    threading.Timer(0.2, stop.set).start()
    began = time.monotonic()
    with usage.stop_on(stop), pytest.raises(usage.StopRequested):
        usage.abandonable(slow)
    assert time.monotonic() - began < 1.0 and not answered
    with usage.stop_on(stop):
        ctx = usage.context()
    seen = []

    def worker():
        with usage.inherited(ctx):
            try:
                usage.check_stop()
            except usage.StopRequested:
                seen.append("stopped")

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    assert seen == ["stopped"]
    with usage.stop_on(threading.Event()):
        with pytest.raises(ZeroDivisionError):  # the call's own error comes through
            usage.abandonable(lambda: 1 / 0)


def test_a_countdown_tells_the_time_left_from_the_pace_so_far():
    now = [100.0]
    c = Countdown(4, clock=lambda: now[0])
    assert c.left() == ""  # no pace yet
    now[0] = 130.0
    assert c.tick() == "about 1 min 30 s left"  # 30 s a job, 3 to go
    now[0] = 140.0
    assert c.tick(2) == "about 13 s left"  # 40 s for 3 jobs, 1 to go
    assert c.tick() == "" and c.done == 4


def test_a_refused_round_is_made_again_and_the_run_has_one_round_fewer():
    """A round the image model refused: nothing was made, the same round is made again,
    and the run may make one round fewer (the refused one counted against its rounds):
    the bar never goes back, and the round's number stays."""
    p = RunProgress(Clock())
    p.see(RunStarted(run="r", dir="d", first=0, last=2))
    p.see(RoundDecided(round=0, decision="initial"))
    p.see(StageStarted(round=1, stage="edit", n=2))
    before = p.fraction()
    p.see(RoundDecided(round=1, decision="refused", reason="every candidate (2) was refused"))
    assert p.round == 1 and p.last == 1 and p.fraction() >= before
    assert "round 1 refused, made again" in p.describe()
    p.see(StageStarted(round=1, stage="edit", n=2))
    p.see(RoundDecided(round=1, decision="accepted"))
    assert p.fraction() == pytest.approx(1.0)  # round 1 was the last one left
