"""CAIRE's universal set: each concept generated in each country and every image scored for
every country by the 1-5 CAIRE scorer, set against people's ratings (CAIRE C.9). Its
recipes' command runs it (refine bench --recipe caire-table2)."""

from refine.harness.registry import TaskSpec

SPEC = TaskSpec(
    name="caire",
    help="Score CAIRE's universal set and its agreement with people's ratings (CAIRE C.9).",
    plan=None,
    run=None,
    table_metrics=("caire",),
    tables=("agreement",),
)
