"""What a CAIRE universal-set run is asked for: the concepts (a file, or the concepts
themselves), the countries each is drawn in and every image is scored for, the generators
and seeds, the scorer's profile and an optional knowledge base."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import field_validator, model_validator

from refine.harness.plan import (
    BACKENDS,
    MAX_IMAGES_PER_PROMPT,
    PROFILE,
    Backends,
    Generators,
    Plan,
    option,
    profile_generator,
)
from refine.harness.recipes import chosen_profile, recipe_concepts

PROMPT = "A realistic photo of {concept} in {country}"  # CAIRE Sec. 4.2


class CairePlan(Plan):
    """Every generator draws every concept in every country with the same seeds; the judge
    scores each image 1-5 for every country (with the knowledge base, where given)."""

    positional = ("generators", "concepts", "countries")
    recipe_reader = "refine.harness.tasks.caire.plan:caire_plan"

    generators: Generators = option(
        help="A generator (once per generator; default: the profile's).",
        flag="--generator",
        given="repeat",
    )
    concepts: list[str] = option(
        help="The universal set's concepts: a file of one concept a line, JSON lines with a "
        "concept each, or a CSV with a concept column.",
        given="path",
        min_length=1,
    )
    countries: list[str] = option(
        help='The countries each concept is drawn in and scored for, e.g. "Iran,India".',
        given="list",
        min_length=1,
    )
    images_per_prompt: int = option(
        1, "Images per prompt, seeds seed to seed+N-1.", ge=1, le=MAX_IMAGES_PER_PROMPT
    )
    seed: int = option(0, "The first seed.", ge=0, le=2**32 - 1)
    profile: str = PROFILE
    backends: Backends = BACKENDS
    kb: str | None = option(
        None, "A CAIRE knowledge base (refine caire kb build); none: kb-free.", given="path"
    )

    _generators_given = model_validator(mode="before")(profile_generator)

    @field_validator("concepts", mode="before")
    @classmethod
    def _read(cls, value: Any) -> Any:
        if isinstance(value, str | Path):  # a file of them
            return read_concepts(value)
        return value

    @field_validator("countries")
    @classmethod
    def _countries(cls, value: list[str]) -> list[str]:
        from refine.evaluate.caire.scorer import parse_labels

        return parse_labels(value)

    @field_validator("kb")
    @classmethod
    def _kb(cls, value: str | None) -> str | None:
        if value is None:
            return None
        from refine.evaluate.caire.kb import check_folder

        check_folder(value)
        return str(Path(value).resolve())

    def seeds(self) -> list[int]:
        return [self.seed + i for i in range(self.images_per_prompt)]


def read_concepts(path: str | Path) -> list[str]:
    """The concepts of a file: a text file of one concept a line, JSON lines with a
    ``concept`` each, or a CSV with a ``concept`` column; each once, in order."""
    import csv

    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{path}: no such file")
    text = path.read_text(encoding="utf-8")
    if path.suffix.lower() == ".csv":
        rows = list(csv.DictReader(text.splitlines()))
        if rows and "concept" not in rows[0]:
            raise ValueError(f"{path}: needs a concept column")
        found = [str(r.get("concept") or "") for r in rows]
    elif path.suffix.lower() in (".jsonl", ".json"):
        found = []
        for k, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as err:
                    raise ValueError(f"{path}:{k}: not JSON ({err.msg})") from None
                if not isinstance(row, dict) or not str(row.get("concept") or "").strip():
                    raise ValueError(f"{path}:{k}: give a concept")
                found.append(str(row["concept"]))
    else:
        found = text.splitlines()
    out = list(dict.fromkeys(" ".join(c.split()) for c in found if c.strip()))
    if not out:
        raise ValueError(f"{path}: no concepts")
    if any(len(c) > 120 for c in out):
        raise ValueError(f"{path}: a concept is longer than 120 characters")
    return out


def caire_plan(
    recipe: Any,
    concepts: str | Path | None = None,
    generators: list[str] | tuple[str, ...] = (),
    limit: int | None = None,
    *,
    profile: str | None = None,
    backends: dict[str, str] | None = None,
) -> CairePlan:
    """The CAIRE plan of a recipe (:attr:`CairePlan.recipe_reader`): its concepts file
    (``concepts`` in place of the recipe's; the first ``limit``), countries, generators,
    seeds and knowledge base."""
    s = recipe.select
    hint = "the universal set's concepts (one concept a line, JSONL or CSV with a concept field)"
    found = recipe_concepts(recipe, concepts, limit, read_concepts, hint)
    return CairePlan(
        generators=list(generators) or list(s.generators),
        concepts=found,
        countries=list(s.countries),
        images_per_prompt=s.images_per_prompt,
        seed=s.seed,
        **chosen_profile(profile, recipe),
        backends=backends or {},
        kb=s.kb,
    )
