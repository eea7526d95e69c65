"""``refine rescore BENCH --out NEW``: a bench scored again from its stored images and
observations, under another tau, observer or baselines (nothing is generated again). The
command is made from RescorePlan (:func:`refine.cli.task_cmd.task_command`), with the modes
that make several folders or a table as options of its own: ``--tau-quantiles``,
``--cube-weights`` (a concepts run), ``--recipe`` and ``--ratings``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from refine.cli.inputs import UserInputError
from refine.cli.task_cmd import extra_option, run_plan, task_command
from refine.harness import registry

MODES = [
    extra_option(
        "tau_quantiles", False, "--tau-quantiles",
        "Three rescores, at tau = Q1, the median and Q3 of the best-match similarities on the "
        "prompts' real photos (AHEaD Tab. 5): OUT/tau-q1, OUT/tau-median, OUT/tau-q3.", bool,
    ),
    extra_option(
        "cube_weights", [], "--cube-weights",
        "A concepts run (CUBE): geo-tag kernel weights of continent, country, artifact, e.g. "
        "0,1,0 (repeatable: one new folder each, OUT/weights-0-1-0).", list[str],
    ),
    extra_option(
        "recipe", None, "--recipe", "Also write this recipe's table for the new bench.",
        str | None,
    ),
    extra_option("ratings", None, "--ratings", "With --recipe: the ratings file.", Path | None),
]  # fmt: skip


def _modes(given: dict[str, Any], extras: dict[str, Any], **run: Any) -> bool:
    """The source checked, then the modes that are not one rescore into ``--out``; False:
    the plain rescore, run from the plan."""
    bench, out, as_json, engine = Path(given["source"]), run["out"], run["as_json"], run["engine"]
    if not (bench / "results.json").is_file():
        raise UserInputError(f"BENCH: {bench} holds no bench (no results.json)")
    if extras["ratings"] is not None and extras["recipe"] is None:
        raise UserInputError("--ratings goes with --recipe NAME (the table it is set against)")
    task = json.loads((bench / "results.json").read_text(encoding="utf-8")).get("task")
    if task == "concepts" or extras["cube_weights"]:
        if task != "concepts":
            raise UserInputError(f"--cube-weights: {bench} is no concepts run (refine concepts)")
        _concepts(bench, out, extras["cube_weights"], as_json, engine)
        return True
    if extras["tau_quantiles"]:
        if given["tau"] is not None:
            raise UserInputError("--tau-quantiles: leave out --tau (the photos give three)")
        _quantiles(run["plan"](), out, extras["recipe"], extras["ratings"], as_json, engine)
        return True
    plan = run["plan"]()
    if not plan.changes():
        raise UserInputError(
            "nothing to recompute: give --tau, --references, --exag, --backend observer=M, "
            "--observer-prompts or --baselines"
        )
    if extras["recipe"] is None:
        return False
    from refine.cli.recipe_run import read_recipe, write_table

    chosen = read_recipe(extras["recipe"])
    results = run_plan(registry.task("rescore"), plan, out, as_json, engine)
    write_table(chosen, results, out, extras["ratings"], lambda line: typer.echo(line, err=as_json))
    return True


def _concepts(source: Path, out: Path, given: list[str], as_json: bool, engine) -> None:
    """--cube-weights: the concepts run under each kernel's weights (no model call)."""
    from refine.harness.tasks.concepts.top_up import rescore_concepts
    from refine.present.report.concepts import write_concepts_page

    if not given:
        raise UserInputError(f"{source} is a concepts run: give --cube-weights W1,W2,W3")
    try:
        sets = [tuple(float(w) for w in text.split(",")) for text in given]
    except ValueError:
        raise UserInputError(
            f"--cube-weights: three numbers each, e.g. 0,1,0 (got {given})"
        ) from None

    def echo(line: str) -> None:
        typer.echo(line, err=as_json)

    made = {}
    for weights in sets:
        name = "weights-" + "-".join(f"{w:g}" for w in weights)
        where = out if len(sets) == 1 else out / name
        try:
            results = rescore_concepts(source, weights, where, on_event=echo, engine=engine)
        except ValueError as err:
            raise UserInputError(f"--cube-weights {weights}: {err}") from err
        write_concepts_page(where, results)
        made[name] = str(where)
        for g, row in results.summary["generators"].items():
            cd = row.get("cube_cd")
            echo(f"{name}: {g}: CUBE cd (Eq. 3) {cd:.3f}" if cd is not None else f"{name}: {g}: -")
    if as_json:
        typer.echo(json.dumps(made, indent=2))


def _quantiles(plan, out: Path, recipe, ratings, as_json: bool, engine) -> None:
    """--tau-quantiles: the bench at each quartile's tau, and a recipe's settings table."""
    from refine.harness.tasks.rescore.tau_quantiles import rescore_at_quantiles
    from refine.present.report.bench import write_bench_page

    def echo(line: str) -> None:
        typer.echo(line, err=as_json)

    chosen = None
    if recipe is not None:  # checked before anything is observed
        from refine.cli.recipe_run import read_recipe

        chosen = read_recipe(recipe)
        if chosen.table.kind != "settings":
            raise UserInputError(f"--recipe {chosen.name}: its table is not one of settings")
    try:
        made = rescore_at_quantiles(plan, out, on_event=echo, engine=engine)
    except ValueError as err:
        raise UserInputError(str(err)) from err
    for name, tau, results in made:
        write_bench_page(out / f"tau-{name}", results)
        faith = (results.summary["generators"].get(results.config["generators"][0]) or {}).get(
            "faith"
        ) or {}
        mean = faith.get("mean")
        shown_faith = f"{mean:.3f}" if mean is not None else "-"
        where = out / f"tau-{name}"
        echo(f"{name}: tau {tau:.4f}, {where} (FAITH of the first generator {shown_faith})")
    if chosen is not None:
        from refine.harness.recipe_tables import settings_table, tau_settings
        from refine.present.report.recipe import write_recipe_table
        from refine.present.terminal.records import recipe_table_lines

        rated = None
        if ratings is not None:
            from refine.human.ratings import load_ratings

            try:
                rated = load_ratings(ratings)
            except ValueError as err:
                raise UserInputError(f"--ratings: {err}") from err
        table = settings_table(chosen, tau_settings(made, out), rated)
        if rated is None:
            table.missing.append("people's ratings: give --ratings FILE")
        for line in recipe_table_lines(table):
            echo(line)
        for path in write_recipe_table(out, table):
            echo(f"written: {path}")
    if as_json:
        doc = {n: {"tau": t, "folder": str(out / f"tau-{n}")} for n, t, _ in made}
        typer.echo(json.dumps(doc, indent=2))


rescore_cmd = task_command(registry.task("rescore"), MODES, _modes, "Cells at a time.", batch=True)
