"""What a strategies bench is asked for (see :mod:`refine.harness.tasks.strategies.task`): the
strategies, the prompts, the budget per prompt, how its cells are kept; and what a
strategy's next step needs of the budget left."""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

from pydantic import field_validator, model_validator

from refine.harness.cells import CellFormat
from refine.harness.plan import BACKENDS, PROFILE, Backends, option
from refine.harness.tasks.bench.plan import PromptPlan
from refine.io.files import slug

STRATEGIES = ("best-of-n", "edit", "regenerate", "auto")
BEST_OF_N = "best-of-n"
# a loop's strategy with --memory: the bench's own store of fixes (fixes.jsonl in its
# folder), filled by these runs' accepted rounds as the prompts go (no model call)
MEMORY = "+memory"


def memory_settings(strategy: str, folder: Any) -> dict[str, Any]:
    """A strategy's run settings for --memory: a store of its own in the bench folder,
    whose hints come from other prompts' runs only (a prompt's cell made again, or its
    other strategies, give it none)."""
    return {
        "memory": with_memory(strategy)[1],
        "memory_store": str(Path(folder) / f"fixes-{slug(strategy, 40)}.jsonl"),
        "memory_other_prompts": True,
    }


def with_memory(strategy: str) -> tuple[str, bool]:
    """A strategy's move and whether its runs remember fixes: ``edit+memory`` ->
    (``edit``, True)."""
    if strategy.endswith(MEMORY):
        return strategy[: -len(MEMORY)], True
    return strategy, False


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
    data=("calls", "seconds", "reached", "stop_reason", "run_dir", "picked", "forgetting"),
)


class StrategyPlan(PromptPlan):
    """Each strategy on each prompt at one budget per prompt; a strategy named twice, no
    budget, or none of either is refused here, for every front."""

    positional = ("strategies", "prompts")

    strategies: list[str] = option(
        help=f"The strategies to compare, separated by commas ({', '.join(STRATEGIES)}); "
        "a loop's with +memory (edit+memory) gives its writer the fixes earlier prompts' "
        "runs made.",
        given="list",
        min_length=1,
    )
    budget_calls: int | None = option(
        None, "Model calls per prompt and strategy (a call budget).", ge=1
    )
    budget_seconds: float | None = option(
        None, "Wall-clock seconds per prompt and strategy (a time budget).", gt=0
    )
    seed: int = option(42, "The first seed of every strategy's images.", ge=0, le=2**32 - 1)
    target: float = option(
        0.7, "The loop's stop, and the share of prompts reaching it: FAITH.", ge=0, le=1
    )
    candidates: int = option(2, "Candidates per editing round.", ge=1, le=64)
    tau: float | None = option(
        None, "The match threshold (the profile's when not given).", gt=0, le=1
    )
    profile: str = PROFILE
    backends: Backends = BACKENDS

    @field_validator("strategies")
    @classmethod
    def _known(cls, value: list[str]) -> list[str]:
        known = (*STRATEGIES, *(s + MEMORY for s in STRATEGIES if s != BEST_OF_N))
        unknown = [s for s in value if s not in known]
        if unknown:
            raise ValueError(f"{', '.join(unknown)} unknown; choose among {', '.join(known)}")
        if len(set(value)) != len(value):
            raise ValueError("name each strategy once")
        return value

    @model_validator(mode="after")
    def _budget(self) -> StrategyPlan:
        if self.budget_calls is None and self.budget_seconds is None:
            raise ValueError("--strategies needs a budget: --budget-calls N or --budget-seconds S")
        return self


def first_best(steps: list[dict[str, Any]]) -> int | None:
    """The step best-of-N picks (None without a FAITH): the first with the highest FAITH.
    Where FAITH was read from sampled answers (a step's ``faith_se``), a later step takes
    the pick's place only when its FAITH is higher beyond the noise of both readings (the
    difference's one-sided 90% lower bound above 0), as the loop accepts an edit: the
    largest of N noisy readings is otherwise chosen for its noise."""
    from refine.loop.policy import CONFIDENCE_Z

    pick: dict[str, Any] | None = None
    for s in steps:
        if s["faith"] is None:
            continue
        noise = (
            0.0
            if pick is None
            else math.hypot(s.get("faith_se") or 0.0, pick.get("faith_se") or 0.0)
        )
        if pick is None or s["faith"] - pick["faith"] - CONFIDENCE_Z * noise > 0:
            pick = s
    return None if pick is None else pick["step"]


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
