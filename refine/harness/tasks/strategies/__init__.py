"""The strategies bench: best-of-N against the loop's strategies at one call budget per prompt
(plan.py, cells.py, summary.py; task.py: the task and run_strategies)."""

from refine.harness.registry import TaskSpec, lazy_exports

SPEC = TaskSpec(
    name="strategies",
    help="Compare best-of-N with the loop's strategies at the same call budget per prompt.",
    plan="refine.harness.tasks.strategies.plan:StrategyPlan",
    run="refine.harness.tasks.strategies.task:run_strategies",
    page="strategies",
    metrics=("faith", "quality"),
    summary="refine.harness.tasks.strategies.summary:summary_lines",
)

_LAZY = {"StrategyPlan": "plan", "run_strategies": "task"}

__getattr__ = lazy_exports(__name__, _LAZY)  # imported when asked for
