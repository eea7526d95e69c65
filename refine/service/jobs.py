"""One run on a worker thread, as a front end watches it: :class:`Job` (stop, steer, read
its updates) and :class:`Update` (the record so far, the stage, a review waiting)."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from refine.events import Event, ReviewWaiting, RunStarted, StepDone
from refine.io.store import RunStore
from refine.progress import RunProgress
from refine.records import Run

if TYPE_CHECKING:
    from refine.service.runs import RunService

END = "end"  # put on a job's queue when its worker thread is done


def _span(seconds: float) -> str:
    """A waiting time as people say it: "15 min", "0.5 s"."""
    return f"{seconds / 60:g} min" if seconds >= 120 else f"{seconds:g} s"


class ServiceBusy(RuntimeError):
    """A run is in progress; one device runs one run at a time."""


@dataclass
class Update:
    stage: str  # the event, in words (``round 1: edit x2``)
    run: Run | None  # the record as saved so far (None before round 0 is saved)
    run_dir: Path | None
    review: tuple[int, str] | None = None  # (round, instruction) waiting for the user
    done: bool = False
    error: str | None = None
    # (round, instruction) the user applied, for the round in progress
    applied: tuple[int, str] | None = None
    fraction: float = 0.0  # of the rounds this run may make (see refine.progress)
    progress: str = ""  # round k of N, stage, time spent, time left
    light: bool = False  # only the progress moved (a denoising step): the run is as before
    # with a review: who wrote the instruction and the changes it was built from
    review_source: str = ""
    review_changes: tuple[str, ...] = ()


class Job:
    """One run on a worker thread; its updates are read with :meth:`updates`."""

    def __init__(
        self,
        service: RunService,
        pause: bool,
        owner: str | None = None,
        review_timeout_s: float | None = None,
    ) -> None:
        self.service = service
        self.pause = pause
        self.owner = owner  # the visitor who may stop or steer it; None: anyone
        self.review_timeout_s = review_timeout_s
        self.run_dir: Path | None = None
        self.run: Run | None = None
        self.error: str | None = None
        self._events: queue.Queue[Event | str] = queue.Queue()
        self._answers: queue.Queue[str | None] = queue.Queue()
        self._thread: threading.Thread | None = None
        self.waiting: tuple[int, str] | None = None
        self.stopped = False
        self.stop_why = ""  # the stop reason asked for ("": the user's Stop)
        self.tracker = RunProgress()
        self.applied: tuple[int, str] | None = None
        self.review_info: tuple[str, tuple[str, ...]] = ("", ())  # (source, changes)

    # called on the worker thread ------------------------------------------------------

    def _on_event(self, event: Event) -> None:
        if isinstance(event, ReviewWaiting):
            # reported by _review, and only when this job pauses for one
            self.review_info = (event.source, event.changes)
            return
        self.tracker.see(event)
        if isinstance(event, RunStarted):
            self.run_dir = Path(event.dir)
            if self.owner is not None:
                self.service.claim(self.run_dir, self.owner)
            if self.stopped:  # a stop asked for before the loop began still counts
                self.service.refiner().request_stop(self.stop_why)
        self._events.put(event)

    def _review(self, k: int, instruction: str, run: Run) -> str | None:
        if not self.pause:
            return instruction
        self.waiting = (k, instruction)
        event = ReviewWaiting(round=k, instruction=instruction)
        self.tracker.see(event)
        self._events.put(event)
        try:
            answer = self._answers.get(timeout=self.review_timeout_s)
        except queue.Empty:  # nobody answered: the owner is gone, the slot is freed
            self.stopped = True
            waited = _span(self.review_timeout_s)
            self.stop_why = f"stopped: nobody answered the review within {waited}"
            self.service.refiner().request_stop(self.stop_why)
            answer = None
        self.waiting = None
        return answer

    # called by the front end ----------------------------------------------------------

    def submit_instruction(self, text: str) -> None:
        """Apply ``text`` (the proposed instruction or a rewritten one) and go on."""
        if not text or not text.strip():
            raise ValueError("the instruction is empty; write one, or stop the run")
        if self.waiting is not None:
            self.applied = (self.waiting[0], text.strip())
        self._answers.put(text)

    def stop(self, why: str = "") -> None:
        """End the run within moments (see :meth:`refine.loop.refiner.Refiner.request_stop`):
        completed rounds are kept, the round in progress is kept as stopped; ``why`` is the
        record's stop reason ("stopped by the user" when not given)."""
        self.stopped = True
        self.stop_why = why
        self.service.refiner().request_stop(why)
        if self.waiting is not None:
            self._answers.put(None)

    def updates(self, poll_s: float = 0.25) -> Iterator[Update]:
        """An update per event until the run ends (the last one has ``done``)."""
        shown: Run | None = None
        while True:
            try:
                event = self._events.get(timeout=poll_s)
            except queue.Empty:
                if self._thread is not None and not self._thread.is_alive():
                    event = END
                else:
                    continue
            if event == END:
                yield Update(
                    "failed" if self.error else "finished",
                    self._load(),
                    self.run_dir,
                    done=True,
                    error=self.error,
                    fraction=1.0 if not self.error else self.tracker.fraction(),
                    progress=self.tracker.describe(),
                )
                return
            light = isinstance(event, StepDone)
            if light:  # steps come fast: only the latest one queued is shown
                while isinstance(self._peek(), StepDone):
                    event = self._events.get_nowait()
            else:
                shown = self._load()
            yield Update(
                event.describe(),
                shown,
                self.run_dir,
                review=self.waiting,
                applied=self.applied,
                review_source=self.review_info[0],
                review_changes=self.review_info[1],
                fraction=self.tracker.fraction(),
                progress=self.tracker.describe(),
                light=light,
            )

    def _peek(self) -> Event | str | None:
        with self._events.mutex:
            return self._events.queue[0] if self._events.queue else None

    def owned_by(self, who: str | None) -> bool:
        """Whether ``who`` may stop or steer this run (its owner; anyone when unowned)."""
        return self.owner is None or who == self.owner

    def join(self, timeout: float | None = None) -> None:
        """Wait until the worker thread has ended (the run fully stopped and saved)."""
        if self._thread is not None:
            self._thread.join(timeout)

    def wait(self) -> Update:
        """The last update (the run's end). In pause mode another thread must answer the
        reviews (``submit_instruction`` or ``stop``), or this waits for ever."""
        updates = list(self.updates())
        return updates[-1]

    def _load(self) -> Run | None:
        if self.run_dir is None or not (self.run_dir / "run.json").is_file():
            return None
        return RunStore(self.run_dir).load()
