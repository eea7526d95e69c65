"""A recipe run from Python: :func:`run_recipe` turns a recipe's ``[select]`` into its task's
Plan, runs the task, and makes the recipe's table from the results (and people's ratings,
where the table is agreement with them). ``refine bench --recipe`` is this, with the pages
written and the table printed.

Each task's Plan reads its recipe (:meth:`refine.harness.plan.Plan.from_recipe`): a bench
recipe's prompts are the catalog's by its countries, activities, categories and sample
(``limit``: the first K taken in turn from each country), a concepts recipe's its concepts
file's (:mod:`refine.harness.tasks.bench.recipe`, ``...concepts.recipe``); a recipe of a
task whose Plan has no reader gives its Plan's fields in ``[select]`` (each checked by that
Plan when the recipe loads). The options asked replace the recipe's; ``limit`` keeps the
first N jobs of a task whose Plan takes no limit itself, and the results record says what
was asked (``config["asked"]``) and how many jobs ran of how many (``config["jobs"]``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from refine.harness import registry
from refine.harness.engine import LOCAL, EngineOptions
from refine.harness.judges import judge_rescores, judges_note, with_judges
from refine.harness.recipes import Recipe, load_recipe
from refine.harness.results import Results


@dataclass
class RecipeRun:
    """What a recipe made: its task's results, its table (None for a task that makes no
    recipe table), and the other backbones' rescores, (label, folder, results) each."""

    recipe: Recipe
    results: Results
    table: Any = None
    backbones: list[tuple[str, Path, Results]] = field(default_factory=list)


def plan_of(recipe: Recipe, **asked: Any) -> Any:
    """The Plan a recipe runs: its task's Plan read from its ``[select]``
    (:meth:`refine.harness.plan.Plan.from_recipe`), the options ``asked`` (of
    :data:`refine.harness.plan.ASKED`, or the Plan's fields; None: not asked) in place of
    the recipe's. One the Plan cannot take is a ValueError naming its flag."""
    return registry.task(recipe.task).plan_class().from_recipe(recipe, **asked)


def planned(recipe: Recipe, engine: EngineOptions, **asked: Any) -> tuple[Any, EngineOptions]:
    """A recipe's plan (:func:`plan_of`) and the engine options it runs on: where its Plan
    takes no limit of its own, an asked ``limit`` keeps the task's first N jobs."""
    from dataclasses import replace

    plan = plan_of(recipe, **asked)
    limit = type(plan).jobs_limit(asked)
    return plan, replace(engine, limit=limit) if limit else engine


def record_asked(out: Path, results: Results, asked: dict[str, Any]) -> Results:
    """The task's results record with what the run was asked beside the recipe
    (``config["asked"]``, by option name; the jobs it then ran are ``config["jobs"]``),
    written again; the record unchanged where nothing was asked."""
    from refine.harness.plan import asked_only

    given = asked_only(asked)
    if not given:
        return results
    results.config["asked"] = {k: str(v) if isinstance(v, Path) else v for k, v in given.items()}
    results.write(out)
    return results


def recipe_shortfall(recipe: Recipe) -> str | None:
    """What a bench recipe's selection names that has no reference descriptors here (its
    plan then runs fewer countries or prompts than the paper's), in words with the command
    that fetches the rest; None for another task, or when nothing is left out."""
    if recipe.task != "bench":
        return None
    from refine.harness.tasks.bench.plan import shortfall

    s = recipe.select
    return shortfall(s.countries, s.activities, s.categories, s.sample)


def proposer_packs(recipe: Recipe) -> list[tuple[str, Path]]:
    """Each AHEaD proposer's own pack, fetched by ``refine data fetch ahead --proposers``;
    a ValueError says to fetch them where they are not."""
    from refine.evaluate.paper_data import PROPOSERS, proposer_pack
    from refine.evaluate.reference_source import data_dir

    packs = [(p, proposer_pack(data_dir(), p)) for p in PROPOSERS]
    gone = [str(path) for _, path in packs if not path.is_file()]
    if gone:
        raise ValueError(
            f"recipe {recipe.name} rescores the bench with each proposer's own descriptors: "
            f"fetch them first with `refine data fetch ahead --proposers` (none at {gone[0]})"
        )
    return packs


