"""CUBE-style cultural diversity: many images of one under-specified concept per generator.

CUBE ("Beyond Aesthetics: Cultural Competence in Text-to-Image Models", Kannen et al.,
NeurIPS 2024) prompts a generator with a concept ("Image of traditional clothing", or
within one culture "Image of a Nigerian dish"), geo-tags every image with a
vision-language model (continent, country, artifact name; a few artifacts of the concept
are given as examples) and measures how many different cultures the images show with the
Vendi score of the tags under a hierarchical similarity. Per concept and generator this
module reports:

* ``cube_diversity``: the Vendi score of the geo-tags (``metrics.vendi.tag_kernel``:
  for a concept without a country, ``weights`` over continent, country and artifact,
  (1, 0, 0) as in the CUBE authors' notebook; within a country, tags alike only when all
  three parts agree), normalised per chunk of 8 images (VS / size of the chunk, mean over
  chunks; ``cube_diversity_authors`` divides the last chunk by 8 too and of fewer than 32
  images uses the first 24, as the authors' code does);
* ``tag_vendi`` and ``tag_qvendi``: the Vendi score of all the tags at once and its
  quality-weighted form (CUBE's Eq. 3: mean quality x VS);
* ``vendi`` and ``qvendi``: the same over the image embeddings (cosine kernel);
* quality per image: the judge's yes-probability that the image matches the prompt.

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
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from metrics.catalog import CUBE_FIGURES
from metrics.vendi import (
    normalised_by_size,
    quality_weighted,
    tag_kernel,
    vendi_from_embeddings,
    vendi_from_kernel,
)
from refine.assets import prompt_template
from refine.backends.selection import Backends
from refine.harness.cells import Cell, CellFormat, CellStore
from refine.harness.engine import LOCAL, EngineOptions, MakerSpec
from refine.harness.task import CellTask, Summary, run_task
from refine.harness.tasks.bench import checked_generators, generate
from refine.io.files import atomic_write_text, slug
from refine.profiles import load_profile

CHUNK = 8


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
            data = json.loads(text)
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
                rows.append((f"{path}:{k}", json.loads(line)))
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


@dataclass
class ConceptPlan:
    generators: list[str]
    concepts: list[Concept]
    images_per_prompt: int = 16
    seed: int = 0
    weights: tuple[float, float, float] = (1.0, 0.0, 0.0)
    profile: str = "gemini"
    backends: dict[str, str] = field(default_factory=dict)


def concept_stats(
    tags: Sequence[tuple[str, str, str]],
    embeddings: Any,
    quality: Sequence[float],
    within_country: bool,
    weights: Sequence[float] = (1.0, 0.0, 0.0),
) -> dict[str, Any]:
    """The diversity figures of one concept's images (see the module docstring)."""
    import numpy as np

    kernel = tag_kernel(tags, None if within_country else tuple(weights))
    emb = np.asarray(embeddings, dtype=float)
    tag_vendi = vendi_from_kernel(kernel)
    vendi = vendi_from_embeddings(emb)
    countries: dict[str, int] = {}
    for t in tags:
        countries[t[1]] = countries.get(t[1], 0) + 1
    return {
        "cube_diversity": normalised_by_size(kernel=kernel, group_size=CHUNK),
        "cube_diversity_authors": normalised_by_size(kernel=kernel, group_size=CHUNK, authors=True),
        "tag_vendi": tag_vendi,
        "tag_qvendi": quality_weighted(tag_vendi, quality),
        "vendi": vendi,
        "qvendi": quality_weighted(vendi, quality),
        "quality": float(np.mean(quality)),
        "similarity": "all three parts equal" if within_country else list(weights),
        "countries": dict(sorted(countries.items(), key=lambda kv: (-kv[1], kv[0]))),
    }


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
    ),
    key=("generator", "key"),
    data=("embeddings", "countries", "similarity"),
)


