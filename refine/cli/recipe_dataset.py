"""``refine bench --recipe`` of a recipe on a dataset's own images and ratings
(``select.dataset``): CulturalFrames Fig. 6 on CulturalFrames' 3,637 images and their
ratings, fetched by ``refine data fetch culturalframes``. Nothing is generated: each image
is scored by the recipe's baselines for its own prompt (:mod:`refine.human.dataset_scores`),
and the table sets them against the dataset's ratings (``--ratings`` for others)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from refine.cli.inputs import UserInputError
from refine.harness.recipes import Recipe


def run_dataset_recipe(recipe: Recipe, given: dict[str, Any], echo: Callable[[str], None]) -> Any:
    from refine.evaluate.culturalframes_data import FOLDER, country_name
    from refine.evaluate.reference_source import data_dir

    s = recipe.select
    if given["generator"]:
        raise UserInputError(
            f"--generator: recipe {recipe.name} scores the {s.dataset} dataset's own images, "
            "which are drawn already; leave out --generator"
        )
    folder = data_dir() / FOLDER
    if not (folder / "prompts.jsonl").is_file():
        raise UserInputError(
            f"recipe {recipe.name} scores CulturalFrames' own images and ratings: fetch them "
            f"first with `refine data fetch culturalframes` (about 6 GB; none in {folder})"
        )
    from refine.human.dataset_scores import read_prompts

    try:
        rows = read_prompts(folder)
    except ValueError as err:
        raise UserInputError(str(err)) from err
    wanted = {country_name(c).lower() for c in s.countries}
    rows = [r for r in rows if not wanted or r["country"].lower() in wanted]
    if s.generators:  # the dataset's models the recipe keeps (its own names)
        rows = [r for r in rows if r["model"] in s.generators]
    if given["limit"]:  # the first K images of each country
        taken: dict[str, int] = {}
        kept = []
        for r in rows:
            taken[r["country"]] = taken.get(r["country"], 0) + 1
            if taken[r["country"]] <= given["limit"]:
                kept.append(r)
        rows = kept
    ratings = Path(given["ratings"] or folder / "ratings.jsonl")
    baselines = list(s.baselines if given["baselines"] is None else _parsed(given["baselines"]))
    countries = sorted({r["country"] for r in rows})
    if given["dry_run"]:
        echo(f"recipe {recipe.name} ({recipe.source}): nothing is scored")
        echo(
            f"{len(rows)} images of {len(countries)} countries ({', '.join(countries)}) from "
            f"{folder}, scored by {', '.join(baselines) or 'no baseline'} for their own "
            f"prompts; ratings: {ratings}"
        )
        return None
    if not rows:
        raise UserInputError(f"recipe {recipe.name}: no image of the dataset is selected")
    return _score_and_tabulate(recipe, given, rows, folder, ratings, baselines, echo)


def _score_and_tabulate(
    recipe: Recipe,
    given: dict[str, Any],
    rows: list[dict[str, Any]],
    folder: Path,
    ratings: Path,
    baselines: list[str],
    echo: Callable[[str], None],
) -> Any:
    from refine.backends.selection import Backends
    from refine.cli.recipe_run import terminal
    from refine.cli.run_cmd import parse_backends
    from refine.evaluate.baseline_models import parse_baseline_models
    from refine.evaluate.baselines import needs_llm
    from refine.harness.recipe_tables import agreement_table
    from refine.human.dataset_scores import SCORES, score_images, stored
    from refine.human.ratings import load_ratings
    from refine.present.report.recipe import write_recipe_table
    from refine.profiles import load_profile

    if not ratings.is_file():
        raise UserInputError(f"--ratings: no file {ratings}")
    try:
        rated = load_ratings(ratings)
    except ValueError as err:
        raise UserInputError(f"--ratings: {err}") from err
    out = Path(given["out"])
    out.mkdir(parents=True, exist_ok=True)
    try:
        backends = Backends(load_profile(given["profile"]), parse_backends(given["backend"]))
        tau, _ = backends.tau(given["tau"])
        backends.preflight(["judge", "image_embedder"] + (["llm"] if needs_llm(baselines) else []))
        models = parse_baseline_models(given["baseline_model"])
    except ValueError as err:
        raise UserInputError(f"--profile/--backend: {err}") from err
    done = score_images(rows, folder, out, backends, baselines, tau, models, echo)
    table = agreement_table(recipe, rated, stored(done.rows, folder))
    lacking = done.with_references < len(done.rows)
    if lacking and any(m.metric not in baselines for m in recipe.table.metrics):
        table.missing.append(
            f"AHEaD's metrics (FAITH, ALIGN, ...): {done.with_references} of {len(done.rows)} "
            "images have references for their prompt; build them with `refine refs build "
            "PROMPT --country C` and run again (the rest of the images are kept)"
        )
    for line in terminal(table):
        echo(line)
    for path in [out / SCORES, *write_recipe_table(out, table)]:
        echo(f"written: {path}")
    return table


def _parsed(text: str) -> tuple[str, ...]:
    from refine.evaluate.baselines import parse_baselines

    try:
        return parse_baselines(text)
    except ValueError as err:
        raise UserInputError(f"--baselines: {err}") from err
