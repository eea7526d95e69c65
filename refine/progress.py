"""How far a run is, from its events: a fraction for a progress bar, the stage in words,
the time spent and, once a round is done, an estimate of the time left.

Every front end reads the same tracker: the app draws its bar from it, the service puts it
in each update. A round's share of the bar: making the images (generate or edit, advanced
by the diffusion pipeline's step callback where the backend has one) ``MAKE``, observing
and scoring its candidates ``ASSESS`` (split evenly over them), the steps after it (CAIRE,
other prompt languages) the rest. Time spent waiting for a user's review counts neither in
a round's duration nor in the estimate.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from refine.events import (
    Event,
    ModelsLoading,
    ReviewWaiting,
    RoundDecided,
    RunFinished,
    RunStarted,
    StageStarted,
    StepDone,
)

MAKE, ASSESS = 0.45, 0.45
STAGE_WORDS = {
    "generate": "generating the first image",
    "edit": "editing",
    "observe": "observing and scoring",
    "caire": "rating cultures (CAIRE)",
    "languages": "other prompt languages",
    "expectations": "checking cultural expectations",
}


def duration_text(seconds: float) -> str:
    """``42 s``, ``3 min 05 s``, ``1 h 02 min``."""
    s = max(0, round(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {(s % 3600) // 60:02d} min"


def bar(done: int, total: int, width: int = 20) -> str:
    """A text progress bar, ``[#####...............]``, for terminals and logs alike."""
    filled = width if total <= 0 else min(width, round(width * done / total))
    return "[" + "#" * filled + "." * (width - filled) + "]"


class Countdown:
    """The time left over ``total`` jobs, from the mean time of those done so far (jobs
    made side by side count as they end): ``about 2 min 10 s left``. ``clock`` is
    injectable for tests."""

    def __init__(self, total: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.total, self.done, self.clock = total, 0, clock
        self.started = clock()

    def left(self) -> str:
        """The time left in words (empty before the first job ends and after the last)."""
        remaining = self.total - self.done
        if remaining <= 0 or self.done <= 0:
            return ""
        spent = self.clock() - self.started
        return f"about {duration_text(spent / self.done * remaining)} left"

    def tick(self, n: int = 1) -> str:
        """Count ``n`` more jobs done; the time left in words."""
        self.done += n
        return self.left()


class RunProgress:
    """Feed it a run's events with :meth:`see`; read :meth:`fraction`, :meth:`eta_s` and
    :meth:`describe`. ``clock`` is injectable for tests."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.started: float | None = None
        self.first = 0
        self.last = 0
        self.round = 0
        self.within = 0.0  # share of the current round done
        self.stage = "starting"
        self.detail = ""
        self.candidates = 1
        self.round_started: float | None = None
        self.waited = 0.0  # review time in the current round
        self.review_since: float | None = None
        self.durations: dict[int, float] = {}  # round -> seconds of work
        self.finished = False

    # -- events ------------------------------------------------------------------------

    def see(self, event: Event) -> None:
        now = self.clock()
        if self.review_since is not None and not isinstance(event, ReviewWaiting):
            self.waited += now - self.review_since
            self.review_since = None
        if isinstance(event, ModelsLoading):
            self.stage, self.detail = "loading models", ", ".join(event.roles)
        elif isinstance(event, RunStarted):
            self.started = self.round_started = now
            self.first, self.last = event.first, max(event.first, event.last)
            self.round, self.within = event.first, 0.0
            self.stage, self.detail = "starting", ""
        elif isinstance(event, StageStarted):
            self._stage(event)
        elif isinstance(event, StepDone) and event.round == self.round and event.total > 0:
            self.within = max(self.within, MAKE * min(1.0, event.step / event.total))
            self.detail = f"step {event.step} of {event.total}"
        elif isinstance(event, ReviewWaiting):
            self.review_since = now
            self.stage, self.detail = "waiting for your review of the instruction", ""
        elif isinstance(event, RoundDecided) and event.decision == "refused":
            # nothing made: the same round is made again, and the run has one round fewer
            self.last = max(self.round, self.last - 1)
            self.within, self.round_started, self.waited = 0.0, now, 0.0
            self.stage, self.detail = f"round {event.round} refused, made again", ""
        elif isinstance(event, RoundDecided):
            if self.round_started is not None:
                self.durations[event.round] = max(0.0, now - self.round_started - self.waited)
            self.round, self.within = event.round + 1, 0.0
            self.round_started, self.waited = now, 0.0
            self.stage, self.detail = f"round {event.round} {event.decision}", ""
        elif isinstance(event, RunFinished):
            self.finished = True
            self.stage, self.detail = "finished", event.stop_reason or ""

    def _stage(self, event: StageStarted) -> None:
        self.round = event.round
        self.stage = STAGE_WORDS.get(event.stage, event.stage)
        if event.stage in ("generate", "edit"):
            self.candidates = max(1, event.n)
            self.within = 0.0
            self.detail = f"{event.n} candidates" if event.n > 1 else ""
        elif event.stage == "observe":
            # candidates assessed at the same time report in any order: never backwards
            j = event.candidate or 0
            self.within = max(self.within, MAKE + ASSESS * j / self.candidates)
            self.detail = f"candidate {j + 1} of {self.candidates}" if self.candidates > 1 else ""
        else:
            self.within = max(self.within, MAKE + ASSESS)
            self.detail = ""

    # -- reading -----------------------------------------------------------------------

    @property
    def total(self) -> int:
        """Rounds this drive may make (round 0 counts as one)."""
        return self.last - self.first + 1

    def fraction(self) -> float:
        """0..1 of the rounds this drive may make; 1 once finished (also when the run
        stops early, at the target)."""
        if self.finished:
            return 1.0
        if self.started is None:
            return 0.0
        done = (self.round - self.first) + self.within
        return max(0.0, min(1.0, done / self.total))

    def elapsed_s(self) -> float:
        return 0.0 if self.started is None else self.clock() - self.started

    def eta_s(self) -> float | None:
        """Seconds left if every round left is made, from the mean duration of the rounds
        done (editing rounds when there are any: round 0 is not one); None before the first
        round is done and after the end."""
        if self.finished or not self.durations:
            return None
        edits = [s for k, s in self.durations.items() if k > 0]
        per = sum(edits or self.durations.values()) / len(edits or self.durations)
        left = self.last - self.round + 1
        spent = 0.0
        if self.round_started is not None:
            waiting = self.clock() - self.review_since if self.review_since else 0.0
            spent = self.clock() - self.round_started - self.waited - waiting
        return max(0.0, per * left - spent)

    def round_text(self) -> str:
        k = min(self.round, self.last)
        if k == 0:
            return "round 0 (first image)"
        return f"round {k} of {self.last}"

    def describe(self) -> str:
        """``round 2 of 5 · editing, step 12 of 30 · 1 min 20 s · about 3 min 10 s left``."""
        if self.started is None:
            return self.stage + (f": {self.detail}" if self.detail else "")
        if self.finished:
            parts = ["finished" + (f": {self.detail}" if self.detail else "")]
        else:
            stage = self.stage + (f", {self.detail}" if self.detail else "")
            parts = [self.round_text(), stage]
        parts.append(f"{duration_text(self.elapsed_s())} elapsed")
        eta = self.eta_s()
        if eta is not None:
            parts.append(f"about {duration_text(eta)} left at most")
        return " \u00b7 ".join(parts)
