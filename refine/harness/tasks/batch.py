"""Batches: one refinement run per line of a JSONL or CSV file, in one batch directory.

A batch directory is named after the spec file and a hash of its content
(``batch-<name>-<sha8>``), so ``--resume`` finds it again. It holds ``batch.json`` (every
entry's status, run directory, FAITH before and after, error) written atomically after
every change, and ``runs/<run id>/`` per run. A failing run is recorded as failed and
the batch goes on; a killed batch resumes its unfinished runs where they stopped.

Spec lines name ``activity`` and ``country`` and any run setting (``rounds``, ``target``,
``seed``, ``candidates``, ...), plus ``refs`` (a references file) or ``image`` (an image
to refine), both relative to the spec file, and an optional ``name``. The profile and
backends are the batch's, given once on the command line.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import logging
import queue
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from refine import settings
from refine.evaluate.refs_build import find_any
from refine.events import BatchStarted, EntryChanged, EntryEvent, Event, RunStarted
from refine.io.files import atomic_write_text, slug
from refine.io.store import RunStore
from refine.records import ReferencePack, Run, RunSpec

log = logging.getLogger(__name__)

BATCH_FILE = "batch.json"
BATCH_WIDE = ("profile", "backends", "backend_options")


class BatchSpecError(ValueError):
    """A spec file that cannot be run; the message names every bad line."""


class BatchEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    line: int
    name: str
    spec: RunSpec
    references: ReferencePack
    status: Literal["pending", "running", "finished", "failed"] = "pending"
    run_dir: str | None = None  # relative to the batch directory
    error: str | None = None
    initial_faith: float | None = None
    best_faith: float | None = None
    edit_rounds: int = 0
    regressions: int = 0
    stop_reason: str | None = None
    elapsed_s: float = 0.0
    retries: int = 0  # times its worker died mid-run and the run went on elsewhere (Ray)


class Batch(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str
    source: str
    source_sha256: str
    profile: str
    backends: dict[str, str] = Field(default_factory=dict)
    created: str = ""
    updated: str = ""
    entries: list[BatchEntry]
    summary: dict[str, Any] = Field(default_factory=dict)


# -- spec files ------------------------------------------------------------------------


def _rows(path: Path, text: str) -> list[tuple[int, dict[str, Any]]]:
    if path.suffix.lower() == ".csv":
        reader = csv.DictReader(io.StringIO(text))
        if not reader.fieldnames or not {"activity", "country"} <= set(reader.fieldnames):
            raise BatchSpecError(f"{path}: the CSV header must name 'activity' and 'country'")
        rows = []
        for row in reader:
            values = {k.strip(): v.strip() for k, v in row.items() if k and v and v.strip()}
            if values:
                rows.append((reader.line_num, values))
        return rows
    if path.suffix.lower() not in (".jsonl", ".ndjson", ".json"):
        raise BatchSpecError(f"{path}: a batch file is .jsonl (one JSON object a line) or .csv")
    rows = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as err:
            raise BatchSpecError(f"{path} line {n}: not JSON ({err.msg})") from err
        if not isinstance(obj, dict):
            raise BatchSpecError(f"{path} line {n}: each line must be a JSON object")
        rows.append((n, obj))
    return rows


def _entry(
    path: Path, n: int, row: dict[str, Any], profile: str, find: Callable[..., ReferencePack]
) -> BatchEntry:

    where = f"{path.name} line {n}"
    wide = [k for k in BATCH_WIDE if k in row]
    if wide:
        raise BatchSpecError(
            f"{where}: {', '.join(wide)} is set for the whole batch (--profile, --backend)"
        )
    row = dict(row)
    name = row.pop("name", None)
    try:
        spec, refs = settings.load(row, base_dir=path.parent, find=find)
    except settings.SettingsError as err:
        hint = f" (set {err.related})" if err.related else ""
        raise BatchSpecError(f"{where}: {err.field}: {err.message}{hint}") from err
    spec = spec.model_copy(update={"profile": profile})
    return BatchEntry(
        line=n, name=str(name or f"{spec.activity} ({refs.country})"), spec=spec, references=refs
    )


def read_specs(
    path: str | Path, profile: str = "gemini", find: Callable[..., ReferencePack] | None = None
) -> list[BatchEntry]:
    """Every line checked before anything runs; all bad lines are reported together."""

    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise BatchSpecError(f"{path}: cannot read the batch file ({err.strerror})") from err
    entries, problems = [], []
    for n, row in _rows(path, text):
        try:
            entries.append(_entry(path, n, row, profile, find or find_any))
        except BatchSpecError as err:
            problems.append(str(err))
    if problems:
        raise BatchSpecError("\n".join(problems))
    if not entries:
        raise BatchSpecError(f"{path}: no runs in the batch file")
    return entries


def batch_dir_for(path: str | Path, out: str | Path) -> tuple[Path, str]:
    data = Path(path).read_bytes()
    sha = hashlib.sha256(data).hexdigest()
    return Path(out).resolve() / f"batch-{slug(Path(path).stem, 30)}-{sha[:8]}", sha


# -- the record ------------------------------------------------------------------------


def summarise(entries: list[BatchEntry]) -> dict[str, Any]:
    """Success rate, mean FAITH gain, regression rate and rounds used.

    The FAITH gain of a run is its best round's FAITH minus round 0's; the regression
    rate is the share of editing rounds whose chosen candidate scored a lower FAITH than
    its parent (over all finished runs).
    """
    done = [e for e in entries if e.status == "finished"]
    gains = [
        e.best_faith - e.initial_faith
        for e in done
        if e.best_faith is not None and e.initial_faith is not None
    ]
    edits = sum(e.edit_rounds for e in done)
    return {
        "runs": len(entries),
        "finished": len(done),
        "failed": sum(e.status == "failed" for e in entries),
        "unfinished": sum(e.status in ("pending", "running") for e in entries),
        "success_rate": len(done) / len(entries) if entries else None,
        "mean_faith_gain": sum(gains) / len(gains) if gains else None,
        "improved_runs": sum(g > 0 for g in gains),
        "regression_rate": sum(e.regressions for e in done) / edits if edits else None,
        "editing_rounds": edits,
        "mean_editing_rounds": edits / len(done) if done else None,
        "retries": sum(e.retries for e in entries),
    }


def record_run(entry: BatchEntry, run: Run) -> None:
    """Copy a run's outcome into its batch entry."""
    entry.status = run.status
    entry.error = run.error
    entry.stop_reason = run.stop_reason
    entry.elapsed_s = run.elapsed_s
    if run.rounds:
        entry.initial_faith = run.rounds[0].best.scores.faith
    best = run.best()
    entry.best_faith = best.best.scores.faith if best else None
    edits = run.rounds[1:]
    entry.edit_rounds = len(edits)
    entry.regressions = 0
    for r in edits:
        parent = run.rounds[r.parent].best.scores.faith if r.parent is not None else None
        if parent is not None and r.best.scores.faith is not None:
            entry.regressions += r.best.scores.faith < parent


