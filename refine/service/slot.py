"""The service's one job at a time: a run, a references build or a tune holds the slot
while it works. :class:`refine.service.runs.RunService`, its runs' :class:`Job` and its
:class:`refine.service.tuning.Tuning` share one :class:`Slot`, and none of them reaches
back into the service for it."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator


class ServiceBusy(RuntimeError):
    """A run is in progress; one device runs one run at a time."""


BUSY = "a run is in progress; wait for it or stop it"


class Slot:
    """One job at a time, taken without waiting (a second asker is told at once)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def take(self, busy: str = BUSY) -> None:
        """Hold the slot, or raise :class:`ServiceBusy` with ``busy`` while another job
        holds it. The holder calls :meth:`free` when done."""
        if not self._lock.acquire(blocking=False):
            raise ServiceBusy(busy)

    def free(self) -> None:
        self._lock.release()

    @contextlib.contextmanager
    def held(self, busy: str = BUSY) -> Iterator[None]:
        """The slot for the length of a ``with`` block."""
        self.take(busy)
        try:
            yield
        finally:
            self.free()

    @property
    def busy(self) -> bool:
        return self._lock.locked()
