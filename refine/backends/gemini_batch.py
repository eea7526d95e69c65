"""Gemini requests sent as batch jobs, for work that can wait (``--batch``: a bench, a
rescore, a recipe).

The Gemini Batch API takes many ``generateContent`` requests in one job, answers them
within a day, and bills half the live price (ai.google.dev/gemini-api/docs/batch-mode,
read 2026-11-28). While a :func:`batching` context is open, every request a
:class:`~refine.backends.gemini.GeminiClient` sends waits in a :class:`Batcher` instead: the
requests of every thread that arrive together (none for ``gather_s``) become one job per
model, keyed by a digest of the request (:func:`request_key`; the same request asked twice
is sent once), and each thread gets its own answer once the job is done. The engine runs
every cell at once and the Gemini backends lift their limits of requests in flight, so a
task's stages (its images, then their observations and readings, ...) make one job each.

Every job made is written to a journal (``.gemini-batches.json`` in the task's folder)
with the keys it holds. A task killed while a job waits is run again with the same
command: the requests it asks again find their keys in the journal, and the job is read
by its name (polled until done) instead of being sent again.

A job is polled every ``poll_s`` seconds (``REFINE_GEMINI_BATCH_POLL_S``, 30); the API's
webhook, which needs an address the API can reach, is not used. A job that ends other than
succeeded (failed, cancelled, expired after 48 hours) fails each of its requests with its
state; a request the job answers with an error fails with that error.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from refine.io.files import atomic_write_json
from refine.usage import BudgetExhausted, check_stop, time_left

log = logging.getLogger(__name__)

JOURNAL = ".gemini-batches.json"
DONE_STATES = ("SUCCEEDED", "FAILED", "CANCELLED", "EXPIRED")
_ACTIVE: list[Batcher] = []  # the batcher of the open batching() context, if any


def active() -> Batcher | None:
    """The batcher requests go to now (None: they go out live)."""
    return _ACTIVE[-1] if _ACTIVE else None


def _seconds(name: str, default: float) -> float:
    raw = os.environ.get(name, "")
    try:
        return float(raw) if raw else default
    except ValueError:
        raise ValueError(f"{name}: a number of seconds, got {raw!r}") from None


@contextmanager
def batching(folder: str | Path, emit: Callable[[str], None] | None = None) -> Iterator[Batcher]:
    """Gemini requests go out as batch jobs while this is open (the journal in ``folder``)."""
    batcher = Batcher(
        Path(folder) / JOURNAL,
        poll_s=_seconds("REFINE_GEMINI_BATCH_POLL_S", 30.0),
        gather_s=_seconds("REFINE_GEMINI_BATCH_GATHER_S", 2.0),
        emit=emit,
    )
    _ACTIVE.append(batcher)
    try:
        yield batcher
    finally:
        _ACTIVE.remove(batcher)
        batcher.close()


def _digest(item: Any) -> Any:
    """A request's part as plain data: text as is, image bytes by their SHA-256."""
    if isinstance(item, str):
        return item
    inline = getattr(item, "inline_data", None)
    if inline is not None and getattr(inline, "data", None) is not None:
        return ["bytes", inline.mime_type, hashlib.sha256(inline.data).hexdigest()]
    dump = getattr(item, "model_dump", None)
    return dump(exclude_none=True) if dump else repr(item)


def request_key(model: str, contents: list[Any], config: Any) -> str:
    """The same digest for the same request in any process (what a job's answers are
    found by, and how a rerun finds a job it sent before)."""
    settings = config.model_dump(exclude_none=True) if config is not None else {}
    settings.pop("http_options", None)
    blob = json.dumps([model, [_digest(c) for c in contents], settings], default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:32]


@dataclass
class _Waiting:
    contents: list[Any]
    config: Any
    done: threading.Event = field(default_factory=threading.Event)
    response: Any = None
    error: BaseException | None = None


class BatchJobError(RuntimeError):
    """A batch job that ended without answers."""


class BatchAnswerError(BatchJobError):
    """A request a batch job answered with an error: its HTTP ``code`` and ``message``."""

    def __init__(self, text: str, code: int | None, message: str) -> None:
        super().__init__(text)
        self.code, self.message = code, message


