"""Benchmark mode: compare generators the way the AHEaD paper does, on a slice of the
bundled CULTIVate catalog.

Every generator draws ``images_per_prompt`` images (the same seeds) for every (activity,
country) prompt; one fixed scorer (the profile's observer, judge and embedders) observes
and scores them all, so generators are compared on equal terms. Per prompt: ALIGN, HAL,
EXAG and FAITH per image and their means, pooled ALIGN, DDIV and SDIV over the prompt's
images, the Vendi score of their image embeddings and its quality-weighted form (quality =
FAITH). Aggregates per generator and per generator and country come with 95% bootstrap
intervals over prompts; the first generator is compared with each other one on the same
prompts and seeds (mean FAITH difference, its interval, share of prompts improved).

A bench folder holds ``cells.jsonl`` (one line per generator and prompt, appended and
synced as each is done: a bench killed half-way goes on from the next cell with
``--resume``, and adding a generator reuses the cells done), the images, and the outputs
``results.json`` (the results record, :mod:`refine.harness.results`), ``rows.csv`` (one row
per image, for pandas or an HF dataset) and ``bench.html`` (a self-contained leaderboard).

The plan is read in :mod:`refine.harness.tasks.bench.plan`, the cells summarised in
:mod:`refine.harness.tasks.bench.summary`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from metrics.catalog import BENCH_PROMPT, HEADLINE, label
from refine.evaluate.reference_source import activity_category
from refine.harness.cells import Cell
from refine.harness.engine import LOCAL, EngineOptions, MakerSpec
from refine.harness.results import Results
from refine.harness.task import CellTask, run_task
from refine.harness.tasks.bench.cells import BENCH_CELLS, CellMaker
from refine.harness.tasks.bench.plan import BenchPlan
from refine.harness.tasks.bench.summary import image_rows, row_fields, summarise
from refine.harness.tasks.bench.top_up import RESCORE, images_kept, missing_baselines


class BenchTask(CellTask):
    """A bench on the harness: one cell per generator and prompt."""

    name = "bench"
    what = "the bench folder (--out)"
    form = BENCH_CELLS
    metrics = BENCH_PROMPT  # per image: the images' records (BENCH_IMAGE and the extras)

    def __init__(
        self,
        plan: BenchPlan,
        out: str | Path,
        backend_options: dict[str, dict[str, Any]] | None = None,
        emit: Callable[[str], None] | None = None,
    ) -> None:
        super().__init__(out, emit)
        self.plan = plan
        self.backend_options = backend_options or {}
        self.seeds = [plan.seed + i for i in range(plan.images_per_prompt)]

    def maker(self) -> MakerSpec:
        return MakerSpec(
            CellMaker,
            {"plan": self.plan, "folder": self.folder, "backend_options": self.backend_options},
        )

    def jobs(self) -> list[tuple[str, str, str]]:
        return [(g, a, c) for g in self.plan.generators for a, c in self.plan.prompts]

    def job_key(self, job: tuple[str, ...]) -> tuple[Any, ...]:
        return (*job[:3], tuple(self.seeds))

    def label(self, job: tuple[str, ...]) -> str:
        again = " (its baselines, from its images)" if job[3:] == (RESCORE,) else ""
        return f"{job[0]}: {job[1]} ({job[2]}){again}"

    def reusable(self, cell: Cell, scoring: Any) -> bool:
        """Made with the same seeds, scored the same way, with every baseline asked for."""
        return missing_baselines(cell, self.plan, self.seeds, scoring) == []

    def top_up(self, job: tuple[str, str, str], cell: Cell, scoring: Any) -> Any:
        """A kept cell made the same way but without some of the baselines asked for is
        scored for them from its saved images, not made again."""
        if missing_baselines(cell, self.plan, self.seeds, scoring) and images_kept(
            cell, self.folder
        ):
            return (*job, RESCORE)
        return None

    def progress(self, cell: Cell) -> str:
        given = cell.inputs
        return (
            f"{given['generator']}: {given['activity']} ({given['country']}): "
            f"{label(HEADLINE)} {cell.mean(HEADLINE):.3f}, Vendi {cell.outputs['vendi']:.2f}"
        )

    def config(self, scoring: Any) -> dict[str, Any]:
        tau, tau_source, scorer = scoring
        plan = self.plan
        return {
            "generators": plan.generators,
            "profile": plan.profile,
            "scorer": scorer,
            "tau": tau,
            "tau_source": tau_source,
            "images_per_prompt": plan.images_per_prompt,
            "seeds": self.seeds,
            "prompts": [list(p) for p in plan.prompts],
            "expectations": plan.expectations,
            "baselines": list(plan.baselines),
            "baseline_models": plan.checkpoints(),
            # a recipe's generator settings, where it sets any (its images drew with them)
            **({"generator_settings": plan.generator_settings} if plan.generator_settings else {}),
        }

    def summarise(self, cells: list[Cell], scoring: Any) -> dict[str, Any]:
        for c in cells:  # cells made before categories were kept
            if c.inputs.get("category") is None:
                c.inputs["category"] = activity_category(c.inputs["activity"], c.inputs["country"])
        return summarise(cells, self.plan.generators, seed=self.plan.seed)

    def csv_fields(self) -> tuple[str, ...]:
        return row_fields()

    def csv_rows(self, line: dict[str, Any]) -> list[dict[str, Any]]:
        return image_rows(line)


def run_bench(
    plan: BenchPlan,
    out: str | Path,
    backend_options: dict[str, dict[str, Any]] | None = None,
    instances: dict[str, Any] | None = None,
    on_event: Callable[[str], None] | None = None,
    engine: EngineOptions = LOCAL,
) -> Results:
    """Make, score and summarise every cell of ``plan`` not done yet in ``out``; returns
    the results record (also written as results.json, with rows.csv; its page is
    :func:`refine.present.report.bench.write_bench_page`). ``engine.workers`` cells at a time, on
    ``engine`` (see :func:`refine.harness.engine.open_engine`); the summary is the same for
    any engine and number of workers."""
    return run_task(
        BenchTask(plan, out, backend_options, on_event),
        engine=engine,
        instances=instances,
        on_event=on_event,
    )
