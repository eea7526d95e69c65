"""A kept bench cell scored again from its saved images for the baselines a plan asks for
and it lacks: nothing generated, observed or judged for FAITH again (see
:meth:`refine.harness.tasks.bench.task.BenchTask.top_up`)."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from refine.evaluate.baselines import rescored
from refine.evaluate.reference_source import ReferenceSource
from refine.harness.cells import Cell

if TYPE_CHECKING:
    from refine.harness.tasks.bench.plan import BenchPlan

# the last element of a job that scores a kept cell's images for the baselines it lacks
RESCORE = "baselines"


def missing_baselines(
    cell: Cell, plan: BenchPlan, seeds: list[int], scoring: tuple[float, str, dict[str, str]]
) -> list[str] | None:
    """The plan's baselines a kept cell lacks (or scored on another checkpoint), when the
    cell was otherwise made as the plan makes cells (its seeds, tau, scoring models and
    expectations); None when it was not, and must be made again."""
    tau, _, scorer = scoring
    given = cell.inputs
    if not (
        given["seeds"] == seeds
        and given.get("tau") == tau
        and given.get("scorer") == scorer
        and bool(given.get("expectations")) == plan.expectations
        # drawn with the generator settings the plan sets (none recorded: none set)
        and (given.get("generator_settings") or {})
        == (plan.generator_settings.get(given["generator"]) or {})
    ):
        return None
    had = set(given.get("baselines") or ())
    models = given.get("baseline_models") or {}
    wanted = plan.checkpoints()
    return [
        b for b in plan.baselines if b not in had or (b in wanted and models.get(b) != wanted[b])
    ]


def images_kept(cell: Cell, folder: str | Path) -> bool:
    """Whether every image of a kept cell is still in the bench folder."""
    return bool(cell.images) and all(
        (Path(folder) / str(im.get("file", ""))).is_file() for im in cell.images
    )


def rescore(maker: Any, job: tuple[str, str, str]) -> Cell:
    """The last kept cell of ``job`` with the baselines of the plan it lacks, read from
    its saved images (no image is generated, observed or judged for FAITH again)."""
    from PIL import Image

    began = time.perf_counter()
    key = (*job, tuple(maker.seeds))
    scoring = maker.describe()
    kept = [
        c
        for c in maker.store.cells()
        if c.key == key and missing_baselines(c, maker.plan, maker.seeds, scoring)
    ]
    if not kept or not images_kept(kept[-1], maker.store.dir):
        raise ValueError(f"{job[0]}: {job[1]} ({job[2]}): no kept cell to rescore")
    cell = kept[-1]
    missing = missing_baselines(cell, maker.plan, maker.seeds, scoring) or []
    refs = ReferenceSource.default().find(job[1], job[2]).pack
    images = []
    for im in cell.images:
        with Image.open(maker.store.dir / im["file"]) as opened:
            images.append(opened.convert("RGB"))
    got = rescored(maker.assessor, images, refs, missing, known=cell.images)

    judge = scoring[2].get("judge")
    records = [
        with_baselines(im, scores, missing, judge)
        for im, scores in zip(cell.images, got, strict=True)
    ]
    baselines = list(dict.fromkeys([*(cell.inputs.get("baselines") or ()), *missing]))
    models = {**(cell.inputs.get("baseline_models") or {}), **maker.plan.checkpoints()}
    return Cell(
        key=cell.key,
        inputs={**cell.inputs, "baselines": baselines, "baseline_models": models},
        outputs=dict(cell.outputs),
        images=records,
        data=dict(cell.data),
        timings={**cell.timings, "rescore_s": time.perf_counter() - began},
        errors=list(cell.errors),
    )


def why_missing(scores: Any, baselines: Any) -> dict[str, str]:
    """Why each baseline asked for has no value for an image."""
    return {
        m: scores.notes.get(m) or "not computed" for m in baselines if scores.values.get(m) is None
    }


def with_baselines(
    record: dict[str, Any], scores: Any, names: list[str], judge: Any
) -> dict[str, Any]:
    """An image's ``record`` with the baselines ``names`` as ``scores`` gives them: their
    values, the judge that read each, TIFA's answers, and why any is missing."""
    out = {**record, **scores.values}
    if mine := judged_record(scores, judge):
        out["judged"] = {**(record.get("judged") or {}), **mine}
    if scores.tifa is not None:
        out["tifa_answers"] = [dataclasses.asdict(a) for a in scores.tifa]
    why = {**(record.get("missing") or {}), **why_missing(scores, names)}
    out.pop("missing", None)
    if why := {m: w for m, w in why.items() if out.get(m) is None}:
        out["missing"] = why
    return out


def judged_record(scores: Any, judge: Any) -> dict[str, dict[str, Any]]:
    """Per value a judge read: the judge and its reading (``logprobs``, ``sampled k=N``),
    what a recipe table's way check reads (:mod:`refine.harness.ways`)."""
    out = {
        m: {"by": judge, "read": r.mode}
        for m, r in scores.readings.items()
        if scores.values.get(m) is not None
    }
    if (q := scores.quality_reading) is not None and scores.values.get("quality") is not None:
        out["quality"] = {"by": q.judge, "read": q.method}
    return out
