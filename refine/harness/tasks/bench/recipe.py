"""A bench recipe's plan (:attr:`BenchPlan.recipe_reader`): the catalog's prompts by the
recipe's countries, activities, categories and sample (``limit``: the first K taken in turn
from each country), its images per prompt, seed, observer prompts and generator settings."""

from __future__ import annotations

from refine.harness.recipes import Recipe, chosen_profile, generator_settings, interleaved
from refine.harness.tasks.bench.plan import BenchPlan, plan_prompts


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
) -> BenchPlan:
    """The bench plan of a recipe: its prompts (the first ``limit``), images per prompt,
    seed, observer prompts and generator settings; ``tau`` and ``baselines`` in place of
    the recipe's where given. A ValueError (a pydantic one from the plan) says what cannot
    be."""
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
        **chosen_profile(profile, recipe),
        backends=backends or {},
        baselines=baselines if baselines is not None else tuple(s.baselines) or ("clipscore",),
        baseline_models=tuple(baseline_models),
        observer_prompts=s.observer_prompts,
        generator_settings=generator_settings(recipe, generators),
    )
