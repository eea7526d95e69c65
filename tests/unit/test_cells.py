"""The typed cell, its store and the engine interface of the harness."""

from __future__ import annotations

import json
import threading

import pytest

from refine.harness.cells import SCHEMA, Cell, CellFormat, CellSchemaError, CellStore, latest
from refine.harness.engine import EngineOptions, MakerSpec, open_engine

FORM = CellFormat(
    "cells.jsonl", inputs=("generator", "seeds", "expectations"), key=("generator", "seeds")
)


def a_cell(generator: str = "g", vendi: float = 1.5) -> Cell:
    return Cell(
        key=(generator, (1, 2)),
        inputs={"generator": generator, "seeds": [1, 2], "expectations": True},
        outputs={"vendi": vendi},
        images=[{"file": "a.png", "faith": 0.25}, {"file": "b.png", "faith": 0.75}],
        data={"embeddings": [[1.0, 0.0]]},
        timings={"generate_s": 0.5},
    )


def test_a_cell_goes_to_its_line_and_back(tmp_path):
    store = CellStore(tmp_path, FORM)
    store.append(a_cell())
    (line,) = store.records()
    assert line["schema"] == SCHEMA == 1
    assert (
        line["generator"] == "g" and line["vendi"] == 1.5 and line["timings"] == {"generate_s": 0.5}
    )
    (back,) = store.cells()
    # "expectations" is a catalog metric name, but this format declares it an input
    assert back.inputs == {"generator": "g", "seeds": [1, 2], "expectations": True}
    assert back.outputs == {"vendi": 1.5}
    assert back.key == ("g", (1, 2))
    assert back.data == {"embeddings": [[1.0, 0.0]]}
    assert back.mean("faith") == 0.5 and back.mean("vendi") == 1.5 and back.mean("hal") is None


def test_a_line_before_the_schema_reads_as_version_0(tmp_path):
    path = tmp_path / "cells.jsonl"
    old = {"generator": "g", "seeds": [1, 2], "vendi": 2.0, "images": [], "legacy": 3}
    path.write_text(json.dumps(old) + "\n" + '{"generator": "cut')  # a line cut by a kill
    (cell,) = CellStore(tmp_path, FORM).cells()
    assert cell.schema == 0 and cell.timings == {} and cell.errors == []
    assert cell.outputs == {"vendi": 2.0}
    assert cell.data == {"legacy": 3}  # not a metric: kept, not lost


def test_a_newer_layout_is_refused_with_its_file_and_line(tmp_path):
    path = tmp_path / "cells.jsonl"
    line = a_cell().record()
    path.write_text(json.dumps(line) + "\n" + json.dumps({**line, "schema": SCHEMA + 1}) + "\n")
    with pytest.raises(CellSchemaError) as err:
        CellStore(tmp_path, FORM).cells()
    assert f"{path} line 2" in str(err.value) and "upgrade" in str(err.value)


def test_outputs_are_catalog_metrics_and_fields_are_named_once():
    with pytest.raises(ValueError, match="not metrics"):
        Cell(key=("g",), inputs={"generator": "g"}, outputs={"faithfulness": 1.0})
    with pytest.raises(ValueError, match="given twice"):
        Cell(key=("g",), inputs={"vendi": 1.0}, outputs={"vendi": 1.0})
    with pytest.raises(ValueError, match="given twice"):
        Cell(key=("g",), inputs={"timings": 1.0}, outputs={})


def test_the_latest_cell_of_a_key_wins():
    kept = latest([a_cell("g", 1.0), a_cell("h", 2.0), a_cell("g", 3.0)])
    assert {k: c.outputs["vendi"] for k, c in kept.items()} == {
        ("g", (1, 2)): 3.0,
        ("h", (1, 2)): 2.0,
    }


class Squares:
    """A cell maker: one per engine, shared by its threads."""

    built = 0

    def __init__(self, offset: int, instances=None) -> None:
        Squares.built += 1
        self.offset = offset
        self.threads: set[str] = set()
        self.barrier = threading.Barrier(3, timeout=10)

    def describe(self) -> str:
        return f"squares+{self.offset}"

    def make(self, job: int, tell=None) -> int:
        self.threads.add(threading.current_thread().name)
        tell(f"making {job}")
        self.barrier.wait()  # three jobs at once, or this times out
        return job * job + self.offset


