"""A many-cell job as a task on the harness.

A task says how its jobs are made (its :class:`refine.harness.engine.MakerSpec`), which are
left to do, what to record as each ends and what the job's result is; :func:`run_task` does
the rest, the same for every task and engine: it opens the engine, runs the jobs left, and
on Ctrl-C stops the workers before the task saves what it knows.

:class:`CellTask` is the task of a job whose results are cells in a :class:`CellStore`
(bench, CUBE concepts): it keeps the cells already made that still fit, appends each new one
as it ends (a job killed half-way goes on from there), summarises them in the plan's order
and writes the task's one results record (:mod:`refine.harness.results`) and its CSV.
Batches and SoS banks keep their state in their own files (``batch.json``, ``bank.json``),
which their progress is read from, and end with the same results record.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from refine.harness.cells import Cell, CellFormat, CellStore, latest
from refine.harness.engine import LOCAL, EngineOptions, MakerSpec, open_engine
from refine.harness.results import RESULTS, Results, publish
from refine.progress import Countdown

# what a task run with --batch records in its results' config
BATCH_WORDS = (
    "Gemini requests sent as batch jobs (--batch): a sampled reading sends all k answers at "
    "once and reads them as a live one does, which stops at its first agreeing answers"
)


class Task:
    """A job on the harness. Subclasses set ``name`` (in progress lines, thread names and
    Ray's dashboard) and ``what`` (its folder as the user knows it) and give ``maker``,
    ``begin``, ``done`` and ``end``; the other hooks are the engine's news, ignored here."""

    name = "cells"
    what = "the output folder (--out)"
    folder: str | Path = "."
    engine: EngineOptions = LOCAL  # what run_task runs it on
    models: dict[str, str] = {}  # noqa: RUF012 (set per task by run_task, never mutated)

    def maker(self) -> MakerSpec:
        """How a process builds the maker of this task's jobs."""
        raise NotImplementedError

    def begin(self, made_with: Any, workers: list[str]) -> list[Any]:
        """The jobs left to do; ``made_with`` is what the engine's makers describe."""
        raise NotImplementedError

    def end(self, made_with: Any) -> Any:
        """The job's result, once every job is made."""
        raise NotImplementedError

    def label(self, job: Any) -> str:
        return str(job)

    def started(self, job: Any) -> None:
        pass

    def heard(self, job: Any, news: Any) -> None:
        pass

    def done(self, job: Any, result: Any, worker: str) -> None:
        raise NotImplementedError

    def lost(self, job: Any, worker: str, retries: int) -> bool:
        return True  # made again (the engine gives up after its own limit)

    def failed(self, job: Any, err: Exception, worker: str) -> bool:
        """The job failed with ``err``: True when the task recorded it and the other jobs
        go on, False to stop them (the engine then raises ``err``)."""
        return False

    def interrupted(self) -> None:
        """Ctrl-C, once the workers are stopped: save what is known."""


def run_task(
    task: Task,
    *,
    engine: EngineOptions = LOCAL,
    instances: Any = None,
    on_event: Callable[[str], None] | None = None,
) -> Any:
    """Make every job of ``task`` left to do on ``engine`` and return its result, the same
    for any engine and number of workers."""
    from refine.io.store import held

    with held(task.folder):  # one process a task folder: another is refused, naming it
        return _run_held(task, engine, instances, on_event)


def _run_held(task: Task, engine: EngineOptions, instances: Any, on_event: Any) -> Any:
    if engine.limit and not isinstance(task, CellTask):
        raise NotLimited(
            f"--limit: a {task.name} is not made job by job; run it whole, or make its plan smaller"
        )
    task.engine = engine
    cells_engine = open_engine(
        engine,
        task.maker(),
        name=task.name,
        folder=task.folder,
        what=task.what,
        emit=on_event or (lambda line: None),
        instances=instances,
    )
    try:
        made_with = cells_engine.describe()
        todo = task.begin(made_with, cells_engine.workers())
        if todo:
            cells_engine.run(todo, task)
        task.models = cells_engine.models()  # after the work: what the APIs answered from
    except KeyboardInterrupt:
        cells_engine.close()
        task.interrupted()
        raise
    finally:
        cells_engine.close()
    result = task.end(made_with)
    failures = getattr(task, "failures", None)
    if failures:  # after the task's end: what was made is written whole
        raise CellsFailed(failures, len(getattr(task, "todo", ())), Path(task.folder), result)
    return result


class CellTask(Task):
    """A task whose results are cells kept in ``folder`` (see the module docstring).
    Subclasses give ``form``, ``metrics``, ``csv_file``, ``maker`` and ``jobs``; the other
    hooks have defaults read from the ``CellFormat`` and the task's ``plan`` (its Plan,
    where it keeps one), and a task gives them only where it differs: ``job_key``,
    ``reusable``, ``progress``, ``config``, ``summarise``, ``csv_fields`` and
    ``csv_rows``."""

    form: CellFormat
    metrics: tuple[str, ...] = ()  # the catalog metrics a cell fills (its outputs)
    csv_file = "rows.csv"
    plan: Any = None  # the task's Plan, where it keeps one: the defaults read it

    def __init__(self, folder: str | Path, emit: Callable[[str], None] | None = None) -> None:
        self.folder = str(folder)
        self.store = CellStore(folder, self.form)
        self.emit = emit or (lambda line: None)
        self.lock = threading.Lock()
        self.todo: list[Any] = []
        self.finished = 0
        self.failures: list[str] = []  # the cells that failed on their own, in words

    def jobs(self) -> list[Any]:
        """Every job of the plan, in the plan's order."""
        raise NotImplementedError

    def job_key(self, job: Any) -> tuple[Any, ...]:
        """The key the job's cell has: a mapping's fields of the format's key, a tuple as
        it is, any other job alone."""
        if isinstance(job, dict):
            return self.form.key_of(job)
        return job if isinstance(job, tuple) else (job,)

    def reusable(self, cell: Cell, made_with: Any) -> bool:
        """Whether a cell on record was made the way this plan makes cells: made by the
        same makers (its ``maker`` input, where its format keeps one)."""
        return "maker" not in self.form.inputs or cell.inputs.get("maker") == made_with

    def settled(self, cell: Cell) -> bool:
        """Whether a reusable cell is done; one that is not (a failure it records) stays in
        the results until it is made again, on the next run."""
        return True

    def top_up(self, job: Any, cell: Cell, made_with: Any) -> Any:
        """The job that brings a kept cell that is not reusable up to date without making
        it again (scoring its saved images for what it lacks), or None: make it again."""
        return None

    def progress(self, cell: Cell) -> str:
        """One line about a finished cell: its key, and each metric's value."""
        from metrics.catalog import label
        from refine.numbers import shown

        key = ", ".join(f"{k}={v}" for k, v in zip(self.form.key, cell.key, strict=True))
        values = [f"{label(m)} {shown(cell.outputs.get(m))}" for m in self.metrics]
        return f"{key}: {', '.join(values)}"

    def config(self, made_with: Any) -> dict[str, Any]:
        """What the task was asked for and made its cells with, for the record: the plan's
        fields and the makers."""
        asked = self.plan.model_dump(mode="json") if self.plan is not None else {}
        return {**asked, "maker": made_with}

    def summarise(self, cells: list[Cell], made_with: Any) -> dict[str, Any]:
        """The figures of the plan's cells (in its order), by catalog metric name: each
        metric pooled over the cells as the catalog says, with the plan's seed."""
        from metrics.catalog import pooled

        seed = getattr(self.plan, "seed", 42)
        return {m: pooled(m, [c.mean(m) for c in cells], seed) for m in self.metrics}

    def csv_fields(self) -> tuple[str, ...]:
        """The CSV's columns: the cell's inputs, then its metrics."""
        return (*self.form.inputs, *self.metrics)

    def csv_rows(self, line: dict[str, Any]) -> list[dict[str, Any]]:
        """A cell's rows in the CSV, from its line: one a cell."""
        return [{k: line.get(k) for k in self.csv_fields()}]

    def planned(self) -> list[Any]:
        """The plan's jobs this run makes: its first ``engine.limit`` where one is asked."""
        jobs = self.jobs()
        return jobs[: self.engine.limit] if self.engine.limit else jobs

    def begin(self, made_with: Any, workers: list[str]) -> list[Any]:
        jobs = self.planned()
        cells = self.store.cells()
        done = {c.key for c in cells if self.reusable(c, made_with) and self.settled(c)}
        last = latest(cells)
        self.todo, again = [], 0
        for job in jobs:
            key = self.job_key(job)
            if key in done:
                continue
            topped = self.top_up(job, last[key], made_with) if key in last else None
            again += topped is not None
            self.todo.append(topped if topped is not None else job)
        self.countdown = Countdown(len(self.todo))
        rescored = f" ({again} of them kept, scored again from their images)" if again else ""
        first = (
            f", the first {len(jobs)} of {len(self.jobs())} (--limit)" if self.engine.limit else ""
        )
        self.emit(
            f"{self.name} in {self.store.dir}: {len(self.todo)} of {len(jobs)} cell(s) to do"
            f"{first}{rescored}"
        )
        return self.todo

    def done(self, job: Any, cell: Cell, worker: str) -> None:
        where = f" [{worker}]" if worker else ""
        undeclared = sorted(set(cell.outputs) - set(self.metrics))
        if undeclared:
            raise ValueError(f"a {self.name} cell fills {undeclared}, not among {self.metrics}")
        with self.lock:
            self.store.append(cell)
            self.finished += 1
            left = self.countdown.tick()
            left = f" · {left}" if left else ""
            self.emit(f"[{self.finished}/{len(self.todo)}] {self.progress(cell)}{where}{left}")

    def failed(self, job: Any, err: Exception, worker: str) -> bool:
        """A cell's own failure (a refusal, a batch job that failed: ``JobFailure``) is
        said and kept out of the cells, and the others go on; the next run makes only the
        cells left. Any other failure stops them."""
        from refine.backends.loading import JobFailure, describe_error

        if not isinstance(err, JobFailure):
            return False
        where = f" [{worker}]" if worker else ""
        with self.lock:
            self.failures.append(f"{self.label(job)}: {describe_error(err)}")
            self.finished += 1
            left = self.countdown.tick()
            left = f" · {left}" if left else ""
            self.emit(
                f"[{self.finished}/{len(self.todo)}] {self.label(job)}: failed: "
                f"{describe_error(err)}{where}{left}"
            )
        return True

    def end(self, made_with: Any) -> Results:
        """The results record of the plan's cells, written with the CSV beside it (cells
        that failed on their own are left out: :func:`run_task` names them after)."""

        kept = latest(c for c in self.store.cells() if self.reusable(c, made_with))
        planned = self.planned()
        cells = [kept[key] for key in map(self.job_key, planned) if key in kept]
        summary = self.summarise(cells, made_with)
        lines = [c.record() for c in cells]
        kept = [{k: v for k, v in line.items() if k not in self.form.bulky} for line in lines]
        config = self.config(made_with)
        if self.engine.batch:  # the cells left were made so: how their judge read
            config["batch"] = BATCH_WORDS
        if self.engine.limit:  # what was asked against what was done
            config["jobs"] = {
                "limit": self.engine.limit,
                "run": len(planned),
                "of": len(self.jobs()),
            }
        models = self.models
        if (self.store.dir / RESULTS).is_file():  # a rerun: the cells kept were made then
            from refine.harness.made_with import merge_models

            try:
                models = merge_models([Results.read(self.store.dir).models, models])
            except ValueError:  # an unreadable record names nothing to keep
                pass
        results = Results.made(self.name, config, summary, kept, self.csv_file, models)
        rows = [row for line in lines for row in self.csv_rows(line)]
        results = publish(self.store.dir, results, self.csv_fields(), rows)
        self.emit(f"written: {self.store.dir / RESULTS}, {self.csv_file}")
        return results


def cells_runner(task: Callable[..., CellTask]) -> Callable[..., Results]:
    """A TaskSpec's run function for the task ``task(plan, folder, emit)`` builds."""

    def run(
        plan: Any,
        out: str | Path,
        on_event: Callable[[str], None] | None = None,
        engine: EngineOptions = LOCAL,
    ) -> Results:
        return run_task(task(plan, out, on_event), engine=engine, on_event=on_event)

    return run


class NotLimited(ValueError):
    """``--limit`` asked of a task that is not made job by job (a bank, a batch)."""


class CellsFailed(RuntimeError):
    """Cells that failed on their own (a refusal, a failed batch job), raised by
    :func:`run_task` once the task has ended: the others were made and written,
    ``results`` the task's result; running the same job again makes only the cells left."""

    def __init__(self, failures: list[str], asked: int, folder: Path, results: Results) -> None:
        shown = "; ".join(failures[:5]) + (
            f"; and {len(failures) - 5} more" if len(failures) > 5 else ""
        )
        super().__init__(
            f"{len(failures)} of {asked} cell(s) failed and are left out of {folder / RESULTS} "
            f"(the others are in it): {shown}. Run the same command again to make only those"
        )
        self.failures, self.results = failures, results
