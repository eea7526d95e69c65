"""``refine bench``: compare generators on a slice of the CULTIVate catalog."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
from pydantic import ValidationError

from metrics.catalog import HEADLINE, label
from refine.cli.inputs import (
    UserInputError,
    baseline_model_option,
    baselines_option,
    made_plan,
    parsed_baseline_models,
    tau_option,
    with_engine,
)
from refine.cli.run_cmd import parse_backends
from refine.cli.task_cmd import run_plan
from refine.harness import registry
from refine.harness.cells import CellSchemaError
from refine.harness.engine import LOCAL, EngineOptions
from refine.harness.plan import refusal
from refine.harness.ray import RayEngineError
from refine.harness.recipe_run import plan_of, proposer_packs
from refine.harness.tasks.bench.plan import BenchPlan, plan_prompts
from refine.harness.tasks.bench.task import run_bench
from refine.numbers import MISSING, shown
from refine.present.report.bench import write_bench_page
from refine.profiles import load_profile
from refine.settings import default, split_list

# --recipe and what goes with it; the options a recipe names itself
SELECTION = (
    "countries",
    "activity",
    "category",
    "sample",
    "images",
    "cube_weights",
    "expectations",
)
RECIPE = typer.Option(
    None,
    "--recipe",
    help="Run a paper's protocol and write its table (CSV, LaTeX, HTML) beside the "
    "bench: ahead-table1, ahead-table2, ahead-table4, ahead-table5, cube-table5, sos-table2, "
    "caire-table2, culturalframes-fig6, culturalframes-fig6-cultivate, or a recipe file (.toml).",
)
LIMIT = typer.Option(
    None,
    "--limit",
    min=1,
    help="With --recipe: only its first K prompts (each a cell per generator), taken "
    "in turn from its countries, for a quick look (a concepts recipe: its first K concept "
    "prompts; sos: K cultures; caire: K concepts).",
)
DRY_RUN = typer.Option(
    False,
    "--dry-run",
    help="With --recipe: print the images and model calls it would make, and the "
    "profile's cost estimate, making none.",
)
CUBE_QUALITY = typer.Option(
    "auto",
    "--cube-quality",
    help="With --concepts: the images' quality, hpsv2 (as CUBE rates it), judge, or auto "
    "(HPS v2 where its checkpoint loads, else the judge's, said).",
)
RATINGS = typer.Option(
    None,
    "--ratings",
    help="With a recipe whose table is agreement with people: the ratings file "
    "(CSV or JSONL, or the Rate view's).",
)


def bench_cmd(
    generator: list[str] = typer.Option(
        [],
        "--generator",
        help="A generator to compare (repeatable); default: the profile's. "
        "NAME+lora=PATH[@SCALE] adds a LoRA adapter to a diffusers: generator.",
    ),
    profile: str = typer.Option(
        "gemini", "--profile", help="The scorer's profile: observer, judge, embedders."
    ),
    backend: list[str] = typer.Option([], "--backend", help="Override a scorer role: ROLE=NAME."),
    countries: str = typer.Option(
        None, "--countries", help='Countries, e.g. "Iran,India" (default: all with references).'
    ),
    activity: list[str] = typer.Option(
        [], "--activity", help="An activity (repeatable; default: all with references)."
    ),
    category: list[str] = typer.Option(
        [],
        "--category",
        help="An activity category (repeatable): eating, greeting, dancing, concert, game, "
        "celebration, religious, wedding, funeral.",
    ),
    sample: int = typer.Option(
        None, "--sample", min=1, help="Draw this many prompts of each country."
    ),
    images: int = typer.Option(
        None, "--images-per-prompt", min=1, help="Seeds per prompt (2; 16 with --concepts)."
    ),
    concepts: Path = typer.Option(
        None,
        "--concepts",
        help="CUBE-style diversity: a JSONL/JSON/CSV file of concept prompts "
        "(prompt, concept, country, artifacts) instead of CULTIVate activities.",
    ),
    cube_weights: str = typer.Option(
        None,
        "--cube-weights",
        help="With --concepts: geo-tag similarity weights of continent, country, artifact "
        "(default 1,0,0).",
    ),
    seed: int = typer.Option(
        default("seed"), "--seed", help="First seed (and the sample's and intervals')."
    ),
    tau: float = tau_option(),
    out: Path = typer.Option(
        Path("bench"), "--out", help="Bench folder; run again to go on where it stopped."
    ),
    baselines: str = baselines_option(None),
    baseline_model: list[str] = baseline_model_option(),
    expectations: bool = typer.Option(
        False,
        "--expectations",
        help="Also list each prompt's cultural expectations (the profile's llm, cached) "
        "and check them on every image (explicit_met, implicit_met).",
    ),
    recipe: str = RECIPE,
    limit: int = LIMIT,
    dry_run: bool = DRY_RUN,
    ratings: Path = RATINGS,
    cube_quality: str = CUBE_QUALITY,
    as_json: bool = typer.Option(False, "--json", help="Print the results record (results.json)."),
    engine: EngineOptions = LOCAL,
) -> None:
    """Benchmark generators the way the AHEaD paper does: every generator draws the same
    seeds for every prompt; one scorer observes and scores all images (ALIGN, HAL, EXAG,
    FAITH, DDIV, SDIV, Vendi); means with 95% bootstrap intervals per generator and
    country, a paired comparison, results.json (the results record), rows.csv and an HTML
    leaderboard.
    --engine ray makes the cells on Ray actors (one set of models each; the bench folder
    must be on storage every node sees) with the same results.
    --recipe runs a paper's protocol with the paper's settings and writes its table in the
    paper's layout, the paper's figures beside the bench's.
    The loop's own benches are commands of their own: refine strategies (best-of-N against
    the loop's strategies at one budget per prompt) and refine editor-loops (editors over
    many edits in a row)."""

    if recipe is None:
        for name, given in (("--limit", limit), ("--dry-run", dry_run), ("--ratings", ratings)):
            if given:
                raise UserInputError(f"{name} goes with --recipe NAME")
    else:
        # what the recipe takes from the command line, and what it chooses itself
        selection = dict(zip(SELECTION, (countries, activity, category, sample, images,
                                         cube_weights, expectations), strict=True))  # fmt: skip
        _recipe(recipe, {
            "selection": selection, "generator": generator, "profile": profile,
            "backend": backend, "tau": tau, "baselines": baselines,
            "baseline_model": baseline_model, "out": out, "as_json": as_json, "engine": engine,
            "ratings": ratings, "limit": limit, "dry_run": dry_run, "concepts": concepts,
            "cube_quality": cube_quality,
        })  # fmt: skip
        return
    try:
        names = list(generator) or [load_profile(profile).backend("generator")]
        prompts = plan_prompts(split_list(countries), activity, sample, seed, category)
    except ValueError as err:
        raise UserInputError(f"--profile/--countries/--activity/--category: {err}") from err
    parsed_baseline_models(baseline_model)
    plan = made_plan(
        BenchPlan,
        generators=names,
        prompts=prompts,
        images_per_prompt=images or 2,
        seed=seed,
        tau=tau,
        profile=profile,
        backends=parse_backends(backend),
        expectations=expectations,
        baselines=_baselines("clipscore" if baselines is None else baselines),
        baseline_models=tuple(baseline_model),
    )

    def progress(line: str) -> None:
        if not as_json:
            typer.echo(line, err=True)

    try:
        results = run_bench(plan, out, on_event=progress, engine=engine)
    except (RayEngineError, CellSchemaError) as err:
        raise UserInputError(str(err)) from err

    write_bench_page(out, results)
    if as_json:
        typer.echo(json.dumps(results.to_json(), indent=2))
        return
    _print_summary(results.summary, plan.baselines, out)


def _print_summary(summary: dict, baselines: tuple[str, ...], out: Path) -> None:
    """The bench's leaderboard on the terminal: FAITH, quality and Vendi per generator,
    the paired differences, the baselines and the EXAG variants."""
    head = label(HEADLINE)
    typer.echo(f"{'generator':40} {'prompts':>7} {head:>22} {'quality':>22} {'Vendi':>7}")
    for name, row in summary["generators"].items():
        faith, quality = _with_interval(row.get(HEADLINE)), _with_interval(row.get("quality"))
        vendi = row["vendi"]["mean"]
        typer.echo(f"{name:40} {row['prompts']:>7} {faith:>22} {quality:>22} {_shown(vendi, 7, 2)}")
    for p in summary["paired"]:
        if p["mean_difference"] is not None:
            typer.echo(
                f"{p['other']} - {p['base']}: {head} {p['mean_difference']:+.4f} over "
                f"{p['prompts']} prompts, better on {100 * p['share_improved']:.0f}%"
            )
    for name in baselines:
        got = [
            f"{g} {_with_interval(row[name]).strip()}"
            for g, row in summary["generators"].items()
            if name in row
        ]
        why = summary.get("missing", {}).get(name)
        if got or why:
            typer.echo(f"{name}: " + ("; ".join(got) if got else f"not computed: {why}"))
    variants = _variants(summary)
    if variants:
        from metrics.catalog import made_by

        typer.echo("EXAG: " + "; ".join(made_by(v) for v in variants))
    typer.echo(f"leaderboard: {out / 'bench.html'}")


def _recipe(name: str, given: dict) -> None:
    """``--recipe``: the recipe's bench (or concepts run), then its table."""
    from refine.cli.recipe_run import dry_run, read_recipe, write_table

    recipe = read_recipe(name)
    chosen = [k for k, v in given["selection"].items() if v]
    if chosen:
        flag = {"activity": "--activity", "category": "--category", "images": "--images-per-prompt"}
        names = ", ".join(flag.get(k, "--" + k.replace("_", "-")) for k in chosen)
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
        from refine.cli.recipe_dataset import run_dataset_recipe

        run_dataset_recipe(recipe, given, echo)
        return
    plan = _recipe_plan(recipe, given)
    if given["dry_run"]:
        if recipe.task == "concepts":
            _concepts_dry_run(recipe, plan, given, echo)
        elif (estimate := registry.task(recipe.task).estimator()) is not None:
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
    results = run_plan(registry.task(recipe.task), plan, out, as_json, given["engine"])
    write_table(recipe, results, out, given["ratings"], echo)


