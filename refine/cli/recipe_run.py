"""``refine bench --recipe NAME|FILE``: a paper's protocol with the paper's settings (the
recipes: :mod:`refine.harness.recipes`), written as a bench and as the paper's table
(CSV, LaTeX, HTML: :mod:`refine.present.report.recipe`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from refine.cli.inputs import UserInputError, parse_backends
from refine.harness.recipes import Recipe, load_recipe
from refine.present.terminal.records import recipe_table_lines
from refine.records import DEFAULT_PROFILE


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


def dry_run(plan: Any, recipe: Recipe, echo: Callable[[str], None]) -> None:
    """Say what the recipe's bench makes and calls, making nothing."""
    from refine.harness.recipe_run import recipe_estimate
    from refine.profiles import load_profile

    try:
        profile = load_profile(plan.profile)
    except ValueError as err:
        raise UserInputError(f"--profile: {err}") from err
    est = recipe_estimate(recipe, plan, profile)
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
    for line in recipe_table_lines(table):
        echo(line)
    for path in files:
        echo(f"written: {path}")
    return table


def run_dataset_recipe(recipe: Recipe, given: dict[str, Any], echo: Callable[[str], None]) -> Any:
    """A recipe on a dataset's own images and ratings (:mod:`refine.harness.recipe_dataset`),
    its table written and printed."""
    from refine.evaluate.baselines import parse_baselines
    from refine.harness.recipe_dataset import score_dataset, select_dataset
    from refine.present.report.recipe import write_recipe_table

    backends = parse_backends(given["backend"])
    try:
        baselines = None if given["baselines"] is None else parse_baselines(given["baselines"])
    except ValueError as err:
        raise UserInputError(f"--baselines: {err}") from err
    try:
        chosen = select_dataset(
            recipe, given["limit"], given["ratings"], baselines, given["generator"]
        )
        if given["dry_run"]:
            for line in chosen.lines():
                echo(line)
            return None
        table = score_dataset(
            chosen, given["out"], given["profile"] or recipe.select.profile or DEFAULT_PROFILE,
            backends, given["tau"],
            given["baseline_model"], echo,
        )  # fmt: skip
    except ValueError as err:
        raise UserInputError(str(err)) from err
    for line in recipe_table_lines(table):
        echo(line)
    for path in [Path(given["out"]) / "scores.jsonl", *write_recipe_table(given["out"], table)]:
        echo(f"written: {path}")
    return table
