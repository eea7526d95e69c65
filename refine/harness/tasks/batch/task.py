"""Batches: one refinement run per line of a JSONL or CSV file, in one batch directory.

A batch directory is named after the spec file and a hash of its content
(``batch-<name>-<sha8>``), so ``--resume`` finds it again. It holds ``batch.json`` (every
entry's status, run directory, FAITH before and after, error) written atomically after
every change, ``runs/<run id>/`` per run, and the results record ``results.json``
(:mod:`refine.harness.results`: the summary, one cell per entry) with ``runs.csv``, written
as each run ends, at the batch's end and on Ctrl-C, which the batch's report reads. A
failing run is recorded as failed and the batch goes on; a killed batch resumes its
unfinished runs where they stopped.

The spec file is read in :mod:`refine.harness.tasks.batch.specs`, an entry's run made in
:mod:`refine.harness.tasks.batch.runs`, the record kept in
:mod:`refine.harness.tasks.batch.record`.

Spec lines name ``activity`` and ``country`` and any run setting (``rounds``, ``target``,
``seed``, ``candidates``, ...), plus ``refs`` (a references file) or ``image`` (an image
to refine), both relative to the spec file, and an optional ``name``. The profile and
backends are the batch's, given once on the command line.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from refine.events import BatchStarted, EntryChanged, EntryEvent, Event, RunStarted
from refine.harness.engine import LOCAL, EngineOptions, MakerSpec
from refine.harness.ray import MAX_RETRIES
from refine.harness.results import publish
from refine.harness.task import Task, run_task
from refine.harness.tasks.batch.record import (
    RUN_FIELDS,
    Batch,
    BatchEntry,
    BatchStore,
    batch_results,
    entry_ended,
    record_run,
)
from refine.harness.tasks.batch.runs import RunMaker, claimed, release_lock
from refine.io.store import RunStore
from refine.records import Run


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
        release_lock(self.store.dir, entry.run_dir, worker)
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
            self.publish()  # a report of the batch so far reads it
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
        self.publish()

    def end(self, made_with: Any) -> Batch:
        self.store.save(self.batch)
        self.publish()
        return self.batch

    def publish(self) -> None:
        """The batch's results record (results.json) and runs.csv, from its record."""
        results, rows = batch_results(self.batch, self.store.dir)
        publish(self.store.dir, results, RUN_FIELDS, rows)


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