class ConceptMaker:
    """The generators, observer, judge and image embedder that make and score concept
    cells in a concepts folder (one per process)."""

    def __init__(
        self,
        plan: ConceptPlan,
        folder: str,
        backend_options: dict[str, dict[str, Any]] | None = None,
        instances: dict[str, Any] | None = None,
    ) -> None:
        self.plan = plan
        self.store = CellStore(folder, CONCEPT_CELLS)
        self.scorer = scorer = Backends(
            load_profile(plan.profile), plan.backends, backend_options, instances
        )
        scorer.preflight(["observer", "judge", "image_embedder"])
        self.generators = checked_generators(scorer, plan.generators)
        observer = scorer.get("observer")
        if not callable(getattr(observer, "ask_json", None)):
            raise ValueError(f"the observer {scorer.names.get('observer')} cannot geo-tag images")
        self.seeds = [plan.seed + i for i in range(plan.images_per_prompt)]
        self.scoring = {
            r: n for r, n in scorer.ids().items() if r in ("observer", "judge", "image_embedder")
        }
        self.template = prompt_template("geotag")
        self.weights = [float(w) for w in plan.weights]

    def describe(self) -> dict[str, str]:
        """The scoring models' ids: what a cell is scored with."""
        return self.scoring

    def make(self, job: tuple[str, Concept], tell: Any = None) -> Cell:
        gen_name, concept = job
        scorer, seeds, store = self.scorer, self.seeds, self.store
        began = time.perf_counter()
        images = generate(scorer, self.generators[gen_name], concept.prompt, seeds)
        files = []
        for s, image in zip(seeds, images, strict=True):
            path = store.image_path(gen_name, concept.name, concept.country or "global", s)
            path = path.parent / f"{slug(concept.prompt, 40)}-{path.name}"
            path.parent.mkdir(parents=True, exist_ok=True)
            image.save(path)
            files.append(str(path.relative_to(store.dir)))
        generated = time.perf_counter()
        examples = ", ".join(concept.artifacts) or "(none given)"
        question = self.template.strip().format(prompt=concept.prompt, examples=examples)
        tags = []
        for image in images:
            with scorer.using("observer") as obs:
                tag = obs.ask_json(image, question, GeoTag)
            tags.append((tag.continent.strip(), tag.country.strip(), tag.artifact.strip()))
        with scorer.using("judge") as judge:
            quality = judge.yes_probability(
                images, [f'Does this image match the prompt "{concept.prompt}"?'] * len(images)
            )
        with scorer.using("image_embedder") as embedder:
            emb = embedder.encode_images(images).float().cpu().numpy()
        stats = concept_stats(tags, emb, quality, concept.country is not None, self.weights)
        return Cell(
            key=(gen_name, concept.key),
            inputs={
                "generator": gen_name,
                "key": concept.key,
                "concept": concept.name,
                "prompt": concept.prompt,
                "country": concept.country,
                "artifacts": list(concept.artifacts),
                "seeds": seeds,
                "weights": self.weights,
                "scorer": self.scoring,
            },
            outputs={f: stats[f] for f in FIGURES},
            images=[
                {"file": f, "seed": s, "tag": list(t), "quality": q}
                for f, s, t, q in zip(files, seeds, tags, quality, strict=True)
            ],
            data={
                "countries": stats["countries"],
                "similarity": stats["similarity"],
                "embeddings": emb.tolist(),
            },
            timings={
                "generate_s": generated - began,
                "score_s": time.perf_counter() - generated,
            },
        )


