"""``refine export``: refinement runs as training data."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import typer

from refine.cli.inputs import PUBLIC_HELP, UserInputError, checked_push, push_to_hub_option
from refine.settings import split_list
from refine.train.export import FORMATS, export

CUT_OFF = ".export-incomplete"  # in --out while an export is being written


def export_cmd(
    runs: list[Path] = typer.Argument(..., help="Run or batch directories (or folders of them)."),
    fmt: str = typer.Option(
        ..., "--format", help="imagefolder, pairs, edits, dpo, judge-dpo or judge-kto."
    ),
    out: Path = typer.Option(..., "--out", help="The dataset folder to write."),
    min_margin: float = typer.Option(
        0.02,
        "--min-margin",
        min=0.0,
        help="pairs, dpo, judge-dpo: least FAITH difference of a pair (closer: a tie, left out).",
    ),
    max_drift: float = typer.Option(
        0.5,
        "--max-drift",
        min=0.0,
        help="pairs, dpo, judge-dpo: largest drift between a pair's images.",
    ),
    holdout: str = typer.Option(
        None,
        "--holdout",
        help='pairs, dpo, judge-*: activities held out for testing, e.g. "wedding".',
    ),
    include_initial: bool = typer.Option(
        False, "--include-initial", help="imagefolder: round 0's images too."
    ),
    push_to_hub: str = push_to_hub_option("the dataset"),
    public: bool = typer.Option(False, "--public", help=PUBLIC_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print the counts as JSON."),
) -> None:
    """Export refinement runs as a dataset: accepted images with metadata (imagefolder),
    preference pairs for one prompt (pairs, for refine tune; dpo, Pick-a-Pic's columns for
    diffusers' Diffusion-DPO example), (input, instruction, edited) triplets (edits, for
    InstructPix2Pix training), or the loop's judgements for distilling a judge with TRL
    (judge-dpo, judge-kto). Says what it took and why it left the rest out."""

    if fmt not in FORMATS:
        raise UserInputError(f"--format: {fmt!r} is not one of {', '.join(FORMATS)}")
    if out.exists() and not out.is_dir():
        raise UserInputError(f"--out: {out} is a file; give a new folder")
    # an export cut off before its end (a full disk, a kill) leaves its mark: the same
    # command writes it again there, what it left removed first (all of it was its own)
    cut_off = out / CUT_OFF
    if out.exists() and any(out.iterdir()) and not cut_off.is_file():
        raise UserInputError(f"--out: {out} is not empty; give a new folder")
    checked_push(push_to_hub, public)  # before any work: a bad token said now
    from refine.io.store import RunLocked, held

    try:
        with held(out):  # one export a folder: another process's is refused
            for left in out.iterdir():
                if left.name in (".lock", CUT_OFF):
                    continue
                if left.is_dir() and not left.is_symlink():
                    shutil.rmtree(left)
                else:
                    left.unlink()
            cut_off.write_text("an export began here and has not ended\n")
            try:
                result = export(
                    runs, out, fmt, min_margin, max_drift, split_list(holdout), include_initial
                )
            except ValueError as err:
                raise UserInputError(f"RUNS: {err}") from err
            cut_off.unlink(missing_ok=True)
    except RunLocked as err:
        raise UserInputError(f"--out: {err}") from err
    doc = result.to_dict()
    if push_to_hub:
        from refine.train.hub import push

        message = f"refine export --format {fmt}: {result.taken} item(s)"
        doc["pushed"] = push(out, push_to_hub, "dataset", message, public)
    if as_json:
        typer.echo(json.dumps(doc, indent=2))
        return
    for line in result.lines():
        typer.echo(line)
    if push_to_hub:
        typer.echo(f"pushed to the Hub: {doc['pushed']}")