def run_recipe(
    recipe: Recipe | str | Path,
    out: str | Path,
    *,
    ratings: str | Path | None = None,
    on_event: Callable[[str], None] | None = None,
    engine: EngineOptions = LOCAL,
    **overrides: Any,
) -> RecipeRun:
    """Run a recipe (a :class:`Recipe`, a bundled recipe's name or a recipe file) into
    ``out``: its task on ``engine``, then its table from the results (and ``ratings``,
    a ratings file, where the table is agreement with people). ``overrides`` are the
    options asked (:func:`plan_of`): the run-level ones (``generators``, ``limit``,
    ``profile``, ``backends``, ``baseline_models``), a bench's ``tau`` and ``baselines``, a
    concepts run's ``concepts`` and ``quality``, or the Plan's own fields."""

    if not isinstance(recipe, Recipe):
        recipe = load_recipe(recipe)
    spec = registry.task(recipe.task)
    if spec.run is None:
        raise ValueError(f"recipe {recipe.name}: run it with refine bench --recipe {recipe.name}")
    plan, engine = planned(recipe, engine, **overrides)
    if recipe.table.settings == "proposers":  # refused before any image is made
        proposer_packs(recipe)
    emit = on_event or (lambda line: None)
    said = recipe_shortfall(recipe)
    if said:
        emit(f"recipe {recipe.name}: {said}")
    results = spec.runner()(plan, Path(out), on_event=emit, engine=engine)
    results = record_asked(Path(out), results, overrides)
    table, others = recipe_table(recipe, results, Path(out), ratings, emit)
    return RecipeRun(recipe, results, table, others)


def recipe_table(
    recipe: Recipe,
    results: Results,
    out: Path,
    ratings: str | Path | None = None,
    emit: Callable[[str], None] | None = None,
) -> tuple[Any, list[tuple[str, Path, Results]]]:
    """The recipe's table from its task's results in ``out`` (and ``ratings``), and the
    other backbones' rescores it made; (None, []) for a task that makes no table."""
    from refine.harness.recipe_tables import agreement_table, metrics_table

    emit = emit or (lambda line: None)
    spec = registry.task(recipe.task)
    if not spec.tables:
        return None, []
    own = spec.recipe_table()
    if own is not None:  # a table of the task's own (CAIRE's C.9)
        return own(recipe, results, out, _ratings(ratings)), []
    others = backbone_rescores(recipe, out, emit)
    profile = results.config.get("profile")
    judged = judge_rescores(recipe, out, profile, emit)  # baselines another judge reads
    cells = with_judges(results.cells, judged)
    rated = _ratings(ratings)
    if recipe.table.kind == "settings":
        table = _settings(recipe, out, rated, emit)
    elif recipe.needs_ratings and rated is not None:
        from refine.human.stored import stored_from_cells, stored_metrics

        table = agreement_table(
            recipe,
            rated,
            stored_from_cells([out, *(f for _, f, _ in judged)], cells)
            if judged
            else stored_metrics([out]),
            backbones=[(label, stored_metrics([folder])) for label, folder, _ in others],
        )
    else:
        table = metrics_table(
            recipe,
            cells,
            list(results.config.get("generators") or [None]),  # None: a task's one row
            backbones=[(label, done.cells) for label, _, done in others],
        )
    if said := judges_note(recipe, profile):
        table.notes.append(said)
    tau, source = results.config.get("tau"), results.config.get("tau_source")
    # where this tau comes from, where a figure is set apart (a settings table's rows are
    # each at a tau of their own)
    if tau is not None and source and table.apart_figures() and recipe.table.kind != "settings":
        table.notes.append(f"tau here: {tau:g} ({source})")
    said = recipe_shortfall(recipe)
    if said:
        table.missing.append(f"countries and prompts: {said}")
    if recipe.table.caveat:
        table.notes.append(" ".join(recipe.table.caveat.split()))
    if recipe.needs_ratings and rated is None:
        table.missing.append(
            f"people's ratings: the table is each metric's agreement with the answers "
            f"to {recipe.table.question!r} ({recipe.table.protocol} protocol); rate the "
            f"bench's images (refine app's Rate view, or refine rate pack) and give "
            f"--ratings FILE. Written meanwhile: the metric side, the means over prompts"
        )
    return table, others


