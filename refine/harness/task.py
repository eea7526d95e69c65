"""A many-cell job as a task on the harness: the task says how a cell is made (its
:class:`refine.harness.engine.MakerSpec`) and how cells are summarised; :func:`run_task`
does the rest, the same for every task and engine: it opens the task's folder, asks the
engine what the cells are scored with, keeps the cells already made that still fit, makes
the others (each appended as it ends, so a job killed half-way goes on from there), and
hands the task its cells in the plan's order.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from refine.harness.cells import Cell, CellFormat, CellStore, latest
from refine.harness.engine import MakerSpec, open_engine


class Summary(dict):
    """What a task found (the dict its JSON file holds), and ``cells``: the lines of the
    cells it was made from, in the plan's order, for a page to show them."""

    def __init__(self, summary: dict[str, Any], cells: list[dict[str, Any]]) -> None:
        super().__init__(summary)
        self.cells = cells


class Task(Protocol):
    name: str  # in progress lines, thread names and Ray's dashboard: "bench"
    what: str  # the folder as the user knows it: "the bench folder (--out)"
    form: CellFormat

    def maker(self) -> MakerSpec:
        """How a process builds the maker of this task's cells."""

    def jobs(self) -> list[Any]:
        """Every job of the plan, in the plan's order."""

    def job_key(self, job: Any) -> tuple[Any, ...]:
        """The key the job's cell has."""

    def label(self, job: Any) -> str:
        """The job in a message ("generator: activity (country)")."""

    def reusable(self, cell: Cell, scoring: Any) -> bool:
        """Whether a cell on record was made the way this plan makes cells (``scoring``
        is what the engine's makers describe)."""

    def progress(self, cell: Cell) -> str:
        """One line about a finished cell."""

    def summarise(self, cells: list[Cell], scoring: Any, store: CellStore) -> Summary:
        """The summary of the plan's cells (in its order); writes the task's outputs."""


def run_task(
    task: Task,
    out: str | Path,
    *,
    engine: str = "local",
    workers: int = 1,
    instances: Any = None,
    address: str | None = None,
    gpus_per_worker: float = 0.0,
    on_event: Callable[[str], None] | None = None,
) -> Summary:
    """Make every cell of ``task`` not done yet in ``out`` on ``engine`` and return the
    summary. It is the same for any engine and number of workers."""
    emit = on_event or (lambda line: None)
    store = CellStore(out, task.form)
    cells_engine = open_engine(
        engine,
        task.maker(),
        workers=workers,
        name=task.name,
        folder=store.dir,
        what=task.what,
        emit=emit,
        instances=instances,
        address=address,
        gpus_per_worker=gpus_per_worker,
    )
    try:
        scoring = cells_engine.describe()
        jobs = task.jobs()
        done = {c.key for c in store.cells() if task.reusable(c, scoring)}
        todo = [job for job in jobs if task.job_key(job) not in done]
        emit(f"{task.name} in {store.dir}: {len(todo)} of {len(jobs)} cell(s) to do")
        lock = threading.Lock()
        finished = [0]

        def record(job: Any, cell: Cell, worker: str) -> None:
            where = f" [{worker}]" if worker else ""
            with lock:
                store.append(cell)
                finished[0] += 1
                emit(f"[{finished[0]}/{len(todo)}] {task.progress(cell)}{where}")

        cells_engine.run(todo, record, task.label)
    finally:
        cells_engine.close()
    kept = latest(c for c in store.cells() if task.reusable(c, scoring))
    cells = [kept[key] for key in map(task.job_key, jobs) if key in kept]
    return task.summarise(cells, scoring, store)
