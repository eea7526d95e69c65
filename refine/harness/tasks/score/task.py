"""``refine score`` as a task: one cell an image, observed and scored by one scorer against
the plan's references (with its expectations checked where a file is given). A cell is kept
while its image's bytes, the references and the scorer are the same, so the same command
goes on where a kill stopped it and scores only what changed."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from metrics.catalog import BENCH_IMAGE, image_extras
from refine.harness.cells import Cell, CellFormat
from refine.harness.engine import LOCAL, EngineOptions, MakerSpec
from refine.harness.results import Results
from refine.harness.task import CellTask, run_task
from refine.harness.tasks.score.plan import ScorePlan

SCORE_CELLS = CellFormat(
    "cells.jsonl",
    inputs=(
        "image",
        "sha256",
        "activity",
        "country",
        "references",
        "tau",
        "scorer",
        "baselines",
        "expectations",
    ),  # fmt: skip
    key=("image", "sha256"),
)
SCORING = ("observer", "judge", "text_embedder")  # the models every image needs


def image_digest(path: str) -> str:
    from refine.io.files import file_digest

    return file_digest(path)


class ScoreMaker:
    """The scorer's models, loaded once a process, that observe and score one image a
    job."""

    def __init__(self, plan: ScorePlan, instances: dict[str, Any] | None = None) -> None:
        from refine.backends.selection import Backends
        from refine.evaluate.assess import scoring_assessor
        from refine.evaluate.baselines import needs_llm
        from refine.profiles import load_profile

        self.plan = plan
        self.refs = plan.pack()
        self.scorer = Backends(load_profile(plan.profile), plan.backends, None, instances)
        self.tau, self.tau_source = self.scorer.tau(plan.tau)
        # every model loads (or is checked with its API) before the first image is scored
        # the models every image needs load (or are checked with their API) before the
        # first is scored; an embedder of images loads when a baseline first needs it
        self.scorer.preflight(
            ["observer", "judge", "text_embedder", *(["llm"] if needs_llm(plan.baselines) else [])]
        )
        self.assessor = scoring_assessor(self.scorer, plan.baselines, plan.baseline_models)
        self.wanted = None
        if plan.expectations is not None:
            from refine.evaluate.expectations import load_expectations

            self.wanted = load_expectations(plan.expectations)
        text = json.dumps(self.refs.model_dump(mode="json"), sort_keys=True)
        self.made = {
            "tau": self.tau,
            "tau_source": self.tau_source,
            "scorer": {r: n for r, n in self.scorer.ids().items() if r in SCORING},
            "references": hashlib.sha256(text.encode()).hexdigest()[:16],
        }

    def describe(self) -> dict[str, Any]:
        """What a cell is scored with: tau and where it comes from, the scoring models'
        ids and the references' digest."""
        return self.made

    def make(self, job: str, tell: Any = None) -> Cell:
        from PIL import Image

        from refine.harness.tasks.bench.cells import exaggerated_record
        from refine.harness.tasks.bench.top_up import why_missing

        plan, made = self.plan, self.made
        digest = image_digest(job)  # read once: the cell's key and its record
        with Image.open(job) as im:
            image = im.convert("RGB")
        (assessed,) = self.assessor.assess_many([image], self.refs, self.tau)
        scores = assessed.scores
        record = {
            "file": job,
            **{m: scores.value(m) for m in BENCH_IMAGE},
            **{m: scores.value(m) for m in image_extras()},
            "observed": assessed.observed,
            "scores": scores.model_dump(mode="json"),
            "feedback": assessed.feedback.model_dump(mode="json"),
            "exaggerated": exaggerated_record(assessed.feedback.exaggerated),
            "exag_variant": scores.variants.get("exag"),
        }
        if scores.tifa is not None:  # TIFA's questions and the judge's answers
            record["tifa_answers"] = [dataclasses.asdict(a) for a in scores.tifa]
        if why := why_missing(scores, plan.baselines):
            record["missing"] = why
        if self.wanted is not None:
            from refine.evaluate.expectations import check_images

            with self.scorer.using("judge") as judge:
                (checked,) = check_images([image], self.wanted.expectations, judge)
            record["explicit_met"] = checked.explicit_met
            record["implicit_met"] = checked.implicit_met
            record["expectations"] = checked.model_dump(mode="json")
        return Cell(
            key=(job, digest),
            inputs={
                "image": job,
                "sha256": digest,
                "activity": self.refs.activity,
                "country": self.refs.country,
                "references": made["references"],
                "tau": self.tau,
                "scorer": made["scorer"],
                "baselines": list(plan.baselines),
                "expectations": plan.expectations,
            },
            outputs={},
            images=[record],
            timings={k: float(v) for k, v in (assessed.timings or {}).items()},
        )


