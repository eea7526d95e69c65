"""Quotas of a shared demo (``refine app --runs-per-visitor-per-hour N --daily-calls N``).

* Runs per visitor per hour: a visitor (see :mod:`ui.visitors`) may start N runs in any
  hour. The same count is kept per client address (behind a trusted proxy, the address it
  forwards), so clearing the browser's token does not reset it.
* Model calls per day: every run's calls count against the whole app's daily allowance,
  which renews at midnight UTC.

A start over quota is refused with one message saying when the visitor can start again.
A start is reserved at admission (:meth:`Quotas.reserve`), atomically: the run counts
against the visitor's and the address's hour at once, and its most calls (its budget)
against the day's allowance, while it waits in line and runs; visitors who start together
cannot all pass the check before any of them is counted. A reservation is written to the
ledger when its run starts (:meth:`Quotas.started`), settled with the calls the run made
when it ends, and released if the run never starts.
The ledger is ``--out/.usage.jsonl``: hashed visitors and addresses (never the ids), one
line per start and per finished run's calls, so a restart keeps the counts. ``refine
app-usage --out DIR`` prints it per visitor. The hashes are salted with a secret kept
beside the ledger (``--out/.ledger-salt``, made on first use, readable by its owner only,
never served: :mod:`ui.private`): without it, an address's hash cannot be found by trying
addresses (unsalted, 127.0.0.1 was found in 2 guesses of 127.0.0.0/16). A ledger written
before the salt keeps its lines, which no longer match: the counts start afresh once.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

LEDGER = ".usage.jsonl"
SALT = ".ledger-salt"
HOUR, DAY = 3600.0, 86400.0
# runs per visitor per hour when the app listens beyond this machine and none is given
PUBLIC_RUNS_PER_HOUR = 6


class QuotaExceeded(ValueError):
    """A start over quota; the message says when the visitor can start again."""


def hashed(kind: str, value: str, salt: str = "") -> str:
    return hashlib.sha256(f"refine-{kind}\x00{salt}\x00{value}".encode()).hexdigest()[:16]


def ledger_salt(out: Path) -> str:
    """The secret the ledger's hashes are salted with, made once (owner-only) in ``out``."""
    import secrets

    path = Path(out) / SALT
    try:
        return path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    # written whole to a file of its own, then linked into place in one step: a file made
    # in place is empty for a moment, and a visitor starting then read an empty salt (so
    # hashes that matched no other: six starting together were six addresses)
    tmp = path.with_name(f"{SALT}.{os.getpid()}.{threading.get_ident()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(secrets.token_hex(16))
        fh.flush()
        os.fsync(fh.fileno())
    try:
        os.link(tmp, path)  # fails where another made it first: theirs is the salt
    except FileExistsError:
        pass
    finally:
        tmp.unlink(missing_ok=True)
    return path.read_text(encoding="utf-8").strip()


def _when(t: float, now: float) -> str:
    minutes = max(1, int((t - now + 59) // 60))
    clock = time.strftime("%H:%M UTC", time.gmtime(t))
    if minutes < 120:
        return f"{clock} (in {minutes} minute{'s' if minutes != 1 else ''})"
    return f"{clock} (in {minutes // 60} hours)"


@dataclass
class Reservation:
    """A start admitted and not yet settled: who (hashed), from where, and the most calls
    its run may make under the day's allowance (held against it until the run ends; 0
    without an allowance)."""

    who: str
    where: str
    calls: int
    started: bool = False


@dataclass
class Quotas:
    out: Path
    runs_per_hour: int | None = None  # per visitor and per address; None: no limit
    daily_calls: int | None = None  # all visitors together; None: no limit
    clock: Callable[[], float] = time.time
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _held: list[Reservation] = field(default_factory=list, repr=False)

    def check(self) -> Quotas:
        for name, option in (
            ("runs_per_hour", "--runs-per-visitor-per-hour"),
            ("daily_calls", "--daily-calls"),
        ):
            value = getattr(self, name)
            if value is not None and (int(value) != value or value < 1):
                raise ValueError(f"{option}: a whole number of at least 1, got {value}")
        return self

    @property
    def path(self) -> Path:
        return Path(self.out) / LEDGER

    def _lines(self, since: float) -> list[dict[str, Any]]:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        out = []
        for line in text.splitlines():
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:  # a line cut by a crash: the rest still counts
                continue
            if isinstance(entry, dict) and float(entry.get("t", 0)) >= since:
                out.append(entry)
        return out

    def _append(self, entry: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(entry) + "\n")
            fh.flush()
            os.fsync(fh.fileno())

    def check_start(self, visitor: str, address: str | None) -> None:
        """Raise :class:`QuotaExceeded`, saying when they can start again, when ``visitor``
        (or ``address``) may not start a run now (nothing is reserved)."""
        now = self.clock()
        salt = ledger_salt(self.out)
        who, where = hashed("visitor", visitor, salt), hashed("address", address or "", salt)
        with self._lock:
            self._check(now, who, where if address else "")

    def reserve(self, visitor: str, address: str | None, calls: int | None = None) -> Reservation:
        """Check and reserve a start in one step (under the lock): the run counts at once
        against the visitor's and the address's hour, and holds its most calls (``calls``,
        or less: what the day's allowance has left, :attr:`Reservation.calls`, which the run
        is then held to) against the day's allowance; :class:`QuotaExceeded` when it may not
        start."""
        now = self.clock()
        salt = ledger_salt(self.out)
        who, where = hashed("visitor", visitor, salt), hashed("address", address or "", salt)
        with self._lock:
            self._check(now, who, where if address else "")
            held = Reservation(who, where if address else "", max(0, int(calls or 0)))
            if self.daily_calls is not None:
                left = self.daily_calls - self._used(now) - sum(r.calls for r in self._held)
                held.calls = left if calls is None else min(held.calls, left)
            self._held.append(held)
        return held

    def _used(self, now: float) -> int:
        midnight = now - now % DAY
        return sum(int(e.get("n", 0)) for e in self._lines(midnight) if e["kind"] == "calls")

    def started(self, held: Reservation) -> int:
        """The reserved run has started: its start is written to the ledger; returns the
        visitor's starts in the last hour, this one included."""
        now = self.clock()
        with self._lock:
            self._append({"t": now, "kind": "start", "visitor": held.who, "address": held.where})
            held.started = True
            return sum(
                1
                for e in self._lines(now - HOUR)
                if e["kind"] == "start" and e.get("visitor") == held.who
            )

    def settle(self, held: Reservation, calls: int) -> None:
        """The reserved run has ended, having made ``calls``: they are written to the
        ledger and the reservation let go."""
        with self._lock:
            if calls > 0:
                self._append({"t": self.clock(), "kind": "calls", "visitor": held.who, "n": calls})
            self._let_go(held)

    def release(self, held: Reservation) -> None:
        """The reserved run never started (refused, or its page left while it waited)."""
        with self._lock:
            self._let_go(held)

    def _let_go(self, held: Reservation) -> None:
        self._held = [r for r in self._held if r is not held]

    def _check(self, now: float, who: str, where: str) -> None:
        """:class:`QuotaExceeded` when a start of ``who`` from ``where`` ("": no address)
        does not fit: no call of the day's allowance left unused and unheld, or the hour's
        starts (the ledger's and those reserved) at the limit (under the lock)."""
        if self.daily_calls is not None:
            midnight = now - now % DAY
            used, held = self._used(now), sum(r.calls for r in self._held)
            if used + held >= self.daily_calls:
                holds = f", {held} held by runs under way" if held else ""
                raise QuotaExceeded(
                    f"this demo's daily allowance of {self.daily_calls} model calls is "
                    f"spent ({used} used{holds}); it renews at {_when(midnight + DAY, now)}"
                )
        if self.runs_per_hour is None:
            return
        starts = [e for e in self._lines(now - HOUR) if e["kind"] == "start"]
        waiting = [r for r in self._held if not r.started]  # reserved, not in the ledger yet
        mine = [e["t"] for e in starts if e.get("visitor") == who]
        mine += [now] * sum(1 for r in waiting if r.who == who)
        here = [e["t"] for e in starts if where and e.get("address") == where]
        here += [now] * sum(1 for r in waiting if where and r.where == where)
        for times, whose in ((mine, "you have"), (here, "your address has")):
            if len(times) >= self.runs_per_hour:
                # the oldest start of the window leaves it first
                free = sorted(times)[len(times) - self.runs_per_hour] + HOUR
                raise QuotaExceeded(
                    f"{whose} started {len(times)} run(s) in the last hour (this demo "
                    f"allows {self.runs_per_hour}); you can start again at "
                    f"{_when(free, now)}"
                )

    def record_start(self, visitor: str, address: str | None) -> int:
        """Count a start; returns the visitor's starts in the last hour, this one included."""
        now = self.clock()
        salt = ledger_salt(self.out)
        who, where = hashed("visitor", visitor, salt), hashed("address", address or "", salt)
        with self._lock:
            self._append({"t": now, "kind": "start", "visitor": who, "address": where})
            return sum(
                1
                for e in self._lines(now - HOUR)
                if e["kind"] == "start" and e.get("visitor") == who
            )

    def spent(self, visitor: str, calls: int) -> None:
        """Record the model calls a visitor's run made."""
        if calls > 0:
            with self._lock:
                who = hashed("visitor", visitor, ledger_salt(self.out))
                self._append({"t": self.clock(), "kind": "calls", "visitor": who, "n": calls})

    def usage(self) -> dict[str, dict[str, int]]:
        """Per hashed visitor: runs in the last hour and day, calls today (UTC)."""
        now = self.clock()
        midnight = now - now % DAY
        table: dict[str, dict[str, int]] = {}
        for e in self._lines(min(now - DAY, midnight)):
            row = table.setdefault(
                e.get("visitor", "?"), {"runs_hour": 0, "runs_day": 0, "calls_today": 0}
            )
            if e["kind"] == "start":
                row["runs_day"] += int(e["t"] >= now - DAY)
                row["runs_hour"] += int(e["t"] >= now - HOUR)
            elif e["kind"] == "calls" and e["t"] >= midnight:
                row["calls_today"] += int(e.get("n", 0))
        return table

    def describe(self) -> str:
        parts = []
        if self.runs_per_hour is not None:
            parts.append(f"{self.runs_per_hour} runs per visitor per hour")
        if self.daily_calls is not None:
            parts.append(f"{self.daily_calls} model calls a day for everyone")
        return ", ".join(parts)


def client_address(request: Any, trust_proxy: bool = False) -> str | None:
    """The client's address as Gradio reports it; behind a trusted proxy, the address that
    proxy put last in ``X-Forwarded-For`` (what a client writes there itself comes before
    it, so a forged header moves nothing; the header is read only when the operator says a
    proxy sets it)."""
    if request is None:
        return None
    if trust_proxy:
        headers = getattr(request, "headers", None) or {}
        forwarded = headers.get("x-forwarded-for") or headers.get("X-Forwarded-For")
        if forwarded:
            last = str(forwarded).split(",")[-1].strip()
            if last:
                return last[:100]
    client = getattr(request, "client", None)
    host = getattr(client, "host", None)
    return str(host) if host else None
