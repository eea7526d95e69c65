"""What a strategies bench is asked for (see :mod:`refine.harness.tasks.strategies`): the
strategies, the prompts, the budget per prompt, how its cells are kept; and what a
strategy's next step needs of the budget left."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from refine.harness.cells import CellFormat

STRATEGIES = ("best-of-n", "edit", "regenerate", "auto")
BEST_OF_N = "best-of-n"
FAILED = "failed: "  # how the stop reason of a cell a failure ended begins

STRATEGY_CELLS = CellFormat(
    "strategies.jsonl",
    inputs=(
        "strategy",
        "activity",
        "country",
        "budget_calls",
        "budget_seconds",
        "seed",
        "target",
        "candidates",
        "tau",
        "scorer",
    ),
    key=(
        "strategy",
        "activity",
        "country",
        "budget_calls",
        "budget_seconds",
        "seed",
        "target",
        "candidates",
    ),
    data=("calls", "seconds", "reached", "stop_reason", "run_dir", "picked"),
)


@dataclass
class StrategyPlan:
    strategies: list[str]
    prompts: list[tuple[str, str]]  # (activity, country)
    budget_calls: int | None = None
    budget_seconds: float | None = None
    seed: int = 42
    target: float = 0.7  # the loop's stop, and the share of prompts reaching it
    candidates: int = 2  # per editing round
    tau: float | None = None
    profile: str = "gemini"
    backends: dict[str, str] = field(default_factory=dict)

    def check(self) -> None:
        """A ValueError naming the option that cannot be, and what to do instead."""
        unknown = [s for s in self.strategies if s not in STRATEGIES]
        if unknown:
            raise ValueError(
                f"--strategies: {', '.join(unknown)} unknown; choose among {', '.join(STRATEGIES)}"
            )
        if not self.strategies or len(set(self.strategies)) != len(self.strategies):
            raise ValueError("--strategies: name each strategy once, at least one")
        if self.budget_calls is None and self.budget_seconds is None:
            raise ValueError("--strategies needs a budget: --budget-calls N or --budget-seconds S")
        if self.budget_calls is not None and self.budget_calls < 1:
            raise ValueError(f"--budget-calls: at least 1, got {self.budget_calls}")
        if self.budget_seconds is not None and self.budget_seconds <= 0:
            raise ValueError(f"--budget-seconds: more than 0, got {self.budget_seconds:g}")
        if not 0.0 <= self.target <= 1.0:
            raise ValueError(f"--target: between 0 and 1, got {self.target:g}")
        if not 1 <= self.candidates <= 64:
            raise ValueError(f"--candidates: 1 to 64, got {self.candidates}")
        if not self.prompts:
            raise ValueError("no prompts: the countries and activities given leave none")


def first_best(steps: list[dict[str, Any]]) -> int | None:
    """The first step with the highest FAITH (None without one)."""
    scored = [s for s in steps if s["faith"] is not None]
    if not scored:
        return None
    return max(scored, key=lambda s: s["faith"])["step"]


def too_short(
    budget: Any, deadline: float | None, costs: list[tuple[int, float]], what: str
) -> str:
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
