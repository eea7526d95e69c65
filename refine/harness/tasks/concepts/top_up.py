"""A concepts run (CUBE) scored again under other geo-tag kernel weights
(``refine rescore CONCEPTS --cube-weights 0,1,0 --out NEW``, repeatable): the stored
tags, quality readings and image embeddings give every figure again with no model call
(CUBE varies the kernel on the same images, Tab. 4-5)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from refine.harness.cells import Cell, CellStore
from refine.harness.engine import LOCAL, EngineOptions, MakerSpec
from refine.harness.results import Results
from refine.harness.task import run_task
from refine.harness.tasks.concepts.plan import Concept, ConceptPlan
from refine.harness.tasks.concepts.task import CONCEPT_CELLS, ConceptsTask
from refine.records import DEFAULT_PROFILE


class ConceptRescorer:
    """Recomputes a source cell's figures under the plan's weights (no model)."""

    def __init__(
        self, plan: ConceptPlan, folder: str, source: str, scoring: dict[str, str], instances=None
    ):
        self.plan = plan
        self.store = CellStore(folder, CONCEPT_CELLS)
        self.source = CellStore(source, CONCEPT_CELLS)
        self.scoring = scoring
        self.weights = [float(w) for w in plan.weights]
        self.source_cells: dict | None = None

    def describe(self) -> dict[str, str]:
        return self.scoring

    def make(self, job: tuple[str, Concept], tell: Any = None) -> Cell:
        from refine.harness.tasks.concepts.summary import FIGURES, concept_stats
        from refine.harness.tasks.rescore.cell import copy_image

        gen, concept = job
        if self.source_cells is None:  # read once a maker, the last cell of a key wins
            self.source_cells = {c.key: c for c in self.source.cells()}
        src = self.source_cells.get((gen, concept.key))
        if src is None:
            raise ValueError(f"{gen}: {concept.prompt}: no such cell in {self.source.dir}")
        for im in src.images:
            copy_image(self.source.dir / im["file"], self.store.dir / im["file"])
        tags = [tuple(im["tag"]) for im in src.images]
        quality = [im["concept_quality"] for im in src.images]
        faithful = [bool(im.get("faithful", True)) for im in src.images]
        stats = concept_stats(
            tags, src.data["embeddings"], quality, concept.country is not None, self.weights,
            faithful if concept.country is not None else None,
        )  # fmt: skip
        return Cell(
            key=src.key,
            inputs={**src.inputs, "weights": self.weights},
            outputs={f: stats[f] for f in FIGURES},
            images=[dict(im) for im in src.images],
            data={
                **src.data,
                "similarity": stats["similarity"],
                "cd_kernels": stats["cd_kernels"],
                "rescored": {
                    "from": str(Path(self.source.dir).resolve()),
                    "weights": [src.inputs.get("weights"), self.weights],
                    "recomputed": list(FIGURES[:-1]),
                    "kept": ["images", "tags", "concept_quality", "embeddings"],
                    "model_calls": 0,
                },
            },
            timings={},
        )


class ConceptsRescoreTask(ConceptsTask):
    def __init__(self, source: str, weights: Sequence[float], out: str | Path, emit=None) -> None:
        src = Results.read(source, "concepts")
        cells = [c for c in CellStore(source, CONCEPT_CELLS).cells()]
        concepts: dict[str, Concept] = {}
        for c in cells:
            i = c.inputs
            concepts.setdefault(
                i["key"],
                Concept(
                    i["concept"], i["prompt"], i.get("country"), tuple(i.get("artifacts") or ())
                ),
            )
        seeds = src.config["seeds"]
        plan = ConceptPlan(
            generators=list(src.config["generators"]),
            concepts=[concepts[k] for k in src.config["concepts"] if k in concepts],
            images_per_prompt=len(seeds),
            seed=seeds[0],
            weights=tuple(float(w) for w in weights),
            profile=src.config.get("profile", DEFAULT_PROFILE),
        )
        if Path(out).resolve() == Path(source).resolve():
            raise ValueError("--out: the new folder must be another than the source")
        super().__init__(plan, out, None, emit)
        self.source = source
        self.source_scoring = {
            **(src.config.get("scorer") or {}),
            "quality": src.config.get("quality") or "judge",
            "quality_why": src.config.get("quality_why") or "",
        }

    def maker(self) -> MakerSpec:
        return MakerSpec(
            ConceptRescorer,
            {
                "plan": self.plan,
                "folder": self.folder,
                "source": self.source,
                "scoring": self.source_scoring,
            },
        )

    def config(self, scoring: Any) -> dict[str, Any]:
        return {**super().config(scoring), "rescored_from": str(Path(self.source).resolve())}


def rescore_concepts(
    source: str | Path,
    weights: Sequence[float],
    out: str | Path,
    on_event: Callable[[str], None] | None = None,
    engine: EngineOptions = LOCAL,
) -> Results:
    """The concepts run in ``source`` under ``weights`` into ``out``."""
    from metrics.vendi import tag_kernel

    tag_kernel([("a", "b", "c")], tuple(weights))  # a ValueError names bad weights
    task = ConceptsRescoreTask(str(source), weights, out, on_event)
    return run_task(task, engine=engine, on_event=on_event)