def _ratings(path: str | Path | None) -> Any:
    if path is None:
        return None
    from refine.human.ratings import load_ratings

    try:
        return load_ratings(Path(path))
    except ValueError as err:
        raise ValueError(f"--ratings: {err}") from err


def backbone_rescores(
    recipe: Recipe, out: Path, emit: Callable[[str], None]
) -> list[tuple[str, Path, Results]]:
    """The recipe's other backbones scoring the bench's images: a rescore each (the images
    observed again, the judge's baselines in ``rejudge`` read again, nothing generated),
    into ``out/backbones/<label>``, kept and gone on with; (label, folder, results) each."""
    from refine.harness.results import ResultsError
    from refine.harness.tasks.rescore.task import RescorePlan, run_rescore

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
        emit(f"backbone {b.label}: the bench's images scored again into {folder}")
        try:
            done = run_rescore(plan, folder, on_event=emit)
        except (ValueError, ResultsError) as err:
            raise ValueError(f"backbone {b.label}: {err}") from err
        made.append((b.label, folder, done))
    return made


def _settings(recipe: Recipe, out: Path, rated: Any, emit: Callable[[str], None]) -> Any:
    """A settings table: the bench rescored at each setting (``out/settings/tau-q1``...,
    ``out/settings/proposer-gpt-4o``..., kept and gone on with), each setting a row."""
    from refine.harness.recipe_tables import settings_table, tau_settings
    from refine.harness.tasks.rescore.task import RescorePlan, run_rescore
    from refine.harness.tasks.rescore.tau_quantiles import rescore_at_quantiles

    if recipe.table.settings == "proposers":
        rows = []
        for proposer, pack in proposer_packs(recipe):
            folder = out / "settings" / f"proposer-{proposer}"
            plan = RescorePlan(source=str(out), references=str(pack))
            run_rescore(plan, folder, on_event=emit)
            rows.append((proposer, f"Proposer ({proposer})", folder))
        rows.append(("proposer-refiner", "Proposer-Refiner", out))  # the bench's own
    else:
        made = rescore_at_quantiles(RescorePlan(source=str(out)), out / "settings", on_event=emit)
        rows = tau_settings(made, out / "settings")
    return settings_table(recipe, rows, rated)


def recipe_estimate(recipe: Recipe, plan: Any, profile: Any) -> Any:
    """What a bench recipe's run makes and calls (:func:`refine.harness.estimate.
    bench_estimate`), with the real photos its tau quartiles observe and the images each
    other backbone looks at again."""
    from refine.harness.estimate import bench_estimate

    est = bench_estimate(plan, profile)
    said = recipe_shortfall(recipe)
    if said:  # never a smaller plan without a word
        est.notes.append(said)
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
    _judges_estimate(recipe, plan, est)
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
    return est


def _judges_estimate(recipe: Recipe, plan: Any, est: Any) -> None:
    """The second judges' readings of the bench's images, counted as the judge's calls
    (priced at the profile's judge), or why they do not run."""
    from refine.harness.judges import judges_apply

    if not judges_apply(recipe, plan.profile):
        if said := judges_note(recipe, plan.profile):
            est.notes.append(said)
        return
    from refine.harness.estimate import ONE_READING

    for j in recipe.select.judges:
        read = [m for m in j.metrics if m in plan.baselines and m in ONE_READING]
        est.calls["judge"] += est.images * len(read)
        est.sampled["judge"] += est.images * len(read) * est.samples
        est.notes.append(
            f"judge {j.judge}: {', '.join(j.metrics)} of the bench's images read again by it "
            f"(a rescore into OUT/judges/{j.slug}), in place of the profile judge's"
        )
