"""The generator bench: generators on the CULTIVate catalog, every image scored by one scorer
(plan.py: what is asked; cells.py: a cell per generator and prompt; summary.py: the figures;
top_up.py: kept cells scored again for what they lack; task.py: the task and run_bench;
lines.py: the terminal's leaderboard)."""

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
    summary="refine.harness.tasks.bench.lines:bench_lines",
    about="The AHEaD paper's way: every generator draws the same seeds for every prompt; one "
    "scorer observes and scores all images (ALIGN, HAL, EXAG, FAITH, DDIV, SDIV, Vendi); "
    "means with 95% bootstrap intervals per generator and country, a paired comparison, "
    "results.json (the results record), rows.csv and an HTML leaderboard. --engine ray "
    "makes the cells on Ray actors (one set of models each; the bench folder must be on "
    "storage every node sees) with the same results. --recipe runs a paper's protocol with "
    "the paper's settings and writes its table in the paper's layout. The loop's own "
    "benches are commands of their own: refine strategies and refine editor-loops.",
)

_LAZY = {"BenchPlan": "plan", "plan_prompts": "plan", "run_bench": "task"}

__getattr__ = lazy_exports(__name__, _LAZY)  # imported when asked for
