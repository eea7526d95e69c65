"""The task registry: every many-cell job the toolkit runs, as a :class:`TaskSpec` keyed by
its name (its command, ``refine NAME``; a recipe's ``task``; the results record's task).

A spec names its parts by lazy targets (``"module:attribute"``), as the backend registry
does, so that reading the registry imports no task: its Plan (a pydantic model whose fields
carry their flag, help, bounds and the fronts that show them, like
:class:`refine.records.RunSpec`'s), its run function, the page ``refine.present`` writes
for its results (by kind; tasks import nothing from ``present``), the catalog metrics it
fills, the table kinds a recipe of it makes, and its terminal summary.

The bundled tasks are registered below by the target of the ``SPEC`` their sub-package of
:mod:`refine.harness.tasks` exports; :func:`register` adds one (a test's toy task, a
user's own), and a recipe with ``task = NAME`` then runs it with no other change.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

# the table kinds a recipe's [table] can be (refine.harness.recipes.Table.kind)
TABLE_KINDS = ("metrics", "agreement", "settings", "labels")


def resolve(target: str) -> Any:
    """The object a ``"module:attribute"`` target names, its module imported now."""
    module, _, attribute = target.partition(":")
    if not module or not attribute:
        raise ValueError(f"a target is 'module:attribute', not {target!r}")
    return getattr(importlib.import_module(module), attribute)


def lazy_exports(module: str, names: dict[str, str]) -> Any:
    """A package's ``__getattr__`` giving each of ``names`` from its submodule (name ->
    submodule), imported when first asked for: a task family's package exports its plan and
    run function without importing them when only its spec is read."""

    def attribute(name: str) -> Any:
        if name in names:
            return getattr(importlib.import_module(f"{module}.{names[name]}"), name)
        raise AttributeError(f"module {module!r} has no attribute {name!r}")

    return attribute


@dataclass(frozen=True)
class TaskSpec:
    """One task: what it is called and asked for, what runs it and what it fills."""

    name: str  # its command and a recipe's task: lower case, words joined by hyphens
    help: str  # one line: what it does
    # "module:Class": its Plan, a pydantic model; None: the task runs from its recipes
    # alone, by the recipe's command (refine bench --recipe NAME), and has no run function
    plan: str | None
    run: str | None  # "module:function": run(plan, out, *, on_event, engine) -> Results
    page: str | None = None  # the page kind refine.present writes for its results
    metrics: tuple[str, ...] = ()  # the catalog's image-level metrics its cells fill
    prompt_metrics: tuple[str, ...] = ()  # its prompt-level figures (catalog names)
    # the names a recipe's table may take beyond those two (a CUBE kernel's cd:NAME, a
    # method of the SoS labels table); "catalog": every metric of the catalog
    table_metrics: tuple[str, ...] = ()
    tables: tuple[str, ...] = ()  # the table kinds a recipe of it makes
    # "module:function": the terminal's lines from its results record
    summary: str | None = None
    # its command's words after refine (empty: its name; ("sos", "bank"): in a group)
    command: tuple[str, ...] = ()
    # "module:Class" of each of its own errors a user can put right (a model the plan asks
    # for that does not load), said in one line naming the option, exit code 2
    errors: tuple[str, ...] = ()
    # "module:function": a line for each cell a failure ended, from its results' cells
    # (its command then exits 1; the same command makes them again)
    failures: str | None = None
    # "module:function": a recipe's table of its own, table(recipe, results, out, rated)
    # (None: the metrics, agreement and settings tables every task's cells feed)
    table: str | None = None
    # "module:function": estimate(plan, profile), what a plan draws and calls (a recipe's
    # --dry-run), a refine.harness.estimate.Estimate
    estimate: str | None = None
    about: str = ""  # more of its command's help, after the help's line
    # the task its results record names, where another's (a rescore's record is a bench's)
    record: str = ""
    # whether it is made job by job (a CellTask), so that --limit N keeps its first N jobs;
    # a task made as one piece (an SoS bank) has no --limit
    limits_jobs: bool = True

    def __post_init__(self) -> None:
        if not self.name or not all(c.isalnum() or c == "-" for c in self.name):
            raise ValueError(f"a task's name is letters, digits and hyphens, not {self.name!r}")
        stray = [k for k in self.tables if k not in TABLE_KINDS]
        if stray:
            raise ValueError(
                f"task {self.name}: no table kind {stray[0]!r} ({', '.join(TABLE_KINDS)})"
            )
        if (self.plan is None) != (self.run is None):
            raise ValueError(f"task {self.name}: a plan and a run function, or neither")

    def plan_class(self) -> type:
        return resolve(self._command("plan"))

    def runner(self) -> Any:
        return resolve(self._command("run"))

    def summary_lines(self, results: Any) -> list[str]:
        """What the terminal shows of its results record: its ``summary`` function's lines;
        without one, each pooled figure of the summary with its interval."""
        if self.summary:
            return list(resolve(self.summary)(results))
        from metrics.catalog import label
        from refine.numbers import interval_text

        pooled = {k: v for k, v in results.summary.items() if isinstance(v, dict) and "mean" in v}
        said = "; ".join(f"{label(k)} {interval_text(v)}" for k, v in pooled.items())
        return [said] if said else []

    def error_types(self) -> tuple[type[Exception], ...]:
        """Its own errors that a user can put right (each said in one line, exit code 2)."""
        return tuple(resolve(target) for target in self.errors)

    def failure_lines(self, cells: list[dict[str, Any]]) -> list[str]:
        """A line for each cell a failure ended (none without a failures function)."""
        return list(resolve(self.failures)(cells)) if self.failures else []

    def recipe_table(self) -> Any:
        """Its own recipe table's maker, or None."""
        return resolve(self.table) if self.table else None

    def estimator(self) -> Any:
        """Its estimate of a plan, or None."""
        return resolve(self.estimate) if self.estimate else None

    def _command(self, part: str) -> str:
        target = getattr(self, part)
        if target is None:
            raise ValueError(f"task {self.name} runs from its recipes: refine bench --recipe NAME")
        return target

    def table_names(self) -> set[str]:
        """Every metric name a recipe's table of this task may give."""
        names = {*self.metrics, *self.prompt_metrics, *self.table_metrics}
        if "catalog" in names:
            from metrics.catalog import CATALOG

            names = (names - {"catalog"}) | set(CATALOG)
        return names


