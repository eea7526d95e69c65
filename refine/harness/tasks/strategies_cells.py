"""How a strategies cell is made: one strategy on one prompt at the plan's budget (see
:mod:`refine.harness.tasks.strategies`)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from refine import usage
from refine.evaluate.assess import photo_baseline
from refine.harness.cells import Cell
from refine.harness.tasks.strategies_plan import BEST_OF_N, StrategyPlan
from refine.io.files import slug

CANDIDATES_AT_MOST = 1000  # best-of-N under a wall-time budget alone: its one other limit


class StrategyMaker:
    """One refiner (one set of models) that makes strategies cells in a bench folder."""

    def __init__(
        self,
        plan: StrategyPlan,
        folder: str,
        backend_options: dict[str, dict[str, Any]] | None = None,
        instances: Any = None,
    ) -> None:
        from refine.loop.refiner import Refiner

        plan.check()
        self.plan, self.folder = plan, Path(folder)
        if isinstance(instances, Refiner):
            self.refiner = instances
        else:
            self.refiner = Refiner(
                plan.profile, plan.backends, backend_options, instances=instances
            )
        backends = self.refiner.backends
        self.tau, self.tau_source = backends.tau(plan.tau)
        roles = ("generator", "editor", "observer", "judge", "llm", "text_embedder")
        roles += ("image_embedder",)
        self.scoring = {r: backends.names[r] for r in roles if backends.names.get(r)}

    def describe(self) -> tuple[float, str, dict[str, str]]:
        return self.tau, self.tau_source, self.scoring

    def spec(self, activity: str, country: str, strategy: str) -> tuple[Any, Any]:
        from refine import settings
        from refine.evaluate.reference_source import ReferenceSource

        p = self.plan
        raw = {
            "activity": activity,
            "country": country,
            "rounds": 100,  # the budget (or the target) ends the run, not patience:
            "patience": 100,  # a loop spends what best-of-N spends
            "target": p.target,
            "candidates": p.candidates,
            "seed": p.seed,
            "tau": self.tau,
            "strategy": "edit" if strategy == BEST_OF_N else strategy,
            "budget_seconds": p.budget_seconds,
        }

        def find(a: str, c: str) -> Any:
            return ReferenceSource.default().find(a, c).pack

        return settings.load(raw, find=find)

    def make(self, job: tuple[str, str, str], tell: Any = None) -> Cell:
        strategy, activity, country = job
        spec, refs = self.spec(activity, country, strategy)
        p = self.plan
        # the photos' baseline depends on the references alone: outside every budget
        photo_baseline(self.refiner.assessor(spec), refs)
        budget = usage.CallBudget(p.budget_calls) if p.budget_calls else None
        began = time.monotonic()
        deadline = None if p.budget_seconds is None else began + p.budget_seconds
        where = self.folder / "strategies" / slug(strategy, 40)
        with usage.call_budget(budget), usage.deadline(deadline):
            if strategy == BEST_OF_N:
                steps, picked, stop = self._best_of_n(spec, refs, budget, deadline, where)
                run_dir = None
            else:
                steps, picked, stop, run_dir = self._loop(spec, refs, budget, deadline, where)
        seconds = time.monotonic() - began
        chosen = next((s for s in steps if s["step"] == picked), None)
        faith = None if chosen is None else chosen["faith"]
        errors = [] if chosen is not None else [f"no image within the budget ({stop})"]
        return Cell(
            key=(strategy, activity, country, p.budget_calls, p.budget_seconds, p.seed)
            + (p.target, p.candidates),
            inputs={
                "strategy": strategy,
                "activity": activity,
                "country": country,
                "budget_calls": p.budget_calls,
                "budget_seconds": p.budget_seconds,
                "seed": p.seed,
                "target": p.target,
                "candidates": p.candidates,
                "tau": self.tau,
                "scorer": self.scoring,
            },
            outputs={"faith": faith, "quality": None if chosen is None else chosen["quality"]},
            images=steps,
            data={
                "calls": budget.spent if budget is not None else _calls(steps),
                "seconds": seconds,
                "reached": faith is not None and faith >= p.target,
                "stop_reason": stop,
                "run_dir": run_dir,
                "picked": picked,
            },
            timings={"wall": seconds},
            errors=errors,
        )

    def _best_of_n(
        self, spec: Any, refs: Any, budget: Any, deadline: float | None, where: Path
    ) -> tuple[list[dict[str, Any]], int | None, str]:
        """Candidates one seed after the other until the budget (or the target) says stop;
        the pick is the first with the highest FAITH."""
        from refine.assets import prompt_template
        from refine.evaluate.assess import Assessor, CallCounter, QualityCache

        backends = self.refiner.backends
        assessor = Assessor(backends, CallCounter(), self.refiner.baselines, QualityCache())
        prompt = (
            prompt_template("generate").strip().format(activity=spec.activity, country=refs.country)
        )
        steps: list[dict[str, Any]] = []
        costs: list[tuple[int, float]] = []  # (calls, seconds) of each candidate
        stop = f"{CANDIDATES_AT_MOST} candidates made"
        where.mkdir(parents=True, exist_ok=True)
        for j in range(CANDIDATES_AT_MOST):
            best = _best(steps)
            if best is not None and (steps[best]["faith"] or 0.0) >= spec.target:
                stop = f"target: FAITH {steps[best]['faith']:.3f} >= {spec.target:g}"
                break
            short = _short(budget, deadline, costs, "candidate")
            if short:
                stop = short
                break
            before, t = budget.spent if budget else 0, time.monotonic()
            seed = spec.seed + j
            try:
                with backends.using("generator") as generator:
                    image = generator.generate(prompt, [seed])[0]
                a = assessor.assess(image, refs, spec.tau, spec.max_per_dimension)
            except usage.BudgetExhausted as err:
                stop = f"budget: {err} (candidate {j} dropped)"
                break
            name = f"{slug(spec.country, 30)}--{slug(spec.activity, 60)}--s{seed}.png"
            image.save(where / name)
            costs.append(((budget.spent if budget else 0) - before, time.monotonic() - t))
            steps.append(
                {
                    "step": j,
                    "kind": "generate",
                    "decision": "candidate",
                    "seed": seed,
                    "faith": a.scores.faith,
                    "quality": a.scores.quality,
                    "calls": budget.spent if budget else None,
                    "image": str((where / name).relative_to(self.folder)),
                }
            )
        return steps, _best(steps), stop

    def _loop(
        self, spec: Any, refs: Any, budget: Any, deadline: float | None, where: Path
    ) -> tuple[list[dict[str, Any]], int | None, str, str]:
        """A refinement run with the strategy, stopped before a round the budget left would
        likely not cover; its rounds are the steps, the pick its best round."""
        from refine.events import RoundDecided

        costs: list[tuple[int, float]] = []  # each editing round's (calls, seconds)
        guess: list[tuple[int, float]] = []  # an editing round's, from round 0's
        mark = [budget.spent if budget else 0, time.monotonic()]
        at: dict[int, int | None] = {}  # each round's calls used by its decision
        worker: Any = None

        def heard(event: Any) -> None:
            if not isinstance(event, RoundDecided):
                return
            spent = budget.spent if budget else 0
            at[event.round] = spent if budget else None
            cost = (spent - mark[0], time.monotonic() - mark[1])
            mark[:] = [spent, time.monotonic()]
            if event.round == 0:  # an editing round makes `candidates` images, not one
                ratio = spec.candidates / max(1, spec.initial_candidates)
                guess[:] = [(int(cost[0] * ratio) + 1, cost[1] * ratio)]  # +1: the writer
            else:
                costs.append(cost)
            short = _short(budget, deadline, costs or guess, "round")
            if short:
                worker.request_stop(short)

        worker = self.refiner.sibling(on_event=heard)
        run = worker.start(spec, refs, out=where)
        steps = []
        best: float | None = None
        for r in run.rounds:
            s = r.best.scores
            if r.decision in ("initial", "accepted"):
                best = s.faith
            steps.append(
                {
                    "step": r.index,
                    "kind": r.kind,
                    "decision": r.decision,
                    "faith": s.faith,
                    "quality": s.quality,
                    "best_faith": best,
                    "calls": at.get(r.index),
                    "image": str((where / run.id / r.best.image).relative_to(self.folder)),
                }
            )
        run_dir = str((where / run.id).relative_to(self.folder))
        return steps, run.best_round, run.stop_reason or "", run_dir


def _best(steps: list[dict[str, Any]]) -> int | None:
    """The first step with the highest FAITH (None without one)."""
    scored = [s for s in steps if s["faith"] is not None]
    if not scored:
        return None
    return max(scored, key=lambda s: s["faith"])["step"]


def _short(budget: Any, deadline: float | None, costs: list[tuple[int, float]], what: str) -> str:
    """Why another ``what`` would likely not fit the budget left (as much as the most any
    cost so far), or ""."""
    if not costs:
        return ""
    calls, seconds = max(c for c, _ in costs), max(s for _, s in costs)
    if budget is not None and budget.left < calls:
        return (
            f"budget: {budget.spent} of {budget.limit} calls used; another {what} needs "
            f"about {calls}"
        )
    if deadline is not None and deadline - time.monotonic() < seconds:
        return f"budget: the wall time left is under another {what}'s {seconds:.1f} s"
    return ""


def _calls(steps: list[dict[str, Any]]) -> int | None:
    return steps[-1]["calls"] if steps else None
