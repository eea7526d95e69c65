"""The editor bench: editors over K edits in a row on the same prompts (plan.py, cells.py,
summary.py; task.py: the task and run_editor_loops)."""

from metrics.catalog import EDITOR_LOOP
from refine.harness.registry import TaskSpec, lazy_exports

SPEC = TaskSpec(
    name="editor-loops",
    help="Compare editors over K edits in a row on the same prompts.",
    plan="refine.harness.tasks.editor_loops.plan:EditorLoopPlan",
    run="refine.harness.tasks.editor_loops.task:run_editor_loops",
    page="editor_loops",
    metrics=EDITOR_LOOP,
    summary="refine.harness.tasks.editor_loops.summary:loop_lines",
    failures="refine.harness.tasks.editor_loops.summary:failed_chains",
)

_LAZY = {"EditorLoopPlan": "plan", "run_editor_loops": "task"}

__getattr__ = lazy_exports(__name__, _LAZY)  # imported when asked for
