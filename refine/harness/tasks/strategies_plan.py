"""What a strategies bench is asked for (see :mod:`refine.harness.tasks.strategies`): the
strategies, the prompts, the budget per prompt, and how its cells are kept."""

from __future__ import annotations

from dataclasses import dataclass, field

from refine.harness.cells import CellFormat

STRATEGIES = ("best-of-n", "edit", "regenerate", "auto")
BEST_OF_N = "best-of-n"

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
