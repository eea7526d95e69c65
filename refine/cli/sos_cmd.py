"""``refine sos``: build Surface-over-Semantics reference banks and analyse them."""

from __future__ import annotations

from pathlib import Path

import typer

from refine.cli.inputs import UserInputError, show
from refine.evaluate.sos import BankError
from refine.present.report.sos import write_sos_report
from refine.present.terminal import records as lines

sos_app = typer.Typer(
    help=(
        "Surface over Semantics: 'bank' generates and embeds images of cultures prompted in "
        "several languages; 'report' shows where the prompt's language outweighs the culture."
    ),
    no_args_is_help=True,
    rich_markup_mode=None,
)


@sos_app.command("report")
def report_cmd(
    bank_dir: list[Path] = typer.Argument(
        ..., help="A bank folder, or several (one per generator: their centroids pooled)."
    ),
    out: Path = typer.Option(None, "--out", help="The HTML file (default BANK_DIR/report.html)."),
    centroids: str = typer.Option(
        "pooled",
        "--centroids",
        help="pooled: from the images of every bank given (the SoS paper's Sec. 4.1); "
        "per-generator: each bank's own.",
    ),
    top: int = typer.Option(5, "--top", min=1, help="Show the images of this many pairs."),
    as_json: bool = typer.Option(False, "--json", help="Print the analysis as JSON."),
    classifiers: str = typer.Option(
        "none",
        "--classifiers",
        help="The SoS paper's caption classifiers to set beside SoS's labels: clipscore (the "
        "bank's CLIP), mclip (a multilingual CLIP, hfclip:BAAI/AltCLIP-m9), all or none.",
    ),
    caption_model: list[str] = typer.Option(
        [],
        "--caption-model",
        help="NAME=EMBEDDER: another CLIP for a classifier (mclip=hfclip:ID). Repeatable.",
    ),
    surface_cultures: Path = typer.Option(
        None,
        "--surface-cultures",
        help="A JSON file of each language's culture, in place of the bundled choice.",
    ),
) -> None:
    """SoS per (culture, language), per language, the strongly surface-led model-language
    pairs (median at or below the 25th percentile of all such pairs' medians), a heatmap
    per generator and the images of the most surface-led pairs, in one HTML file; with
    --classifiers, the paper's caption classifiers' agreement with SoS's labels."""
    from refine.evaluate.sos_captions import parse_caption_models, parse_classifiers

    try:
        names = parse_classifiers(classifiers)
        models = parse_caption_models(caption_model)
    except ValueError as err:
        raise UserInputError(f"--classifiers/--caption-model: {err}") from err
    if centroids not in ("pooled", "per-generator"):
        raise UserInputError(f"--centroids: pooled or per-generator, not {centroids!r}")
    if surface_cultures is not None and not surface_cultures.is_file():
        raise UserInputError(f"--surface-cultures: no file {surface_cultures}")
    try:
        path, result = write_sos_report(
            list(bank_dir), out, top, names, models, surface_cultures, centroids
        )
    except (BankError, ValueError) as err:
        raise UserInputError(str(err)) from err
    show({**result, "report": str(path)}, lines.sos_report_lines, as_json)
