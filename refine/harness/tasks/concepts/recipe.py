"""A concepts recipe's plan (:attr:`ConceptPlan.recipe_reader`): its concepts file (the
first ``limit``), images per prompt, seed, CUBE's kernel weights and generator settings."""

from __future__ import annotations

from pathlib import Path

from refine.harness.recipes import Recipe, chosen_profile, generator_settings, recipe_concepts
from refine.harness.tasks.concepts.plan import ConceptPlan, load_concepts


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
) -> ConceptPlan:
    """The concepts plan of a recipe: its concepts file (``concepts`` in place of the
    recipe's; the first ``limit``), images per prompt, seed and kernel weights."""
    s = recipe.select
    about = recipe.about.split(".")[0] if recipe.about else "see the recipe"
    found = recipe_concepts(recipe, concepts, limit, load_concepts, f"concept prompts ({about})")
    generators = list(generators) or list(s.generators)
    return ConceptPlan(
        generators=generators,
        concepts=found,
        images_per_prompt=s.images_per_prompt,
        seed=s.seed,
        weights=tuple(s.cube_weights),
        **chosen_profile(profile, recipe),
        backends=backends or {},
        quality=quality,
        baseline_models=tuple(baseline_models),
        generator_settings=generator_settings(recipe, generators),
    )
