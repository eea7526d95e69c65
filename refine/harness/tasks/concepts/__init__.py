"""CUBE concepts: concept prompts drawn many times per generator and their cultural diversity
(plan.py: concepts files and the plan; quality.py: the images' quality; summary.py: CUBE's
figures; top_up.py: kept cells scored again; task.py: the task and run_concepts)."""

from metrics.catalog import CUBE_FIGURES
from metrics.vendi import CUBE_KERNELS
from refine.harness.registry import TaskSpec, lazy_exports

SPEC = TaskSpec(
    name="concepts",
    help="Measure CUBE's cultural diversity of concept prompts, drawn many times per generator.",
    plan="refine.harness.tasks.concepts.plan:ConceptPlan",
    run="refine.harness.tasks.concepts.task:run_concepts",
    page="concepts",
    prompt_metrics=CUBE_FIGURES,
    table_metrics=tuple(f"cd:{k}" for k in CUBE_KERNELS),  # one kernel's cultural diversity
    tables=("metrics",),
    summary="refine.harness.tasks.concepts.summary:concept_lines",
    errors=("refine.harness.tasks.concepts.quality:QualityUnavailable",),
    estimate="refine.harness.tasks.concepts.summary:concepts_estimate",
)

_LAZY = {"ConceptPlan": "plan", "load_concepts": "plan", "run_concepts": "task"}

__getattr__ = lazy_exports(__name__, _LAZY)  # imported when asked for
