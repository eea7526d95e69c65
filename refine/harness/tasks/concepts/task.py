"""CUBE-style cultural diversity: many images of one under-specified concept per generator.

CUBE ("Beyond Aesthetics: Cultural Competence in Text-to-Image Models", Kannen et al.,
NeurIPS 2024) prompts a generator with a concept ("Image of traditional clothing", or
within one culture "Image of a Nigerian dish"), geo-tags every image with a
vision-language model (continent, country, artifact name; a few artifacts of the concept
are given as examples) and measures how many different cultures the images show with the
Vendi score of the tags under a hierarchical similarity; per concept and generator, the
figures of :mod:`refine.harness.tasks.concepts.summary`. The concepts file is read in
:mod:`refine.harness.tasks.concepts.plan`, the quality in ``concepts.quality``. A folder
holds ``concepts.jsonl`` (the cells), the images, ``results.json``, ``concept_rows.csv``
and ``concepts.html``; a cell drawn with other generator settings is drawn again."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from refine.assets import prompt_template
from refine.backends.selection import Backends
from refine.harness.cells import Cell, CellStore
from refine.harness.engine import LOCAL, EngineOptions, MakerSpec
from refine.harness.generators import checked_generators, generate
from refine.harness.results import Results
from refine.harness.task import CellTask, run_task
from refine.harness.tasks.concepts.plan import CONCEPT_CELLS, Concept, ConceptPlan, GeoTag
from refine.harness.tasks.concepts.summary import (
    FIGURES,
    ROW_FIELDS,
    concept_stats,
    image_rows,
    summarise_concepts,
)
from refine.io.files import slug
from refine.profiles import load_profile


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
        self.generators = checked_generators(scorer, plan.generators, plan.generator_settings)
        observer = scorer.get("observer")
        if not callable(getattr(observer, "ask_json", None)):
            raise ValueError(f"the observer {scorer.names.get('observer')} cannot geo-tag images")
        self.seeds = [plan.seed + i for i in range(plan.images_per_prompt)]
        self.scoring = {
            r: n for r, n in scorer.ids().items() if r in ("observer", "judge", "image_embedder")
        }
        self.template = prompt_template("geotag")
        self.weights = [float(w) for w in plan.weights]
        from refine.harness.tasks.concepts.quality import choose_quality

        self.quality = choose_quality(plan.quality, plan.baseline_models, scorer)

    def describe(self) -> dict[str, str]:
        """The scoring models' ids and what rates quality: what a cell is scored with."""
        return {**self.scoring, "quality": self.quality.by, "quality_why": self.quality.why}

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
        from refine.harness.tasks.concepts.quality import faithful, image_records, read_quality

        quality = read_quality(self.quality, scorer, images, concept.prompt)
        kept, kept_p = faithful(scorer, images, concept) if concept.country else (None, None)
        with scorer.using("image_embedder") as embedder:
            emb = embedder.encode_images(images).float().cpu().numpy()
        stats = concept_stats(tags, emb, quality, concept.country is not None, self.weights, kept)
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
                "quality_by": self.quality.by,
            }
            | ({"settings": st} if (st := self.plan.generator_settings.get(gen_name)) else {}),
            outputs={f: stats[f] for f in FIGURES},
            images=image_records(files, seeds, tags, quality, kept, kept_p),
            data={
                "countries": stats["countries"],
                "similarity": stats["similarity"],
                "cd_kernels": stats["cd_kernels"],
                "embeddings": emb.tolist(),
            },
            timings={
                "generate_s": generated - began,
                "score_s": time.perf_counter() - generated,
            },
        )


def _models(scoring: dict[str, str]) -> dict[str, str]:
    """The scoring models of what a maker describes (its quality apart)."""
    return {k: v for k, v in scoring.items() if k not in ("quality", "quality_why")}


class ConceptsTask(CellTask):
    """A CUBE concepts run on the harness: one cell per generator and concept."""

    name = "concepts"
    what = "the concepts folder (--out)"
    form = CONCEPT_CELLS
    metrics = FIGURES
    csv_file = "concept_rows.csv"

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
            and given.get("scorer") == _models(scoring)
            and given["weights"] == self.weights
            and given.get("quality_by", "judge").split(" ")[0] == scoring["quality"].split(" ")[0]
            and given.get("settings", {})
            == self.plan.generator_settings.get(given["generator"], {})
        )

    def progress(self, cell: Cell) -> str:
        return (
            f"{cell.inputs['generator']}: {cell.inputs['prompt']}: CUBE diversity "
            f"{cell.outputs['cube_diversity']:.3f}, {len(cell.data['countries'])} countries"
        )

    def config(self, scoring: Any) -> dict[str, Any]:
        return {
            "generators": self.plan.generators,
            "concepts": [c.key for c in self.plan.concepts],
            "profile": self.plan.profile,
            "scorer": _models(scoring),
            "seeds": self.seeds,
            "weights": self.weights,
            "quality": scoring.get("quality"),
            "quality_why": scoring.get("quality_why") or None,
        } | ({"generator_settings": p} if (p := self.plan.generator_settings) else {})

    def summarise(self, cells: list[Cell], scoring: Any) -> dict[str, Any]:
        return summarise_concepts([c.record() for c in cells], self.plan.generators)

    def csv_fields(self) -> tuple[str, ...]:
        return ROW_FIELDS

    def csv_rows(self, line: dict[str, Any]) -> list[dict[str, Any]]:
        return image_rows(line)


def run_concepts(
    plan: ConceptPlan,
    out: str | Path,
    backend_options: dict[str, dict[str, Any]] | None = None,
    instances: dict[str, Any] | None = None,
    on_event: Callable[[str], None] | None = None,
    engine: EngineOptions = LOCAL,
) -> Results:
    """Make, tag and score every (generator, concept) cell not done yet in ``out``
    (``concepts.jsonl``, synced cell by cell) on ``engine``; writes the results record
    (results.json) and concept_rows.csv and returns the record (its page is
    :func:`refine.present.report.concepts.write_concepts_page`)."""
    return run_task(
        ConceptsTask(plan, out, backend_options, on_event),
        engine=engine,
        instances=instances,
        on_event=on_event,
    )