def _recipe_plan(recipe: Any, given: dict) -> Any:
    """The plan a recipe runs, with the command line's generators, profile, backends and
    the rest in place of the recipe's where given; one line where it cannot be."""
    spec = registry.task(recipe.task)
    parsed_baseline_models(given["baseline_model"])  # a bad one said as the option's
    common = {
        "generators": list(given["generator"]),
        "limit": given["limit"],
        "profile": given["profile"],
        "backends": parse_backends(given["backend"]),
        "baseline_models": tuple(given["baseline_model"]),
    }
    if recipe.task == "bench":
        # the recipe's own baselines unless --baselines chooses others
        chosen = None if given["baselines"] is None else _baselines(given["baselines"])
        overrides = {**common, "tau": given["tau"], "baselines": chosen}
    elif recipe.task == "concepts":
        overrides = {**common, "concepts": given["concepts"], "quality": given["cube_quality"]}
    elif recipe.task == "caire":
        overrides = {k: common[k] for k in ("generators", "limit", "profile", "backends")}
        overrides["concepts"] = given["concepts"]
    elif recipe.task == "sos":
        keep = ("generators", "limit", "profile", "backends", "baseline_models")
        overrides = {k: common[k] for k in keep}
    else:
        overrides = {}
    try:
        return plan_of(recipe, **overrides)
    except ValidationError as err:
        raise UserInputError(f"--recipe {recipe.name}: {refusal(err, spec.plan_class())}") from err
    except ValueError as err:
        raise UserInputError(f"--recipe {recipe.name}: {err}") from err


