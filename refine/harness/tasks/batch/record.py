"""A batch's record: ``batch.json``, the state of every entry (its status, run directory,
FAITH before and after, error), replaced atomically after every change, and its summary;
and the results record (:mod:`refine.harness.results`) a batch ends with, which its report
reads (see :mod:`refine.harness.tasks.batch.task`)."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from metrics.catalog import pooled
from refine.events import EntryChanged
from refine.harness.results import Results
from refine.io.files import atomic_write_text
from refine.records import ReferencePack, Run, RunSpec

BATCH_FILE = "batch.json"


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


RUN_FIELDS = (
    "line",
    "name",
    "activity",
    "country",
    "status",
    "run_dir",
    "initial_faith",
    "best_faith",
    "faith_gain",
    "edit_rounds",
    "regressions",
    "stop_reason",
    "error",
    "elapsed_s",
    "retries",
)


def entry_row(entry: BatchEntry) -> dict[str, Any]:
    """An entry's cell in the results record and its row of runs.csv."""
    initial, best = entry.initial_faith, entry.best_faith
    return {
        "line": entry.line,
        "name": entry.name,
        "activity": entry.spec.activity,
        "country": entry.references.country,
        "status": entry.status,
        "run_dir": entry.run_dir,
        "initial_faith": initial,
        "best_faith": best,
        "faith_gain": best - initial if best is not None and initial is not None else None,
        "edit_rounds": entry.edit_rounds,
        "regressions": entry.regressions,
        "stop_reason": entry.stop_reason,
        "error": entry.error,
        "elapsed_s": entry.elapsed_s,
        "retries": entry.retries,
    }


def batch_results(batch: Batch, folder: Any = None) -> tuple[Results, list[dict[str, Any]]]:
    """The batch's results record and its CSV rows: its summary, with FAITH at round 0,
    at the best round and their difference over the finished runs (means and 95%
    bootstrap intervals), and one cell per entry."""

    rows = [entry_row(e) for e in batch.entries]
    finished = [r for r in rows if r["status"] == "finished"]
    summary = dict(summarise(batch.entries))
    for key, field in (("faith_initial", "initial_faith"), ("faith_best", "best_faith")):
        summary[key] = pooled("faith", [r[field] for r in finished])
    summary["faith_gain"] = pooled("faith", [r["faith_gain"] for r in finished])
    config = {
        "id": batch.id,
        "source": batch.source,
        "source_sha256": batch.source_sha256,
        "profile": batch.profile,
        "backends": batch.backends,
    }
    models = {} if folder is None else _models(batch, Path(folder))
    return Results.made("batch", config, summary, rows, "runs.csv", models), rows


def _models(batch: Batch, folder: Path) -> dict[str, str]:
    """Every model the batch's runs (under ``folder``) used, by their run.json's
    backend_info, and the weights each resolved to."""
    from refine.backends.provenance import weights_of
    from refine.harness.made_with import merge_models
    from refine.io.store import RunStore

    seen = []
    for entry in batch.entries:
        if not entry.run_dir:
            continue
        try:
            run = RunStore(folder / entry.run_dir).load()
        except ValueError:  # a run that never wrote its record names no model
            continue
        seen.append({i.get("id", role): weights_of(i) for role, i in run.backend_info.items()})
    return merge_models(seen)
