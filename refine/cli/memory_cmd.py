"""``refine memory show | export | import``: the fixes ``--memory`` remembers, per profile
(refine.loop.memory): looked at, shared as a file, and taken from a teammate's file."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from refine.cli.inputs import UserInputError
from refine.io.inputs import InputError
from refine.loop.memory import FixStore, read_shared, store_path
from refine.loop.tracking import folded
from refine.records import DEFAULT_PROFILE

memory_app = typer.Typer(
    help="The fixes --memory remembers: what accepted rounds fixed, per profile.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
PROFILE = typer.Option(DEFAULT_PROFILE, "--profile", help="Whose store (one per profile).")


def _store(profile: str) -> FixStore:
    """The profile's store; a profile that is neither bundled nor a file is one line (its
    store would be an empty file of a name no run writes)."""
    from refine.assets import bundled_or_file

    try:
        bundled_or_file(profile, "profile")
    except ValueError as err:
        raise UserInputError(f"--profile: {err}") from err
    return FixStore(store_path(profile))


@memory_app.command("show")
def show_cmd(
    profile: str = PROFILE,
    country: str = typer.Option(None, "--country", help="Only this country's fixes."),
    activity: str = typer.Option(None, "--activity", help="Only this activity's fixes."),
    as_json: bool = typer.Option(False, "--json", help="Print the entries as JSON."),
) -> None:
    """The remembered fixes, best FAITH gain first: what each fixed or removed, and the
    instruction that did it."""
    store = _store(profile)
    try:
        fixes = store.entries()
    except InputError as err:
        raise UserInputError(str(err)) from err
    if country:
        fixes = [f for f in fixes if folded(f.country) == folded(country)]
    if activity:
        fixes = [f for f in fixes if folded(f.activity) == folded(activity)]
    fixes.sort(key=lambda f: -(f.faith_gain if f.faith_gain is not None else float("-inf")))
    if as_json:
        typer.echo(json.dumps([f.model_dump(mode="json") for f in fixes], indent=2))
        return
    typer.echo(f"{store.path}: {len(fixes)} fix(es)")
    for f in fixes:
        gain = "-" if f.faith_gain is None else f"{f.faith_gain:+.3f}"
        words = " ".join(f.instruction.split())
        typer.echo(
            f"  {f.country} / {f.activity}: {f.kind} {f.dimension}: {f.descriptor} "
            f"(FAITH {gain}, {f.editor or 'editor not named'}, run {f.run} round {f.round})"
        )
        typer.echo(f"    {words[:200]}{'...' if len(words) > 200 else ''}")


@memory_app.command("export")
def export_cmd(
    dest: Path = typer.Argument(..., help="The file to write (JSON lines)."),
    profile: str = PROFILE,
) -> None:
    """The store as one JSON-lines file to share: words and figures only, no image."""
    if dest.suffix.lower() not in (".jsonl", ".json"):
        raise UserInputError(f"DEST: {dest}: an exported store ends in .jsonl")
    try:
        n = _store(profile).export(dest)
    except InputError as err:
        raise UserInputError(str(err)) from err
    typer.echo(f"{n} fix(es) written to {dest}")


@memory_app.command("import")
def import_cmd(
    source: Path = typer.Argument(..., help="An exported store (JSON lines)."),
    profile: str = PROFILE,
) -> None:
    """Add a shared store's fixes to this profile's; the ones it holds already are left
    out. Every line is checked first: a file with one bad line adds nothing."""
    try:
        fixes = read_shared(source)
        n = _store(profile).add(fixes)
    except InputError as err:
        raise UserInputError(str(err)) from err
    typer.echo(f"{n} new fix(es) of {len(fixes)} added to {_store(profile).path}")
