"""Editors over many edits: ``refine editor-loops --editor M [--editor M2 ...] --loops K``.

For every (activity, country) prompt the generator draws one source image (loop 0, the
same picture for every editor). Each editor then edits it K times in a row, each edit
made from the one before (``edit_from = "last"``) with the loop's own instruction for it
(the changes planned from that image's feedback, worded as a run words them), one
candidate an edit. Every edit is kept, whatever it scores, so that erosion shows; every
loop is observed and scored as the loop scores its candidates.

Per loop: FAITH, quality and drift, from the image before (1 - the cosine of their image
embeddings), outside the edit's boxes with ``--localize`` (1 - SSIM there), and from the
source. The loop's quality guard is the source's quality less ``max_quality_drop``; the
first loop whose quality falls below it is marked, per prompt and for the editor's mean.

The cells (one per editor and prompt) are kept in ``editor_loops.jsonl``, each a run
directory under ``runs/``; the summary is
:mod:`refine.harness.tasks.editor_loops.summary`, the page
:func:`refine.present.report.editor_loops.write_editor_loops_page`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from refine.harness.cells import Cell
from refine.harness.engine import LOCAL, EngineOptions
from refine.harness.results import Results
from refine.harness.task import run_task
from refine.harness.tasks.editor_loops.plan import EDITOR_LOOP_CELLS, EditorLoopPlan
from refine.harness.tasks.editor_loops.summary import FIGURES
from refine.harness.tasks.loop_benches import LoopBenchTask

# a row a loop: the cell's prompt, the loop, its figures, the guard's mark, the image
ROW_FIELDS = ("editor", "activity", "country", "loop", *FIGURES, "below_guard", "image")


class EditorLoopTask(LoopBenchTask):
    """An editor bench on the harness: one cell per editor and prompt."""

    name = "editor-loops"
    form = EDITOR_LOOP_CELLS
    csv_file = "editor_loops.csv"
    maker_class = ("refine.harness.tasks.editor_loops.cells", "EditorLoopMaker")

    def variants(self) -> list[str]:
        return self.plan.editors

    def job_key(self, job: tuple[str, str, str]) -> tuple[Any, ...]:
        p = self.plan
        return (*job, p.loops, p.seed, p.localize)

    def settled(self, cell: Cell) -> bool:
        return not cell.data.get("failed")  # a chain an error ended is made again

    def progress(self, cell: Cell) -> str:
        from refine.numbers import shown

        given = cell.inputs
        faiths = " -> ".join(shown(r["faith"], ".3f") for r in cell.images)
        fell = cell.data.get("guard_loop")
        guard = f"; quality below the guard from loop {fell}" if fell else ""
        failed = cell.data.get("failed")
        said = f"; failed: {failed}" if failed else ""
        faith = f"FAITH {faiths}" if faiths else "no image scored"
        return f"{given['editor']}: {given['activity']} ({given['country']}): {faith}{guard}{said}"

    def config(self, scoring: Any) -> dict[str, Any]:
        tau, tau_source, scorer = scoring
        p = self.plan
        return {
            "editors": p.editors,
            "loops": p.loops,
            "localize": p.localize,
            "profile": p.profile,
            "scorer": scorer,
            "tau": tau,
            "tau_source": tau_source,
            "seed": p.seed,
            "max_quality_drop": p.max_quality_drop,
            "prompts": [list(x) for x in p.prompts],
        }

    def summarise(self, cells: list[Cell], scoring: Any) -> dict[str, Any]:
        from refine.harness.tasks.editor_loops.summary import summarise

        p = self.plan
        return summarise(cells, p.editors, p.loops, seed=p.seed)

    def csv_fields(self) -> tuple[str, ...]:
        return ROW_FIELDS

    def csv_rows(self, line: dict[str, Any]) -> list[dict[str, Any]]:
        guard = line.get("guard")
        return [
            {
                "editor": line["editor"],
                "activity": line["activity"],
                "country": line["country"],
                **{k: r.get(k) for k in ("loop", *FIGURES)},
                "below_guard": None
                if guard is None or r.get("quality") is None
                else r["quality"] < guard - 1e-9,
                "image": r.get("image"),
            }
            for r in line.get("images") or []
        ]


def run_editor_loops(
    plan: EditorLoopPlan,
    out: str | Path,
    backend_options: dict[str, dict[str, Any]] | None = None,
    instances: Any = None,
    on_event: Callable[[str], None] | None = None,
    engine: EngineOptions = LOCAL,
) -> Results:
    """Every editor's chain of ``plan.loops`` edits on every prompt's source, into ``out``
    (cells done before are kept); returns the results record (``results.json``, with
    ``editor_loops.csv``). ``instances``: a :class:`refine.loop.refiner.Refiner` whose
    models to share (the local engine)."""
    task = EditorLoopTask(plan, out, backend_options, on_event)
    return run_task(task, engine=engine, instances=instances, on_event=on_event)
