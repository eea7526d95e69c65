"""``refine agree``: which metric agrees with human ratings of the same images."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from metrics.catalog import agree_metrics
from refine.cli.inputs import UserInputError, parse_backends
from refine.harness.tasks.score.missing import score_missing
from refine.human.agree import DEFAULT_METRICS, agreement
from refine.human.ratings import load_ratings
from refine.human.stored import stored_metrics
from refine.io.files import atomic_write_text
from refine.present.report.agreement import render_agreement
from refine.present.terminal import agreement_lines
from refine.records import DEFAULT_PROFILE
from refine.settings import split_list


def agree_cmd(
    ratings: Path = typer.Option(..., "--ratings", help="A ratings file (CSV or JSONL)."),
    source: list[Path] = typer.Option(
        [], "--source", help="A bench or run folder (or a folder of them) holding metrics."
    ),
    metrics: str = typer.Option(
        ",".join(DEFAULT_METRICS),
        "--metrics",
        help=f"Metrics to compare with the ratings, of: {', '.join(agree_metrics())}; none: "
        "the raters' own agreement alone.",
    ),
    compute: bool = typer.Option(
        False, "--compute", help="Score rated images that have no stored metrics."
    ),
    activity: str = typer.Option(None, "--activity", help="With --compute: what images show."),
    country: str = typer.Option(None, "--country", help="With --compute: where."),
    profile: str = typer.Option(DEFAULT_PROFILE, "--profile", help="With --compute: the scorer."),
    backend: list[str] = typer.Option([], "--backend", help="Override a role: ROLE=NAME."),
    seed: int = typer.Option(0, "--seed", help="Seed of the bootstrap intervals."),
    out: Path = typer.Option(None, "--out", help="Folder for agree.json and agree.html."),
    as_json: bool = typer.Option(False, "--json", help="Print agree.json."),
    by: list[str] = typer.Option(
        [],
        "--by",
        help="Also every correlation and alpha per group: country, region (Global North or "
        "South), generator, category or rater-country. Repeatable.",
    ),
    regions_file: Path = typer.Option(
        None, "--regions", help="A JSON table of country -> region in place of the bundled one."
    ),
    figures: str = typer.Option(
        None,
        "--figures",
        help="Also write the charts as files (png,svg,pdf): correlations per group, the "
        "metric-metric matrix, the scatters.",
    ),
    latex: bool = typer.Option(
        False, "--latex", help="Also write booktabs tables (metrics by questions and groups)."
    ),
    exclude_flagged: bool = typer.Option(
        False,
        "--exclude-flagged",
        help="Leave out raters flagged by the study's attention checks and repeated items.",
    ),
) -> None:
    """Join human ratings (the app's Rate view, or a file in the documented columns) to the
    metrics stored for the same images and report per metric Spearman, Kendall tau-b and
    Pearson correlations with each question (95% bootstrap intervals), Krippendorff's alpha
    between raters as the ceiling, and a scatter per metric (agree.json, agree.html)."""

    from refine.present.figures import parse_formats

    try:
        formats = parse_formats(figures) if figures is not None else ()
    except ValueError as err:
        raise UserInputError(str(err)) from err
    raters_only = metrics.strip().lower() == "none"  # the raters' own agreement alone
    wanted = [] if raters_only else split_list(metrics)
    known = agree_metrics()
    unknown = [m for m in wanted if m not in known]
    if unknown or not (wanted or raters_only):
        raise UserInputError(
            f"--metrics: unknown metric {unknown[0] if unknown else ''!r} "
            f"(metrics: {', '.join(known)})"
        )
    excluded: list[str] = []
    try:
        rated = load_ratings(ratings, exclude_flagged, excluded)
    except ValueError as err:
        raise UserInputError(f"--ratings: {err}") from err
    try:
        found = stored_metrics(source)
    except ValueError as err:
        raise UserInputError(f"--source: {err}") from err

    def progress(line: str) -> None:  # how far, and the time left, on stderr
        typer.echo(f"  {line}", err=True)

    computed = 0
    if compute:
        try:
            computed = score_missing(
                rated,
                found,
                wanted,
                (out or ratings.parent) / "scored",
                profile,
                parse_backends(backend),
                None,
                activity,
                country,
                on_progress=progress,
            )
        except ValueError as err:
            raise UserInputError(f"--compute: {err}") from err
    from refine.human.groups import by_groups, extend

    result = agreement(rated, found, wanted, seed=seed, on_progress=progress)
    result.computed = computed
    result.excluded = excluded
    extend(result, rated, seed=seed)
    if by:
        if regions_file is not None and not regions_file.is_file():
            raise UserInputError(f"--regions: no file {regions_file}")
        try:
            result.by = by_groups(rated, found, wanted, by, regions_file, seed=seed)
        except ValueError as err:
            raise UserInputError(str(err)) from err
    if not result.table and not result.fleiss and not raters_only:
        raise UserInputError(
            "--source: no rated image has any of the metrics; --source the bench or run "
            "folders the images came from, or --compute with --activity and --country"
        )
    doc = result.to_dict()
    folder = out or ratings.parent
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write_text(folder / "agree.json", json.dumps(doc, indent=1))
    atomic_write_text(folder / "agree.html", render_agreement(result))
    written = _files(result, folder, formats, latex)
    if as_json:
        typer.echo(json.dumps(doc, indent=2))
        return
    for line in agreement_lines(result, doc):
        typer.echo(line)
    typer.echo(f"written: {folder / 'agree.json'}, {folder / 'agree.html'}")
    for path in written:
        typer.echo(f"written: {path}")


def _files(result, folder: Path, formats: tuple[str, ...], latex: bool) -> list[Path]:
    """The figures (``--figures``) and LaTeX tables (``--latex``) asked for."""
    written = []
    if formats:
        from refine.present.figures import write_figures

        written += write_figures(result, folder / "figures", formats)
    if latex:
        from refine.present.latex import write_tables
        from refine.present.report.agreement_tables import agreement_tables

        written += write_tables(agreement_tables(result), folder / "tables", "agree")
    return written
