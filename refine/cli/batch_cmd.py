"""``refine batch`` and ``refine score``: many runs from a file, and scoring existing images."""

from __future__ import annotations

import shlex
from pathlib import Path

import typer

from metrics.catalog import CATALOG
from refine import settings
from refine.backends.selection import Backends
from refine.cli.inputs import (
    UserInputError,
    baseline_model_option,
    baselines_option,
    load_images,
    parsed_baseline_models,
    reference_images_option,
    tau_option,
    with_engine,
)
from refine.cli.run_cmd import parse_backends
from refine.evaluate.assess import Assessor
from refine.evaluate.baselines import parse_baselines
from refine.events import BatchStarted, EntryChanged, EntryEvent, RoundDecided
from refine.harness.engine import LOCAL, EngineOptions
from refine.harness.ray import RayEngineError
from refine.harness.tasks.batch.specs import BatchSpecError, open_batch
from refine.harness.tasks.batch.task import run_batch
from refine.loop.refiner import Refiner
from refine.numbers import MISSING, shown
from refine.present.report import write_report
from refine.present.views import scores_made_by
from refine.profiles import load_profile
from refine.records import Scores
from refine.settings import SettingsError, output_folder
from refine.usage import QuotaSpent


def _fmt(x: float | None) -> str:
    return shown(x, "6.3f", 6)


