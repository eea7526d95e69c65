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
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from refine import settings
from refine.evaluate.reference_source import ReferenceSource
from refine.events import BatchStarted, EntryChanged, EntryEvent, Event, RunStarted
from refine.harness.engine import LOCAL, EngineOptions, MakerSpec
from refine.harness.ray import MAX_RETRIES
from refine.harness.task import Task, run_task
from refine.io.files import atomic_write_text, slug
from refine.io.store import LOCK_FILE, RunStore
from refine.loop.refiner import Refiner
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
    status: Literal["pending", "running", "finished", "failed", "interrupted"] = "pending"
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


def _rows(path: Path, text: str) -> list[tuple[int, dict[str, Any] | BatchSpecError]]:
    """(line number, its settings, or what is wrong with the line) per line that holds one."""
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
        except json.JSONDecodeError as err:  # said with every other bad line
            rows.append((n, BatchSpecError(f"{path.name} line {n}: not JSON ({err.msg})")))
            continue
        if not isinstance(obj, dict):
            obj = BatchSpecError(f"{path.name} line {n}: each line must be a JSON object")
        rows.append((n, obj))
    return rows


def _entry(
    path: Path,
    n: int,
    row: dict[str, Any],
    profile: str,
    find: Callable[..., ReferencePack],
    spec_type: type[RunSpec] = RunSpec,
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
        spec, refs = settings.load(row, base_dir=path.parent, find=find, spec=spec_type)
    except settings.SettingsError as err:
        hint = f" (set {err.related})" if err.related else ""
        raise BatchSpecError(f"{where}: {err.field}: {err.message}{hint}") from err
    spec = spec.model_copy(update={"profile": profile})
    return BatchEntry(
        line=n, name=str(name or f"{spec.activity} ({refs.country})"), spec=spec, references=refs
    )


def _find(activity: str, country: str) -> ReferencePack:
    """A batch line's references when it names no file: the first found in the one order
    (:mod:`refine.evaluate.reference_source`)."""
    return ReferenceSource.default().find(activity, country).pack


def read_specs(
    path: str | Path,
    profile: str = "gemini",
    find: Callable[..., ReferencePack] | None = None,
    spec: type[RunSpec] = RunSpec,
) -> list[BatchEntry]:
    """Every line checked before anything runs (as a ``spec``, RunSpec or one with more
    fields); all bad lines are reported together."""

    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise BatchSpecError(f"{path}: cannot read the batch file ({err.strerror})") from err
    entries, problems = [], []
    for n, row in _rows(path, text):
        try:
            if isinstance(row, BatchSpecError):
                raise row
            entries.append(_entry(path, n, row, profile, find or _find, spec))
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
        "unfinished": sum(e.status in ("pending", "running", "interrupted") for e in entries),
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


def claimed(root: Path, i: int) -> str | None:
    """The run directory a Ray worker started for entry ``i``, if any."""
    try:
        return json.loads((root / "runs" / ".claims" / f"{i}.json").read_text())["run_dir"]
    except (OSError, ValueError, KeyError):
        return None


def _release(root: Path, run_dir: str | None, dead: str | None) -> None:
    """Remove a run's lock when the dead worker held it (its host may be another)."""
    if not run_dir or not dead:
        return
    lock = root / run_dir / LOCK_FILE
    try:
        if lock.read_text(encoding="utf-8").strip() == dead:
            lock.unlink(missing_ok=True)
    except OSError:
        pass


class RunMaker:
    """Makes or resumes the runs of a batch's entries in the batch directory: one Refiner
    (one set of models) per process, a sibling sharing its models per thread. A worker
    that can tell the driver (the local engine) tells it every run event; one that cannot
    (a Ray worker) writes ``runs/.claims/<entry>.json`` as soon as its run starts, so a
    retry elsewhere resumes that run instead of starting another."""

    def __init__(
        self,
        profile: str,
        backends: dict[str, str],
        options: dict[str, dict[str, Any]],
        root: str,
        instances: Any = None,
    ) -> None:
        self.refiner = instances if instances is not None else Refiner(profile, backends, options)
        self.root = Path(root)
        self.local = threading.local()

    def describe(self) -> None:
        return None

    def make(self, job: tuple[int, BatchEntry], tell: Any = None) -> dict[str, Any]:
        """The entry's run made or resumed: ``{"run_dir": ..., "error": ...}`` (a run that
        fails is reported, not raised: the batch goes on)."""
        i, entry = job
        worker = getattr(self.local, "refiner", None)
        if worker is None:
            worker = self.local.refiner = self.refiner.sibling()
        root = self.root
        started: dict[str, str] = {}

        def on_event(event: Event) -> None:
            if isinstance(event, RunStarted) and "dir" not in started:
                started["dir"] = str(Path(event.dir).relative_to(root))
                if tell is None:
                    claim = root / "runs" / ".claims" / f"{i}.json"
                    claim.parent.mkdir(parents=True, exist_ok=True)
                    atomic_write_text(claim, json.dumps({"run_dir": started["dir"]}))
            if tell is not None:
                tell(event)

        worker.on_event = on_event
        run_dir = entry.run_dir or claimed(root, i)
        try:
            if run_dir and (root / run_dir / "run.json").is_file():
                worker.resume(root / run_dir)
                started.setdefault("dir", run_dir)
            else:
                worker.start(entry.spec, entry.references, out=root / "runs")
            return {"run_dir": started.get("dir"), "error": None}
        except Exception as err:  # recorded; the batch goes on
            log.debug("batch entry %d failed", i, exc_info=True)
            return {"run_dir": started.get("dir", run_dir), "error": f"{type(err).__name__}: {err}"}


class BatchTask(Task):
    """A batch on the harness: one job per unfinished entry, ``batch.json`` saved (by the
    driver alone) at every change."""

    name = "batch"
    what = "the batch directory (--out)"

    def __init__(
        self,
        batch: Batch,
        store: BatchStore,
        emit: Callable[[Event], None],
        options: dict[str, dict[str, Any]] | None = None,
        on_workers: Callable[[list[str]], None] | None = None,
        timings: list[tuple[int, float, float, bool]] | None = None,
    ) -> None:
        self.batch, self.store, self.emit = batch, store, emit
        self.folder = store.dir
        self.options = options or {}
        self.on_workers, self.timings = on_workers, timings
        self.total = len(batch.entries)
        self.count = 0
        self.lock = threading.Lock()
        self.began = time.perf_counter()
        self.submitted: dict[int, float] = {}
        self.made: dict[str, list[int]] = {}  # per Ray worker: runs, rounds

    def maker(self) -> MakerSpec:
        return MakerSpec(
            RunMaker,
            {
                "profile": self.batch.profile,
                "backends": dict(self.batch.backends),
                "options": self.options,
                "root": str(self.store.dir),
            },
        )

    def begin(self, made_with: Any, workers: list[str]) -> list[tuple[int, BatchEntry]]:
        if workers and self.on_workers is not None:
            self.on_workers(workers)
        todo = [(i, e) for i, e in enumerate(self.batch.entries) if e.status != "finished"]
        self.count = self.total - len(todo)
        self.emit(
            BatchStarted(
                id=self.batch.id, dir=str(self.store.dir), total=self.total, todo=len(todo)
            )
        )
        self.began = time.perf_counter()
        return todo

    def label(self, job: tuple[int, BatchEntry]) -> str:
        return f"line {job[1].line} ({job[1].name})"

    def started(self, job: tuple[int, BatchEntry]) -> None:
        i, entry = job
        entry.status, entry.error = "running", None
        self.submitted[i] = time.perf_counter()
        self.store.save(self.batch)
        self.emit(EntryChanged(entry=i, name=entry.name, status="running"))

    def heard(self, job: tuple[int, BatchEntry], event: Event) -> None:
        i, entry = job
        if isinstance(event, RunStarted) and entry.run_dir is None:
            entry.run_dir = str(Path(event.dir).relative_to(self.store.dir))
            self.store.save(self.batch)
        self.emit(EntryEvent(entry=i, name=entry.name, event=event))

    def done(self, job: tuple[int, BatchEntry], outcome: dict[str, Any], worker: str) -> None:
        i, entry = job
        root = self.store.dir
        entry.run_dir = outcome.get("run_dir") or entry.run_dir or claimed(root, i)
        run = None
        if entry.run_dir and (root / entry.run_dir / "run.json").is_file():
            run = RunStore(root / entry.run_dir).load()
            record_run(entry, run)
        if outcome.get("error") or run is None:
            entry.status = "failed"
            entry.error = outcome.get("error") or "the run left no record"
        self._ended(i, entry, worker, run)

    def lost(self, job: tuple[int, BatchEntry], worker: str, retries: int) -> bool:
        """Its worker died: free the dead worker's lock on the run and resume it elsewhere
        (``retries`` in batch.json counts this), or give up after MAX_RETRIES."""
        i, entry = job
        entry.retries += 1
        entry.run_dir = entry.run_dir or claimed(self.store.dir, i)
        _release(self.store.dir, entry.run_dir, worker)
        if entry.retries <= MAX_RETRIES:
            entry.status = "pending"
            self.store.save(self.batch)
            self.emit(EntryChanged(entry=i, name=entry.name, status="retrying"))
            return True
        entry.status, entry.error = "failed", "its worker died too often"
        self._ended(i, entry, worker, None)
        return False

    def _ended(self, i: int, entry: BatchEntry, worker: str, run: Run | None) -> None:
        with self.lock:
            self.store.save(self.batch)
            self.count += 1
            event = entry_ended(i, entry, self.count, self.total)
            if worker and run is not None:  # a Ray worker: who made it, and how fast
                made = self.made.setdefault(worker, [0, 0])
                first = made[0] == 0
                made[0] += 1
                made[1] += len(run.rounds)
                minutes = max(time.perf_counter() - self.began, 1e-6) / 60
                event = replace(
                    event,
                    worker=worker,
                    worker_runs=made[0],
                    worker_rounds_per_min=made[1] / minutes,
                    rounds_per_min=sum(m[1] for m in self.made.values()) / minutes,
                )
                if self.timings is not None:
                    # (entry, the driver's wall time, the run's own, the worker's first:
                    # its models loaded on the way)
                    wall = time.perf_counter() - self.submitted.get(i, self.began)
                    self.timings.append((i, wall, run.elapsed_s, first))
        self.emit(event)

    def interrupted(self) -> None:
        """Ctrl-C: runs begun keep their folders, so ``--resume`` goes on with them."""
        for i, entry in enumerate(self.batch.entries):
            if entry.status == "running":
                entry.run_dir = entry.run_dir or claimed(self.store.dir, i)
        self.store.save(self.batch)

    def end(self, made_with: Any) -> Batch:
        self.store.save(self.batch)
        return self.batch


def run_batch(
    batch: Batch,
    store: BatchStore,
    refiner: Any = None,
    on_event: Callable[[Event], None] | None = None,
    *,
    engine: EngineOptions = LOCAL,
    backend_options: dict[str, dict[str, Any]] | None = None,
    on_workers: Callable[[list[str]], None] | None = None,
    timings: list[tuple[int, float, float, bool]] | None = None,
) -> Batch:
    """Run every unfinished entry (``engine.workers`` at a time) and return the batch
    record.

    On the local engine ``refiner`` (a :class:`refine.loop.refiner.Refiner`; built from
    the batch's profile and backends when not given) lends each thread a sibling sharing
    its models; on Ray (``engine.kind`` ``ray``) each worker builds its own from the
    batch's profile, backends and ``backend_options``, on this machine or the cluster at
    ``engine.address``, and the batch directory must be on storage every node sees. A run that
    fails is recorded and the others go on; a worker that dies mid-run is replaced and its
    run resumed from its last complete round. Ctrl-C saves the record and stops; completed
    rounds stay in the run directories for ``--resume`` (either engine).
    """
    emit = on_event or (lambda event: None)
    task = BatchTask(batch, store, emit, backend_options, on_workers, timings)
    return run_task(task, engine=engine, instances=refiner)
