"""One run on a worker thread, as a front end watches it: :class:`Job` (stop, steer, read
its updates) and :class:`Update` (the record so far, the stage, a review waiting)."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from refine.events import Event, ReviewWaiting, RunStarted, StepDone
from refine.io.store import RunStore
from refine.progress import RunProgress
from refine.records import Run
from refine.service.slot import ServiceBusy

__all__ = ["END", "IDLE", "Job", "ServiceBusy", "Update"]

END = "end"  # the last entry of a job's log, once its worker thread is done
IDLE = "idle"  # no event for a while (see Job.updates)


def _span(seconds: float) -> str:
    """A waiting time as people say it: "15 min", "0.5 s"."""
    return f"{seconds / 60:g} min" if seconds >= 120 else f"{seconds:g} s"


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


MAX_INSTRUCTION = 2000  # characters of an instruction a person applies (an edit prompt)


class Job:
    """One run on a worker thread; its updates are read with :meth:`updates`."""

    def __init__(
        self,
        claim: Callable[[Path, str], None],
        stop_run: Callable[[str], None],
        pause: bool,
        owner: str | None = None,
        review_timeout_s: float | None = None,
        orphan_s: float | None = None,
    ) -> None:
        """``claim(run_dir, owner)`` records the run's owner once its folder exists;
        ``stop_run(why)`` asks the loop running it to stop. A review nobody answers ends
        the run after ``review_timeout_s``, or after ``orphan_s`` with no reader of its
        updates (its owner's pages closed): the slot is not held for a visitor gone."""
        self._claim, self._stop_run = claim, stop_run
        self.pause = pause
        self.owner = owner  # the visitor who may stop or steer it; None: anyone
        self.review_timeout_s = review_timeout_s
        self.orphan_s = orphan_s
        self.followers = 0  # readers of updates() now
        self._unfollowed_since = time.monotonic()
        self.review_since: float | None = None
        self.run_dir: Path | None = None
        self.run: Run | None = None
        self.error: str | None = None
        # every event in order, END last: each reader keeps its own place in it, so the
        # page that started the run and a page that attached later each see every update
        self._log: list[Event | str] = []
        self._logged = threading.Condition()
        self._last_stage = "starting"
        self._when_done: list[Callable[[Job], None]] = []
        self._answers: queue.Queue[Any] = queue.Queue()  # text, a Review, or None
        self._thread: threading.Thread | None = None
        self.waiting: tuple[int, str] | None = None
        self._reviewing: Run | None = None
        self.stopped = False
        self.stop_why = ""  # the stop reason asked for ("": the user's Stop)
        self.tracker = RunProgress()
        self.applied: tuple[int, str] | None = None
        # (source, changes, move) of the review waiting
        self.review_info: tuple[str, tuple[str, ...], str] = ("", (), "edit")
        # how the run's editor restricts an edit to a region (mask, instruction, or None:
        # it cannot), asked of the service's models when a region is applied
        self.localizes: Callable[[], str | None] = lambda: "mask"

    # called on the worker thread ------------------------------------------------------

    def _on_event(self, event: Event) -> None:
        if isinstance(event, ReviewWaiting):
            # reported by _review, and only when this job pauses for one
            self.review_info = (event.source, event.changes, event.move)
            return
        self.tracker.see(event)
        if isinstance(event, RunStarted):
            self.run_dir = Path(event.dir)
            if self.owner is not None:
                self._claim(self.run_dir, self.owner)
            if self.stopped:  # a stop asked for before the loop began still counts
                self._stop_run(self.stop_why)
        self._put(event)

    def _review(self, k: int, instruction: str, run: Run) -> Any:
        if not self.pause:
            return instruction
        self._reviewing = run  # the live record: the references a change is made to
        self.waiting = (k, instruction)
        event = ReviewWaiting(round=k, instruction=instruction)
        self.tracker.see(event)
        self._put(event)
        began = self.review_since = time.monotonic()
        answer = None
        while True:
            now = time.monotonic()
            timed_out = self.review_timeout_s is not None and now - began >= self.review_timeout_s
            gone = (
                self.orphan_s is not None
                and self.followers == 0
                and now - self._unfollowed_since >= self.orphan_s
            )
            if timed_out or gone:  # nobody answered: the owner is gone, the slot is freed
                self.stopped = True
                if gone:
                    self.stop_why = (
                        "stopped: its visitor left during the review (no page followed "
                        f"it for {_span(self.orphan_s)}); roll back to a round to go on"
                    )
                else:
                    waited = _span(self.review_timeout_s)
                    self.stop_why = f"stopped: nobody answered the review within {waited}"
                self._stop_run(self.stop_why)
                break
            try:
                answer = self._answers.get(timeout=0.25)
                break
            except queue.Empty:
                continue
        self.waiting = None
        self.review_since = None
        self._reviewing = None
        return answer

    def _follow(self, n: int) -> None:
        with self._logged:
            self.followers += n
            if self.followers == 0:
                self._unfollowed_since = time.monotonic()

    # called by the front end ----------------------------------------------------------

    def submit_instruction(
        self,
        text: str,
        boxes: list[list[float]] | None = None,
        mask: Any = None,
        references: Any = None,
    ) -> None:
        """Apply ``text`` (the proposed instruction or a rewritten one) and go on; with
        ``boxes`` or a drawn ``mask`` (one channel, the image's size) the edit is restricted
        to them, and ``references`` (a :class:`refine.records.ReferenceEdit`) changes what
        the run aims for from this round on (:mod:`refine.loop.pause`). What cannot be is
        refused with a ValueError saying why, and the review goes on waiting."""
        if not isinstance(text, str) or not text.strip():
            raise ValueError("the instruction is empty; write one, or stop the run")
        if len(text) > MAX_INSTRUCTION:
            raise ValueError(
                f"the instruction is {len(text):,} characters; at most {MAX_INSTRUCTION:,}"
            )
        answer: Any = text
        if boxes or mask is not None or references is not None:
            from refine.loop.pause import Review

            answer = Review(text, list(boxes or []), mask, references)
            reviewing = self._reviewing
            if self.waiting is None or reviewing is None or self.run_dir is None:
                raise ValueError("no round is waiting for review")
            size, move = self._image_size(reviewing), self.review_info[2]
            answer.check(size, reviewing.references, move, self.localizes())
        if self.waiting is not None:
            self.applied = (self.waiting[0], text.strip())
        self._answers.put(answer)

    def _image_size(self, run: Run) -> tuple[int, int]:
        """The size of the image the round under review edits (its parent's chosen)."""
        from PIL import Image

        from refine.loop.policy import parent_of_next

        name = run.rounds[parent_of_next(run)].best.image
        with Image.open(Path(self.run_dir) / name) as im:
            return im.size

    @property
    def reviewing(self) -> Run | None:
        """The live record of the run whose round waits for review (None: no review)."""
        return self._reviewing if self.waiting is not None else None

    def review_image(self) -> Any:
        """The image the round under review edits (its parent's chosen), as RGB; a
        ValueError where no round waits."""
        from refine.loop.policy import parent_of_next

        run = self.reviewing
        if run is None or self.run_dir is None:
            raise ValueError("no round is waiting for review")
        return RunStore(self.run_dir).load_image(run.rounds[parent_of_next(run)].best.image)

    def stop(self, why: str = "") -> None:
        """End the run within moments (see :meth:`refine.loop.refiner.Refiner.request_stop`):
        completed rounds are kept, the round in progress is kept as stopped; ``why`` is the
        record's stop reason ("stopped by the user" when not given)."""
        self.stopped = True
        self.stop_why = why
        self._stop_run(why)
        if self.waiting is not None:
            self._answers.put(None)

    def _put(self, event: Event | str) -> None:
        with self._logged:
            self._log.append(event)
            if isinstance(event, Event) and not isinstance(event, StepDone):
                self._last_stage = event.describe()
            self._logged.notify_all()

    def _finish(self) -> None:
        """Called by the worker thread once the run has ended and been saved."""
        self._put(END)
        with self._logged:
            callbacks, self._when_done = self._when_done, []
        for callback in callbacks:
            callback(self)

    def when_done(self, callback: Callable[[Job], None]) -> None:
        """Call ``callback(job)`` once the run has ended (at once if it has): what must
        happen whether or not anybody still follows the run (a quota's count)."""
        with self._logged:
            if not (self._log and self._log[-1] == END):
                self._when_done.append(callback)
                return
        callback(self)

    @property
    def live(self) -> bool:
        """Whether the run is still going (started and not yet ended)."""
        return self._thread is not None and self._thread.is_alive()

    def snapshot(self) -> Update:
        """The run as it stands now, as one update (what a page that attaches shows)."""
        with self._logged:
            ended = bool(self._log) and self._log[-1] == END
            stage = self._last_stage
        if ended:
            return self._end_update()
        return self._update(stage, self._load())

    def _update(self, stage: str, run: Run | None, light: bool = False) -> Update:
        """An update of the run in progress: ``stage`` in words, ``run`` as saved so far."""
        return Update(
            stage,
            run,
            self.run_dir,
            review=self.waiting,
            applied=self.applied,
            review_source=self.review_info[0],
            review_changes=self.review_info[1],
            fraction=self.tracker.fraction(),
            progress=self.tracker.describe(),
            light=light,
        )

    def _end_update(self) -> Update:
        return Update(
            "failed" if self.error else "finished",
            self._load(),
            self.run_dir,
            done=True,
            error=self.error,
            fraction=1.0 if not self.error else self.tracker.fraction(),
            progress=self.tracker.describe(),
        )

    def updates(
        self,
        poll_s: float = 0.25,
        attach: bool = False,
        idle_s: float | None = None,
        latest: bool = False,
    ) -> Iterator[Update | None]:
        """An update per event until the run ends (the last one has ``done``), from the
        run's start; with ``attach``, the run as it stands now and then the events from
        here on. Any number of readers may follow one run, each from its own place. With
        ``idle_s``, a None after each ``idle_s`` without an event (a run paused for review
        sends none): a reader that is a generator can then be closed between two. With
        ``latest``, the events that came while the reader was busy are one update, the
        latest's (a page, which shows the run as it stands, not each stage it passed).
        While one reads, the run's visitor is here (see ``orphan_s``)."""
        self._follow(1)
        try:
            yield from self._updates(poll_s, attach, idle_s, latest)
        finally:
            self._follow(-1)

    def _updates(
        self, poll_s: float, attach: bool, idle_s: float | None, latest: bool
    ) -> Iterator[Update | None]:
        with self._logged:
            at = len(self._log) if attach else 0
        quiet_since = time.monotonic()
        if attach:
            first = self.snapshot()
            yield first
            if first.done:
                return
        shown: Run | None = None
        while True:
            with self._logged:
                if at >= len(self._log):
                    self._logged.wait(poll_s)
                if at >= len(self._log):
                    if self._thread is not None and not self._thread.is_alive():
                        event: Event | str = END  # a worker that died without saying so
                    elif idle_s is not None and time.monotonic() - quiet_since >= idle_s:
                        event = IDLE
                    else:
                        continue
                else:
                    event = self._log[at]
                    at += 1
                    light = isinstance(event, StepDone)
                    # denoising steps come fast: only the latest one logged is shown (with
                    # ``latest``, the latest event of all)
                    while at < len(self._log) and (
                        latest or (light and isinstance(self._log[at], StepDone))
                    ):
                        event = self._log[at]
                        at += 1
                        light = light and isinstance(event, StepDone)
            if event == IDLE:
                quiet_since = time.monotonic()
                yield None
                continue
            quiet_since = time.monotonic()
            if event == END:
                yield self._end_update()
                return
            assert isinstance(event, Event)
            if not light:
                shown = self._load()
            yield self._update(event.describe(), shown, light)

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
