"""``refine agree``: which metric agrees with human ratings of the same images."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from metrics.catalog import agree_metrics
from refine.cli.inputs import UserInputError
from refine.cli.run_cmd import parse_backends
from refine.harness.tasks.score.missing import score_missing
from refine.human.agree import DEFAULT_METRICS, agreement
from refine.human.ratings import load_ratings
from refine.human.stored import stored_metrics
from refine.io.files import atomic_write_text
from refine.numbers import shown
from refine.present.report.agreement import render_agreement
from refine.settings import split_list

SHOWN_RATERS = 12  # raters named on the terminal (CulturalFrames has about 10,400)


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
    profile: str = typer.Option("gemini", "--profile", help="With --compute: the scorer."),
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
    _terminal(result, doc)
    _extras(result)
    typer.echo(f"written: {folder / 'agree.json'}, {folder / 'agree.html'}")
    for path in written:
        typer.echo(f"written: {path}")


def _terminal(result, doc: dict) -> None:
    """The raters, the alphas, the correlation table and the rankings, on the terminal."""
    named = ", ".join(result.raters[:SHOWN_RATERS])
    more = len(result.raters) - SHOWN_RATERS
    typer.echo(
        f"{result.images} images, {len(result.raters)} raters: {named}"
        + (f" and {more} more (agree.json names them)" if more > 0 else "")
    )
    for note in result.notes():
        typer.echo(f"  note: {note}")
    for q, a in result.alpha.items():
        alphas = " ".join(
            f"{level} {shown(v)}"
            for level, v in (("interval", a), ("ordinal", result.alpha_ordinal.get(q)))
        )
        typer.echo(f"  Krippendorff's alpha ({q}): {alphas}")
    if result.table:
        typer.echo(
            f"{'metric':13} {'question':17} {'n':>4} {'Spearman':>9} {'Kendall':>8} {'Pearson':>8}"
        )
    for m, by_q in result.table.items():
        for q, row in by_q.items():
            figs = " ".join(shown(row[s], "+.3f", 8) for s in ("spearman", "kendall", "pearson"))
            typer.echo(f"{m:13} {q:17} {row['n']:>4} {figs}")
    for q, ranked in doc["ranking"].items():
        typer.echo(f"ranked by agreement with people ({q}, Spearman in the agreeing direction):")
        for e in ranked:
            iv = e["interval"]
            span = f" [{iv[0]:+.3f}, {iv[1]:+.3f}]" if iv else ""
            typer.echo(
                f"  {e['rank']:>2}. {e['metric']:24} {shown(e['agreement'], '+.3f', 7)}{span}"
            )


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


def _interval(iv) -> str:
    return f" [{iv[0]:+.3f}, {iv[1]:+.3f}]" if iv else ""


def _extras(result) -> None:
    """The human-human ceiling, the paired differences, Fleiss' kappa and the groups."""
    for q, c in result.ceiling.items():
        over = (
            f"over {len(c['raters'])} raters"
            if c["raters"]
            else f"pooled over {c['pooled']['n']} ratings (no rater rated two images)"
        )
        typer.echo(
            f"human-human ceiling ({q}, each rater against the others' mean): Spearman "
            f"{shown(c['spearman'], '+.3f')} {over}"
        )
    for q, k in result.kappa.items():
        typer.echo(
            f"Cohen's weighted kappa ({q}), mean over rater pairs: {shown(k['mean'], '.3f')}"
        )
    for d in result.differences:
        if d["difference"] is not None:
            typer.echo(
                f"{d['metric']} - {d['versus']} ({d['question']}, Spearman, {d['n']} images): "
                f"{d['difference']:+.3f}{_interval(d['interval'])}"
            )
    for q, f in result.fleiss.items():
        tendency = ", ".join(f"{k} {v}" for k, v in sorted(f.get("tendency", {}).items()))
        typer.echo(
            f"Fleiss' kappa ({q}, {f['images']} images): {shown(f['kappa'], '.3f')}"
            + (f"; the majority's tendency: {tendency}" if tendency else "")
        )
    for by, groups in result.by.items():
        typer.echo(f"by {by}:")
        for key, g in groups.items():
            alpha = " ".join(f"{q} {shown(a, '.3f')}" for q, a in g["alpha"].items())
            if "alpha_pooled" in g:  # a region: its countries' mean, then pooled
                pooled = " ".join(f"{q} {shown(a, '.3f')}" for q, a in g["alpha_pooled"].items())
                alpha = f"{alpha} (mean of its countries'; pooled {pooled})"
            human = " ".join(
                f"{q} {shown(c['spearman'], '+.3f')}" for q, c in g.get("ceiling", {}).items()
            )
            typer.echo(
                f"  {key}: {g['images']} images, alpha {alpha or '-'}"
                + (f", human-human {human}" if human else "")
            )
            scores = " ".join(
                f"{q} {s['mean']:.2f} ({shown(s['sd'], '.2f')})"
                for q, s in g.get("scores", {}).items()
            )
            if scores:
                typer.echo(f"    answers, mean (SD): {scores}")
            for m, by_q in g["metrics"].items():
                for q, row in by_q.items():
                    typer.echo(
                        f"    {m:13} {q:17} n {row['n']:>3} Spearman "
                        f"{shown(row['spearman'], '+.3f')}{_interval(row['spearman_interval'])}"
                    )
            for note in g["notes"]:
                typer.echo(f"    note: {note}")
