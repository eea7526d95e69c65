"""``refine bench``: compare generators on a slice of the CULTIVate catalog. The command is
made from the bench's TaskSpec and Plan (:func:`refine.cli.task_cmd.task_command`), with
``--recipe`` and what goes with it as options of its own: a recipe runs its task (a bench,
a concepts run, CAIRE's universal set, SoS banks) and writes the paper's table."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import typer
from pydantic import ValidationError

from refine.cli.inputs import UserInputError, parse_backends, parsed_baseline_models
from refine.cli.task_cmd import extra_option, run_plan, task_command
from refine.harness import registry
from refine.harness.plan import refusal
from refine.harness.recipe_run import planned, proposer_packs, recipe_shortfall
from refine.harness.recipes import bundled as bundled_recipes

# the fields a recipe chooses itself, refused beside --recipe
SELECTION = ("countries", "activity", "category", "sample", "images_per_prompt", "expectations")


RECIPE_OPTIONS = [
    extra_option(
        "recipe", None, "--recipe",
        "Run a paper's protocol and write its table (CSV, LaTeX, HTML) beside the bench: "
        f"{', '.join(bundled_recipes())}, or a recipe file (.toml).", str | None,
    ),
    extra_option(
        "dry_run", False, "--dry-run",
        "With --recipe: print the images and model calls it would make, and the profile's "
        "cost estimate, making none.", bool,
    ),
    extra_option(
        "ratings", None, "--ratings",
        "With a recipe whose table is agreement with people: the ratings file (CSV or "
        "JSONL, or the Rate view's).", Path | None,
    ),
    extra_option(
        "concepts", None, "--concepts",
        "With a concepts or CAIRE recipe: the concept prompts' file (refine concepts runs "
        "one without a recipe).", Path | None,
    ),
    extra_option(
        "cube_quality", None, "--cube-quality",
        "With a concepts recipe: the images' quality, hpsv2 (as CUBE rates it), judge, or "
        "auto (HPS v2 where its checkpoint loads, else the judge's, said; the default).",
        str | None,
    ),
]  # fmt: skip


def _intercept(given: dict[str, Any], extras: dict[str, Any], **run: Any) -> bool:
    """``--recipe``: the recipe's task and table, done here (True); without it, the options
    that go with it are refused and the bench runs from its Plan (False)."""
    if extras["recipe"] is None:
        for flag, name in (("--dry-run", "dry_run"), ("--ratings", "ratings"),
                           ("--concepts", "concepts"),
                           ("--cube-quality", "cube_quality")):  # fmt: skip
            if extras[name]:
                raise UserInputError(f"{flag} goes with --recipe NAME")
        if given["baseline_models"]:
            parsed_baseline_models(given["baseline_models"])  # said as the option's
        return False
    selection = {k: given[k] for k in SELECTION}
    _recipe(extras["recipe"], {
        "selection": selection, "generator": given["generators"] or [],
        "profile": given["profile"], "backend": given["backends"] or [],
        "tau": given["tau"], "baselines": given["baselines"],
        "baseline_model": given["baseline_models"] or [], **extras, **run,
        "limit": run["engine"].limit, "engine": replace(run["engine"], limit=None),
    })  # fmt: skip
    return True


def _recipe(name: str, given: dict) -> None:
    """``--recipe``: the recipe's task (a bench, a concepts run, CAIRE's universal set, SoS
    banks), then its table."""
    from refine.cli.recipe_run import dry_run, read_recipe, write_table

    recipe = read_recipe(name)
    chosen = [k for k, v in given["selection"].items() if v]
    if chosen:
        from refine.harness.tasks.bench.plan import BenchPlan
        from refine.settings import flag_of

        names = ", ".join(flag_of(k, BenchPlan) for k in chosen)
        raise UserInputError(
            f"--recipe {recipe.name} names its prompts, images and settings; leave out "
            f"{names}, or copy the recipe (assets/recipes/{recipe.name}.toml) and change it"
        )
    if given["ratings"] is not None:
        if not recipe.needs_ratings:
            raise UserInputError(
                f"--ratings: recipe {recipe.name}'s table is made from the metrics alone"
            )
        if not given["ratings"].is_file():
            raise UserInputError(f"--ratings: no file {given['ratings']}")
    out, as_json = given["out"], given["as_json"]

    def echo(line: str) -> None:
        typer.echo(line, err=as_json)

    if recipe.select.dataset:
        from refine.cli.recipe_run import run_dataset_recipe

        run_dataset_recipe(recipe, given, echo)
        return
    plan, engine = _recipe_plan(recipe, given)
    if given["dry_run"]:
        if (estimate := registry.task(recipe.task).estimator()) is not None:
            from refine.cli.recipe_run import profile_of

            echo(f"recipe {recipe.name} ({recipe.source}): nothing is made")
            for line in estimate(plan, profile_of(plan.profile)).lines():
                echo(line)
        else:
            dry_run(plan, recipe, echo)
        return
    if recipe.table.settings == "proposers":  # refused before any image is made
        try:
            proposer_packs(recipe)
        except ValueError as err:
            raise UserInputError(str(err)) from err
    if said := recipe_shortfall(recipe):  # a smaller plan than the paper's, said first
        echo(f"recipe {recipe.name}: {said}")
    results = run_plan(registry.task(recipe.task), plan, out, as_json, engine, _asked(given))
    write_table(recipe, results, out, given["ratings"], echo)


def _asked(given: dict) -> dict[str, Any]:
    """What the command line asks of a recipe's plan, by the plan's names (None or empty:
    not asked; refine.harness.plan.ASKED)."""
    parsed_baseline_models(given["baseline_model"])  # a bad one said as the option's
    chosen = None if given["baselines"] is None else _baselines(given["baselines"])
    return {  # an option not given is None (an empty one is asked: --baselines none)
        "generators": list(given["generator"]) or None,
        "limit": given["limit"],
        "profile": given["profile"],
        "backends": parse_backends(given["backend"]) or None,
        "baseline_models": tuple(given["baseline_model"]) or None,
        "tau": given["tau"],
        "baselines": chosen,
        "concepts": given["concepts"],
        "quality": given["cube_quality"],
    }


def _recipe_plan(recipe: Any, given: dict) -> tuple[Any, Any]:
    """The plan a recipe runs and its engine options, with the command line's options in
    place of the recipe's where given; one line where one cannot be."""
    try:
        return planned(recipe, given["engine"], **_asked(given))
    except ValidationError as err:
        plan = registry.task(recipe.task).plan_class()
        raise UserInputError(f"--recipe {recipe.name}: {refusal(err, plan)}") from err
    except ValueError as err:
        raise UserInputError(f"--recipe {recipe.name}: {err}") from err


def _baselines(text: str) -> tuple[str, ...]:
    from refine.evaluate.baselines import parse_baselines

    try:
        return parse_baselines(text)
    except ValueError as err:
        raise UserInputError(f"--baselines: {err}") from err


bench_cmd = task_command(
    registry.task("bench"),
    RECIPE_OPTIONS,
    _intercept,
    "Prompts at a time (API models; local ones take turns).",
    batch=True,
)
