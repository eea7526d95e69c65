"""``refine batch`` and ``refine report``: many runs from a file, and the HTML report of a
run, a batch or a tune."""

from __future__ import annotations

import shlex
from pathlib import Path

import typer

from refine.cli.inputs import UserInputError, parse_backends, with_engine
from refine.events import BatchStarted, EntryChanged, EntryEvent, RoundDecided
from refine.harness.engine import LOCAL, EngineOptions
from refine.harness.ray import RayEngineError
from refine.harness.tasks.batch.specs import BatchSpecError, open_batch
from refine.harness.tasks.batch.task import run_batch
from refine.loop.refiner import Refiner
from refine.present.report import write_report
from refine.present.terminal.records import batch_lines
from refine.records import DEFAULT_PROFILE
from refine.settings import SettingsError, output_folder
from refine.usage import QuotaSpent


def batch_cmd(
    specs: Path = typer.Argument(..., help="A .jsonl (one JSON object a line) or .csv file."),
    out: Path = typer.Option(Path("runs"), "--out", help="Folder for the batch directory."),
    resume: bool = typer.Option(False, "--resume", help="Finish this file's existing batch."),
    profile: str = typer.Option(
        DEFAULT_PROFILE, "--profile", help="Backend profile (name or .toml)."
    ),
    backend: list[str] = typer.Option([], "--backend", help="Override a role: ROLE=NAME."),
    as_json: bool = typer.Option(False, "--json", help="Print the batch record as JSON."),
    engine: EngineOptions = LOCAL,
) -> None:
    """One refinement run per line of SPECS, with a summary over the batch.

    Each line names activity and country and any run setting (rounds, target, seed,
    candidates, initial_candidates, margin, max_drift, edit_from, instructions, ...),
    plus optional refs (a references file), image (refine this image) and name. Every
    line is checked before anything runs. Runs that fail are recorded and the batch goes
    on; the exit code is 1 when any run failed. Local models run one call at a time;
    --workers helps with API backends. --engine ray runs the same batch on Ray actors
    (one set of models each; the batch directory must be on storage every node sees).
    """

    backends = parse_backends(backend)
    try:
        output_folder(out)
    except SettingsError as err:
        raise UserInputError(f"--out: {err.message}") from err
    try:
        batch, store = open_batch(specs, out, profile, backends, resume=resume)
    except BatchSpecError as err:
        raise UserInputError(str(err)) from err
    try:
        refiner = Refiner(profile, backends)
    except ValueError as err:
        raise UserInputError(f"--profile/--backend: {err}") from err

    def progress(event) -> None:
        if as_json:
            return
        if isinstance(event, BatchStarted) or (
            isinstance(event, EntryChanged)
            and (event.done is not None or event.status == "retrying")
        ):
            typer.echo(event.describe(), err=True)
        elif isinstance(event, EntryEvent) and isinstance(event.event, RoundDecided):
            typer.echo(f"    {event.describe()}", err=True)

    try:
        batch = run_batch(
            batch,
            store,
            refiner,
            on_event=progress,
            engine=engine,
        )
    except RayEngineError as err:
        raise UserInputError(str(err)) from err
    except QuotaSpent as err:  # one line: which model, when it is back, how to go on
        typer.echo(
            f"error: {err}; the batch so far is kept in {store.dir}: go on once it is back "
            f"with {shlex.join(batch_again(specs, out, profile, backend, engine))}",
            err=True,
        )
        raise typer.Exit(1) from None
    except KeyboardInterrupt:
        again = batch_again(specs, out, profile, backend, engine)
        typer.echo(
            f"interrupted: the batch so far is kept in {store.dir} (runs finished, and runs "
            f"begun with their rounds done); go on with\n  {shlex.join(again)}",
            err=True,
        )
        raise typer.Exit(130) from None
    if as_json:
        typer.echo(batch.model_dump_json(indent=2))
    else:
        for line in batch_lines(batch, store.dir):
            typer.echo(line)
    if batch.summary["failed"]:
        raise typer.Exit(1)


def batch_again(specs: Path, out: Path, profile: str, backend: list[str], engine) -> list[str]:
    """The command that finishes this batch (``--resume``, with its profile and engine)."""
    again = ["refine", "batch", str(specs), "--out", str(out), "--resume"]
    if profile != DEFAULT_PROFILE:
        again += ["--profile", profile]
    for b in backend:
        again += ["--backend", b]
    return again + engine.flags()


batch_cmd = with_engine(batch_cmd, 1, "Runs at the same time.")


def report_cmd(
    directory: Path = typer.Argument(
        ..., help="A run directory, a batch directory or a tune's output folder."
    ),
    out: Path = typer.Option(
        None,
        "--out",
        help="The HTML file (default DIRECTORY/report.html; a tune's DIRECTORY/loss.html).",
    ),
) -> None:
    """Write a self-contained HTML report (images inline) of a run, a batch or a tune."""

    if not directory.is_dir():
        raise UserInputError(f"{directory}: no such directory")
    try:
        path = write_report(directory, out)
    except ValueError as err:
        raise UserInputError(str(err)) from err
    typer.echo(str(path))
