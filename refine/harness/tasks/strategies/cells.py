"""How a strategies cell is made: one strategy on one prompt at the plan's budget (see
:mod:`refine.harness.tasks.strategies.task`)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from refine import usage
from refine.evaluate.assess import photo_baseline
from refine.harness.cells import Cell
from refine.harness.tasks.loop_benches import forgetting_of, loop_models
from refine.harness.tasks.strategies.plan import (
    BEST_OF_N,
    FAILED,
    StrategyPlan,
    first_best,
    memory_settings,
    too_short,
    with_memory,
)
from refine.io.files import slug
from refine.io.store import run_left

CANDIDATES_AT_MOST = 1000  # best-of-N under a wall-time budget alone: its one other limit
FAILURES_IN_A_ROW = 3  # best-of-N gives up after this many candidates failing in a row
UNLIMITED = 10**12  # the calls "budget" that only counts


class StrategyMaker:
    """One refiner (one set of models) that makes strategies cells in a bench folder."""

    def __init__(
        self,
        plan: StrategyPlan,
        folder: str,
        backend_options: dict[str, dict[str, Any]] | None = None,
        instances: Any = None,
    ) -> None:
        self.plan, self.folder = plan, Path(folder)
        self.refiner, self.tau, self.tau_source, self.scoring = loop_models(
            plan, backend_options, instances
        )

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
            "strategy": "edit" if strategy == BEST_OF_N else with_memory(strategy)[0],
            "budget_seconds": p.budget_seconds,
            **memory_settings(strategy, self.folder),
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
        # without a calls budget the calls are counted all the same (no limit to reach)
        budget = usage.CallBudget(p.budget_calls or UNLIMITED)
        began = time.monotonic()
        deadline = None if p.budget_seconds is None else began + p.budget_seconds
        where = self.folder / "strategies" / slug(strategy, 40)
        with usage.call_budget(budget), usage.deadline(deadline):
            if strategy == BEST_OF_N:
                steps, picked, stop = self._best_of_n(spec, refs, budget, deadline, where)
                run_dir, forgot = None, None
            else:
                steps, picked, stop, run_dir, forgot = self._loop(spec, refs, budget, deadline,
                                                                  where)  # fmt: skip
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
                "calls": budget.spent,
                "seconds": seconds,
                "reached": faith is not None and faith >= p.target,
                "stop_reason": stop,
                "run_dir": run_dir,
                "picked": picked,
                "forgetting": forgot,  # the loop's kept rounds: fixes made and undone
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
        from refine.evaluate.assess import CallCounter, QualityCache

        backends = self.refiner.backends
        # the refiner's models on counters of this cell's own (each candidate's cost)
        assessor = self.refiner.assessor(calls=CallCounter(), qualities=QualityCache())
        prompt = (
            prompt_template("generate").strip().format(activity=spec.activity, country=refs.country)
        )
        steps: list[dict[str, Any]] = []
        costs: list[tuple[int, float]] = []  # (calls, seconds) of each candidate
        stop = f"{CANDIDATES_AT_MOST} candidates made"
        where.mkdir(parents=True, exist_ok=True)
        for j in range(CANDIDATES_AT_MOST):
            best = first_best(steps)
            if best is not None and (steps[best]["faith"] or 0.0) >= spec.target:
                stop = f"target: FAITH {steps[best]['faith']:.3f} >= {spec.target:g}"
                break
            short = too_short(budget, deadline, costs, "candidate")
            if short:
                stop = short
                break
            before, t = budget.spent, time.monotonic()
            seed = spec.seed + j
            try:
                with backends.using("generator") as generator:
                    image = generator.generate(prompt, [seed])[0]
                a = assessor.assess(image, refs, spec.tau, spec.max_per_dimension)
            except usage.BudgetExhausted as err:
                stop = f"budget: {err} (candidate {j} dropped)"
                break
            except usage.QuotaSpent:  # every later cell would meet it too: the bench stops
                raise
            except Exception as err:  # this candidate only, its calls counted, as the loop
                failed = f"{type(err).__name__}: {err}"
                costs.append((budget.spent - before, time.monotonic() - t))
                steps.append({"step": j, "kind": "generate", "decision": "failed", "seed": seed,
                              "faith": None, "quality": None, "calls": budget.spent,
                              "error": failed})  # fmt: skip
                if [s["decision"] for s in steps[-FAILURES_IN_A_ROW:]] == ["failed"] * 3:
                    stop = f"{FAILED}{FAILURES_IN_A_ROW} candidates in a row; the last: {failed}"
                    break
                continue
            name = f"{slug(spec.country, 30)}--{slug(spec.activity, 60)}--s{seed}.png"
            image.save(where / name)
            costs.append((budget.spent - before, time.monotonic() - t))
            # FAITH's error where it was read from sampled answers (plan.first_best)
            se = a.scores.stderr("faith")
            steps.append({"step": j, "kind": "generate", "decision": "candidate", "seed": seed,
                          "faith": a.scores.faith, "quality": a.scores.quality,
                          "calls": budget.spent,
                          "image": str((where / name).relative_to(self.folder)),
                          **({} if se is None else {"faith_se": se})})  # fmt: skip
        return steps, first_best(steps), stop

    def _loop(
        self, spec: Any, refs: Any, budget: Any, deadline: float | None, where: Path
    ) -> tuple[list[dict[str, Any]], int | None, str, str | None, dict | None]:
        """A refinement run with the strategy, stopped before a round the budget left would
        likely not cover; its rounds are the steps, the pick its best round."""
        from refine.events import RoundDecided

        costs: list[tuple[int, float]] = []  # each editing round's (calls, seconds)
        guess: list[tuple[int, float]] = []  # an editing round's, from round 0's
        mark = [budget.spent, time.monotonic()]
        at: dict[int, int | None] = {}  # each round's calls used by its decision
        worker: Any = None

        def heard(event: Any) -> None:
            if not isinstance(event, RoundDecided):
                return
            spent = budget.spent
            at[event.round] = spent
            cost = (spent - mark[0], time.monotonic() - mark[1])
            mark[:] = [spent, time.monotonic()]
            if event.round == 0:  # an editing round makes `candidates` images, not one
                ratio = spec.candidates / max(1, spec.initial_candidates)
                guess[:] = [(int(cost[0] * ratio) + 1, cost[1] * ratio)]  # +1: the writer
            else:
                costs.append(cost)
            short = too_short(budget, deadline, costs or guess, "round")
            if short:
                worker.request_stop(short)

        worker = self.refiner.sibling(on_event=heard)
        before = {d.name for d in where.iterdir()} if where.is_dir() else set()
        try:
            run = worker.start(spec, refs, out=where)
        except usage.QuotaSpent:  # every later cell would meet it too: the bench stops
            raise
        except Exception as err:  # the rounds done are kept; the bench goes on
            run = run_left(where, before)
            why = f"{FAILED}{type(err).__name__}: {err}"
            if run is None:
                return [], None, why, None, None
            run.stop_reason = why
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
        return steps, run.best_round, run.stop_reason or "", run_dir, forgetting_of(run)