def batch_cmd(
    specs: Path = typer.Argument(..., help="A .jsonl (one JSON object a line) or .csv file."),
    out: Path = typer.Option(Path("runs"), "--out", help="Folder for the batch directory."),
    resume: bool = typer.Option(False, "--resume", help="Finish this file's existing batch."),
    profile: str = typer.Option("gemini", "--profile", help="Backend profile (name or .toml)."),
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
        print_batch_summary(batch, store.dir)
    if batch.summary["failed"]:
        raise typer.Exit(1)


def batch_again(specs: Path, out: Path, profile: str, backend: list[str], engine) -> list[str]:
    """The command that finishes this batch (``--resume``, with its profile and engine)."""
    again = ["refine", "batch", str(specs), "--out", str(out), "--resume"]
    if profile != "gemini":
        again += ["--profile", profile]
    for b in backend:
        again += ["--backend", b]
    return again + engine.flags()


def print_batch_summary(batch, directory: Path) -> None:
    typer.echo(f"\nbatch {batch.id} ({directory})")
    typer.echo(f"{'line':>4} {'status':8} {'FAITH0':>6} {'best':>6} {'edits':>5}  run / error")
    for e in batch.entries:
        where = e.run_dir or ""
        if e.status == "failed":
            where = f"{where}  {e.error}".strip()
        typer.echo(
            f"{e.line:>4} {e.status:8} {_fmt(e.initial_faith)} {_fmt(e.best_faith)} "
            f"{e.edit_rounds:>5}  {where}"
        )
    s = batch.summary

    def pct(x):
        return MISSING if x is None else f"{100 * x:.0f}%"

    gain = shown(s["mean_faith_gain"], "+.3f")
    mean_edits = shown(s["mean_editing_rounds"], ".1f")
    typer.echo(
        f"success rate {pct(s['success_rate'])} ({s['finished']}/{s['runs']}, "
        f"{s['failed']} failed); mean FAITH gain {gain} ({s['improved_runs']} run(s) improved); "
        f"regression rate {pct(s['regression_rate'])} of {s['editing_rounds']} editing "
        f"round(s); {mean_edits} editing round(s) per run"
        + (f"; {s['retries']} run(s) resumed after a worker died" if s.get("retries") else "")
    )


batch_cmd = with_engine(batch_cmd, 1, "Runs at the same time.")


def score_cmd(
    images: list[Path] = typer.Argument(..., help="Image files to score."),
    activity: str = typer.Option(..., "--activity", help="The activity the images show."),
    country: str = typer.Option(..., "--country", help="The country they should show."),
    refs_file: Path = typer.Option(None, "--refs", help="References JSON instead of the pack."),
    reference_images: Path = reference_images_option(),
    profile: str = typer.Option("gemini", "--profile", help="Backend profile (name or .toml)."),
    backend: list[str] = typer.Option([], "--backend", help="Override a role: ROLE=NAME."),
    tau: float = tau_option(),
    expectations: Path = typer.Option(
        None, "--expectations", help="An expectations file: check each image against it."
    ),
    baselines: str = baselines_option(),
    baseline_model: list[str] = baseline_model_option(),
    as_json: bool = typer.Option(False, "--json", help="Print the scores as JSON."),
) -> None:
    """Observe and score existing images (AHEaD, EXAG, FAITH) without editing them; with
    --expectations, which explicit and implicit expectations each image meets."""

    loaded = load_images(images)
    try:
        refs = settings.references(activity, country, refs_file)
        refs = settings.with_reference_images(refs, reference_images)
    except settings.SettingsError as err:
        where = f"--{err.field.replace('_', '-')}"
        if err.field == "refs" and not refs_file:
            where = "--activity/--country"
        raise UserInputError(f"{where}: {err.message}") from err
    wanted = None
    if expectations is not None:
        from refine.evaluate.expectations import load_expectations

        try:
            wanted = load_expectations(expectations)
        except ValueError as err:
            raise UserInputError(f"--expectations: {err}") from err
    try:
        backends = Backends(load_profile(profile), parse_backends(backend))
    except ValueError as err:
        raise UserInputError(f"--profile/--backend: {err}") from err
    tau, source = backends.tau(tau)
    if source != "given" and not as_json:
        typer.echo(f"tau {tau:g} ({source})", err=True)
    try:
        assessor = Assessor(
            backends,
            compare=parse_baselines(baselines),
            baseline_models=parsed_baseline_models(baseline_model),
        )
    except ValueError as err:
        raise UserInputError(f"--baselines: {err}") from err
    rows = []
    for path, image in zip(images, loaded, strict=True):
        if not as_json:
            typer.echo(f"scoring {path}", err=True)
        observed, scores, feedback, _ = assessor.assess(image, refs, tau=tau)
        row = {
            "image": str(path),
            "observed": observed,
            "scores": scores.model_dump(mode="json"),
            "feedback": feedback.model_dump(mode="json"),
        }
        if wanted is not None:
            from refine.evaluate.expectations import check_images

            with backends.using("judge") as judge:
                (checked,) = check_images([image], wanted.expectations, judge)
            row["expectations"] = checked.model_dump(mode="json")
        rows.append(row)
    if as_json:
        import json

        doc = {
            "activity": refs.activity,
            "country": refs.country,
            "references": refs.model_dump(mode="json"),
            "backends": backends.ids(),
            "images": rows,
        }
        typer.echo(json.dumps(doc, indent=2))
        return
    typer.echo(f"\n{refs.activity} - {refs.country}")
    typer.echo(f"{'FAITH':>6} {'ALIGN':>6} {'HAL':>6} {'EXAG':>6}  image")
    for row in rows:
        s = row["scores"]["values"]
        typer.echo(
            f"{_fmt(s['faith'])} {_fmt(s['align'])} {_fmt(s['hal'])} {_fmt(s['exag'])}  "
            f"{row['image']}"
        )
    for row in rows:
        fb = row["feedback"]
        typer.echo(f"\n{row['image']}:")
        for label in ("missing", "hallucinated"):
            phrases = [m["phrase"] for m in fb[label]]
            typer.echo(f"  {label}: {', '.join(phrases) or '-'}")
        seen = [x["candidate"] for x in fb["exaggerated"]]
        typer.echo(f"  stereotypes seen: {', '.join(seen) or '-'}")
        ex = row.get("expectations")
        if ex:
            for kind in ("explicit", "implicit"):
                share = ex[f"{kind}_met"]
                if share is not None:
                    missed = [
                        c["statement"] for c in ex["checks"] if c["kind"] == kind and not c["met"]
                    ]
                    typer.echo(
                        f"  {kind} expectations met: {100 * share:.0f}%"
                        + (f"; missed: {'; '.join(missed)}" if missed else "")
                    )
    typer.echo(f"\nEXAG: {scores_made_by(Scores.model_validate(rows[0]['scores']))}")
    for name in assessor.compare:
        for row in rows:
            shown = _fmt(row["scores"]["values"].get(name))
            why = ""
            if name == "tifa":  # the questions the judge did not answer yes
                no = [a["question"] for a in row["scores"]["tifa"] or () if a["p_yes"] <= 0.5]
                why = f"  (answered no: {' '.join(no)})" if no else ""
            typer.echo(f"{CATALOG[name].label} {shown}  {row['image']}{why}")


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
