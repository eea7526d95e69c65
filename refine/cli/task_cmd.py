"""A task's command, made from its :class:`refine.harness.registry.TaskSpec`: an option per
field of its Plan that the command line shows (flag, help, bounds and default from the
field, as ``refine run``'s options come from RunSpec's), ``--out``, ``--json`` and the
engine's options. The plan is built and checked by its own validators; the task runs into
``--out`` (a folder holding another task's results is refused), its page is written, and
its summary printed (its results record with ``--json``).

:func:`add_task_commands` gives the command tree a command for every registered task that
has none of its own yet, so a task registered in a test or by a user is ``refine NAME``
with no other edit."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import typer

from refine.cli.inputs import (
    UserInputError,
    given_value,
    made_plan,
    setting_parameters,
    with_engine,
)
from refine.harness import registry
from refine.harness.cells import CellSchemaError
from refine.harness.engine import LOCAL, EngineOptions
from refine.harness.ray import RayEngineError
from refine.harness.registry import TaskSpec
from refine.harness.results import RESULTS, Results, ResultsError
from refine.harness.task import CellsFailed, NotLimited
from refine.settings import shown_on


def own_folder(out: Path, mine: str) -> None:
    """A folder holding another task's results record is refused: one record a folder."""
    if not (out / RESULTS).is_file():
        return
    try:
        task = Results.read(out).task
    except ResultsError as err:
        raise UserInputError(f"--out: {err}") from err
    if task != mine:
        raise UserInputError(
            f"--out {out}: it holds the results of a {task}; give this one a folder of "
            f"its own (for example --out {mine}-results)"
        )


def run_plan(
    spec: TaskSpec,
    plan: Any,
    out: Path,
    as_json: bool = False,
    engine: EngineOptions = LOCAL,
    asked: dict[str, Any] | None = None,
) -> Results:
    """Run ``plan`` of task ``spec`` into ``out`` with progress on stderr, write its page
    and print its summary (or its results record with ``as_json``); a cell a failure ended
    is named on stderr and the exit code is 1 (the same command makes it again). ``asked``:
    what a recipe's run was asked, kept in the record (``config.asked``) before any of it
    is shown."""
    own_folder(out, spec.record or spec.name)

    def progress(line: str) -> None:
        if not as_json:
            typer.echo(line, err=True)

    own: list[str] = []  # cells that failed on their own (a refusal): none in the results
    try:
        results = spec.runner()(plan, out, on_event=progress, engine=engine)
    except CellsFailed as err:  # the rest were made: their page and summary, then exit 1
        results, own = err.results, [f"failed: {line}" for line in err.failures]
    except (RayEngineError, CellSchemaError, NotLimited, *spec.error_types()) as err:
        raise UserInputError(str(err)) from err
    if asked:
        from refine.harness.recipe_run import record_asked

        results = record_asked(out, results, asked)
    failed = [*own, *spec.failure_lines(results.cells)]
    for line in failed:
        typer.echo(line, err=True)
    if failed:
        typer.echo(
            f"{len(failed)} of {len(results.cells) + len(own)} cell(s) failed; they are made "
            "again when the same command runs again (the others are kept)",
            err=True,
        )
    written = None
    if spec.page:
        from refine.present.report import write_task_page

        written = write_task_page(spec.page, out, results)
    if as_json:
        typer.echo(json.dumps(results.to_json(), indent=2))
    else:
        for line in spec.summary_lines(results):
            typer.echo(line)
        typer.echo(f"results: {out / RESULTS}" + (f"; page: {written}" if written else ""))
    if failed:
        raise typer.Exit(1)
    return results


def _on_command_line(ctx: Any, name: str) -> bool:
    """Whether the option ``name`` was given (not left at its default) in ``ctx``, the
    running command's context."""
    source = ctx.get_parameter_source(name) if ctx is not None else None
    return source is None or source.name not in ("DEFAULT", "DEFAULT_MAP")


def extra_option(name: str, default: Any, flag: str, help: str, annotation: Any) -> Any:
    """An option of a task command's own (:func:`task_command`'s ``extras``)."""
    import inspect

    return inspect.Parameter(
        name,
        inspect.Parameter.KEYWORD_ONLY,
        default=typer.Option(default, flag, help=help),
        annotation=annotation,
    )


