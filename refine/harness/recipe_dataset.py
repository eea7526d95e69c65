"""A recipe on a dataset's own images and ratings (``select.dataset``): CulturalFrames
Fig. 6 on CulturalFrames' 3,637 images and their ratings, fetched by ``refine data fetch
culturalframes``. Nothing is generated: each image is scored by the recipe's baselines
for its own prompt (:mod:`refine.human.dataset_scores`), and the table sets them against
the dataset's ratings (or another ratings file). A ValueError says what cannot be, naming
the command line's option where one is to blame."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from refine.harness.recipes import Recipe
from refine.records import DEFAULT_PROFILE


@dataclass
class DatasetSelection:
    """The dataset's images a recipe scores (its rows), where they are, the ratings file
    and the baselines."""

    recipe: Recipe
    folder: Path
    rows: list[dict[str, Any]]
    ratings: Path
    baselines: list[str]

    def lines(self) -> list[str]:
        """What a dry run says: the images, their countries, the scorers, the ratings."""
        countries = sorted({r["country"] for r in self.rows})
        return [
            f"recipe {self.recipe.name} ({self.recipe.source}): nothing is scored",
            f"{len(self.rows)} images of {len(countries)} countries ({', '.join(countries)}) "
            f"from {self.folder}, scored by {', '.join(self.baselines) or 'no baseline'} for "
            f"their own prompts; ratings: {self.ratings}",
        ]


def select_dataset(
    recipe: Recipe,
    limit: int | None = None,
    ratings: str | Path | None = None,
    baselines: Sequence[str] | None = None,
    generators: Sequence[str] = (),
) -> DatasetSelection:
    """The images of the recipe's dataset it scores: its countries' and models', the first
    ``limit`` of each country."""
    from refine.evaluate.culturalframes_data import FOLDER, country_name
    from refine.evaluate.reference_source import data_dir
    from refine.human.dataset_scores import read_prompts

    s = recipe.select
    if generators:
        raise ValueError(
            f"--generator: recipe {recipe.name} scores the {s.dataset} dataset's own images, "
            "which are drawn already; leave out --generator"
        )
    folder = data_dir() / FOLDER
    if not (folder / "prompts.jsonl").is_file():
        raise ValueError(
            f"recipe {recipe.name} scores CulturalFrames' own images and ratings: fetch them "
            f"first with `refine data fetch culturalframes` (about 6 GB; none in {folder})"
        )
    rows = read_prompts(folder)
    wanted = {country_name(c).lower() for c in s.countries}
    rows = [r for r in rows if not wanted or r["country"].lower() in wanted]
    if s.generators:  # the dataset's models the recipe keeps (its own names)
        rows = [r for r in rows if r["model"] in s.generators]
    if limit:  # the first K images of each country
        taken: dict[str, int] = {}
        kept = []
        for r in rows:
            taken[r["country"]] = taken.get(r["country"], 0) + 1
            if taken[r["country"]] <= limit:
                kept.append(r)
        rows = kept
    chosen = list(s.baselines if baselines is None else baselines)
    return DatasetSelection(recipe, folder, rows, Path(ratings or folder / "ratings.jsonl"), chosen)


def score_dataset(
    chosen: DatasetSelection,
    out: str | Path,
    profile: str = DEFAULT_PROFILE,
    backends: dict[str, str] | None = None,
    tau: float | None = None,
    baseline_models: Sequence[str] = (),
    emit: Callable[[str], None] | None = None,
) -> Any:
    """Score the selected images into ``out`` (kept: a second run scores only what is not
    there) and make the recipe's agreement table with the ratings."""
    from refine.backends.selection import Backends
    from refine.evaluate.baseline_models import parse_baseline_models
    from refine.evaluate.baselines import needs_llm
    from refine.harness.recipe_tables import agreement_table
    from refine.human.dataset_scores import score_images, stored
    from refine.human.ratings import load_ratings
    from refine.profiles import load_profile

    recipe = chosen.recipe
    if not chosen.rows:
        raise ValueError(f"recipe {recipe.name}: no image of the dataset is selected")
    if not chosen.ratings.is_file():
        raise ValueError(f"--ratings: no file {chosen.ratings}")
    try:
        rated = load_ratings(chosen.ratings)
    except ValueError as err:
        raise ValueError(f"--ratings: {err}") from err
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    try:
        made = Backends(load_profile(profile), backends)
        tau, _ = made.tau(tau)
        made.preflight(
            ["judge", "image_embedder"] + (["llm"] if needs_llm(chosen.baselines) else [])
        )
        models = parse_baseline_models(list(baseline_models))
    except ValueError as err:
        raise ValueError(f"--profile/--backend: {err}") from err
    done = score_images(chosen.rows, chosen.folder, out, made, chosen.baselines, tau, models, emit)
    table = agreement_table(recipe, rated, stored(done.rows, chosen.folder))
    lacking = done.with_references < len(done.rows)
    if lacking and any(m.metric not in chosen.baselines for m in recipe.table.metrics):
        table.missing.append(
            f"AHEaD's metrics (FAITH, ALIGN, ...): {done.with_references} of {len(done.rows)} "
            "images have references for their prompt; build them with `refine refs build "
            "PROMPT --country C` and run again (the rest of the images are kept)"
        )
    return table
