"""``refine rate``: a study's images split among raters to rate elsewhere, and joined back
(:mod:`refine.human.packs`)."""

from __future__ import annotations

from pathlib import Path

import typer

from refine.cli.inputs import UserInputError

rate_app = typer.Typer(
    help="Rating studies: pack a set for raters who rate in another copy of the app, and "
    "merge their answers back.",
    no_args_is_help=True,
    rich_markup_mode=None,
)


@rate_app.command("pack")
def pack_cmd(
    rating_set: Path = typer.Argument(..., help="The set: a run, bench, bank or image folder."),
    raters: int = typer.Option(..., "--raters", help="How many rater folders to write."),
    out: Path = typer.Option(..., "--out", help="A new folder for the rater folders."),
    protocol: str = typer.Option(
        None,
        "--protocol",
        help="quick, ahead, culturalframes, cube, caire, sos or a protocol file (default: the "
        "set's own, else quick).",
    ),
    seed: int = typer.Option(0, "--seed", help="The study's seed (a set's first only)."),
) -> None:
    """Write one folder per rater, each image given to the protocol's number of raters,
    balanced; each folder opens in the app's Rate view as a set of its own."""
    from refine.human.packs import pack
    from refine.human.study import Study

    try:
        study = Study.open(rating_set, protocol, seed)
        given = pack(study, raters, out)
    except ValueError as err:
        raise UserInputError(str(err)) from err
    for name, images in given.items():
        typer.echo(f"{out / name}: {len(images)} images")
    typer.echo(
        f"protocol {study.protocol.name}; {out / 'assignment.json'} says who has what; "
        f"join the answers with: refine rate merge {out}/rater-* --into {rating_set}"
    )


@rate_app.command("merge")
def merge_cmd(
    folders: list[Path] = typer.Argument(..., help="Rated rater folders."),
    into: Path = typer.Option(..., "--into", help="The set the folders were packed from."),
) -> None:
    """Append the folders' answers and profiles to the set, joining images by content; an
    answer that differs from the set's for the same rater and image is reported, never
    written over."""
    from refine.human.packs import merge

    try:
        done = merge(list(folders), into)
    except ValueError as err:
        raise UserInputError(str(err)) from err
    _said(done)


@rate_app.command("export")
def export_cmd(
    rating_set: Path = typer.Argument(..., help="The set: a run, bench, bank or image folder."),
    to: str = typer.Option(..., "--to", help="label-studio or argilla."),
    out: Path = typer.Option(..., "--out", help="A new folder for the tool's files."),
    protocol: str = typer.Option(
        None,
        "--protocol",
        help="quick, ahead, culturalframes, cube, caire, sos or a protocol file (default: the "
        "set's own, else quick).",
    ),
    image_url: str = typer.Option(
        None,
        "--image-url",
        help="Where the set's images are served (default: Label Studio's local files, the "
        "set's folder as the document root; Argilla: the images inside the records).",
    ),
) -> None:
    """Write the set's images and its protocol's questions in an annotation tool's formats:
    Label Studio's labelling config and tasks, or the dataset folder Argilla's from_disk
    reads, with the judge's readings as predictions (suggestions) named by model."""
    from refine.human.tools import export_study

    try:
        study, n = export_study(rating_set, to, out, protocol, image_url)
    except ValueError as err:
        raise UserInputError(str(err)) from err
    typer.echo(f"{n} images for {to} under the {study.protocol.name} protocol: {out}")
    typer.echo(f"how to load them: {out / 'README.md'}")


@rate_app.command("import")
def import_cmd(
    file: Path = typer.Argument(..., help="The tool's export (JSON)."),
    source: str = typer.Option(..., "--from", help="label-studio or argilla."),
    into: Path = typer.Option(..., "--into", help="The set the images were exported from."),
    profiles: Path = typer.Option(
        None,
        "--profiles",
        help="The raters' profiles, a JSON object rater -> profile (as the Rate view asks), "
        "where the tool keeps none.",
    ),
) -> None:
    """Append the answers in an annotation tool's export to the set, each with its rater
    and time, joining images by content; all or nothing, as rate merge: an answer that
    differs from the set's for the same rater and image is reported, never written over."""
    from refine.human.tools import import_answers

    try:
        done = import_answers(file, source, into, profiles)
    except ValueError as err:
        raise UserInputError(str(err)) from err
    _said(done)


def _said(done) -> None:
    """What a merge or an import joined; exit 1 when some answers were not joined."""
    typer.echo(
        f"{done.added} answers added, {done.already} already in the set, "
        f"{done.profiles} profiles added, {len(done.conflicts)} conflicts, "
        f"{len(done.unknown)} answers to images not in the set"
    )
    if done.left:
        typer.echo(f"  {done.left} drafts and discarded answers left out")
    for line in done.conflicts:
        typer.echo(f"  conflict: {line}")
    for line in done.unknown:
        typer.echo(f"  not in the set: {line}")
    if done.conflicts or done.unknown:
        raise typer.Exit(1)
