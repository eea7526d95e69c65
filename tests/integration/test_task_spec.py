"""A task is a spec on the harness: the toy task (tests/fakes/toy_task.py) runs on the local
engine, one or several jobs at a time, and writes the one results record and its CSV; a
record another task wrote, or of a newer layout, is refused by name."""

from __future__ import annotations

import csv
import json

import pytest

from refine.harness.engine import EngineOptions
from refine.harness.results import Results, ResultsError, cell_mean
from refine.harness.task import run_task
from tests.fakes.toy_task import ToyPlan, ToyTask


def test_a_toy_task_writes_the_results_record(tmp_path):
    lines: list[str] = []
    results = run_task(ToyTask(ToyPlan(ks=[1, 2, 3, 4]), tmp_path, lines.append))
    assert lines[0].endswith("4 of 4 cell(s) to do")
    # the Vendi score of k orthogonal vectors is k; their mean 2.5
    assert [c["vendi"] for c in results.cells] == pytest.approx([1, 2, 3, 4])
    assert results.summary["vendi"]["mean"] == pytest.approx(2.5)
    lo, hi = results.summary["vendi"]["interval"]
    assert 1 <= lo < 2.5 < hi <= 4
    # what it cannot compute is missing: null in JSON, blank in CSV, never a number
    assert results.summary["ddiv"] == {"mean": None, "interval": None}
    doc = json.loads((tmp_path / "results.json").read_text())
    assert doc["schema"] == 2 and doc["task"] == "toy" and doc["csv"] == "toy.csv"
    assert doc["models"] == {}  # the toy maker loads no model
    assert doc["config"] == {"ks": [1, 2, 3, 4], "maker": "orthogonal vectors"}
    assert doc["cells"][0]["ddiv"] is None and "vectors" in doc["cells"][0]  # not bulky
    assert "numpy" in doc["packages"]
    rows = list(csv.DictReader((tmp_path / "toy.csv").open()))
    assert [(r["k"], r["ddiv"]) for r in rows] == [("1", ""), ("2", ""), ("3", ""), ("4", "")]
    assert float(rows[2]["vendi"]) == pytest.approx(3)
    # read back, the same record; a cell's value by name
    assert Results.read(tmp_path, "toy") == results
    assert cell_mean(results.cells[3], "vendi") == pytest.approx(4)
    assert cell_mean(results.cells[3], "faith") is None


def test_cells_done_are_kept_and_workers_give_the_same_record(tmp_path):
    one = run_task(ToyTask(ToyPlan(ks=[2, 3]), tmp_path / "a"))
    lines: list[str] = []
    more = run_task(ToyTask(ToyPlan(ks=[2, 3, 5]), tmp_path / "a", lines.append))
    assert lines[0].endswith("1 of 3 cell(s) to do")  # 2 and 3 were done
    assert more.cells[:2] == one.cells
    wide = run_task(ToyTask(ToyPlan(ks=[2, 3, 5]), tmp_path / "b"), engine=EngineOptions(workers=3))
    assert (wide.config, wide.summary, wide.cells) == (more.config, more.summary, more.cells)


def test_a_record_of_another_task_or_layout_is_refused(tmp_path):
    with pytest.raises(ResultsError, match="no results record here"):
        Results.read(tmp_path)
    run_task(ToyTask(ToyPlan(ks=[1]), tmp_path))
    with pytest.raises(ResultsError, match="the results of a toy, not of a bench"):
        Results.read(tmp_path, "bench")
    doc = json.loads((tmp_path / "results.json").read_text())
    (tmp_path / "results.json").write_text(json.dumps({**doc, "schema": 9}))
    with pytest.raises(ResultsError, match="layout version 9.*up to 2; upgrade"):
        Results.read(tmp_path)
    (tmp_path / "results.json").write_text("[1, 2]")
    with pytest.raises(ResultsError, match="not a results record"):
        Results.read(tmp_path)


def test_a_cell_filling_an_undeclared_metric_is_refused(tmp_path):
    task = ToyTask(ToyPlan(ks=[2]), tmp_path)
    task.metrics = ("vendi",)  # ddiv left out of the spec
    with pytest.raises(ValueError, match=r"a toy cell fills \['ddiv'\], not among \('vendi',\)"):
        run_task(task)
