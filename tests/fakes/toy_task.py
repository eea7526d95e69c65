"""A toy task on the harness, the smallest a task can be: each job is a number k, and
its cell holds the Vendi score of k orthogonal unit vectors (exactly k: k equally weighted
eigenvalues of 1/k) and a DDIV it cannot compute (missing, never a number). Module-level,
so that Ray's workers can build its maker.

:data:`TOY` is its TaskSpec, with a one-field Plan (:class:`ToyPlan`): registered in a test
(``refine.harness.registry.registered(TOY)``), it is ``refine toy`` and a recipe's task
with no other edit."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import field_validator

from refine.harness.cells import Cell, CellFormat
from refine.harness.engine import LOCAL, EngineOptions, MakerSpec
from refine.harness.plan import Plan, option
from refine.harness.registry import TaskSpec
from refine.harness.results import Results
from refine.harness.task import CellTask, run_task

TOY_CELLS = CellFormat("toy.jsonl", inputs=("k", "maker"), key=("k",), data=("vectors",))


class ToyMaker:
    """Makes a toy cell (one per process)."""

    def __init__(self, instances: Any = None) -> None:
        self.made = 0

    def describe(self) -> str:
        return "orthogonal vectors"

    def make(self, k: int, tell: Any = None) -> Cell:
        import numpy as np

        from metrics.vendi import vendi_from_embeddings

        self.made += 1
        vectors = np.eye(k)
        return Cell(
            key=(k,),
            inputs={"k": k, "maker": self.describe()},
            outputs={"vendi": vendi_from_embeddings(vectors), "ddiv": None},
            data={"vectors": vectors.tolist()},
        )


class ToyTask(CellTask):
    """One cell per k; the summary is each metric's mean over cells with its interval."""

    name = "toy"
    what = "the toy folder"
    form = TOY_CELLS
    metrics = ("vendi", "ddiv")
    csv_file = "toy.csv"

    def __init__(self, ks: list[int], folder: str | Path, emit: Callable | None = None) -> None:
        super().__init__(folder, emit)
        self.ks = ks

    def maker(self) -> MakerSpec:
        return MakerSpec(ToyMaker)

    def jobs(self) -> list[int]:
        return list(self.ks)

    def job_key(self, job: int) -> tuple[int]:
        return (job,)

    def reusable(self, cell: Cell, made_with: Any) -> bool:
        return cell.inputs["maker"] == made_with

    def progress(self, cell: Cell) -> str:
        return f"k={cell.inputs['k']}: Vendi {cell.outputs['vendi']:.3f}"

    def config(self, made_with: Any) -> dict[str, Any]:
        return {"ks": self.ks, "maker": made_with}

    def summarise(self, cells: list[Cell], made_with: Any) -> dict[str, Any]:
        from metrics.stats import mean_interval

        out = {}
        for metric in ("vendi", "ddiv"):
            values = [c.outputs[metric] for c in cells if c.outputs[metric] is not None]
            mean = sum(values) / len(values) if values else None
            out[metric] = {"mean": mean, "interval": mean_interval(values) if values else None}
        return out

    def csv_fields(self) -> tuple[str, ...]:
        return ("k", "vendi", "ddiv")

    def csv_rows(self, line: dict[str, Any]) -> list[dict[str, Any]]:
        return [{m: line[m] for m in self.csv_fields()}]


class ToyPlan(Plan):
    ks: list[int] = option(
        help="How many orthogonal vectors each cell holds, separated by commas.",
        given="list",
        min_length=1,
    )

    @field_validator("ks")
    @classmethod
    def _positive(cls, ks: list[int]) -> list[int]:
        if any(k < 1 for k in ks):
            raise ValueError(f"each k is at least 1, got {min(ks)}")
        return ks


def run_toy(
    plan: ToyPlan,
    out: str | Path,
    on_event: Callable[[str], None] | None = None,
    engine: EngineOptions = LOCAL,
) -> Results:
    return run_task(ToyTask(plan.ks, out, on_event), engine=engine, on_event=on_event)


def toy_lines(results: Results) -> list[str]:
    summary = results.summary
    return [f"Vendi {summary['vendi']['mean']:.3f}, DDIV {summary['ddiv']['mean']}"]


TOY = TaskSpec(
    name="toy",
    help="Vendi of k orthogonal vectors, one cell per k.",
    plan="tests.fakes.toy_task:ToyPlan",
    run="tests.fakes.toy_task:run_toy",
    prompt_metrics=("vendi", "ddiv"),
    tables=("metrics",),
    summary="tests.fakes.toy_task:toy_lines",
)
