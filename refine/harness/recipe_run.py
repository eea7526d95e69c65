"""A recipe run from Python: :func:`run_recipe` turns a recipe's ``[select]`` into its task's
Plan, runs the task, and makes the recipe's table from the results (and people's ratings,
where the table is agreement with them). ``refine bench --recipe`` is this, with the pages
written and the table printed.

A bench recipe's prompts are the catalog's by its countries, activities, categories and
sample (``limit``: the first K taken in turn from each country); a concepts recipe's, its
concepts file's; a recipe of any other registered task gives its Plan's fields in
``[select]`` (each checked by that Plan when the recipe loads), and ``overrides`` replace
them."""

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


def interleaved(prompts: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The prompts taken in turn from each country (the first of each, then the second of
    each, ...): a bench cut short with ``limit`` still covers the countries, and with
    them the table's groups."""
    by: dict[str, list[tuple[str, str]]] = {}
    for p in prompts:
        by.setdefault(p[1], []).append(p)
    out = []
    for k in range(max((len(v) for v in by.values()), default=0)):
        out += [v[k] for v in by.values() if k < len(v)]
    return out


def generator_settings(recipe: Recipe, generators: list[str]) -> dict[str, dict[str, Any]]:
    """The recipe's settings of those of ``generators`` it sets (a generator named in
    place of the recipe's draws with its own)."""
    return {
        g: st.model_dump(exclude_none=True)
        for g, st in recipe.select.generator_settings.items()
        if g in generators
    }


def bench_plan(
    recipe: Recipe,
    generators: list[str] | tuple[str, ...] = (),
    limit: int | None = None,
    *,
    profile: str | None = None,
    backends: dict[str, str] | None = None,
    tau: float | None = None,
    baselines: tuple[str, ...] | None = None,
    baseline_models: tuple[str, ...] = (),
) -> Any:
    """The bench plan of a recipe: its prompts (the first ``limit``), images per prompt,
    seed, observer prompts and generator settings; ``tau`` and ``baselines`` in place of
    the recipe's where given. A ValueError (a pydantic one from the plan) says what cannot
    be."""
    from refine.harness.tasks.bench.plan import BenchPlan, plan_prompts

    s = recipe.select
    prompts = plan_prompts(s.countries, s.activities, s.sample, s.seed, s.categories)
    prompts = interleaved(prompts)[:limit] if limit else prompts
    generators = list(generators) or list(s.generators)
    return BenchPlan(
        generators=generators,
        prompts=prompts,
        images_per_prompt=s.images_per_prompt,
        seed=s.seed,
        tau=tau if tau is not None else s.tau,
        profile=profile or recipe.select.profile or "gemini",
        backends=backends or {},
        baselines=baselines if baselines is not None else tuple(s.baselines) or ("clipscore",),
        baseline_models=tuple(baseline_models),
        observer_prompts=s.observer_prompts,
        generator_settings=generator_settings(recipe, generators),
    )


def _concepts(
    recipe: Recipe, given: str | Path | None, limit: int | None, read: Any, what: str
) -> list[Any]:
    """The first ``limit`` concepts of ``given`` (else the recipe's own file), read by
    ``read``; a ValueError asks for ``--concepts FILE`` where there is neither."""
    path = given or recipe.select.concepts
    if path is None:
        raise ValueError(f"recipe {recipe.name} runs on {what}: give them with --concepts FILE")
    found = read(path)
    return found[:limit] if limit else found


def concepts_plan(
    recipe: Recipe,
    concepts: str | Path | None = None,
    generators: list[str] | tuple[str, ...] = (),
    limit: int | None = None,
    *,
    profile: str | None = None,
    backends: dict[str, str] | None = None,
    quality: str = "auto",
    baseline_models: tuple[str, ...] = (),
) -> Any:
    """The concepts plan of a recipe: its concepts file (``concepts`` in place of the
    recipe's; the first ``limit``), images per prompt, seed and kernel weights."""
    from refine.harness.tasks.concepts.plan import ConceptPlan, load_concepts

    s = recipe.select
    about = recipe.about.split(".")[0] if recipe.about else "see the recipe"
    found = _concepts(recipe, concepts, limit, load_concepts, f"concept prompts ({about})")
    generators = list(generators) or list(s.generators)
    return ConceptPlan(
        generators=generators,
        concepts=found,
        images_per_prompt=s.images_per_prompt,
        seed=s.seed,
        weights=tuple(s.cube_weights),
        profile=profile or recipe.select.profile or "gemini",
        backends=backends or {},
        quality=quality,
        baseline_models=tuple(baseline_models),
        generator_settings=generator_settings(recipe, generators),
    )


def caire_plan(
    recipe: Recipe,
    concepts: str | Path | None = None,
    generators: list[str] | tuple[str, ...] = (),
    limit: int | None = None,
    *,
    profile: str | None = None,
    backends: dict[str, str] | None = None,
) -> Any:
    """The CAIRE plan of a recipe: its concepts file (``concepts`` in place of the
    recipe's; the first ``limit``), countries, generators, seeds and knowledge base."""
    from refine.harness.tasks.caire.plan import CairePlan, read_concepts

    s = recipe.select
    hint = "the universal set's concepts (one concept a line, JSONL or CSV with a concept field)"
    found = _concepts(recipe, concepts, limit, read_concepts, hint)
    return CairePlan(
        generators=list(generators) or list(s.generators),
        concepts=found,
        countries=list(s.countries),
        images_per_prompt=s.images_per_prompt,
        seed=s.seed,
        profile=profile or recipe.select.profile or "gemini",
        backends=backends or {},
        kb=s.kb,
    )


def sos_plan(
    recipe: Recipe,
    generators: list[str] | tuple[str, ...] = (),
    limit: int | None = None,
    *,
    profile: str | None = None,
    backends: dict[str, str] | None = None,
    baseline_models: tuple[str, ...] = (),
) -> Any:
    """The SoS plan of a recipe: its concept, cultures (the first ``limit``), languages and
    generators, the caption classifiers its table names and their checkpoints
    (``baseline_models``, NAME=WHERE)."""
    from refine.harness.tasks.sos.prompts import person_prompts
    from refine.harness.tasks.sos.recipe import SosPlan

    s = recipe.select
    cultures = list(s.cultures)
    if not cultures and s.concept == "person":
        cultures = sorted({c for c, _ in person_prompts()})
    methods = tuple(m.metric for m in recipe.table.metrics if m.metric != "sos")
    given = dict(x.split("=", 1) for x in baseline_models if "=" in x)
    return SosPlan(
        generators=list(generators) or list(s.generators),
        concept=s.concept,
        cultures=cultures[:limit] if limit else cultures,
        languages=list(s.languages),
        images_per_prompt=s.images_per_prompt,
        prompts_per_cell=s.prompts_per_cell,
        seed=s.seed,
        profile=profile or recipe.select.profile or "gemini",
        backends=backends or {},
        classifiers=methods,
        caption_models={k: v for k, v in given.items() if k in methods},
    )


def plan_of(recipe: Recipe, **overrides: Any) -> Any:
    """The Plan a recipe runs: a bench's, a concepts run's or a CAIRE run's from its
    selection (the keyword arguments of :func:`bench_plan`, :func:`concepts_plan` and
    :func:`caire_plan` and :func:`sos_plan` in ``overrides``), any other
    task's from the ``[select]`` fields its Plan declares, ``overrides`` replacing them."""
    if recipe.task == "bench":
        return bench_plan(recipe, **overrides)
    if recipe.task == "concepts":
        return concepts_plan(recipe, **overrides)
    if recipe.task == "caire":
        return caire_plan(recipe, **overrides)
    if recipe.task == "sos":
        return sos_plan(recipe, **overrides)
    spec = registry.task(recipe.task)
    return spec.plan_class()(**{**(recipe.select.model_extra or {}), **overrides})


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
    plan's: for a bench recipe those of :func:`bench_plan`, for a concepts recipe those
    of :func:`concepts_plan`, for another task its Plan's fields."""

    if not isinstance(recipe, Recipe):
        recipe = load_recipe(recipe)
    spec = registry.task(recipe.task)
    if spec.run is None:
        raise ValueError(f"recipe {recipe.name}: run it with refine bench --recipe {recipe.name}")
    plan = plan_of(recipe, **overrides)
    if recipe.table.settings == "proposers":  # refused before any image is made
        proposer_packs(recipe)
    emit = on_event or (lambda line: None)
    said = recipe_shortfall(recipe)
    if said:
        emit(f"recipe {recipe.name}: {said}")
    results = spec.runner()(plan, Path(out), on_event=emit, engine=engine)
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
