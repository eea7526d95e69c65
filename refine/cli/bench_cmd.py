"""``refine bench``: compare generators on a slice of the CULTIVate catalog."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from metrics.catalog import HEADLINE, label
from refine.cli.inputs import (
    UserInputError,
    baseline_model_option,
    baselines_option,
    parsed_baseline_models,
    tau_option,
    with_engine,
)
from refine.cli.run_cmd import parse_backends
from refine.harness.cells import CellSchemaError
from refine.harness.engine import LOCAL, EngineOptions
from refine.harness.ray import RayEngineError
from refine.harness.tasks.bench import run_bench
from refine.harness.tasks.bench_plan import BenchPlan, plan_prompts
from refine.harness.tasks.concepts import run_concepts
from refine.harness.tasks.concepts_plan import ConceptPlan, load_concepts
from refine.numbers import MISSING, shown
from refine.present.report.bench import write_bench_page
from refine.present.report.concepts import write_concepts_page
from refine.profiles import load_profile
from refine.settings import default, split_list


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
        "1,0,0",
        "--cube-weights",
        help="With --concepts: geo-tag similarity weights of continent, country, artifact.",
    ),
    seed: int = typer.Option(
        default("seed"), "--seed", help="First seed (and the sample's and intervals')."
    ),
    tau: float = tau_option(),
    out: Path = typer.Option(
        Path("bench"), "--out", help="Bench folder; run again to go on where it stopped."
    ),
    baselines: str = baselines_option("clipscore"),
    baseline_model: list[str] = baseline_model_option(),
    expectations: bool = typer.Option(
        False,
        "--expectations",
        help="Also list each prompt's cultural expectations (the profile's llm, cached) "
        "and check them on every image (explicit_met, implicit_met).",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the results record (results.json)."),
    engine: EngineOptions = LOCAL,
) -> None:
    """Benchmark generators the way the AHEaD paper does: every generator draws the same
    seeds for every prompt; one scorer observes and scores all images (ALIGN, HAL, EXAG,
    FAITH, DDIV, SDIV, Vendi); means with 95% bootstrap intervals per generator and
    country, a paired comparison, results.json (the results record), rows.csv and an HTML
    leaderboard.
    --engine ray makes the cells on Ray actors (one set of models each; the bench folder
    must be on storage every node sees) with the same results."""

    if concepts is not None:
        if countries or activity or category or sample:
            raise UserInputError(
                "--concepts: the concepts file names the prompts; leave out "
                "--countries, --activity, --category and --sample"
            )
        _concepts(
            generator,
            profile,
            backend,
            concepts,
            cube_weights,
            images or 16,
            seed,
            out,
            as_json,
            engine,
        )
        return
    try:
        names = list(generator) or [load_profile(profile).backend("generator")]
        prompts = plan_prompts(split_list(countries), activity, sample, seed, category)
    except ValueError as err:
        raise UserInputError(f"--profile/--countries/--activity/--category: {err}") from err
    plan = BenchPlan(
        generators=names,
        prompts=prompts,
        images_per_prompt=images or 2,
        seed=seed,
        tau=tau,
        profile=profile,
        backends=parse_backends(backend),
        expectations=expectations,
        baselines=_baselines(baselines),
        baseline_models=tuple(baseline_model),
    )
    parsed_baseline_models(baseline_model)
    try:
        plan.check()
    except ValueError as err:
        raise UserInputError(f"--generator/--countries/--activity: {err}") from err

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
    summary = results.summary
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
    for name in plan.baselines:
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


bench_cmd = with_engine(bench_cmd, 1, "Prompts at a time (API models; local ones take turns).")


def _shown(value: float | None, width: int, digits: int) -> str:
    """A number in a table column, or the dash where it is missing (never a made-up 0)."""
    return shown(value, f"{width}.{digits}f", width)


def _with_interval(stat: dict | None) -> str:
    """``0.712 [0.650, 0.770]``, each EXAG variant's apart where they differ, or the dash."""
    from refine.present.html import interval_text

    return interval_text(stat) if stat else MISSING


def _concepts(
    generator, profile, backend, path, weights_text, images, seed, out, as_json, engine
) -> None:

    try:
        found = load_concepts(path)
    except ValueError as err:
        raise UserInputError(f"--concepts: {err}") from err
    try:
        weights = tuple(float(w) for w in weights_text.split(","))
        from metrics.vendi import tag_kernel

        tag_kernel([("a", "b", "c")], weights)
    except ValueError as err:
        raise UserInputError(f"--cube-weights {weights_text!r}: {err}") from err
    if images < 2:
        raise UserInputError("--images-per-prompt: diversity needs at least 2 images")
    try:
        names = list(generator) or [load_profile(profile).backend("generator")]
        from refine.harness.generators import parse_generator

        for name in names:
            parse_generator(name)
    except ValueError as err:
        raise UserInputError(f"--generator/--profile: {err}") from err
    plan = ConceptPlan(
        generators=names,
        concepts=found,
        images_per_prompt=images,
        seed=seed,
        weights=weights,
        profile=profile,
        backends=parse_backends(backend),
    )

    def progress(line: str) -> None:
        if not as_json:
            typer.echo(line, err=True)

    try:
        results = run_concepts(plan, out, on_event=progress, engine=engine)
    except (RayEngineError, CellSchemaError) as err:
        raise UserInputError(str(err)) from err

    write_concepts_page(out, results)
    if as_json:
        typer.echo(json.dumps(results.to_json(), indent=2))
        return
    summary = results.summary
    typer.echo(f"{'generator':40} {'concepts':>8} {'CUBE div.':>9} {'tag qVS':>8} {'Vendi':>7}")
    for name, row in summary["generators"].items():
        typer.echo(
            f"{name:40} {row['concepts']:>8} {_shown(row['cube_diversity'], 9, 3)} "
            f"{_shown(row['tag_qvendi'], 8, 3)} {_shown(row['vendi'], 7, 2)}"
        )
    typer.echo(f"report: {out / 'concepts.html'}")
