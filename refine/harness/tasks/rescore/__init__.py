"""A bench scored again without drawing: another observer, judge, tau, EXAG variant or
reference set (plan.py: what it changes; cell.py: a cell re-read; tau_quantiles.py: tau
at the real photos' quartiles; task.py: the task and run_rescore)."""

from metrics.catalog import BENCH_IMAGE, BENCH_PROMPT
from refine.harness.registry import TaskSpec, lazy_exports

SPEC = TaskSpec(
    name="rescore",
    help="Score a bench's images again without drawing them: another observer, judge or tau.",
    plan="refine.harness.tasks.rescore.plan:RescorePlan",
    run="refine.harness.tasks.rescore.task:run_rescore",
    page="bench",
    metrics=BENCH_IMAGE,
    prompt_metrics=BENCH_PROMPT,
)

_LAZY = {"RescorePlan": "plan", "run_rescore": "task"}

__getattr__ = lazy_exports(__name__, _LAZY)  # imported when asked for
