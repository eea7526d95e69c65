"""The loop against best-of-N at equal cost: ``refine strategies ...``.

For every (activity, country) prompt each strategy gets the same budget of model calls
(``--budget-calls``) or of wall time (``--budget-seconds``):

* ``best-of-n`` draws candidates from the generator one seed after the other, each
  observed and scored as the loop scores its own candidates, and keeps the best by FAITH;
* ``edit``, ``regenerate`` and ``auto`` are refinement runs with that ``strategy``
  (:mod:`refine.loop.policy`), spending the budget on rounds: the budget or the target
  ends them (up to 100 rounds; patience does not), as they end best-of-N.

A call is one request to a model as it leaves (:class:`refine.usage.CallBudget`): an API
request (generation, edit, observation, judge, language model; a retry too), or one input
of a local model's forward pass. The budget is hard: no request is sent past it. A
strategy stops before a round (or a candidate) the calls or seconds left would likely not
cover (as many as its largest so far); a round the budget still cuts short is dropped,
its calls counted. Every strategy of a prompt starts from the same seed, so best-of-N's
first candidate is the loop's round 0. The photos' EXAG baseline, which depends on the
references alone, is judged once per prompt before any budget starts.

The cells (one per strategy and prompt) are kept in ``strategies.jsonl`` and summarised per
strategy and per strategy and country (:mod:`refine.harness.tasks.strategies.summary`); the
page is :func:`refine.present.report.strategies.write_strategies_page`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from refine.harness.cells import Cell
from refine.harness.engine import LOCAL, EngineOptions
from refine.harness.results import Results
from refine.harness.task import run_task
from refine.harness.tasks.loop_benches import LoopBenchTask
from refine.harness.tasks.strategies.plan import FAILED, STRATEGY_CELLS, StrategyPlan


class StrategyTask(LoopBenchTask):
    """Strategies at equal cost on the harness: one cell per strategy and prompt."""

    name = "strategies"
    form = STRATEGY_CELLS
    csv_file = "strategies.csv"
    maker_class = ("refine.harness.tasks.strategies.cells", "StrategyMaker")

    def variants(self) -> list[str]:
        return self.plan.strategies

    def job_key(self, job: tuple[str, str, str]) -> tuple[Any, ...]:
        p = self.plan
        return (*job, p.budget_calls, p.budget_seconds, p.seed, p.target, p.candidates)

    def settled(self, cell: Cell) -> bool:
        """A cell a failure ended (the loop's run, or best-of-N's candidates in a row) is
        made again on the next run."""
        return not str(cell.data.get("stop_reason") or "").startswith(FAILED)

    def progress(self, cell: Cell) -> str:
        from refine.numbers import shown

        given, data = cell.inputs, cell.data
        return (
            f"{given['strategy']}: {given['activity']} ({given['country']}): "
            f"FAITH {shown(cell.outputs.get('faith'), '.3f')} with {data['calls']} calls, "
            f"{data['seconds']:.1f} s"
        )

    def config(self, scoring: Any) -> dict[str, Any]:
        tau, tau_source, scorer = scoring
        p = self.plan
        return {
            "strategies": p.strategies,
            "budget_calls": p.budget_calls,
            "budget_seconds": p.budget_seconds,
            "profile": p.profile,
            "scorer": scorer,
            "tau": tau,
            "tau_source": tau_source,
            "seed": p.seed,
            "target": p.target,
            "candidates": p.candidates,
            "prompts": [list(x) for x in p.prompts],
        }

    def summarise(self, cells: list[Cell], scoring: Any) -> dict[str, Any]:
        from refine.harness.tasks.strategies.summary import summarise

        p = self.plan
        return summarise(cells, p.strategies, p.budget_calls, seed=p.seed)

    def csv_fields(self) -> tuple[str, ...]:
        return (
            "strategy",
            "activity",
            "country",
            "step",
            "kind",
            "decision",
            "faith",
            "quality",
            "calls",
            "image",
            "picked",
        )

    def csv_rows(self, line: dict[str, Any]) -> list[dict[str, Any]]:
        return [
            {
                "strategy": line["strategy"],
                "activity": line["activity"],
                "country": line["country"],
                **{k: im.get(k) for k in ("step", "kind", "decision", "faith", "quality")},
                **{k: im.get(k) for k in ("calls", "image")},
                "picked": im.get("step") == line.get("picked"),
            }
            for im in line.get("images") or []
        ]


def run_strategies(
    plan: StrategyPlan,
    out: str | Path,
    backend_options: dict[str, dict[str, Any]] | None = None,
    instances: Any = None,
    on_event: Callable[[str], None] | None = None,
    engine: EngineOptions = LOCAL,
) -> Results:
    """Every strategy on every prompt of ``plan`` at the plan's budget, into ``out`` (cells
    done before are kept); returns the results record (``results.json``, with
    ``strategies.csv``). ``instances``: a :class:`refine.loop.refiner.Refiner` whose models
    to use (the local engine)."""
    task = StrategyTask(plan, out, backend_options, on_event)
    return run_task(task, engine=engine, instances=instances, on_event=on_event)