def _concepts_dry_run(recipe: Any, plan: Any, given: dict, echo: Any) -> None:
    """What a concepts recipe draws and calls, making nothing."""
    from refine.cli.recipe_run import profile_of
    from refine.harness.estimate import task_estimate

    n = len(plan.generators) * len(plan.concepts) * plan.images_per_prompt
    within = sum(1 for c in plan.concepts if c.country) * len(plan.generators)
    est = task_estimate(
        profile_of(given["profile"]), n, len(plan.concepts), len(plan.generators), observer=n,
        judge_answers=n + within * plan.images_per_prompt,
        local=["image_embedder", "hpsv2 where at hand"], generator_names=plan.generators,
    )  # fmt: skip
    echo(f"recipe {recipe.name} ({recipe.source}): nothing is made")
    for line in est.lines():
        echo(line)


def _baselines(text: str) -> tuple[str, ...]:
    from refine.evaluate.baselines import parse_baselines

    try:
        return parse_baselines(text)
    except ValueError as err:
        raise UserInputError(f"--baselines: {err}") from err


def _variants(summary: dict) -> list[str]:
    """The EXAG variants a bench's FAITH was made with, over its generators."""
    found = set()
    for row in summary["generators"].values():
        stat = row.get(HEADLINE) or {}
        found.update([stat["variant"]] if stat.get("variant") else [])
        found.update(stat.get("by_variant") or {})
    return sorted(found)


bench_cmd = with_engine(
    bench_cmd, 1, "Prompts at a time (API models; local ones take turns).", batch=True
)


def _shown(value: float | None, width: int, digits: int) -> str:
    """A number in a table column, or the dash where it is missing (never a made-up 0)."""
    return shown(value, f"{width}.{digits}f", width)


def _with_interval(stat: dict | None) -> str:
    """``0.712 [0.650, 0.770]``, each EXAG variant's apart where they differ, or the dash."""
    from refine.present.html import interval_text

    return interval_text(stat) if stat else MISSING
