"""A batch: runs from a spec file, each going on from its last round after a kill (specs.py:
the file read; runs.py: one run of a line; record.py: batch.json, the live state; task.py:
the task and run_batch)."""

from refine.harness.tasks.batch.task import run_batch

__all__ = ["run_batch"]
