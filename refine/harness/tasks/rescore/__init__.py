"""A bench scored again without drawing: another observer, judge, tau, EXAG variant or
reference set (plan.py: what it changes; cell.py: a cell re-read; tau_quantiles.py: tau
at the real photos' quartiles; task.py: the task and run_rescore; summary.py: its lines)."""

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
    summary="refine.harness.tasks.rescore.summary:rescore_lines",
    record="bench",  # a rescore is a bench, its cells scored again
    errors=(
        "refine.harness.tasks.rescore.plan:RescoreError",
        "refine.harness.results:ResultsError",
    ),
    about="--tau recomputes ALIGN, HAL and FAITH from the stored observations with no model "
    "call; --backend observer=M observes the images again (EXAG and quality, the judge's, are "
    "kept); --backend judge=M reads the judge's baselines again; --baselines adds baselines; "
    "--tau-quantiles scores at the quartiles of tau on the prompts' real photos; a concepts "
    "run is scored again under --cube-weights. Each cell records what was recomputed, from "
    "what, and its model calls.",
)

_LAZY = {"RescorePlan": "plan", "run_rescore": "task"}

__getattr__ = lazy_exports(__name__, _LAZY)  # imported when asked for
