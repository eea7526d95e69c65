"""A toy task on the harness, the smallest a task can be: each job is a number k, and
its cell holds the Vendi score of k orthogonal unit vectors (exactly k: k equally weighted
eigenvalues of 1/k) and a DDIV it cannot compute (missing, never a number). Module-level,
so that Ray's workers can build its maker.

It writes only its maker, its jobs and its Plan: the rest (the cells' keys, which cells
are kept, the progress line, the record's config, the summary pooled as the catalog says,
the CSV) are :class:`refine.harness.task.CellTask`'s defaults. :data:`TOY` is its TaskSpec:
registered in a test (``refine.harness.registry.registered(TOY)``), it is ``refine toy``
and a recipe's task with no other edit."""

from __future__ import annotations

from typing import Any

from pydantic import field_validator

from refine.harness.cells import Cell, CellFormat
from refine.harness.engine import MakerSpec
from refine.harness.plan import Plan, option
from refine.harness.registry import TaskSpec
from refine.harness.task import CellTask, cells_runner


class ToyMaker:
    def __init__(self, instances: Any = None) -> None:
        pass

    def describe(self) -> str:
        return "orthogonal vectors"

    def make(self, k: int, tell: Any = None) -> Cell:
        import numpy as np

        from metrics.vendi import vendi_from_embeddings

        vectors = np.eye(k)
        outputs = {"vendi": vendi_from_embeddings(vectors), "ddiv": None}
        inputs = {"k": k, "maker": self.describe()}
        return Cell(key=(k,), inputs=inputs, outputs=outputs, data={"vectors": vectors.tolist()})


class ToyPlan(Plan):
    ks: list[int] = option(help="How many orthogonal vectors each cell holds.", given="list")

    @field_validator("ks")
    @classmethod
    def _positive(cls, ks: list[int]) -> list[int]:
        if not ks or min(ks) < 1:
            raise ValueError(f"each k is at least 1, got {min(ks, default=None)}")
        return ks


class ToyTask(CellTask):
    name, what, metrics, csv_file = "toy", "the toy folder", ("vendi", "ddiv"), "toy.csv"
    form = CellFormat("toy.jsonl", inputs=("k", "maker"), key=("k",), data=("vectors",))

    def __init__(self, plan: ToyPlan, folder: Any, emit: Any = None) -> None:
        super().__init__(folder, emit)
        self.plan = plan

    def maker(self) -> MakerSpec:
        return MakerSpec(ToyMaker)

    def jobs(self) -> list[int]:
        return list(self.plan.ks)


TOY = TaskSpec(
    name="toy",
    help="Vendi of k orthogonal vectors, one cell per k.",
    plan="tests.fakes.toy_task:ToyPlan",
    run="tests.fakes.toy_task:run_toy",
    prompt_metrics=("vendi", "ddiv"),
    tables=("metrics",),
)
run_toy = cells_runner(ToyTask)


class UnbuildableToyMaker:
    """A maker whose models cannot be had (the Ray engine's test of a worker that cannot
    build one)."""

    def __init__(self, instances: Any = None) -> None:
        raise RuntimeError("the toy's models are not on this node")


class UnbuildableToyTask(ToyTask):
    def maker(self) -> MakerSpec:
        return MakerSpec(UnbuildableToyMaker)