class ScoreTask(CellTask):
    """A cell an image, in the order given; the summary is each metric's mean over the
    images with its interval."""

    name = "score"
    what = "the score folder (--out)"
    form = SCORE_CELLS
    csv_file = "scores.csv"

    def __init__(self, plan: ScorePlan, folder: str | Path, emit: Callable | None = None) -> None:
        super().__init__(folder, emit)
        self.plan = plan
        self.digests = {p: image_digest(p) for p in plan.images}

    def maker(self) -> MakerSpec:
        return MakerSpec(ScoreMaker, {"plan": self.plan})

    def jobs(self) -> list[str]:
        return list(self.plan.images)

    def job_key(self, job: str) -> tuple[str, str]:
        return (job, self.digests[job])

    def reusable(self, cell: Cell, made_with: Any) -> bool:
        i = cell.inputs
        return (
            i.get("tau") == made_with["tau"]
            and i.get("scorer") == made_with["scorer"]
            and i.get("references") == made_with["references"]
            and i.get("baselines") == list(self.plan.baselines)
            and i.get("expectations") == self.plan.expectations
        )

    def progress(self, cell: Cell) -> str:
        faith = cell.mean("faith")
        shown = f"{faith:.3f}" if faith is not None else "-"
        return f"{Path(cell.inputs['image']).name}: FAITH {shown}"

    def config(self, made_with: Any) -> dict[str, Any]:
        return {
            "images": list(self.plan.images),
            "activity": self.plan.activity,
            "country": self.plan.country,
            "refs": self.plan.refs,
            "reference_images": self.plan.reference_images,
            "profile": self.plan.profile,
            "expectations": self.plan.expectations,
            "baselines": list(self.plan.baselines),
            "baseline_models": list(self.plan.baseline_models),
            **made_with,
        }

    def summarise(self, cells: list[Cell], made_with: Any) -> dict[str, Any]:
        from metrics.catalog import pooled

        names = [*BENCH_IMAGE, *self.plan.baselines]
        if self.plan.expectations is not None:
            names += ["explicit_met", "implicit_met"]
        out: dict[str, Any] = {"images": len(cells)}
        for name in names:
            values = [v for c in cells if (v := c.mean(name)) is not None]
            out[name] = {**pooled(name, values), "n": len(values)}
        return out

    def csv_fields(self) -> tuple[str, ...]:
        return ("image", *BENCH_IMAGE, *self.plan.baselines)

    def csv_rows(self, line: dict[str, Any]) -> list[dict[str, Any]]:
        return [
            {"image": im["file"], **{m: im.get(m) for m in self.csv_fields()[1:]}}
            for im in line["images"]
        ]


def run_score(
    plan: ScorePlan,
    out: str | Path,
    on_event: Callable[[str], None] | None = None,
    engine: EngineOptions = LOCAL,
    instances: dict[str, Any] | None = None,
) -> Results:
    """Score ``plan``'s images into the folder ``out``: a results record whose cells hold
    each image's observations, scores and feedback, and ``scores.csv``."""
    return run_task(ScoreTask(plan, out, on_event), engine=engine, instances=instances,
                    on_event=on_event)  # fmt: skip
