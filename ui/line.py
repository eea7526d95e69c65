"""The app's one line of visitors waiting for the device: a start, a roll-back or a build of
references that finds the device taken waits here, first come first served, and is told in
words how many runs are ahead of it ("waiting: 2 runs ahead of yours (one in progress:
round 2 of 3 ...; 1 waiting)").

Gradio's own queue (a concurrency limit of 1) said only "queue: 1/1", on every output of
the event; and it held the second visitor until the first one's page stopped following its
run, not until the run ended. So these events have no Gradio limit (``IN_LINE``) and wait
here instead; the device's own lock (``RunService.busy``) still decides who runs.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterator
from typing import Any

from refine.service import ServiceBusy

# events that wait in this line instead of Gradio's queue
IN_LINE = {"concurrency_limit": None}


def line_length(run_minutes: float) -> int:
    """How many may wait: the runs the device can finish in two hours at the longest run
    allowed (at least 8). Past that a visitor is told to come back, instead of waiting for
    hours (a waiting visitor also holds a server thread for a second at a time)."""
    return max(8, math.ceil(120 / run_minutes))


class Line:
    """Tickets in the order they came; a ticket's turn comes when it is first and the
    device is free."""

    def __init__(self, most: int = 8):
        self.most = most
        self._lock = threading.Lock()
        self._waiting: list[object] = []

    def join(self) -> object:
        """A new ticket at the end of the line; ServiceBusy when the line is full."""
        with self._lock:
            if len(self._waiting) >= self.most:
                raise ServiceBusy(
                    f"the line is full: {len(self._waiting)} runs are waiting for this device "
                    "already; try again later"
                )
            ticket = object()
            self._waiting.append(ticket)
            return ticket

    def before(self, ticket: object) -> int:
        """How many tickets are ahead of ``ticket`` (0: it is first)."""
        with self._lock:
            return self._waiting.index(ticket)

    def leave(self, ticket: object) -> None:
        with self._lock:
            if ticket in self._waiting:
                self._waiting.remove(ticket)

    def __len__(self) -> int:
        with self._lock:
            return len(self._waiting)

    def turn(
        self, ticket: object, service: Any, who: str | None, most_s: float, own_waits=False
    ) -> Iterator[str]:
        """Wait for ``ticket``'s turn, yielding what to say about once a second (a page's
        stream is closed between two of them when the page leaves: the caller then leaves
        the line). A start does not wait for the visitor's own run in progress: it is
        theirs to stop (ValueError); with ``own_waits`` (a build of references) it does.
        A wait past ``most_s`` is ServiceBusy."""
        began = time.monotonic()
        while True:
            job = service.job
            live = job is not None and job.live
            if live and not own_waits and who is not None and job.owner == who:
                raise ValueError(
                    "your run is still in progress (this page shows it): stop it, or wait "
                    "for its end, before starting another"
                )
            before, running = self.before(ticket), service.busy
            if not running and before == 0:
                return
            if time.monotonic() - began > most_s:
                raise ServiceBusy("a run is still in progress; try again once it has ended")
            # another visitor's run, said to this one: not "your review"
            where = (
                job.tracker.describe().replace("your review", "its owner's review")
                if live
                else "references being built"
            )
            if live and job.waiting is not None:  # paused: the time left says nothing
                where = f"{where.split(' (')[0]}, {paused_words(job)}"
            yield waiting_words(before, where if running else None)
            if live:
                job.join(1.0)
            else:
                time.sleep(1.0)


def paused_words(job: Any) -> str:
    """Why a run paused for its owner's review holds the device, and until when."""
    since = job.review_since
    waited = f" for {int(time.monotonic() - since)} s" if since is not None else ""
    ends = []
    if job.orphan_s is not None:
        ends.append(f"once no page of its owner has followed it for {job.orphan_s:g} s")
    if job.review_timeout_s is not None:
        ends.append(f"{job.review_timeout_s / 60:g} min into the review at the latest")
    by_itself = f"; it stops by itself {' or '.join(ends)}" if ends else ""
    return f"paused{waited}: waiting for its owner to review an instruction{by_itself}"


def waiting_words(before: int, running: str | None) -> str:
    """``before`` visitors waiting ahead, and the run in progress (what it is doing), in
    words."""
    ahead = before + (running is not None)
    parts = [f"one in progress: {running}"] if running is not None else []
    if before:
        parts.append(f"{before} waiting")
    ends = "it ends" if ahead == 1 else "they end"
    return (
        f"waiting: {ahead} run{'s' if ahead != 1 else ''} ahead of yours ({'; '.join(parts)}); "
        f"yours starts when {ends}"
    )
