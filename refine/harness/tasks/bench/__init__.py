"""The generator bench: generators on the CULTIVate catalog, every image scored by one scorer
(plan.py: what is asked; cells.py: a cell per generator and prompt; summary.py: the figures;
top_up.py: kept cells scored again for what they lack; task.py: the task and run_bench)."""

from metrics.catalog import BENCH_IMAGE, BENCH_PROMPT
from refine.harness.registry import TaskSpec, lazy_exports

SPEC = TaskSpec(
    name="bench",
    help="Compare generators on the CULTIVate catalog, every image scored by one scorer.",
    plan="refine.harness.tasks.bench.plan:BenchPlan",
    run="refine.harness.tasks.bench.task:run_bench",
    page="bench",
    metrics=BENCH_IMAGE,
    prompt_metrics=BENCH_PROMPT,
    table_metrics=("catalog",),  # a recipe's table may show any metric a bench records
    tables=("metrics", "agreement", "settings"),
)

_LAZY = {"BenchPlan": "plan", "plan_prompts": "plan", "run_bench": "task"}

__getattr__ = lazy_exports(__name__, _LAZY)  # imported when asked for
