"""A bench scored again from what it stored (``refine rescore BENCH --out NEW``): the
papers vary tau, the observer, the references and the baselines on the same images (AHEaD
Tab. 2, 4, 5 and 9), so none of these regenerates an image.

* A new tau, or another reference set (``references``), needs no model call: ALIGN and
  HAL from the stored observations, FAITH from them and the stored EXAG, and pooled ALIGN,
  DDIV, SDIV and qVendi from those. ``exag``: EXAG read again by that variant.
* A new observer observes the stored images again; the judge's readings are kept.
* A new judge reads the judge's baselines again (``rejudge``: a subset); those it cannot
  read are said missing. EXAG and quality are kept (AHEaD's EXAG is VQAScore's, Tab. 9).
* Baselines a cell lacks are scored from its images (as a bench tops up its own cells).

The new folder is a bench like any other: ``refine agree``, ``refine compare`` and
``--recipe`` tables read it. Each cell's ``rescored`` says what was recomputed, from what
and with which models, and its model calls; a run killed half-way goes on where it stopped.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from refine.harness.cells import Cell
from refine.harness.engine import LOCAL, EngineOptions, MakerSpec
from refine.harness.results import Results
from refine.harness.task import run_task
from refine.harness.tasks.bench.cells import BenchStore
from refine.harness.tasks.bench.plan import BenchPlan
from refine.harness.tasks.bench.task import BenchTask
from refine.harness.tasks.rescore.plan import SCORING_ROLES, RescoreError, RescorePlan


class Rescorer:
    """The models a rescore needs (the text embedder; the observer where it is new; the
    judge and the baselines' models where a baseline is added), loaded once a process."""

    def __init__(
        self,
        plan: BenchPlan,
        folder: str,
        source: str,
        source_config: dict[str, Any],
        backend_options: dict[str, dict[str, Any]] | None = None,
        instances: dict[str, Any] | None = None,
        tau_source: str | None = None,
        rejudge: tuple[str, ...] | None = None,
        references: str | None = None,
        exag: str | None = None,
    ) -> None:
        from metrics.baselines import JUDGE_READ
        from refine.backends.selection import Backends
        from refine.evaluate.assess import scoring_assessor
        from refine.profiles import load_profile

        self.plan = plan
        self.store = BenchStore(folder)
        self.source = BenchStore(source)
        self.source_config = source_config
        self.seeds = [plan.seed + i for i in range(plan.images_per_prompt)]
        from refine.harness.tasks.bench.cells import with_observer_prompts

        options = with_observer_prompts(backend_options, plan.observer_prompts)
        self.scorer = scorer = Backends(
            load_profile(plan.profile), plan.backends, options, instances
        )
        old = source_config.get("scorer") or {}
        self.new_observer = plan.backends.get("observer") != old.get("observer") or (
            plan.observer_prompts != old.get("observer_prompts", "toolkit")
        )
        self.new_judge = plan.backends.get("judge") != old.get("judge")
        # the kept baselines read again under the new judge
        self.rejudge = (
            tuple(b for b in JUDGE_READ if rejudge is None or b in rejudge)
            if self.new_judge
            else ()
        )
        # what the new judge cannot read (CLIP-FlanT5 gives no ratings): said missing
        from refine.harness.tasks.rescore.again import unreadable

        self.unreadable = unreadable(scorer, self.rejudge) if self.new_judge else {}
        self.rejudge = tuple(b for b in self.rejudge if b not in self.unreadable)
        self.exag = exag
        roles = ["text_embedder"] + (["observer"] if self.new_observer else [])
        scorer.preflight(roles + (["judge"] if exag else []))
        self.tau, self.tau_source = scorer.tau(plan.tau)
        if plan.tau is not None and plan.tau == source_config.get("tau"):
            self.tau_source = source_config.get("tau_source") or self.tau_source
        if tau_source:
            self.tau_source = tau_source
        self.assessor = scoring_assessor(scorer, plan.baselines, plan.baseline_models)
        # what the cells are scored with: every scoring role as this rescore ran it (the
        # source's, and any --backend given in its place)
        self.scoring = {
            r: plan.backends.get(r, old.get(r))
            for r in SCORING_ROLES
            if plan.backends.get(r, old.get(r)) is not None
        }
        if plan.observer_prompts != "toolkit":
            self.scoring["observer_prompts"] = plan.observer_prompts
        self.references = references
        if references is not None:  # by its pack's name: a cell of another set is remade
            from refine.evaluate.references import load_pack

            self.scoring["references"] = load_pack(references).name
        if exag is not None:
            self.scoring["exag"] = exag

    def describe(self) -> tuple[float, str, dict[str, str]]:
        return self.tau, self.tau_source, self.scoring

    def make(self, job: tuple[str, ...], tell: Any = None) -> Cell:
        from refine.harness.tasks.rescore.cell import rescore_cell

        return rescore_cell(self, job)


class RescoreTask(BenchTask):
    """A bench whose cells are the source bench's, scored again."""

    what = "the new bench folder (--out)"

    def __init__(
        self,
        plan: RescorePlan,
        out: str | Path,
        backend_options: dict[str, dict[str, Any]] | None = None,
        emit: Callable[[str], None] | None = None,
    ) -> None:
        bench_plan, self.source_config = plan.bench_plan()
        if Path(out).resolve() == Path(plan.source).resolve():
            raise RescoreError("--out: the new bench must be another folder than the source")
        super().__init__(bench_plan, out, backend_options, emit)
        self.rescore = plan
        kept = {c.key for c in BenchStore(plan.source).cells()}
        self.missing = [j for j in super().jobs() if self.job_key(j) not in kept]

    def jobs(self) -> list[tuple[str, str, str]]:
        """The source's cells (those it lacks are said, not made)."""
        return [j for j in super().jobs() if j not in self.missing]

    def maker(self) -> MakerSpec:
        return MakerSpec(
            Rescorer,
            {
                "plan": self.plan,
                "folder": self.folder,
                "source": self.rescore.source,
                "source_config": self.source_config,
                "backend_options": self.backend_options,
                "tau_source": self.rescore.tau_source,
                "rejudge": self.rescore.rejudge,
                "references": self.rescore.references,
                "exag": self.rescore.exag,
            },
        )

    def top_up(self, job: Any, cell: Cell, scoring: Any) -> Any:
        return None  # a kept cell of the new bench lacking a baseline is rescored whole

    def config(self, scoring: Any) -> dict[str, Any]:
        out = super().config(scoring)
        out["rescored_from"] = {
            "bench": str(Path(self.rescore.source).resolve()),
            "tau": self.source_config.get("tau"),
            "scorer": self.source_config.get("scorer"),
            "baselines": self.source_config.get("baselines"),
            **({"references": self.rescore.references} if self.rescore.references else {}),
            **({"exag": self.rescore.exag} if self.rescore.exag else {}),
        }
        return out


def run_rescore(
    plan: RescorePlan,
    out: str | Path,
    backend_options: dict[str, dict[str, Any]] | None = None,
    instances: dict[str, Any] | None = None,
    on_event: Callable[[str], None] | None = None,
    engine: EngineOptions = LOCAL,
) -> Results:
    """Score the source bench's cells again into ``out``; returns the new results record."""
    task = RescoreTask(plan, out, backend_options, on_event)
    if task.missing and on_event:
        on_event(f"the source lacks {len(task.missing)} cell(s) of its plan: left out")
    began = time.perf_counter()
    results = run_task(task, engine=engine, instances=instances, on_event=on_event)
    if on_event:
        on_event(f"rescored in {time.perf_counter() - began:.1f} s")
    return results
