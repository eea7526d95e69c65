"""CAIRE's universal set as a task: a cell per generator, concept and country (the prompt
"A realistic photo of {concept} in {country}", CAIRE Sec. 4.2), its images drawn with the
plan's seeds and each scored 1-5 for every country by the CAIRE scorer (the judge, with the
knowledge base where given). A killed run goes on from its last cell; ``caire-scores.json``
(what ``refine metrics caire-diversity --scores`` reads) is written beside the results."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from refine.harness.cells import Cell, CellFormat
from refine.harness.engine import LOCAL, EngineOptions, MakerSpec
from refine.harness.results import Results
from refine.harness.task import CellTask, run_task
from refine.harness.tasks.caire.plan import PROMPT, CairePlan

CAIRE_CELLS = CellFormat(
    "cells.jsonl",
    inputs=("generator", "concept", "country", "prompt", "seeds", "labels", "scorer"),
    key=("generator", "concept", "country", "seeds"),
)
SCORES = "caire-scores.json"


class CaireMaker:
    """The generators and the CAIRE scorer, loaded once a process."""

    def __init__(self, plan: CairePlan, folder: str, instances: Any = None) -> None:
        from refine.backends.selection import Backends
        from refine.evaluate.caire.scorer import CaireScorer
        from refine.harness.generators import checked_generators
        from refine.profiles import load_profile

        self.plan, self.folder = plan, Path(folder)
        self.backends = Backends(load_profile(plan.profile), plan.backends, None, instances)
        self.backends.preflight(["judge"])
        self.generators = checked_generators(self.backends, plan.generators)
        kb = embedder = None
        if plan.kb:
            from refine.evaluate.caire.kb import KnowledgeBase

            kb = KnowledgeBase.load(plan.kb)
            embedder = self.backends.embedder_for(
                kb.embedder or self.backends.names["image_embedder"]
            )
        self.scorer = CaireScorer(self.backends.get("judge"), kb, embedder)
        self.made = {"judge": self.backends.ids().get("judge"), "kb": plan.kb}

    def describe(self) -> dict[str, Any]:
        return self.made

    def make(self, job: tuple[str, str, str], tell: Any = None) -> Cell:
        from refine.harness.generators import generate
        from refine.io.files import slug

        name, concept, country = job
        seeds = self.plan.seeds()
        prompt = PROMPT.format(concept=concept, country=country)
        images = generate(self.backends, self.generators[name], prompt, seeds)
        files = []
        for seed, image in zip(seeds, images, strict=True):
            path = (
                self.folder / "images" / slug(name, 60) / slug(country, 30)
                / f"{slug(concept, 40)}-{seed}.png"
            )  # fmt: skip
            path.parent.mkdir(parents=True, exist_ok=True)
            image.save(path)
            files.append(path)
        labels = list(self.plan.countries)
        scored = self.scorer.score(images, labels, names=[str(f.resolve()) for f in files])
        records = []
        for f, seed, r in zip(files, seeds, scored, strict=True):
            by = {lab: r.score_of(lab).score for lab in labels}
            records.append({
                "file": str(f.relative_to(self.folder)),
                "seed": seed,
                "caire": by.get(country),  # the score for the country its prompt names
                "scores": by,
                "mode": r.mode,
                "detail": r.to_dict(),
            })  # fmt: skip
        return Cell(
            key=(name, concept, country, tuple(seeds)),
            inputs={
                "generator": name,
                "concept": concept,
                "country": country,
                "prompt": prompt,
                "seeds": seeds,
                "labels": labels,
                "scorer": self.made,
            },
            outputs={},
            images=records,
        )


class CaireTask(CellTask):
    """A cell per generator, concept and country; the summary is each country's mean score
    over every image (the metric side of CAIRE Tab. 2)."""

    name = "caire"
    what = "the CAIRE folder (--out)"
    form = CAIRE_CELLS
    csv_file = "caire.csv"

    def __init__(self, plan: CairePlan, folder: str | Path, emit: Callable | None = None) -> None:
        super().__init__(folder, emit)
        self.plan = plan

    def maker(self) -> MakerSpec:
        return MakerSpec(CaireMaker, {"plan": self.plan, "folder": str(self.folder)})

    def jobs(self) -> list[tuple[str, str, str]]:
        p = self.plan
        return [(g, c, k) for g in p.generators for c in p.concepts for k in p.countries]

    def job_key(self, job: tuple[str, str, str]) -> tuple[Any, ...]:
        return (*job, tuple(self.plan.seeds()))

    def reusable(self, cell: Cell, made_with: Any) -> bool:
        return cell.inputs.get("scorer") == made_with and cell.inputs.get("labels") == list(
            self.plan.countries
        )

    def progress(self, cell: Cell) -> str:
        i = cell.inputs
        return f"{i['generator']}: {i['concept']} in {i['country']}"

    def config(self, made_with: Any) -> dict[str, Any]:
        p = self.plan
        return {
            "generators": list(p.generators),
            "concepts": list(p.concepts),
            "countries": list(p.countries),
            "seeds": p.seeds(),
            "profile": p.profile,
            "prompt": PROMPT,
            "scorer": made_with,
        }

    def summarise(self, cells: list[Cell], made_with: Any) -> dict[str, Any]:
        from metrics.catalog import pooled

        out: dict[str, Any] = {"images": sum(len(c.images) for c in cells), "countries": {}}
        for label in self.plan.countries:
            got = [v for c in cells for im in c.images if (v := im["scores"][label]) is not None]
            stat = pooled("caire", got, self.plan.seed)
            out["countries"][label] = {**stat, "n": len(got)}
        return out

    def csv_fields(self) -> tuple[str, ...]:
        return ("generator", "concept", "country", "seed", "file", *self.plan.countries)

    def csv_rows(self, line: dict[str, Any]) -> list[dict[str, Any]]:
        head = {k: line[k] for k in ("generator", "concept", "country")}
        return [
            {**head, "seed": im["seed"], "file": im["file"], **im["scores"]}
            for im in line["images"]
        ]

    def end(self, made_with: Any) -> Results:
        from refine.io.files import atomic_write_text

        results = super().end(made_with)
        doc = scores_document(results, Path(self.folder))
        atomic_write_text(Path(self.folder) / SCORES, json.dumps(doc, indent=1))
        return results


def scores_document(results: Results, folder: Path) -> dict[str, Any]:
    """The scores as ``refine caire score --json`` writes them (the labels, a row of scores
    per image, each image's details), with the country each image's prompt names."""
    labels = list(results.config["countries"])
    images = [(c, im) for c in results.cells for im in c["images"]]
    return {
        "labels": labels,
        "scores": [[im["scores"][lab] for lab in labels] for _, im in images],
        "mode": images[0][1]["mode"] if images else None,
        "images": [
            {**im["detail"], "image": str((folder / im["file"]).resolve())} for _, im in images
        ],  # fmt: skip
        "prompt_countries": [c["country"] for c, _ in images],
    }


def run_caire(
    plan: CairePlan,
    out: str | Path,
    on_event: Callable[[str], None] | None = None,
    engine: EngineOptions = LOCAL,
    instances: Any = None,
) -> Results:
    """Draw and score ``plan``'s universal set into ``out``: results.json (a cell per
    generator, concept and country), caire.csv and caire-scores.json."""
    return run_task(CaireTask(plan, out, on_event), engine=engine, instances=instances,
                    on_event=on_event)  # fmt: skip
