"""``refine rescore BENCH --out NEW``: a bench scored again from its stored images and
observations, under another tau, observer or baselines (nothing is generated again)."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from refine.cli.inputs import UserInputError, made_plan, with_engine
from refine.cli.run_cmd import parse_backends
from refine.harness.engine import LOCAL, EngineOptions


def rescore_cmd(
    bench: Path = typer.Argument(..., help="The bench folder to score again."),
    out: Path = typer.Option(..., "--out", help="The new bench folder (run again to go on)."),
    tau: float = typer.Option(
        None,
        "--tau",
        help="The match threshold, in (0, 1] (no model call: the stored observations).",
    ),
    tau_quantiles: bool = typer.Option(
        False,
        "--tau-quantiles",
        help="Three rescores, at tau = Q1, the median and Q3 of the best-match similarities "
        "on the prompts' real photos (AHEaD Tab. 5): OUT/tau-q1, OUT/tau-median, OUT/tau-q3.",
    ),
    backend: list[str] = typer.Option(
        [],
        "--backend",
        help="Replace a scoring role: observer=M observes the stored images again; judge=M "
        "reads the judge's baselines again (MLLM-as-a-judge, VQAScore, VIEScore, TIFA; EXAG "
        "and quality are kept); text_embedder=...",
    ),
    cube_weights: list[str] = typer.Option(
        [],
        "--cube-weights",
        help="A concepts run (CUBE): geo-tag kernel weights of continent, country, artifact, "
        "e.g. 0,1,0 (repeatable: one new folder each, OUT/weights-0-1-0).",
    ),
    observer_prompts: str = typer.Option(
        None,
        "--observer-prompts",
        help="toolkit or ahead (AHEaD's per-dimension prompts, Tab. 22-27): observe the "
        "stored images again with these.",
    ),
    baselines: str = typer.Option(
        "", "--baselines", help="Baselines to add, comma-separated (as refine bench takes them)."
    ),
    profile: str = typer.Option(
        None, "--profile", help="The profile its models come from (default: the bench's)."
    ),
    references: Path = typer.Option(
        None,
        "--references",
        help="Match the stored observations against another reference set, a pack file "
        "(AHEaD Tab. 4's proposer-only sets: refine data fetch ahead --proposers).",
    ),
    exag: str = typer.Option(
        None,
        "--exag",
        help="ita or mllm: read EXAG again by this variant on the same images (AHEaD Tab. 9; "
        "ita needs the prompts' real photos); FAITH follows.",
    ),
    recipe: str = typer.Option(
        None, "--recipe", help="Also write this recipe's table for the new bench."
    ),
    ratings: Path = typer.Option(None, "--ratings", help="With --recipe: the ratings file."),
    as_json: bool = typer.Option(False, "--json", help="Print the new results record."),
    engine: EngineOptions = LOCAL,
) -> None:
    """Score a bench's stored images again into a new bench: --tau recomputes ALIGN, HAL
    and FAITH from the stored observations with no model call; --backend observer=M
    observes the images again (EXAG and quality, the judge's, are kept); --backend judge=M
    reads the judge's baselines again; --baselines adds baselines. Each cell records what
    was recomputed, from what, and its model calls."""
    from refine.harness.ray import RayEngineError
    from refine.harness.results import ResultsError
    from refine.harness.tasks.rescore.task import RescorePlan, run_rescore
    from refine.present.report.bench import write_bench_page

    if tau is not None and not 0 < tau <= 1:  # said before anything loads
        raise UserInputError(f"--tau: a threshold in (0, 1], not {tau:g}")
    if not (bench / "results.json").is_file():
        raise UserInputError(f"BENCH: {bench} holds no bench (no results.json)")
    if ratings is not None and recipe is None:
        raise UserInputError("--ratings goes with --recipe NAME (the table it is set against)")
    task = json.loads((bench / "results.json").read_text(encoding="utf-8")).get("task")
    if task == "concepts" or cube_weights:
        if task != "concepts":
            raise UserInputError(f"--cube-weights: {bench} is no concepts run (refine concepts)")
        _concepts(bench, out, cube_weights, as_json, engine)
        return
    added = ()
    if baselines:
        from refine.evaluate.baselines import parse_baselines

        try:
            added = parse_baselines(baselines)
        except ValueError as err:
            raise UserInputError(f"--baselines: {err}") from err
    plan = made_plan(
        RescorePlan,
        source=str(bench),
        tau=tau,
        backends=parse_backends(backend),
        baselines=tuple(added),
        profile=profile,
        observer_prompts=observer_prompts,
        references=_pack(references),
        exag=_variant(exag),
    )
    if tau_quantiles:
        if tau is not None:
            raise UserInputError("--tau-quantiles: leave out --tau (the photos give three)")
        _quantiles(plan, out, recipe, ratings, as_json, engine)
        return
    given = (tau, references, observer_prompts, exag)
    if given == (None, None, None, None) and not plan.backends and not added:
        raise UserInputError(
            "nothing to recompute: give --tau, --references, --exag, --backend observer=M, "
            "--observer-prompts or --baselines"
        )
    chosen = None
    if recipe is not None:
        from refine.cli.recipe_run import read_recipe

        chosen = read_recipe(recipe)

    def echo(line: str) -> None:
        typer.echo(line, err=as_json)

    try:
        results = run_rescore(plan, out, on_event=echo, engine=engine)
    except (ValueError, ResultsError, RayEngineError) as err:
        raise UserInputError(str(err)) from err
    write_bench_page(out, results)
    calls = sum((c.get("rescored") or {}).get("model_calls", 0) for c in results.cells)
    first = (results.cells[0].get("rescored") or {}) if results.cells else {}
    echo(
        f"{len(results.cells)} cells rescored from {bench}: recomputed "
        f"{', '.join(first.get('recomputed', []))}; {calls} model calls"
    )
    for g, row in results.summary["generators"].items():
        faith = (row.get("faith") or {}).get("mean")
        echo(f"  {g}: FAITH {faith:.3f}" if faith is not None else f"  {g}: FAITH -")
    if chosen is not None:
        from refine.cli.recipe_run import write_table

        write_table(chosen, results, out, ratings, echo)
    echo(f"leaderboard: {out / 'bench.html'}")
    if as_json:
        typer.echo(json.dumps(results.to_json(), indent=2))


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
        from refine.cli.recipe_run import terminal
        from refine.harness.recipe_tables import settings_table, tau_settings
        from refine.present.report.recipe import write_recipe_table

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
        for line in terminal(table):
            echo(line)
        for path in write_recipe_table(out, table):
            echo(f"written: {path}")
    if as_json:
        doc = {n: {"tau": t, "folder": str(out / f"tau-{n}")} for n, t, _ in made}
        typer.echo(json.dumps(doc, indent=2))


rescore_cmd = with_engine(rescore_cmd, 1, "Cells at a time.", batch=True)


def _pack(path: Path | None) -> str | None:
    """``--references``: a pack file that loads, said in one line where it does not."""
    if path is None:
        return None
    from refine.evaluate.references import load_pack

    if not path.is_file():
        raise UserInputError(
            f"--references: no file {path} (the proposer-only packs: refine data fetch ahead "
            "--proposers)"
        )
    try:
        load_pack(str(path))
    except (ValueError, KeyError, TypeError, AttributeError) as err:
        raise UserInputError(f"--references: {path} is not a references pack ({err})") from err
    return str(path.resolve())


def _variant(given: str | None) -> str | None:
    """``--exag``: ita or mllm (or their full names), as the variant's name."""
    if given is None:
        return None
    name = given if given.startswith("exag:") else f"exag:{given}"
    if name not in ("exag:ita", "exag:mllm"):
        raise UserInputError(f"--exag: ita or mllm, not {given!r}")
    return name