class BatchStore:
    """``batch.json`` in the batch directory, replaced atomically; thread-safe."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.lock = threading.Lock()

    def save(self, batch: Batch) -> None:
        with self.lock:
            batch.updated = time.strftime("%Y-%m-%dT%H:%M:%S")
            batch.summary = summarise(batch.entries)
            atomic_write_text(self.dir / BATCH_FILE, batch.model_dump_json(indent=1))

    def load(self) -> Batch:
        path = self.dir / BATCH_FILE
        if not path.is_file():
            raise ValueError(f"{self.dir} is not a batch directory (no {BATCH_FILE})")
        try:
            return Batch.model_validate(json.loads(path.read_text(encoding="utf-8")))
        except (json.JSONDecodeError, ValueError) as err:
            raise ValueError(f"{path}: not a valid batch record ({err})") from err


# -- running ---------------------------------------------------------------------------


def open_batch(
    specs: str | Path,
    out: str | Path,
    profile: str,
    backends: dict[str, str] | None = None,
    resume: bool = False,
    find: Callable[..., ReferencePack] | None = None,
) -> tuple[Batch, BatchStore]:
    """The batch of a spec file: a new directory, or with ``resume`` the existing one."""
    specs = Path(specs)
    if not specs.is_file():
        raise BatchSpecError(f"{specs}: no such batch file")
    directory, sha = batch_dir_for(specs, out)
    store = BatchStore(directory)
    if (directory / BATCH_FILE).is_file():
        if not resume:
            raise BatchSpecError(
                f"{directory} already holds this batch; add --resume to finish it, "
                "or remove the directory to start again"
            )
        batch = store.load()
        if batch.profile != profile or (backends and batch.backends != backends):
            raise BatchSpecError(
                f"{directory} was started with profile {batch.profile!r} and backends "
                f"{batch.backends or '{}'}; resume it with the same --profile and --backend"
            )
        return batch, store
    entries = read_specs(specs, profile, find)
    directory.mkdir(parents=True, exist_ok=True)
    batch = Batch(
        id=directory.name,
        source=str(specs.resolve()),
        source_sha256=sha,
        profile=profile,
        backends=dict(backends or {}),
        created=time.strftime("%Y-%m-%dT%H:%M:%S"),
        entries=entries,
    )
    store.save(batch)
    return batch, store


def entry_ended(i: int, entry: BatchEntry, done: int, total: int) -> EntryChanged:
    """The event of an entry that finished or failed, the ``done``-th of ``total``."""
    return EntryChanged(
        entry=i,
        name=entry.name,
        status=entry.status,
        done=done,
        total=total,
        initial_faith=entry.initial_faith,
        best_faith=entry.best_faith,
        error=entry.error,
    )


def run_batch(
    batch: Batch,
    store: BatchStore,
    refiner: Any,
    workers: int = 1,
    on_event: Callable[[Event], None] | None = None,
) -> Batch:
    """Run every unfinished entry (``workers`` at a time) and return the batch record.

    ``refiner`` is a :class:`refine.loop.refiner.Refiner`; each worker uses a sibling sharing its
    models. A run that fails is recorded and the others go on. Ctrl-C saves the record
    and stops; completed rounds stay in the run directories for ``--resume``.
    """
    emit = on_event or (lambda event: None)
    todo: queue.Queue[int] = queue.Queue()
    for i, e in enumerate(batch.entries):
        if e.status != "finished":
            todo.put(i)
    total = len(batch.entries)
    done_count = [total - todo.qsize()]
    stop = threading.Event()
    runs_dir = store.dir / "runs"

    def one(i: int, worker: Any) -> None:
        entry = batch.entries[i]

        def on_run_event(event: Event) -> None:
            if isinstance(event, RunStarted) and entry.run_dir is None:
                entry.run_dir = str(Path(event.dir).relative_to(store.dir))
                store.save(batch)
            emit(EntryEvent(entry=i, name=entry.name, event=event))

        worker.on_event = on_run_event
        entry.status, entry.error = "running", None
        store.save(batch)
        emit(EntryChanged(entry=i, name=entry.name, status="running"))
        try:
            if entry.run_dir and (store.dir / entry.run_dir / "run.json").is_file():
                run = worker.resume(store.dir / entry.run_dir)
            else:
                run = worker.start(entry.spec, entry.references, out=runs_dir)
            record_run(entry, run)
        except Exception as err:  # recorded; the batch goes on
            log.debug("batch entry %d failed", i, exc_info=True)
            if entry.run_dir and (store.dir / entry.run_dir / "run.json").is_file():
                record_run(entry, RunStore(store.dir / entry.run_dir).load())
            entry.status = "failed"
            entry.error = f"{type(err).__name__}: {err}"
        store.save(batch)
        with store.lock:
            done_count[0] += 1
            n = done_count[0]
        emit(entry_ended(i, entry, n, total))

    def worker_loop() -> None:
        worker = refiner.sibling()
        while not stop.is_set():
            try:
                i = todo.get_nowait()
            except queue.Empty:
                return
            one(i, worker)

    emit(BatchStarted(id=batch.id, dir=str(store.dir), total=total, todo=todo.qsize()))
    threads = [
        threading.Thread(target=worker_loop, name=f"batch-worker-{k}", daemon=True)
        for k in range(max(1, min(workers, todo.qsize())))
    ]
    try:
        for t in threads:
            t.start()
        for t in threads:
            while t.is_alive():
                t.join(0.2)
    except KeyboardInterrupt:
        stop.set()
        store.save(batch)
        raise
    store.save(batch)
    return batch
