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
with the keys it holds: first by the display name it is sent with (``pending:<display>``),
then by the name the API gives it. A task killed while a job waits is run again with the
same command: the requests it asks again find their keys in the journal, and the job is
read by its name (polled until done) instead of being sent again; a job killed between
its sending and its name is found by its display name (``batches.list``). A job whose
reads fail stays in the journal, so the same command reads it again.

A job is polled every ``poll_s`` seconds (``REFINE_GEMINI_BATCH_POLL_S``, 30; a failed poll
is tried again); the API's webhook, which needs an address the API can reach, is not used.
A job holds at most :data:`MAX_JOB_BYTES` of requests (the API takes 20 MB inline) and at
most :data:`MAX_IMAGE_ANSWERS` requests for images, so that its answers can be read. On the
developer API a job that asks for images is sent as a JSON Lines file (uploaded with the
Files API) and answered as a file, which is downloaded a part at a time and read a line at a
time (an inline job's answers come back inside ``batches.get``, all at once). A job
that ends other than succeeded (failed, cancelled, expired after 48 hours) fails each of its
requests with its state, and a request the job answers with an error fails with that error;
the journal marks both, so a rerun sends them again in a new job.
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
PENDING = "pending:"  # a journal entry of a job sent but not yet named, by display name
FAILED_STATES = ("FAILED", "CANCELLED", "EXPIRED")
DONE_STATES = ("SUCCEEDED", *FAILED_STATES)
# the inline requests of one job: the API takes up to 20 MB (ai.google.dev/gemini-api/docs/
# batch-mode); base64 makes an image's bytes 4/3 as many
MAX_JOB_BYTES = 18_000_000
# the image answers of one job: an inline job's answers come back inside batches.get, as
# base64 (about 2 MB an image at 1K), so 100 images are about 200 MB to read in one
# answer; a user's 1.2 GB image jobs could never be read (503 and 504, as reported on
# Google's AI developers forum). Generation requests are short text, so the bytes' cap
# alone let 2,560 image requests into one job.
MAX_IMAGE_ANSWERS = 100
# a job sent as a file (image jobs, on the developer API): the Files API takes files of up to
# 2 GB (ai.google.dev/gemini-api/docs/files); the image cap binds long before, as 100 edits
# of 1K images are about 200 MB of requests
MAX_FILE_BYTES = 1_800_000_000
# the answers' file is read a part at a time, each read given READ_S and READ_S_PER_ANSWER
# for each of the job's requests (a large file may take the API a while to start sending),
# and read READ_TRIES times before its requests fail (the journal keeps the job: the same
# command reads it again, paying nothing twice)
READ_S, READ_S_PER_ANSWER, READ_TRIES = 120.0, 2.0, 3
# the most jobs (a bench's cells) waiting at once, and the most requests one call of a
# backend has in flight, while batching: a larger task makes a job per stage per wave
MAX_AT_ONCE = 256
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


def _asks_for_image(config: Any) -> int:
    """1 for a request whose answer holds an image (IMAGE among its response modalities),
    else 0."""
    kinds = getattr(config, "response_modalities", None) or []
    return int(any(str(getattr(k, "value", k)).upper() == "IMAGE" for k in kinds))


def request_lines(api_client: Any, inlined: list[Any], path: Path) -> None:
    """``inlined`` requests written to ``path`` as a job's JSON Lines file, a line each:
    ``{"key", "request"}``, the request as the SDK's own conversion makes it for an inline
    job (the same request either way; ``api_client``: the SDK client's ``_api_client``)."""
    from google.genai import _common
    from google.genai.batches import _InlinedRequest_to_mldev

    with path.open("w", encoding="utf-8") as out:
        for item in inlined:
            body = _InlinedRequest_to_mldev(api_client, item)
            body = _common.encode_unserializable_types(_common.convert_to_dict(body))
            key = (item.metadata or {})["key"]
            out.write(json.dumps({"key": key, "request": body["request"]}) + "\n")


def answers_in(path: Path) -> list[tuple[Any, Any, Any]]:
    """A job's answers file read a line at a time: (key, response or None, error or
    None) for each line ``{"key", "response"}`` or ``{"key", "error"}``; a response read
    as the SDK reads one (a field it does not know, which a newer API may send, left out)."""
    from google.genai import types
    from google.genai.batches import _GenerateContentResponse_from_mldev

    out = []
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            if not line.strip():
                continue
            item = json.loads(line)
            key = item.get("key", (item.get("metadata") or {}).get("key"))
            answer = item.get("response")
            if answer is not None:
                answer = types.GenerateContentResponse._from_response(
                    response=_GenerateContentResponse_from_mldev(answer), kwargs={}
                )
            out.append((key, answer, item.get("error")))
    return out


def _unread(what: str, after: str, err: BaseException) -> BatchJobError:
    """A job that could not be read, in one line: its requests fail as the job's own
    failure, and the journal keeps it for the same command to read again."""
    said = " ".join(str(err).split())[:160] or type(err).__name__
    return BatchJobError(
        f"{what} could not be read after {after} ({said}); the same command reads the job "
        "again, sending nothing twice"
    )


def _files(client: Any) -> bool:
    """Whether ``client`` sends image jobs as files (the developer API's Gemini client)."""
    check = getattr(client, "batch_files", None)
    return bool(check and check())


def _weight(contents: list[Any]) -> int:
    """About how many bytes a request's contents take in a job (images base64-encoded)."""
    size = 1_000
    for item in contents:
        inline = getattr(item, "inline_data", None)
        data = getattr(inline, "data", None) if inline is not None else None
        size += len(data) * 4 // 3 if data is not None else len(str(item))
    return size


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


class BatchJournalError(ValueError):
    """A journal that cannot be read (said in one line by the command line, which names
    this class among the errors whose message says what to do)."""


def _refused(err: BaseException) -> bool:
    """Whether ``err`` is the API refusing a job's creation (a 4xx, a spent quota), so
    that no job was made; a timeout or a lost answer may have made one."""
    code = getattr(err, "code", None)
    return type(err).__name__ == "QuotaSpent" or (isinstance(code, int) and 400 <= code < 500)


def _readable(model: str, name: str, err: BaseException) -> BaseException:
    """``err`` as the requests of a job fail with it: an answer of the wrong shape read as
    one (AttributeError, TypeError, KeyError, IndexError, ValueError: pydantic's too) a
    :class:`BatchJobError` in one line naming the job and that a rerun reads it again;
    the toolkit's own errors (the API's, a spent quota, a stop) as they are."""
    garbage = (AttributeError, TypeError, KeyError, IndexError, ValueError)
    if not isinstance(err, garbage) or isinstance(err, BatchJournalError):
        return err
    said = " ".join(str(err).split())[:160]
    job = f"batch job {name}" if name else "a batch job"
    return BatchJobError(
        f"{model}: {job}'s answer could not be read ({type(err).__name__}: {said}); "
        "the same command reads the job again"
    )


class BatchAnswerError(BatchJobError):
    """A request a batch job answered with an error: its HTTP ``code`` and ``message``."""

    def __init__(self, text: str, code: int | None, message: str) -> None:
        super().__init__(text)
        self.code, self.message = code, message


def _not_a_journal(jobs: Any) -> str:
    """What makes ``jobs`` (a journal's "jobs") not of its shape; empty when it is: job
    name -> {"model": str, "keys": [str], optional "state": str, "failed": [str]}."""
    if not isinstance(jobs, dict):
        return 'no "jobs" object'
    for name, job in jobs.items():
        if not isinstance(job, dict):
            return f"job {name!r} is not an object"
        if not isinstance(job.get("model"), str):
            return f'job {name!r} names no "model"'
        for kind in ("keys", "failed"):
            held = job.get(kind, [])
            if not isinstance(held, list) or not all(isinstance(k, str) for k in held):
                return f'job {name!r}: "{kind}" is not a list of request keys'
        if not isinstance(job.get("state", ""), str):
            return f'job {name!r}: "state" is not a word'
    return ""


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
        self.max_bytes = MAX_JOB_BYTES
        self.max_images = MAX_IMAGE_ANSWERS
        self._sending: set[str] = set()  # journal entries of jobs this process is sending
        self.poll_failures = 5  # polls failed in a row before a job's requests fail
        self.emit = emit or (lambda line: None)
        self._jobs: dict[str, dict[str, Any]] = self._read()
        # a job's request file or answers a killed run left beside the journal (the task's
        # folder is this process's alone): the job itself is in the journal, or was never sent
        for left in journal.parent.glob(".gemini-batch-*"):
            left.unlink(missing_ok=True)
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
        """The journal's jobs; a ValueError in one line naming the file for one that is not
        a journal (not JSON, a folder, nested past reading, or not of its shape), so that a
        rerun never starts on it, nor waits on a thread it broke."""
        fix = "move it away to send every request again"
        try:
            data = json.loads(self.journal.read_text("utf-8"))
        except FileNotFoundError:
            return {}
        except (ValueError, OSError, RecursionError) as err:
            said = " ".join(str(err).split())[:160] or type(err).__name__
            text = f"{self.journal}: not a batch journal ({said}); {fix}"
            raise BatchJournalError(text) from None
        jobs = data.get("jobs") if isinstance(data, dict) else None
        if jobs is None and isinstance(data, dict) and not data:
            return {}
        wrong = _not_a_journal(jobs)
        if wrong:
            raise BatchJournalError(f"{self.journal}: not a batch journal ({wrong}); {fix}")
        return dict(jobs)

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
        if self._closed.is_set():
            raise BatchJobError(f"{model}: the batching has ended; nothing more is sent")
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
        """:meth:`_answer`, whose every failure fails the requests still waiting: no waiter
        waits on a thread that has ended."""
        try:
            self._answer(client, model, by_key)
        except BaseException as err:
            for waiters in by_key.values():
                for waiting in waiters:
                    if not waiting.done.is_set():
                        waiting.error = _readable(model, "", err)
                        waiting.done.set()

    def _answer(self, client: Any, model: str, by_key: dict[str, list[_Waiting]]) -> None:
        """The group's answers: from the journal's jobs that hold its keys (still running,
        or done and answered without an error), and from new jobs for the rest, each under
        :attr:`max_bytes`; a job that fails fails its own requests only."""

        def fail(keys: list[str], err: BaseException) -> None:
            for key in keys:
                for waiting in by_key.get(key, []):
                    if not waiting.done.is_set():
                        waiting.error = err
                        waiting.done.set()

        self._found_again(client, model)
        jobs: list[tuple[str, list[str], bool]] = []  # (name, keys, from the journal)
        with self._cond:
            taken: set[str] = set()
            for name, job in self._jobs.items():
                if job.get("model") != model or job.get("state") in FAILED_STATES:
                    continue
                failed = set(job.get("failed", []))
                held = [k for k in job.get("keys", []) if k in by_key and k not in failed | taken]
                if held:
                    jobs.append((name, held, True))
                    taken.update(held)
                    self.resumed.append(name)
        fresh = [k for k in by_key if k not in taken]
        images, by_file = any(_asks_for_image(w[0].config) for w in by_key.values()), False
        try:  # (an SDK that cannot send files fails the new jobs alone, not those on record)
            by_file = images and _files(client)
            for chunk in self._chunks(fresh, by_key, by_file):
                jobs.append((self._create(client, model, chunk, by_key, by_file), chunk, False))
        except BaseException as err:  # no job for the rest (a quota, a refusal)
            fail(fresh, _readable(model, "", err))
        for name, keys, journaled in jobs:
            try:
                try:
                    answers = self._wait(client, model, name)
                except Exception as err:
                    if not (journaled and getattr(err, "code", None) == 404):
                        raise
                    # the API no longer has the job: its requests are sent again
                    again = self._create(client, model, keys, by_key, by_file)
                    answers = self._wait(client, model, again)
            except BaseException as err:
                fail(keys, _readable(model, name, err))
                continue
            for key in keys:
                answer = answers.get(key)
                for waiting in by_key.get(key, []):
                    if isinstance(answer, BaseException):
                        waiting.error = answer
                    elif answer is not None:
                        waiting.response = answer
                    else:
                        waiting.error = BatchJobError(
                            f"{model}: the batch job {name} holds no answer for request {key}"
                        )
                    waiting.done.set()
        fail(list(by_key), BatchJobError(f"{model}: no batch job answered this request"))

    def _chunks(
        self, keys: list[str], by_key: dict[str, list[_Waiting]], by_file: bool = False
    ) -> list[list[str]]:
        """``keys`` in jobs whose requests come to at most :attr:`max_bytes` (the API takes
        up to 20 MB of inline requests a job; :data:`MAX_FILE_BYTES` ``by_file``) and at
        most :attr:`max_images` requests for images (the answers one job gives)."""
        chunks: list[list[str]] = []
        size = images = 0
        most = MAX_FILE_BYTES if by_file else self.max_bytes
        for key in keys:
            weight = _weight(by_key[key][0].contents)
            image = _asks_for_image(by_key[key][0].config)
            if not chunks or size + weight > most or images + image > self.max_images:
                chunks.append([])
                size = images = 0
            chunks[-1].append(key)
            size += weight
            images += image
        return chunks

    def _create(
        self,
        client: Any,
        model: str,
        keys: list[str],
        by_key: dict[str, list[_Waiting]],
        by_file: bool = False,
    ) -> str:
        """A job of ``keys``' requests, journaled by its display name before it is sent (a
        kill between the API's answer and the journal's entry leaves the display name, by
        which a rerun finds the job instead of sending it again), then by its name; sent
        as an uploaded file ``by_file`` (its answers come back as a file)."""
        import uuid

        from google.genai import types

        inlined = [
            types.InlinedRequest(
                model=model,
                contents=by_key[k][0].contents,
                config=by_key[k][0].config,
                metadata={"key": k},
            )
            for k in keys
        ]
        display = f"refine {model} x{len(inlined)} {uuid.uuid4().hex[:12]}"
        pending = PENDING + display
        with self._cond:
            self._jobs[pending] = {"model": model, "keys": list(keys), "display": display}
            self._sending.add(pending)  # this process's: never looked for (_found_again)
            self._write()
        try:
            upload = None
            if by_file:
                name, upload = client.batch_create_by_file(
                    model, inlined, display, self.journal.parent
                )
            else:
                name = client.batch_create(model, inlined, display)
        except BaseException as err:
            with self._cond:
                if _refused(err):  # no job was made: nothing to find again
                    self._jobs.pop(pending, None)
                    self._write()
                self._sending.discard(pending)  # (else a rerun looks for it)
            raise
        with self._cond:
            self._jobs.pop(pending, None)
            self._sending.discard(pending)
            self._jobs[name] = {
                "model": model, "keys": list(keys), "display": display, "created": time.time()
            }  # fmt: skip
            if upload is not None:  # deleted once the job is done
                self._jobs[name]["input"] = upload
            self._write()
            self.created.append(name)
        self.emit(f"batch job {name}: {len(inlined)} request(s) to {model} sent")
        return name

    def _found_again(self, client: Any, model: str) -> None:
        """The journal's jobs of ``model`` sent but not yet named (a kill came between the
        sending and the journal's entry): each found by its display name and journaled
        by its name, or dropped where the API has none (its requests are sent again)."""
        with self._cond:
            pending = {
                key: job
                for key, job in self._jobs.items()
                if key.startswith(PENDING)
                and job.get("model") == model
                and key not in self._sending
            }
        for key, job in pending.items():
            name = client.batch_named(job.get("display") or key.removeprefix(PENDING))
            with self._cond:
                self._jobs.pop(key, None)
                if name is not None:
                    self._jobs[name] = {k: v for k, v in job.items()}
                    log.info("batch job %s: found again by its display name", name)
                self._write()

    def _wait(self, client: Any, model: str, name: str) -> dict[str, Any]:
        """The job's answers by key, once it is done (polled; a poll that fails is tried
        again at the next, up to :attr:`poll_failures` in a row)."""
        began, failures = time.monotonic(), 0
        while True:
            try:
                job = client.batch_get(name)
                failures = 0
            except Exception as err:
                failures += 1
                if getattr(err, "code", None) == 404:  # gone: a journaled job is sent again
                    raise
                if failures >= self.poll_failures:  # the job's cells fail; the job is kept
                    raise _unread(f"{model}: batch job {name}", f"{failures} polls", err) from err
                log.warning("batch job %s: %s; polling again", name, err)
                job = None
            if job is not None:
                state = getattr(job.state, "name", str(job.state)).removeprefix("JOB_STATE_")
                if state in DONE_STATES:
                    break
                log.info("batch job %s (%s): %s after %.0f s", name, model, state.lower(),
                         time.monotonic() - began)  # fmt: skip
            if self._closed.wait(self.poll_s):
                raise BatchJobError(f"batch job {name}: no longer waited for (the task ended)")
        self._forget_input(client, name)
        answers: dict[str, Any] = {}
        failed: list[str] = []
        by_file = getattr(job.dest, "file_name", None) if state == "SUCCEEDED" else None
        if by_file:
            items = self._read_answers(client, model, name, str(by_file))
        else:
            items = [
                ((item.metadata or {}).get("key"), item.response, item.error)
                for item in getattr(job.dest, "inlined_responses", None) or []
            ]
        for key, response, error in items:
            if error is not None or response is None:
                err = error or {}
                code = err.get("code") if isinstance(err, dict) else getattr(err, "code", None)
                message = err.get("message") if isinstance(err, dict) else str(err)
                if isinstance(key, str):  # (a journal holds request keys only)
                    failed.append(key)
                answers[key] = BatchAnswerError(
                    f"{model}: the batch job {name} answered HTTP {code}: {message}",
                    code,
                    str(message),
                )
            else:
                answers[key] = response
        with self._cond:  # a rerun sends the failed requests again, in a new job
            entry = self._jobs.setdefault(name, {"model": model, "keys": []})
            if state == "SUCCEEDED":  # a request the job holds no answer for: sent again too
                failed += [k for k in entry.get("keys", []) if k not in answers and k not in failed]
            entry["state"], entry["failed"] = state, failed
            self._write()
        if state != "SUCCEEDED":
            error = getattr(job, "error", None)
            said = f": {getattr(error, 'message', error)}" if error else ""
            raise BatchJobError(f"batch job {name} ({model}) ended {state.lower()}{said}")
        self.emit(f"batch job {name}: answered after {time.monotonic() - began:.0f} s")
        return answers

    def _forget_input(self, client: Any, name: str) -> None:
        """The done job's uploaded requests deleted from the Files API (they count against
        the project's storage for 48 hours); a failure is logged, and the file expires."""
        with self._cond:
            upload = self._jobs.get(name, {}).pop("input", None)
        if not isinstance(upload, str):
            return
        try:
            client.batch_forget(upload)
        except Exception as err:
            log.warning(
                "batch job %s: its requests' file %s was not deleted: %s", name, upload, err
            )

    def _read_answers(
        self, client: Any, model: str, name: str, file: str
    ) -> list[tuple[Any, Any, Any]]:
        """A job's answers from the file ``file`` (JSON Lines, ``{"key", "response"}`` or
        ``{"key", "error"}``): downloaded next to the journal a part at a time, each read
        given :data:`READ_S` plus :data:`READ_S_PER_ANSWER` for each of the job's requests,
        tried :data:`READ_TRIES` times; then read a line at a time and removed."""
        with self._cond:
            held = len(self._jobs.get(name, {}).get("keys", []))
        timeout = READ_S + READ_S_PER_ANSWER * held
        part = self.journal.parent / f".gemini-batch-{name.rsplit('/', 1)[-1]}.answers"
        try:
            for attempt in range(1, READ_TRIES + 1):
                try:
                    client.batch_download(file, part, timeout)
                    break
                except Exception as err:
                    if getattr(err, "code", None) == 404:  # gone: a rerun sends them again
                        raise
                    if attempt == READ_TRIES:
                        what = f"{model}: batch job {name}'s answers ({file})"
                        raise _unread(what, f"{attempt} tries", err) from err
                    log.warning("batch job %s: reading %s: %s; reading again", name, file, err)
                    if self._closed.wait(self.poll_s):
                        raise BatchJobError(
                            f"batch job {name}: no longer read (the task ended)"
                        ) from err
            return answers_in(part)
        finally:
            part.unlink(missing_ok=True)

    def close(self) -> None:
        """Stop: the requests not sent yet, and the waits on jobs, end with an error (the
        jobs sent go on at the API, and a rerun reads them)."""
        self._closed.set()
        with self._cond:
            queued, self._queue = self._queue, {}
            self._cond.notify_all()
        for by_key in queued.values():
            for waiters in by_key.values():
                for waiting in waiters:
                    waiting.error = BatchJobError("the task ended before its batch was sent")
                    waiting.done.set()