class ConceptsTask(CellTask):
    """A CUBE concepts run on the harness: one cell per generator and concept."""

    name = "concepts"
    what = "the concepts folder (--out)"
    form = CONCEPT_CELLS

    def __init__(
        self,
        plan: ConceptPlan,
        out: str | Path,
        backend_options: dict[str, dict[str, Any]] | None = None,
        emit: Callable[[str], None] | None = None,
    ) -> None:
        if not plan.generators or not plan.concepts:
            raise ValueError("name at least one generator and one concept")
        if plan.images_per_prompt < 2:
            raise ValueError("diversity needs at least 2 images per concept")
        super().__init__(out, emit)
        self.plan = plan
        self.backend_options = backend_options or {}
        self.seeds = [plan.seed + i for i in range(plan.images_per_prompt)]
        self.weights = [float(w) for w in plan.weights]

    def maker(self) -> MakerSpec:
        return MakerSpec(
            ConceptMaker,
            {"plan": self.plan, "folder": self.folder, "backend_options": self.backend_options},
        )

    def jobs(self) -> list[tuple[str, Concept]]:
        return [(g, c) for g in self.plan.generators for c in self.plan.concepts]

    def job_key(self, job: tuple[str, Concept]) -> tuple[str, str]:
        return job[0], job[1].key

    def label(self, job: tuple[str, Concept]) -> str:
        return f"{job[0]}: {job[1].prompt}"

    def reusable(self, cell: Cell, scoring: Any) -> bool:
        given = cell.inputs
        return (
            given["seeds"] == self.seeds
            and given.get("scorer") == scoring
            and given["weights"] == self.weights
        )

    def progress(self, cell: Cell) -> str:
        return (
            f"{cell.inputs['generator']}: {cell.inputs['prompt']}: CUBE diversity "
            f"{cell.outputs['cube_diversity']:.3f}, {len(cell.data['countries'])} countries"
        )

    def summarise(self, cells: list[Cell], scoring: Any) -> Summary:
        records = [c.record() for c in cells]
        summary = summarise_concepts(records, self.plan.generators)
        summary.update(
            {
                "profile": self.plan.profile,
                "scorer": scoring,
                "seeds": self.seeds,
                "weights": self.weights,
            }
        )
        write_concept_outputs(self.store.dir, summary, records)
        self.emit(f"written: {self.store.dir / 'concepts.json'}, concept_rows.csv")
        return Summary(summary, records)


def run_concepts(
    plan: ConceptPlan,
    out: str | Path,
    backend_options: dict[str, dict[str, Any]] | None = None,
    instances: dict[str, Any] | None = None,
    on_event: Callable[[str], None] | None = None,
    engine: EngineOptions = LOCAL,
) -> Summary:
    """Make, tag and score every (generator, concept) cell not done yet in ``out``
    (``concepts.jsonl``, synced cell by cell) on ``engine``; writes concepts.json and
    concept_rows.csv and returns the summary (its page is
    :func:`refine.present.report.concepts.write_concepts_page`)."""
    return run_task(
        ConceptsTask(plan, out, backend_options, on_event),
        engine=engine,
        instances=instances,
        on_event=on_event,
    )


FIGURES = CUBE_FIGURES  # the last, quality, is per image


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
                        **{f: c[f] for f in FIGURES},
                        "countries": c["countries"],
                        "similarity": c["similarity"],
                    }
                    for c in mine
                },
            }
        )
    for g in generators:
        mine = [c for c in cells if c["generator"] == g]
        out["generators"][g] = {
            "concepts": len(mine),
            **{f: (sum(c[f] for c in mine) / len(mine) if mine else None) for f in FIGURES},
        }
    return out


def write_concept_outputs(folder: Path, summary: dict[str, Any], cells: list[dict[str, Any]]):
    import io

    atomic_write_text(folder / "concepts.json", json.dumps(summary, indent=1))
    buf = io.StringIO()
    fields = (
        "generator",
        "concept",
        "prompt",
        "country",
        "seed",
        "file",
        "continent",
        "tag_country",
        "artifact",
        "quality",
        *FIGURES[:-1],
    )
    writer = csv.DictWriter(buf, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    for c in cells:
        for im in c["images"]:
            continent, country, artifact = im["tag"]
            writer.writerow(
                {
                    "generator": c["generator"],
                    "concept": c["concept"],
                    "prompt": c["prompt"],
                    "country": c["country"] or "",
                    "seed": im["seed"],
                    "file": im["file"],
                    "continent": continent,
                    "tag_country": country,
                    "artifact": artifact,
                    "quality": im["quality"],
                    **{f: c[f] for f in FIGURES[:-1]},
                }
            )
    atomic_write_text(folder / "concept_rows.csv", buf.getvalue())