class Batcher:
    """Gathers the requests of every thread into batch jobs (see the module docstring)."""

    def __init__(
        self,
        journal: Path,
        poll_s: float = 30.0,
        gather_s: float = 2.0,
        emit: Callable[[str], None] | None = None,
    ) -> None:
        self.journal = journal
        self.poll_s, self.gather_s = poll_s, gather_s
        self.emit = emit or (lambda line: None)
        self._jobs: dict[str, dict[str, Any]] = self._read()
        self._cond = threading.Condition()
        # (the client's id, model) -> request key -> the threads waiting for its answer
        self._queue: dict[tuple[int, str], dict[str, list[_Waiting]]] = {}
        self._clients: dict[int, Any] = {}
        self._last = 0.0
        self._closed = threading.Event()
        self.created: list[str] = []  # the jobs this process sent, in order
        self.resumed: list[str] = []  # the journal's jobs it read again
        self._thread = threading.Thread(target=self._gather, name="gemini-batch", daemon=True)
        self._thread.start()

    # -- the journal ---------------------------------------------------------------------

    def _read(self) -> dict[str, dict[str, Any]]:
        try:
            data = json.loads(self.journal.read_text("utf-8"))
        except FileNotFoundError:
            return {}
        except ValueError as err:
            raise ValueError(
                f"{self.journal}: not a batch journal ({err}); move it away to send every "
                "request again"
            ) from None
        jobs = data.get("jobs") if isinstance(data, dict) else None
        return dict(jobs) if isinstance(jobs, dict) else {}

    def _write(self) -> None:
        self.journal.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_json(self.journal, {"jobs": self._jobs})

    # -- the calling thread --------------------------------------------------------------

    def submit(self, client: Any, model: str, contents: list[Any], config: Any) -> Any:
        """The job's answer to this request (a ``GenerateContentResponse``), waited for
        here; a stop or the end of the wall-time budget ends the wait (the job goes on, and
        a rerun reads it)."""
        key = request_key(model, contents, config)
        waiting = _Waiting(contents, config)
        with self._cond:
            self._clients[id(client)] = client
            self._queue.setdefault((id(client), model), {}).setdefault(key, []).append(waiting)
            self._last = time.monotonic()
            self._cond.notify_all()
        while not waiting.done.wait(0.2):
            check_stop()
            left = time_left()
            if left is not None and left <= 0:
                raise BudgetExhausted(f"{model}: the wall-time budget ran out waiting for a batch")
        if waiting.error is not None:
            raise waiting.error
        return waiting.response

    # -- the gathering thread ------------------------------------------------------------

    def _gather(self) -> None:
        while not self._closed.is_set():
            with self._cond:
                quiet = time.monotonic() - self._last
                if not self._queue or quiet < self.gather_s:
                    self._cond.wait(self.gather_s - quiet if self._queue else 0.5)
                    continue
                groups, self._queue = self._queue, {}
            for (client, model), by_key in groups.items():
                threading.Thread(
                    target=self._send, args=(self._clients[client], model, by_key), daemon=True
                ).start()

    def _send(self, client: Any, model: str, by_key: dict[str, list[_Waiting]]) -> None:
        try:
            with self._cond:
                known: dict[str, list[str]] = {}
                for name, job in self._jobs.items():
                    if job.get("model") != model:
                        continue
                    held = [k for k in job.get("keys", []) if k in by_key]
                    if held:
                        known[name] = held
                taken = {k for keys in known.values() for k in keys}
            fresh = [k for k in by_key if k not in taken]
            names = list(known)
            self.resumed += names
            if fresh:
                names.append(self._create(client, model, {k: by_key[k][0] for k in fresh}))
            for name in names:
                for key, answer in self._wait(client, model, name).items():
                    for waiting in by_key.get(key, []):
                        if isinstance(answer, BaseException):
                            waiting.error = answer
                        else:
                            waiting.response = answer
                        waiting.done.set()
            for key, waiters in by_key.items():
                for waiting in waiters:
                    if not waiting.done.is_set():
                        waiting.error = BatchJobError(
                            f"{model}: the batch job(s) {', '.join(names)} hold no answer for "
                            f"request {key}"
                        )
                        waiting.done.set()
        except BaseException as err:  # every request of the group hears it
            for waiters in by_key.values():
                for waiting in waiters:
                    if not waiting.done.is_set():
                        waiting.error = err
                        waiting.done.set()

    def _create(self, client: Any, model: str, requests: dict[str, _Waiting]) -> str:
        from google.genai import types

        inlined = [
            types.InlinedRequest(
                model=model, contents=w.contents, config=w.config, metadata={"key": key}
            )
            for key, w in requests.items()
        ]
        job = client.client().batches.create(
            model=model,
            src=inlined,
            config=types.CreateBatchJobConfig(display_name=f"refine {model} x{len(inlined)}"),
        )
        name = str(job.name)
        with self._cond:
            self._jobs[name] = {"model": model, "keys": list(requests), "created": time.time()}
            self._write()
            self.created.append(name)
        self.emit(f"batch job {name}: {len(inlined)} request(s) to {model} sent")
        return name

    def _wait(self, client: Any, model: str, name: str) -> dict[str, Any]:
        """The job's answers by key, once it is done (polled)."""
        began = time.monotonic()
        while True:
            job = client.client().batches.get(name=name)
            state = getattr(job.state, "name", str(job.state)).removeprefix("JOB_STATE_")
            if state in DONE_STATES:
                break
            waited = time.monotonic() - began
            log.info("batch job %s (%s): %s after %.0f s", name, model, state.lower(), waited)
            if self._closed.wait(self.poll_s):
                raise BatchJobError(f"batch job {name}: no longer waited for (the task ended)")
        with self._cond:
            self._jobs.setdefault(name, {"model": model, "keys": []})["state"] = state
            self._write()
        if state != "SUCCEEDED":
            error = getattr(job, "error", None)
            said = f": {getattr(error, 'message', error)}" if error else ""
            raise BatchJobError(f"batch job {name} ({model}) ended {state.lower()}{said}")
        self.emit(f"batch job {name}: answered after {time.monotonic() - began:.0f} s")
        answers: dict[str, Any] = {}
        for item in getattr(job.dest, "inlined_responses", None) or []:
            key = (item.metadata or {}).get("key")
            if item.error is not None or item.response is None:
                err = item.error or {}
                code = err.get("code") if isinstance(err, dict) else getattr(err, "code", None)
                message = err.get("message") if isinstance(err, dict) else str(err)
                answers[key] = BatchAnswerError(
                    f"{model}: the batch job {name} answered HTTP {code}: {message}",
                    code,
                    str(message),
                )
            else:
                answers[key] = item.response
        return answers

    def close(self) -> None:
        self._closed.set()
        with self._cond:
            self._cond.notify_all()
