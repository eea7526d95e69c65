"""A task is one TaskSpec and one Plan: the toy task registered here (nothing else changed)
is ``refine toy``, its options made from its Plan's one field, its plan checked by its own
validators, its cells made on the local engine into ``--out`` with the results record and
its summary on the terminal (the twin of test_toy_metric.py; on Ray: test_batch_ray.py)."""

from __future__ import annotations

import json

import pytest

from refine.harness import registry
from refine.harness.results import Results
from tests.e2e.test_cli_run import cli
from tests.fakes.toy_task import TOY


def test_a_registered_task_is_a_command_made_from_its_plan(tmp_path):
    unknown = cli("toy", "--help")
    assert unknown.returncode == 2 and "No such command 'toy'" in unknown.stderr
    with registry.registered(TOY):
        helped = cli("toy", "--help")
        assert helped.returncode == 0, helped.stderr
        words = " ".join(helped.stdout.split())
        assert "Vendi of k orthogonal vectors, one cell per k." in words
        assert "--ks <str> How many orthogonal vectors each cell holds" in words
        assert "--out" in words and "--engine" in words and "--json" in words

        done = cli("toy", "--ks", "1, 2,3", "--out", tmp_path / "t")
        assert done.returncode == 0, done.stderr
        # the task writes no summary, progress or config of its own: the defaults, pooled
        # as the catalog says (a mean with its bootstrap interval; DDIV missing)
        assert "Vendi 2.000 [1.000, 3.000]; DDIV \u2013" in done.stdout
        assert "k=2: Vendi 2.000, DDIV \u2013" in done.stderr
        assert "toy in " in done.stderr and "3 of 3 cell(s) to do" in done.stderr
        results = Results.read(tmp_path / "t")
        assert results.task == "toy" and results.config["ks"] == [1, 2, 3]
        # an eigendecomposition's rounding: k orthogonal vectors give k within 1e-9
        assert [c["vendi"] for c in results.cells] == pytest.approx([1.0, 2.0, 3.0], abs=1e-9)

        again = cli("toy", "--ks", "1,2,3,4", "--out", tmp_path / "t", "--json")
        assert again.returncode == 0, again.stderr
        assert json.loads(again.stdout)["summary"]["vendi"]["mean"] == pytest.approx(2.5, abs=1e-9)
        cells = (tmp_path / "t" / "toy.jsonl").read_text().splitlines()
        assert len(cells) == 4 and not again.stderr  # the three made kept; --json: no progress

        for wrong, said in (
            (["--ks", "2,0"], "error: --ks: each k is at least 1, got 0"),
            (["--ks", "two"], "--ks[0]: Input should be a valid integer"),
            ([], "--ks: Field required"),
            (["--ks", "2", "--engine", "nowhere"], "--engine"),
        ):
            bad = cli("toy", *wrong, "--out", tmp_path / "u")
            assert bad.returncode == 2 and said in bad.stderr, (wrong, bad.stderr)
        assert not (tmp_path / "u").exists()

        (tmp_path / "b").mkdir()
        (tmp_path / "b" / "results.json").write_text('{"task": "bench", "schema": 1}')
        other = cli("toy", "--ks", "2", "--out", tmp_path / "b")
        assert other.returncode == 2 and "it holds the results of a bench" in other.stderr
    assert cli("toy", "--help").returncode == 2  # gone with its registration


TOY_RECIPE = """
name = "toy-table"
title = "Vendi of orthogonal vectors"
paper = "none"
source = "a test"
task = "toy"
[select]
ks = [1, 2, 3]
[table]
caption = "Vendi"
label = "tab:toy"
metrics = [{ metric = "vendi" }, { metric = "ddiv" }]
"""


