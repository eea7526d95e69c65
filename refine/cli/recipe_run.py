"""``refine bench --recipe NAME|FILE``: a paper's protocol with the paper's settings (the
recipes: :mod:`refine.harness.recipes`), written as a bench and as the paper's table
(CSV, LaTeX, HTML: :mod:`refine.present.report.recipe`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from refine.cli.inputs import UserInputError, made_plan
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


def interleaved(prompts: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The prompts taken in turn from each country (the first of each, then the second of
    each, ...): a bench cut short with ``--limit`` still covers the countries, and with
    them the table's groups."""
    by: dict[str, list[tuple[str, str]]] = {}
    for p in prompts:
        by.setdefault(p[1], []).append(p)
    out = []
    for k in range(max((len(v) for v in by.values()), default=0)):
        out += [v[k] for v in by.values() if k < len(v)]
    return out


def generator_settings(recipe: Recipe, generators: list[str]) -> dict[str, dict[str, Any]]:
    """The recipe's settings of those of ``generators`` it sets (a --generator of the
    command line's own draws with its own)."""
    return {
        g: st.model_dump(exclude_none=True)
        for g, st in recipe.select.generator_settings.items()
        if g in generators
    }


def bench_plan(recipe: Recipe, generators: list[str], limit: int | None, **given: Any) -> Any:
    """The bench plan of a recipe: its prompts (the first ``limit``), images per prompt,
    seed, baselines and tau; ``given`` holds the command line's profile, backends,
    tau and baselines where they were given."""
    from refine.harness.tasks.bench.plan import BenchPlan, plan_prompts

    s = recipe.select
    try:
        prompts = plan_prompts(s.countries, s.activities, s.sample, s.seed, s.categories)
    except ValueError as err:
        raise UserInputError(f"--recipe {recipe.name}: {err}") from err
    prompts = interleaved(prompts)[:limit] if limit else prompts
    generators = generators or list(s.generators)
    plan = made_plan(
        BenchPlan,
        f"--recipe {recipe.name}: ",
        generators=generators,
        prompts=prompts,
        images_per_prompt=s.images_per_prompt,
        seed=s.seed,
        tau=given.get("tau") if given.get("tau") is not None else s.tau,
        profile=given["profile"],
        backends=given["backends"],
        baselines=(
            given["baselines"]
            if given.get("baselines") is not None
            else tuple(s.baselines) or ("clipscore",)
        ),
        baseline_models=tuple(given.get("baseline_models") or ()),
        observer_prompts=s.observer_prompts,
        generator_settings=generator_settings(recipe, generators),
    )
    return plan


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
    """The recipe's table from the bench's results (and the ratings), written beside
    them; returns it."""
    from refine.harness.recipe_tables import agreement_table, metrics_table
    from refine.present.report.recipe import write_recipe_table

    generators = list(results.config.get("generators") or [])
    others = backbones(recipe, out, echo)
    if recipe.table.kind == "settings":
        table = _settings(recipe, out, ratings, echo)
    elif recipe.needs_ratings and ratings is not None:
        from refine.human.agree import load_ratings, stored_metrics

        try:
            rated = load_ratings(ratings)
        except ValueError as err:
            raise UserInputError(f"--ratings: {err}") from err
        table = agreement_table(
            recipe,
            rated,
            stored_metrics([out]),
            backbones=[(label, stored_metrics([folder])) for label, folder, _ in others],
        )
    else:
        table = metrics_table(
            recipe,
            results.cells,
            generators,
            backbones=[(label, done.cells) for label, _, done in others],
        )
    if recipe.needs_ratings and ratings is None:
        table.missing.append(
            f"people's ratings: the table is each metric's agreement with the answers "
            f"to {recipe.table.question!r} ({recipe.table.protocol} protocol); rate the "
            f"bench's images (refine app's Rate view, or refine rate pack) and give "
            f"--ratings FILE. Written meanwhile: the metric side, the means over prompts"
        )
    files = write_recipe_table(out, table)
    for line in terminal(table):
        echo(line)
    for path in files:
        echo(f"written: {path}")
    return table


def backbones(recipe: Recipe, out: Path, echo: Callable[[str], None]) -> list[Any]:
    """The recipe's other backbones scoring the bench's images: a rescore each (the images
    observed again, the judge's baselines in ``rejudge`` read again, nothing generated),
    into ``out/backbones/<label>``, kept and gone on with; (label, folder, results) each."""
    from refine.harness.results import ResultsError
    from refine.harness.tasks.rescore.task import RescorePlan, run_rescore
    from refine.present.report.bench import write_bench_page

    made = []
    for b in recipe.select.backbones:
        folder = out / "backbones" / b.slug
        plan = RescorePlan(
            source=str(out),
            tau=b.tau,
            backends={"observer": b.observer, **({"judge": b.judge} if b.judge else {})},
            observer_prompts=b.observer_prompts or recipe.select.observer_prompts,
            rejudge=tuple(b.rejudge),
        )
        echo(f"backbone {b.label}: the bench's images scored again into {folder}")
        try:
            done = run_rescore(plan, folder, on_event=echo)
        except (ValueError, ResultsError) as err:
            raise UserInputError(f"backbone {b.label}: {err}") from err
        write_bench_page(folder, done)
        made.append((b.label, folder, done))
    return made


def _settings(recipe: Recipe, out: Path, ratings: Path | None, echo: Any) -> Any:
    """A settings table: the bench rescored at each setting (``out/settings/tau-q1``...,
    ``out/settings/proposer-gpt-4o``..., kept and gone on with), each setting a row."""
    from refine.harness.recipe_tables import settings_table, tau_settings
    from refine.harness.tasks.rescore.task import RescorePlan, run_rescore
    from refine.harness.tasks.rescore.tau_quantiles import rescore_at_quantiles

    try:
        if recipe.table.settings == "proposers":
            rows = []
            for proposer, pack in proposer_packs(recipe):
                folder = out / "settings" / f"proposer-{proposer}"
                run_rescore(
                    RescorePlan(source=str(out), references=str(pack)), folder, on_event=echo
                )
                rows.append((proposer, f"Proposer ({proposer})", folder))
            rows.append(("proposer-refiner", "Proposer-Refiner", out))  # the bench's own
        else:
            made = rescore_at_quantiles(
                RescorePlan(source=str(out)), out / "settings", on_event=echo
            )
            rows = tau_settings(made, out / "settings")
    except ValueError as err:
        raise UserInputError(str(err)) from err
    rated = None
    if ratings is not None:
        from refine.human.agree import load_ratings

        try:
            rated = load_ratings(ratings)
        except ValueError as err:
            raise UserInputError(f"--ratings: {err}") from err
    return settings_table(recipe, rows, rated)


def proposer_packs(recipe: Recipe) -> list[tuple[str, Path]]:
    """Each AHEaD proposer's own pack, fetched by ``refine data fetch ahead --proposers``;
    one line says to fetch them where they are not."""
    from refine.evaluate.paper_data import PROPOSERS, proposer_pack
    from refine.evaluate.reference_source import data_dir

    packs = [(p, proposer_pack(data_dir(), p)) for p in PROPOSERS]
    gone = [str(path) for _, path in packs if not path.is_file()]
    if gone:
        raise UserInputError(
            f"recipe {recipe.name} rescores the bench with each proposer's own descriptors: "
            f"fetch them first with `refine data fetch ahead --proposers` (none at {gone[0]})"
        )
    return packs


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
