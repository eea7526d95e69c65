"""CAIRE's universal set: each concept generated in each country and every image scored for
every country by the 1-5 CAIRE scorer, set against people's ratings (CAIRE C.9) (plan.py:
what is asked; task.py: a cell per generator, concept and country, and run_caire;
table.py: the recipe's table, the estimate and the terminal's lines). Its command is
``refine caire universal``; its recipes' ``refine bench --recipe caire-table2``."""

from refine.harness.registry import TaskSpec, lazy_exports

SPEC = TaskSpec(
    name="caire",
    help="Draw CAIRE's universal set (each concept in each country) and score every image "
    "1-5 for every country (CAIRE Sec. 4.2, C.9).",
    plan="refine.harness.tasks.caire.plan:CairePlan",
    run="refine.harness.tasks.caire.task:run_caire",
    table_metrics=("caire",),
    tables=("agreement",),
    summary="refine.harness.tasks.caire.table:caire_lines",
    command=("caire", "universal"),
    table="refine.harness.tasks.caire.table:caire_table",
    estimate="refine.harness.tasks.caire.table:caire_estimate",
)

_LAZY = {"CairePlan": "plan", "read_concepts": "plan", "run_caire": "task"}

__getattr__ = lazy_exports(__name__, _LAZY)  # imported when asked for
