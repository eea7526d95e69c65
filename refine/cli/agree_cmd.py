"""``refine agree``: which metric agrees with human ratings of the same images."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from refine.cli.inputs import UserInputError, parse_backends
from refine.cli.task_cmd import extra_option, plan_command
from refine.human.agree_plan import AgreePlan
from refine.io.files import atomic_write_text

AGREE = """Join human ratings (the app's Rate view, or a file in the documented columns) to the
metrics stored for the same images and report per metric Spearman, Kendall tau-b and
Pearson correlations with each question (95% bootstrap intervals), Krippendorff's alpha
between raters as the ceiling, and a scatter per metric (agree.json, agree.html)."""


def _agree(plan: AgreePlan, as_json: bool) -> None:
    from refine.harness.tasks.score.missing import score_missing
    from refine.human.agree import agreement
    from refine.human.groups import by_groups, extend
    from refine.human.ratings import load_ratings
    from refine.human.stored import stored_metrics
    from refine.present.figures import parse_formats
    from refine.present.report.agreement import render_agreement
    from refine.present.terminal import agreement_lines

    try:
        formats = parse_formats(plan.figures) if plan.figures is not None else ()
    except ValueError as err:
        raise UserInputError(str(err)) from err
    wanted, folder, excluded = plan.wanted(), plan.folder(), []
    try:
        rated = load_ratings(plan.ratings, plan.exclude_flagged, excluded)
    except ValueError as err:
        raise UserInputError(f"--ratings: {err}") from err
    try:
        found = stored_metrics(plan.source)
    except ValueError as err:
        raise UserInputError(f"--source: {err}") from err

    def progress(line: str) -> None:  # how far, and the time left, on stderr
        typer.echo(f"  {line}", err=True)

    computed = 0
    if plan.compute:
        try:
            computed = score_missing(
                rated, found, wanted, folder / "scored", plan.profile,
                parse_backends(plan.backend), None, plan.activity, plan.country,
                on_progress=progress,
            )  # fmt: skip
        except ValueError as err:
            raise UserInputError(f"--compute: {err}") from err
    result = agreement(rated, found, wanted, seed=plan.seed, on_progress=progress)
    result.computed, result.excluded = computed, excluded
    extend(result, rated, seed=plan.seed)
    if plan.by:
        if plan.regions is not None and not plan.regions.is_file():
            raise UserInputError(f"--regions: no file {plan.regions}")
        try:
            result.by = by_groups(rated, found, wanted, plan.by, plan.regions, seed=plan.seed)
        except ValueError as err:
            raise UserInputError(str(err)) from err
    if not result.table and not result.fleiss and wanted:
        raise UserInputError(
            "--source: no rated image has any of the metrics; --source the bench or run "
            "folders the images came from, or --compute with --activity and --country"
        )
    doc = result.to_dict()
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write_text(folder / "agree.json", json.dumps(doc, indent=1))
    atomic_write_text(folder / "agree.html", render_agreement(result))
    written = _files(result, folder, formats, plan.latex)
    if as_json:
        typer.echo(json.dumps(doc, indent=2))
        return
    for line in agreement_lines(result, doc):
        typer.echo(line)
    for path in [folder / "agree.json", folder / "agree.html", *written]:
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


agree_cmd = plan_command(
    AgreePlan, _agree, AGREE, [extra_option("as_json", False, "--json", "Print agree.json.", bool)]
)