def test_a_registered_task_runs_from_a_recipe_in_python_and_on_the_command_line(tmp_path):
    from refine.harness.recipe_run import run_recipe

    path = tmp_path / "toy.toml"
    path.write_text(TOY_RECIPE)
    with registry.registered(TOY):
        made = run_recipe(path, tmp_path / "py")
        assert made.results.task == "toy" and made.results.config["ks"] == [1, 2, 3]
        ((row),) = made.table.rows
        assert row.label == "toy"
        vendi, ddiv = (made.table.cells[("toy", m)] for m in ("vendi", "ddiv"))
        # the mean of 1, 2 and 3 effective vectors, and a DDIV no cell has: missing
        assert (vendi.value, vendi.n) == (pytest.approx(2.0, abs=1e-9), 3)
        assert ddiv.value is None and ddiv.note == "no prompt has ddiv"
        more = run_recipe(path, tmp_path / "py", ks=[1, 2, 3, 4])  # the plan's own field
        assert more.table.cells[("toy", "vendi")].value == pytest.approx(2.5, abs=1e-9)

        done = cli("bench", "--recipe", path, "--out", tmp_path / "cli")
        assert done.returncode == 0, done.stderr
        assert "toy-table: Vendi" in done.stdout and "Vendi 2.000" in done.stdout
        assert {p.suffix for p in (tmp_path / "cli").glob("table-toy-table*")} >= {".csv", ".tex"}

        # the run-level options reach a task of its own: --limit keeps its first jobs (the
        # plan has no limit of its own), and the record says what was asked and done
        first = cli("bench", "--recipe", path, "--limit", "1", "--out", tmp_path / "one")
        assert first.returncode == 0, first.stderr
        assert "1 of 1 cell(s) to do, the first 1 of 3 (--limit)" in first.stderr
        one = Results.read(tmp_path / "one")
        assert [c["k"] for c in one.cells] == [1] and "Vendi 1.000" in first.stdout
        assert one.config["jobs"] == {"limit": 1, "run": 1, "of": 3}
        assert one.config["asked"] == {"limit": 1}
        assert len((tmp_path / "one" / "toy.jsonl").read_text().splitlines()) == 1
        limited = run_recipe(path, tmp_path / "py1", limit=2)
        assert limited.results.config["jobs"] == {"limit": 2, "run": 2, "of": 3}
        assert limited.table.cells[("toy", "vendi")].value == pytest.approx(1.5, abs=1e-9)
        # what its plan cannot take is refused in one line, before anything is made
        for wrong, said in (
            (["--generator", "x:y"], "--generator: a toy recipe takes no generators; "
             "it takes --limit"),
            (["--profile", "nonexistent"], "--profile: a toy recipe takes no profile"),
            (["--backend", "judge=gemini:gemini-3.8-flash"],
             "--backend: a toy recipe takes no backends"),
            (["--tau", "0.5"], "--tau: a toy recipe takes no tau"),
        ):  # fmt: skip
            refused = cli(
                "bench", "--recipe", path, "--limit", "1", *wrong, "--out", tmp_path / "no"
            )
            assert refused.returncode == 2, refused.stderr
            assert f"--recipe toy-table: {said}" in refused.stderr, refused.stderr
        plain = cli("toy", "--ks", "1,2,3", "--limit", "2", "--out", tmp_path / "own", "--json")
        assert plain.returncode == 0, plain.stderr
        assert json.loads(plain.stdout)["config"]["jobs"] == {"limit": 2, "run": 2, "of": 3}

        bad = path.with_name("bad.toml")
        bad.write_text(TOY_RECIPE.replace("ks = [1, 2, 3]", "ks = [0]"))
        refused = cli("bench", "--recipe", bad, "--out", tmp_path / "no")
        assert refused.returncode == 2
        assert "select: --ks: each k is at least 1, got 0" in refused.stderr
        stray = path.with_name("stray.toml")
        stray.write_text(TOY_RECIPE.replace("ks = [1, 2, 3]", "ks = [1]\nsides = 3"))
        refused = cli("bench", "--recipe", stray, "--out", tmp_path / "no")
        assert "select.sides: task toy's plan has no such field (ks)" in refused.stderr
    bench = path.with_name("bench.toml")
    bench.write_text(TOY_RECIPE.replace('task = "toy"', 'task = "bench"').replace("vendi", "faith"))
    refused = cli("bench", "--recipe", bench, "--out", tmp_path / "no")
    assert "select.ks: Extra inputs are not permitted" in refused.stderr
    assert not (tmp_path / "no").exists()
