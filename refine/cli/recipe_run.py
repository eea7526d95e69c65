"""``refine bench --recipe NAME|FILE``: a paper's protocol with the paper's settings (the
recipes: :mod:`refine.harness.recipes`), written as a bench and as the paper's table
(CSV, LaTeX, HTML: :mod:`refine.present.report.recipe`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from refine.cli.inputs import UserInputError
from refine.harness.recipes import Recipe, load_recipe


def read_recipe(name: str) -> Recipe:
    try:
        return load_recipe(name)
    except ValueError as err:
        raise UserInputError(f"--recipe: {err}") from err


def profile_of(name: str) -> Any:
    """The profile a recipe's dry run prices with; a bad name is one line."""
    from refine.profiles import load_profile

    try:
        return load_profile(name)
    except ValueError as err:
        raise UserInputError(f"--profile: {err}") from err


def bench_plan(recipe: Recipe, generators: list[str], limit: int | None, **given: Any) -> Any:
    """The bench plan of a recipe (:func:`refine.harness.recipe_run.bench_plan`), or the
    one line saying what cannot be; ``given`` holds the command line's profile, backends,
    tau, baselines and baseline models."""
    from pydantic import ValidationError

    from refine.harness.plan import refusal
    from refine.harness.recipe_run import bench_plan
    from refine.harness.tasks.bench.plan import BenchPlan

    try:
        return bench_plan(recipe, generators, limit, **given)
    except ValidationError as err:
        raise UserInputError(f"--recipe {recipe.name}: {refusal(err, BenchPlan)}") from err
    except ValueError as err:
        raise UserInputError(f"--recipe {recipe.name}: {err}") from err


def dry_run(plan: Any, recipe: Recipe, echo: Callable[[str], None]) -> None:
    """Say what the recipe's bench makes and calls, making nothing."""
    from refine.harness.estimate import bench_estimate
    from refine.profiles import load_profile

    try:
        profile = load_profile(plan.profile)
    except ValueError as err:
        raise UserInputError(f"--profile: {err}") from err
    est = bench_estimate(plan, profile)
    if recipe.table.settings == "tau-quantiles":  # the photos, observed once each
        from metrics.descriptors import DIMENSIONS
        from refine.evaluate.reference_source import ReferenceSource

        source = ReferenceSource.default()
        files = {f for a, c in plan.prompts for f in source.find(a, c).pack.reference_images}
        looks = len(files) * (len(DIMENSIONS) if plan.observer_prompts == "ahead" else 1)
        est.calls["observer"] += looks
        est.sampled["observer"] += looks
        est.notes.append(
            f"the observer's count holds the {len(files)} real photos of the tau quartiles"
            + ("" if files else " (none yet: refine data fetch ahead --photos)")
        )
    for b in recipe.select.backbones:  # each looks at the bench's images again
        from metrics.descriptors import DIMENSIONS
        from refine.harness.estimate import ONE_READING

        prompts = b.observer_prompts or plan.observer_prompts
        looks = est.images * (len(DIMENSIONS) if prompts == "ahead" else 1)
        est.calls["observer"] += looks
        est.sampled["observer"] += looks
        rejudged = [r for r in b.rejudge if r in plan.baselines and r in ONE_READING]
        if b.judge and rejudged:
            est.calls["judge"] += est.images * len(rejudged)
            est.sampled["judge"] += est.images * len(rejudged) * est.samples
        est.notes.append(
            f"backbone {b.label}: {looks} observations of the bench's images by {b.observer}"
            + (
                f" and {', '.join(rejudged)} read again by {b.judge}"
                if b.judge and rejudged
                else ""
            )
        )
    echo(f"recipe {recipe.name} ({recipe.source}), profile {profile.name}: nothing is made")
    for line in est.lines():
        echo(line)
    if recipe.needs_ratings:
        echo(
            f"its table needs people's ratings ({recipe.table.protocol} protocol, question "
            f"{recipe.table.question!r}): --ratings FILE"
        )


def write_table(
    recipe: Recipe,
    results: Any,
    out: Path,
    ratings: Path | None,
    echo: Callable[[str], None],
) -> Any:
    """The recipe's table from the task's results (and the ratings), written beside them
    with the other backbones' pages; returns it."""
    from refine.harness.recipe_run import recipe_table
    from refine.present.report.bench import write_bench_page
    from refine.present.report.recipe import write_recipe_table

    try:
        table, others = recipe_table(recipe, results, out, ratings, echo)
    except ValueError as err:
        raise UserInputError(str(err)) from err
    for _, folder, done in others:
        write_bench_page(folder, done)
    files = write_recipe_table(out, table)
    for line in terminal(table):
        echo(line)
    for path in files:
        echo(f"written: {path}")
    return table


def terminal(table: Any) -> list[str]:
    """The table as text: a line per row, each cell ``value (paper figure)``."""
    digits = table.recipe.table.digits
    heads = [h for _, h, _, _ in table.columns]
    width = max([len(r.label) for r in table.rows] + [8])
    lines = [f"{table.recipe.name}: {table.caption}"]
    lines.append(" " * width + " " + " ".join(f"{h:>16}" for h in heads))
    for row in table.rows:
        cells = []
        for key, _, _, _ in table.columns:
            c = table.cells.get((row.label, key))
            text = "-" if c is None or c.value is None else f"{c.value:.{digits}f}"
            if c is not None and c.paper is not None:
                text += f" ({c.paper:.{digits}f})"
            cells.append(f"{text:>16}")
        lines.append(f"{row.label:<{width}} " + " ".join(cells))
    if table.paper_figures():
        lines.append("(the paper's figure in parentheses)")
    for n in table.notes:
        lines.append(f"differs: {n}")
    for m in table.missing:
        lines.append(f"missing: {m}")
    return lines
