"""How a concepts run's plan is read, and its cells kept (the run:
:mod:`refine.harness.tasks.concepts.task`).

A concepts file is JSONL, JSON (a list) or CSV, one concept per line: ``prompt``
(required unless ``concept`` and ``country`` are given, then "Image of <concept> from
<country>"), ``concept`` (a name; default the prompt), ``country`` (within-culture) and
``artifacts`` (a list, or one text with ``;`` or ``,`` between them). A CUBE-CSpace
export, one artifact a row (columns ``concept``, ``country``, ``artifact``), is grouped
into one concept per (concept, country).
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, Field, field_validator, model_validator

from refine.harness.cells import CellFormat
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
from refine.io.files import json_value

# how a concepts run's cells are kept (the run: refine.harness.tasks.concepts.task)
CONCEPT_CELLS = CellFormat(
    "concepts.jsonl",
    inputs=(
        "generator",
        "key",
        "concept",
        "prompt",
        "country",
        "artifacts",
        "seeds",
        "weights",
        "scorer",
        "quality_by",  # what rated the images' quality (HPS v2, or the judge and why)
        "settings",  # a recipe's generator settings it drew with (absent: none)
    ),
    key=("generator", "key"),
    data=("embeddings", "countries", "similarity", "cd_kernels"),
    bulky=("embeddings",),
    # CUBE's figures named as the catalog names them since they have names of their own
    renamed=(("qvendi", "concept_qvendi"), ("quality", "concept_quality")),
)


@dataclass(frozen=True)
class Concept:
    name: str
    prompt: str
    country: str | None = None
    artifacts: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        return f"{self.name} | {self.country or 'global'} | {self.prompt}"


class GeoTag(BaseModel):
    continent: str = Field(max_length=80)
    country: str = Field(max_length=80)
    artifact: str = Field(max_length=120)


def _text(value: Any, where: str, name: str, limit: int = 300) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ValueError(f"{where}: {name} must be text, got {type(value).__name__}")
    value = " ".join(value.split())
    if len(value) > limit:
        raise ValueError(f"{where}: {name} is longer than {limit} characters")
    return value


def _artifacts(value: Any, where: str) -> list[str]:
    if value is None or value == "":
        return []
    if isinstance(value, str):
        sep = ";" if ";" in value else ","
        items = value.split(sep)
    elif isinstance(value, list):
        items = value
    else:
        raise ValueError(f"{where}: artifacts must be a list or a text")
    out = []
    for item in items:
        out.append(_text(item, where, "an artifact", 120))
    return [a for a in out if a]


def load_concepts(path: str | Path) -> list[Concept]:
    """The concepts of a file (see the module docstring); every bad line is listed in one
    ValueError, each naming the file, the line and the problem."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{path}: no such file")
    text = path.read_text(encoding="utf-8")
    rows: list[tuple[str, Any]] = []
    if path.suffix.lower() == ".csv":
        reader = csv.DictReader(text.splitlines())
        for k, row in enumerate(reader, start=2):
            rows.append((f"{path}:{k}", {a: b for a, b in row.items() if a}))
    elif path.suffix.lower() == ".json":
        try:
            data = json_value(text)
        except json.JSONDecodeError as err:
            raise ValueError(f"{path}: not JSON ({err.msg}, line {err.lineno})") from None
        if not isinstance(data, list):
            raise ValueError(f"{path}: a JSON concepts file holds a list of objects")
        rows = [(f"{path}: item {k}", row) for k, row in enumerate(data, start=1)]
    else:
        for k, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                rows.append((f"{path}:{k}", json_value(line)))
            except json.JSONDecodeError as err:
                rows.append((f"{path}:{k}", ValueError(f"not JSON ({err.msg})")))
    problems: list[str] = []
    grouped: dict[tuple[str, str | None, str], list[str]] = {}
    for where, row in rows:
        try:
            if isinstance(row, Exception):
                raise ValueError(f"{where}: {row}")
            if not isinstance(row, dict):
                raise ValueError(f"{where}: each concept is an object with a prompt")
            unknown = set(row) - {"prompt", "concept", "country", "artifacts", "artifact"}
            if unknown:
                raise ValueError(f"{where}: unknown field {sorted(unknown)[0]!r}")
            country = _text(row.get("country"), where, "country", 60) or None
            concept = _text(row.get("concept"), where, "concept", 120)
            prompt = _text(row.get("prompt"), where, "prompt")
            if not prompt:
                if not (concept and country):
                    raise ValueError(f"{where}: give a prompt (or a concept and a country)")
                prompt = f"Image of {concept} from {country}"
            arts = _artifacts(row.get("artifacts"), where)
            arts += _artifacts(row.get("artifact"), where)
            grouped.setdefault((concept or prompt, country, prompt), []).extend(arts)
        except ValueError as err:
            problems.append(str(err))
    if problems:
        raise ValueError("\n".join(problems))
    if not grouped:
        raise ValueError(f"{path}: no concepts")
    return [
        Concept(name, prompt, country, tuple(dict.fromkeys(arts)))
        for (name, country, prompt), arts in grouped.items()
    ]


def _loaded(value: Any) -> Any:
    if isinstance(value, str | Path):  # a concepts file, as the command line names it
        return load_concepts(value)
    return value


class ConceptPlan(Plan):
    """Every generator draws every concept ``images_per_prompt`` times; what cannot give a
    diversity (one image, kernel weights that are no kernel's) is refused here."""

    positional = ("generators", "concepts")
    recipe_reader = "refine.harness.tasks.concepts.recipe:concepts_plan"

    generators: Generators = option(
        help="A generator to compare (once per generator; default: the profile's).",
        flag="--generator",
        given="repeat",
        min_length=1,
    )
    # the concept prompts, or a concepts file's path (load_concepts)
    concepts: Annotated[list[Concept], BeforeValidator(_loaded)] = option(
        help="A JSONL/JSON/CSV file of concept prompts (prompt, concept, country, artifacts).",
        given="path",
        min_length=1,
    )
    images_per_prompt: int = option(
        16, "Images per concept prompt (diversity needs at least 2).", ge=2,
        le=MAX_IMAGES_PER_PROMPT,
    )  # fmt: skip
    seed: int = option(42, "The first seed.", ge=0, le=2**32 - 1)
    weights: tuple[float, float, float] = option(
        (1.0, 0.0, 0.0),
        "CUBE Eq. 3's weights of the continent, country and artifact kernels (summing to 1).",
        flag="--cube-weights",
        given="list",
    )
    profile: str = PROFILE
    backends: Backends = BACKENDS
    # the images' quality: auto (HPS v2 where it loads, else the judge's), hpsv2, judge
    quality: Literal["auto", "hpsv2", "judge"] = option(
        "auto", "The images' quality: HPS v2 where it loads, else the judge's.",
        flag="--cube-quality",
    )  # fmt: skip
    # hpsv2=WHERE in place of the hub's checkpoint
    baseline_models: tuple[str, ...] = option(
        (), "HPS v2's checkpoint in place of the hub's: hpsv2=WHERE.", flag="--baseline-model",
        given="repeat",
    )  # fmt: skip
    # a recipe's settings of its generators (by name; refine.harness.generators.SETTINGS)
    generator_settings: dict[str, dict[str, Any]] = Field(default_factory=dict)

    _generators_given = model_validator(mode="before")(profile_generator)

    @field_validator("weights")
    @classmethod
    def _kernel(cls, value: tuple[float, float, float]) -> tuple[float, float, float]:
        from metrics.vendi import tag_kernel

        tag_kernel([("a", "b", "c")], value)
        return value