class Heard:
    """A driver that writes down what the engine tells it."""

    def __init__(self) -> None:
        self.news, self.got = [], {}

    def label(self, job):
        return str(job)

    def started(self, job):
        pass

    def heard(self, job, news):
        self.news.append((job, news))

    def done(self, job, result, worker):
        self.got[job] = (result, worker)

    def lost(self, job, worker, retries):
        raise AssertionError("no worker dies here")

    def failed(self, job, err, worker):
        """A job's own failure (JobFailure) is written down and the others go on."""
        from refine.backends.loading import JobFailure

        self.failures = [*getattr(self, "failures", []), (job, str(err))]
        return isinstance(err, JobFailure)


def test_the_local_engine_makes_every_job_on_its_workers(tmp_path):
    Squares.built = 0
    engine = open_engine(
        EngineOptions(workers=3),
        MakerSpec(Squares, {"offset": 1}),
        name="sq",
        folder=tmp_path,
        what="here",
        emit=print,
    )
    driver = Heard()
    engine.run([1, 2, 3, 4, 5, 6], driver)
    engine.close()
    assert driver.got == {k: (k * k + 1, "") for k in range(1, 7)}
    assert sorted(driver.news) == [(k, f"making {k}") for k in range(1, 7)]
    assert engine.describe() == "squares+1" and Squares.built == 1 and engine.workers() == []
    assert len(engine.maker.threads) == 3 and all(t.startswith("sq") for t in engine.maker.threads)


class Failing(Squares):
    """Makes each job but job 2, which raises its :meth:`error`."""

    said = "failed"

    @staticmethod
    def error(message: str) -> Exception:
        return RuntimeError(message)

    def make(self, job: int, tell=None) -> int:
        if job == 2:
            raise self.error(f"job 2 {self.said}")
        return job


def test_the_first_failure_stops_the_rest(tmp_path):
    engine = open_engine(
        EngineOptions(), MakerSpec(Failing, {"offset": 0}), folder=tmp_path, what="x", emit=print
    )
    driver = Heard()
    with pytest.raises(RuntimeError, match="job 2 failed"):
        engine.run([1, 2, 3, 4], driver)
    assert driver.got == {1: (1, "")}  # one worker: 3 and 4 never started


class Refusing(Failing):
    said = "refused"

    @staticmethod
    def error(message: str) -> Exception:
        from refine.backends.loading import Refused

        return Refused(message)


def test_a_jobs_own_failure_is_the_drivers_and_the_rest_go_on(tmp_path):
    """A failure the driver takes as the job's own (a refusal) is told to it, and the
    engine goes on with the other jobs."""
    engine = open_engine(
        EngineOptions(), MakerSpec(Refusing, {"offset": 0}), folder=tmp_path, what="x", emit=print
    )
    driver = Heard()
    engine.run([1, 2, 3, 4], driver)
    assert driver.got == {1: (1, ""), 3: (3, ""), 4: (4, "")}
    assert driver.failures == [(2, "job 2 refused")]


def test_an_unknown_engine_is_named(tmp_path):
    spark = EngineOptions("spark")
    with pytest.raises(ValueError, match="engine 'spark': local or ray"):
        open_engine(spark, MakerSpec(Squares, {"offset": 0}), folder=tmp_path, what="x", emit=print)
    with pytest.raises(ValueError, match="--engine: 'spark' is not local or ray"):
        spark.check()
    with pytest.raises(ValueError, match="--address/--gpus-per-worker: only with --engine ray"):
        EngineOptions(gpus_per_worker=1.0).check()
    ray = EngineOptions("ray", workers=4, address="auto", gpus_per_worker=0.5)
    ray.check()
    assert ray.flags() == [
        "--workers", "4", "--engine", "ray", "--address", "auto", "--gpus-per-worker", "0.5"
    ]  # fmt: skip
    assert EngineOptions(workers=2).flags(default_workers=2) == []


@pytest.mark.slow
def test_only_the_harness_imports_ray_or_chooses_an_engine():
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    ray_users, choosers = [], []
    for path in [*(root / "refine").rglob("*.py"), *(root / "ui").rglob("*.py")]:
        name = str(path.relative_to(root))
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import) and any(
                a.name.split(".")[0] == "ray" for a in node.names
            ):
                ray_users.append(name)
            elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "ray":
                ray_users.append(name)
            elif isinstance(node, ast.Call):
                called = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
                if called in {"open_engine", "LocalEngine", "RayEngine", "RayPool"}:
                    choosers.append(name)
    assert set(ray_users) == {"refine/harness/ray.py"}
    assert {c for c in choosers if not c.startswith("refine/harness/")} == set()
    assert "refine/harness/task.py" in choosers