# name -> the target of its spec (bundled, resolved on first use) or the spec itself
_TASKS: dict[str, str | TaskSpec] = {
    "bench": "refine.harness.tasks.bench:SPEC",
    "concepts": "refine.harness.tasks.concepts:SPEC",
    "strategies": "refine.harness.tasks.strategies:SPEC",
    "editor-loops": "refine.harness.tasks.editor_loops:SPEC",
    "rescore": "refine.harness.tasks.rescore:SPEC",
    "sos": "refine.harness.tasks.sos:SPEC",
    "sos-bank": "refine.harness.tasks.sos:BANK",
    "caire": "refine.harness.tasks.caire:SPEC",
    "score": "refine.harness.tasks.score:SPEC",
}
_version = [0]  # counts registrations, so that what is built from the registry is rebuilt


def names() -> tuple[str, ...]:
    """The registered tasks' names, the bundled ones first."""
    return tuple(_TASKS)


def version() -> int:
    return _version[0]


def task(name: str) -> TaskSpec:
    """The spec of the task named ``name``; a ValueError listing the tasks otherwise."""
    entry = _TASKS.get(name)
    if entry is None:
        raise ValueError(f"no task {name!r} (tasks: {', '.join(_TASKS)})")
    if isinstance(entry, str):
        spec = resolve(entry)
        if not isinstance(spec, TaskSpec) or spec.name != name:
            raise ValueError(f"{entry} is not the TaskSpec of task {name!r}")
        _TASKS[name] = entry = spec
    return entry


def register(spec: TaskSpec) -> None:
    """Add a task: its command, recipes and checks follow from its spec."""
    if spec.name in _TASKS:
        raise ValueError(f"a task named {spec.name!r} is registered already")
    _TASKS[spec.name] = spec
    _version[0] += 1


def unregister(name: str) -> None:
    _TASKS.pop(name)
    _version[0] += 1


@contextlib.contextmanager
def registered(spec: TaskSpec) -> Iterator[TaskSpec]:
    """The registry with ``spec`` in it for the length of a ``with`` block."""
    register(spec)
    try:
        yield spec
    finally:
        unregister(spec.name)
