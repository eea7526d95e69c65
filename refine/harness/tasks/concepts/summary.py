"""How a concepts run's cells are figured and summarised: one concept's diversity figures
from its images' geo-tags, embeddings and quality (see :mod:`refine.harness.tasks.concepts.task`);
per concept each generator's figures, per generator their means over concepts; and the
CSV's rows, one per image.

Per concept and generator:

* ``cube_diversity``: the Vendi score of the geo-tags (``metrics.vendi.tag_kernel``:
  for a concept without a country, ``weights`` over continent, country and artifact,
  (1, 0, 0) as in the CUBE authors' notebook; within a country, tags alike only when all
  three parts agree), normalised per chunk of 8 images (VS / size of the chunk, mean over
  chunks; ``cube_diversity_authors`` divides the last chunk by 8 too and of fewer than 32
  images uses the first 24, as the authors' code does);
* ``cube_cd``: CUBE's cultural-diversity score (Eq. 3: per chunk of 8 images, mean
  quality x VS / N, averaged) under the run's kernel, and ``cd_kernels``: the same under
  each of Tab. 5's five kernels (a concept within a country: its one kernel);
* ``tag_vendi`` and ``tag_qvendi``: the Vendi score of all the tags at once and its
  quality-weighted form (CUBE's Eq. 2: mean quality x VS);
* ``vendi`` and ``concept_qvendi``: the same over the image embeddings (cosine kernel);
* ``cube_within`` (a concept within a country): CUBE App. K's within-culture diversity,
  per batch of 8 the artifacts' VS-bar(0, 0, 1) over the images the judge finds faithful
  to the culture, quality uniform, the batches weighted by the images each kept;
* quality per image: HPS v2's score of the image with its prompt (max(cos, 0)), as CUBE
  rates quality, where its checkpoint loads; else the judge's yes-probability that the
  image matches the prompt (each run and cell names which).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from metrics.catalog import CUBE_FIGURES as FIGURES  # the last, concept_quality, is per image
from metrics.catalog import prompt_values
from metrics.stats import mean_of
from metrics.vendi import (
    CUBE_KERNELS,
    cultural_diversity,
    normalised_by_size,
    quality_weighted,
    tag_kernel,
    vendi_from_kernel,
)
from refine.numbers import shown

CHUNK = 8  # images per chunk of CUBE's normalised diversity


def concept_stats(
    tags: Sequence[tuple[str, str, str]],
    embeddings: Any,
    quality: Sequence[float],
    within_country: bool,
    weights: Sequence[float] = (1.0, 0.0, 0.0),
    faithful: Sequence[bool] | None = None,
) -> dict[str, Any]:
    """The diversity figures of one concept's images (see the module docstring);
    ``faithful``: within a country, which images the judge found faithful to it (CUBE
    App. K's filter), for ``cube_within``."""
    import numpy as np

    kernel = tag_kernel(tags, None if within_country else tuple(weights))
    kernels = (
        {"all three parts equal": kernel}
        if within_country
        else {name: tag_kernel(tags, w) for name, w in CUBE_KERNELS.items()}
    )
    emb = np.asarray(embeddings, dtype=float)
    tag_vendi = vendi_from_kernel(kernel)
    countries: dict[str, int] = {}
    for t in tags:
        countries[t[1]] = countries.get(t[1], 0) + 1
    # the images' Vendi and its quality-weighted form, as every task computes them
    values = prompt_values(("vendi", "qvendi"), embeddings=emb, weights=quality)
    return {
        "cube_diversity": normalised_by_size(kernel=kernel, group_size=CHUNK),
        "cube_diversity_authors": normalised_by_size(kernel=kernel, group_size=CHUNK, authors=True),
        "cube_cd": cultural_diversity(kernel, quality, CHUNK),
        "cd_kernels": {name: cultural_diversity(k, quality, CHUNK) for name, k in kernels.items()},
        "tag_vendi": tag_vendi,
        "tag_qvendi": quality_weighted(tag_vendi, quality),
        "vendi": values["vendi"],
        "concept_qvendi": values["qvendi"],
        "cube_within": _within(tags, faithful) if within_country else None,
        "concept_quality": float(np.mean(quality)),
        "similarity": "all three parts equal" if within_country else list(weights),
        "countries": dict(sorted(countries.items(), key=lambda kv: (-kv[1], kv[0]))),
    }


def _within(tags: Sequence[tuple[str, str, str]], faithful: Sequence[bool] | None) -> float | None:
    """CUBE App. K: per batch of 8 images (as drawn, by seed), the artifacts' Vendi over
    the images the judge found faithful to the culture, over their number (VS-bar(0, 0, 1),
    quality uniform); the batches' mean weighted by how many each kept, so that a batch
    left with one image (whose VS-bar is 1 by construction) counts as one image. None when
    no image is kept."""
    ok = list(faithful) if faithful is not None else [True] * len(tags)
    total, kept_all = 0.0, 0
    for start in range(0, len(tags), CHUNK):
        kept = [
            t
            for t, y in zip(tags[start : start + CHUNK], ok[start : start + CHUNK], strict=True)
            if y
        ]
        if kept:
            total += vendi_from_kernel(tag_kernel(kept, (0.0, 0.0, 1.0)))  # = size x VS-bar
            kept_all += len(kept)
    return total / kept_all if kept_all else None


def summarise_concepts(cells: list[dict[str, Any]], generators: Sequence[str]) -> dict[str, Any]:
    """Per concept, each generator's figures; per generator, their means over concepts."""
    out: dict[str, Any] = {"concepts": [], "generators": {}}
    keys = list(dict.fromkeys(c["key"] for c in cells))
    for key in keys:
        mine = [c for c in cells if c["key"] == key]
        first = mine[0]
        out["concepts"].append(
            {
                "concept": first["concept"],
                "prompt": first["prompt"],
                "country": first["country"],
                "generators": {
                    c["generator"]: {
                        **{f: c.get(f) for f in FIGURES},
                        "cd_kernels": c.get("cd_kernels") or {},
                        "countries": c["countries"],
                        "similarity": c["similarity"],
                    }
                    for c in mine
                },
            }
        )
    for g in generators:
        mine = [c for c in cells if c["generator"] == g]
        kernels = list(dict.fromkeys(k for c in mine for k in c.get("cd_kernels") or {}))
        out["generators"][g] = {
            "concepts": len(mine),
            **{f: mean_of([c.get(f) for c in mine]) for f in FIGURES},
            # Tab. 5: each kernel's Eq. 3, over the concepts computed under it
            "cd_kernels": {
                k: mean_of([(c.get("cd_kernels") or {}).get(k) for c in mine]) for k in kernels
            },
        }
    return out


ROW_FIELDS = (
    "generator",
    "concept",
    "prompt",
    "country",
    "seed",
    "file",
    "continent",
    "tag_country",
    "artifact",
    "concept_quality",
    *FIGURES[:-1],
)


def image_rows(cell: dict[str, Any]) -> list[dict[str, Any]]:
    """A cell's rows of concept_rows.csv, one per image, from its line."""
    rows = []
    for im in cell["images"]:
        continent, country, artifact = im["tag"]
        rows.append(
            {
                "generator": cell["generator"],
                "concept": cell["concept"],
                "prompt": cell["prompt"],
                "country": cell["country"],
                "seed": im["seed"],
                "file": im["file"],
                "continent": continent,
                "tag_country": country,
                "artifact": artifact,
                "concept_quality": im["concept_quality"],
                **{f: cell[f] for f in FIGURES[:-1]},
            }
        )
    return rows


def concept_lines(results: Any) -> list[str]:
    """Each generator's CUBE figures on the terminal, then where the quality came from."""
    lines = [f"{'generator':40} {'concepts':>8} {'CUBE div.':>9} {'tag qVS':>8} {'Vendi':>7}"]
    for name, row in results.summary["generators"].items():
        lines.append(
            f"{name:40} {row['concepts']:>8} {shown(row['cube_diversity'], '9.3f', 9)} "
            f"{shown(row['tag_qvendi'], '8.3f', 8)} {shown(row['vendi'], '7.2f', 7)}"
        )
    why = results.config.get("quality_why")
    lines.append(f"quality: {results.config.get('quality')}" + (f" ({why})" if why else ""))
    return lines


def concepts_estimate(plan: Any, profile: Any) -> Any:
    """What a concepts plan draws and calls: every image, its geo-tags and quality
    answers, and the within-culture filter of the concepts naming a country."""
    from refine.harness.estimate import task_estimate

    n = len(plan.generators) * len(plan.concepts) * plan.images_per_prompt
    within = sum(1 for c in plan.concepts if c.country) * len(plan.generators)
    return task_estimate(
        profile, n, len(plan.concepts), len(plan.generators), observer=n,
        judge_answers=n + within * plan.images_per_prompt,
        local=["image_embedder", "hpsv2 where at hand"], generator_names=plan.generators,
    )  # fmt: skip
