"""Existing images observed and scored, one cell an image (plan.py: what is asked;
task.py: the cells, their figures and run_score; summary.py: the terminal's lines)."""

from metrics.catalog import BENCH_IMAGE
from refine.harness.registry import TaskSpec, lazy_exports

SPEC = TaskSpec(
    name="score",
    help="Observe and score existing images (AHEaD, EXAG, FAITH) without editing them.",
    plan="refine.harness.tasks.score.plan:ScorePlan",
    run="refine.harness.tasks.score.task:run_score",
    metrics=BENCH_IMAGE,
    summary="refine.harness.tasks.score.summary:score_lines",
)

_LAZY = {"ScorePlan": "plan", "run_score": "task"}

__getattr__ = lazy_exports(__name__, _LAZY)  # imported when asked for