def task_command(
    spec: TaskSpec,
    extras: Sequence[Any] = (),
    intercept: Callable[..., bool] | None = None,
    workers_help: str = "Cells at a time.",
    batch: bool = False,
) -> Callable[..., Any]:
    """``refine NAME``, made from the spec and its Plan's fields; ``extras`` (keyword-only
    ``inspect.Parameter``s) are options of the command's own, which ``intercept(given,
    extras, out=, as_json=, engine=, plan=)`` reads first (``plan()``: the Plan of the
    options given); it returns True where it did the
    command's work itself (a bench's recipe). ``given`` holds what the command line gave,
    None where an option was left at its default. ``batch``: it takes ``--batch`` (Gemini
    batch jobs)."""
    import inspect

    plan = spec.plan_class()
    settings = shown_on("cli", plan)

    def command(
        out: Path,
        as_json: bool,
        limit: int | None = None,
        engine: EngineOptions = LOCAL,
        ctx: Any = None,
        **options: Any,
    ) -> None:
        engine = replace(engine, limit=limit)  # the task's first N jobs (CellTask.planned)
        values = {s.name: options.pop(s.name) for s in settings}
        given = {k: v if _on_command_line(ctx, k) else None for k, v in values.items()}
        fields = {s.name: given_value(s, values[s.name]) for s in settings}

        def made(**more: Any) -> Any:  # the plan of the options given (and ``more``)
            return made_plan(plan, **{k: v for k, v in fields.items() if v is not None}, **more)

        if intercept is not None and intercept(
            given, options, out=out, as_json=as_json, engine=engine, plan=made
        ):
            return
        run_plan(spec, made(), out, as_json, engine)

    own = [
        inspect.Parameter(
            "out",
            inspect.Parameter.KEYWORD_ONLY,
            default=typer.Option(
                Path(spec.name),
                "--out",
                help="The task's folder, a folder of its own; run again to go on where it stopped.",
            ),
            annotation=Path,
        ),
        inspect.Parameter(
            "as_json",
            inspect.Parameter.KEYWORD_ONLY,
            default=typer.Option(False, "--json", help="Print the results record."),
            annotation=bool,
        ),
        inspect.Parameter(
            "limit",
            inspect.Parameter.KEYWORD_ONLY,
            default=typer.Option(
                None,
                "--limit",
                min=1,
                help="Only the task's first N cells, for a quick look (a recipe whose task "
                "takes a limit of its own: its first N prompts, taken in turn from its "
                "countries; concepts, cultures).",
            ),
            annotation=int | None,
        ),
        inspect.Parameter("engine", inspect.Parameter.KEYWORD_ONLY, annotation=EngineOptions),
        # the running command's context: which options were given, not left at default
        inspect.Parameter("ctx", inspect.Parameter.KEYWORD_ONLY, annotation=typer.Context),
    ]
    if not spec.limits_jobs:  # made as one piece: no --limit
        own = [p for p in own if p.name != "limit"]
    options = setting_parameters(settings)
    params = [*options, *extras, *own]
    command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    command.__name__ = spec.name.replace("-", "_") + "_cmd"
    command.__doc__ = spec.help + (f"\n\n{spec.about}" if spec.about else "")
    return with_engine(command, 1, workers_help, batch=batch)


def plan_command(
    plan: type, body: Callable[..., Any], doc: str, extras: Sequence[Any] = ()
) -> Callable[..., Any]:
    """A command made from ``plan`` (a pydantic model whose fields carry their flag, help
    and bounds, as a task's Plan's do): an option per field the command line shows and
    ``extras`` (keyword-only ``inspect.Parameter``s of its own); it calls ``body(made,
    **extras)`` with the plan of the options given, checked by its validators (a refusal
    is one line naming the flag)."""
    import inspect

    settings = shown_on("cli", plan)

    def command(**options: Any) -> Any:
        fields = {s.name: given_value(s, options.pop(s.name)) for s in settings}
        made = made_plan(plan, **{k: v for k, v in fields.items() if v is not None})
        return body(made, **options)

    command.__signature__ = inspect.Signature([*setting_parameters(settings, strict=True), *extras])  # type: ignore[attr-defined]
    command.__doc__ = doc
    return command


def add_task_commands(group: Any) -> None:
    """A command in ``group`` (the click group of ``refine``) for every registered task with
    a plan whose every required field the command line gives, and no command of its own."""
    for name in registry.names():
        spec = registry.task(name)
        *where, last = spec.command or (name,)
        inside = group
        for word in where:  # a group of the tree (refine sos)
            inside = inside.commands[word]
        if last in inside.commands or spec.plan is None:
            continue
        plan = spec.plan_class()
        shown = {s.name for s in shown_on("cli", plan)}
        if any(f.is_required() and n not in shown for n, f in plan.model_fields.items()):
            continue
        app = typer.Typer(
            add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None
        )
        app.command(last)(task_command(spec))
        inside.add_command(typer.main.get_command(app), last)
