"""The suite's budget (tests/budget.py): what a run is timed against, the verdict in
reference seconds that names what grew, and a real pytest session that the check fails
for a sleeping test and passes without it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.budget import (
    BUDGET_FILE,
    Timings,
    line,
    load_budget,
    profiled_tests,
    reference_time,
    run_order,
    selection_of,
    verdict,
)

ROOT = Path(__file__).resolve().parents[2]


def config(args=("tests",), markexpr="", keyword=""):
    option = SimpleNamespace(markexpr=markexpr, keyword=keyword, deselect=None)
    return SimpleNamespace(
        option=option,
        args=list(args),
        rootpath=Path("/repo"),
        getini=lambda name: ["tests"] if name == "testpaths" else None,
    )


def test_the_budget_is_the_whole_suites_or_the_fast_tests():
    assert selection_of(config()) == "suite"
    assert selection_of(config(args=())) == "suite"
    assert selection_of(config(args=["/repo/tests"])) == "suite"
    assert selection_of(config(markexpr="not slow")) == "fast"
    assert selection_of(config(markexpr="slow")) is None
    assert selection_of(config(args=["tests/unit/test_stats.py"])) is None
    assert selection_of(config(keyword="leak")) is None


def test_the_repositorys_budget_holds_its_profile():
    """One file: the budgets, the limits, the reference time and a profile whose files
    and tests are in reference seconds; every file and test it names exists."""
    budget = load_budget(BUDGET_FILE)
    assert set(budget["budgets"]) == {"suite", "fast"}
    assert budget["grace"] == 0.25 and budget["new_test_s"] == 10 and budget["slow_s"] == 1.5
    assert budget["workers"] == 3  # as ./dev test runs
    assert budget["budgets"]["fast"] < budget["budgets"]["suite"]
    assert 0.5 < budget["reference_s"] < 20
    profile = budget["profile"]
    assert profile["suite"] <= budget["budgets"]["suite"]  # recorded within its budget
    assert all((ROOT / f).is_file() for f in profile["files"])
    assert all((ROOT / t.split("::")[0]).is_file() for t in profile["tests"])
    fast = sum(f["fast"] for f in profile["files"].values())
    assert 0 < fast < sum(f["all"] for f in profile["files"].values())


def test_the_run_takes_modules_with_slow_tests_first_and_each_modules_longest_first(tmp_path):
    """A worker that is done takes the tail of another's queue: the tails are short tests."""

    def item(path, name, slow=False, end=False):
        marks = {"slow"} if slow else set()
        return SimpleNamespace(
            path=path, nodeid=f"{path}::{name}", keywords=marks | ({"module_end"} if end else set())
        )

    items = [
        item("a.py", "quick"),
        item("b.py", "ends_one", end=True),
        item("b.py", "short", slow=True),
        item("b.py", "unprofiled"),
        item("b.py", "long", slow=True),
        item("b.py", "ends_all", slow=True, end=True),
        item("b.py", "middle"),
        item("c.py", "long"),
        item("c.py", "short"),
        item("d.py", "only", slow=True),
    ]
    took = {"b.py::long": 20.0, "b.py::middle": 4.0, "b.py::short": 1.2, "c.py::long": 9.0}
    took |= {"b.py::ends_one": 1.0, "b.py::ends_all": 30.0}
    order = [i.nodeid for i in run_order(items, took)]
    assert order == [
        "b.py::long",
        "b.py::middle",
        "b.py::short",
        "b.py::unprofiled",  # no time of its own: after the profiled ones, in file order
        "b.py::ends_one",  # what ends the module's shared things: last, in file order
        "b.py::ends_all",
        "d.py::only",
        "a.py::quick",  # modules without a slow test after those with one, in file order
        "c.py::long",
        "c.py::short",
    ]
    # the repository's profile is the one read; an unreadable file orders by file alone
    assert profiled_tests() == load_budget()["profile"]["tests"]
    bad = tmp_path / "budget.json"
    bad.write_text("{")
    assert profiled_tests(bad) == {}
    assert [i.nodeid for i in run_order(items, {})][:6] == [
        "b.py::short",
        "b.py::unprofiled",
        "b.py::long",
        "b.py::middle",
        "b.py::ends_one",
        "b.py::ends_all",
    ]


def test_a_budget_file_that_cannot_be_read_is_named_before_any_test(tmp_path):
    bad = tmp_path / "budget.json"
    with pytest.raises(pytest.UsageError, match=r"budget.json: the suite's budget cannot be read"):
        load_budget(bad)
    bad.write_text("{not json")
    with pytest.raises(pytest.UsageError, match="cannot be read"):
        load_budget(bad)
    bad.write_text(json.dumps({"budgets": {}, "grace": 0.25}))
    with pytest.raises(pytest.UsageError, match="lacks new_test_s, slow_s, reference_s, workers"):
        load_budget(bad)


BUDGET = {
    "budgets": {"suite": 100.0, "fast": 20.0},
    "workers": 2,
    "grace": 0.25,
    "new_test_s": 10.0,
    "slow_s": 1.5,
    "reference_s": 2.0,
    "profile": {
        "suite": 90.0,
        "files": {"a.py": {"all": 60.0, "fast": 5.0}, "b.py": {"all": 120.0, "fast": 10.0}},
        "tests": {"a.py::big": 30.0, "b.py::huge": 50.0},
    },
}


def test_the_verdict_holds_within_the_grace_and_names_what_grew_beyond_it():
    within = Timings(124.0, {"a.py": 70.0, "b.py": 170.0}, {"a.py::big": 40.0, "b.py::x": 9.9})
    assert verdict("suite", within, BUDGET) == []
    over = Timings(126.0, {"a.py": 62.0, "b.py": 170.0}, {"a.py::big": 31.0, "b.py::huge": 90.0})
    said = verdict("suite", over, BUDGET)
    assert said[0] == (
        "the suite took 126 reference s, over its budget of 100 plus 25% (125); what grew most:"
    )
    assert said[1:] == [
        "  file b.py: +50.0 s (170.0 s now)",
        "  file a.py: +2.0 s (62.0 s now)",
        "  test b.py::huge: +40.0 s (90.0 s now)",
        "  test a.py::big: +1.0 s (31.0 s now)",
    ]
    # the fast tests against the fast part of the profile
    fast = Timings(26.0, {"a.py": 6.0, "b.py": 9.0}, {"a.py::t": 1.0})
    assert verdict("fast", fast, BUDGET)[1:] == [
        "  file a.py: +1.0 s (6.0 s now)",
        "  test a.py::t: +1.0 s (1.0 s now)",
    ]


def test_a_new_test_over_the_limit_fails_and_is_named_whatever_the_total():
    got = Timings(50.0, {"a.py": 60.0}, {"a.py::big": 45.0, "a.py::new": 10.5, "a.py::ok": 9.0})
    said = verdict("suite", got, BUDGET)
    assert len(said) == 1 and said[0].startswith(
        "a.py::new is not in the profile and took 10.5 reference s (the limit is 10)"
    )


def test_the_line_says_over_or_within_and_names_the_slowest_files_and_unmarked_tests():
    files = {f"t{k}.py": float(k) for k in range(1, 8)}
    over = line(546.4, 300.0, files, 781, "reference s", {"t1.py::a": 1.7, "t2.py::b": 2.25})
    assert over == (
        "suite time: 546 reference s for 781 tests, 246 over the budget of 300; slowest "
        "files: t7.py 7, t6.py 6, t5.py 5, t4.py 4, t3.py 3; over 1.5 s and not marked slow: "
        "t2.py::b 2.2, t1.py::a 1.7"
    )
    assert line(58.0, 60.0, {"a.py": 30.2}, 500) == (
        "suite time: 58 s for 500 tests, within the budget of 60; slowest files: a.py 30"
    )
    assert "a selection: no budget of its own" in line(3.0, None, {"a.py": 3.0}, 2)


@pytest.mark.slow  # three pytest sessions (about 1.5 s each)
def test_a_run_with_a_sleeping_test_fails_naming_it_and_passes_without(tmp_path, monkeypatch):
    """A real session with the plugin: a test that sleeps for half the budget fails the
    run and is named; the same session without it passes; on another number of workers
    than the profile's the run is not timed, and says why. The reference workload here is
    an empty interpreter, timed by this test first, so the sessions' scale is about 1
    however fast the machine is."""
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_quick.py").write_text(
        "import json\n\n\ndef test_quick():\n    assert json.loads('[1, 2]') == [1, 2]\n"
    )
    (tmp_path / "pytest.ini").write_text("[pytest]\ntestpaths = tests\n")
    (tmp_path / "conftest.py").write_text(
        "from tests import budget\n\n\ndef pytest_configure(config):\n    budget.register(config)\n"
    )
    monkeypatch.setenv("REFINE_BUDGET_WORKLOAD", "pass")
    # a new test's limit a tenth of the sleep below: the workload here is an empty
    # interpreter's start (about 0.04 s), and on a busy machine one copy of it has taken
    # five times what this test timed just before (0.20 s against 0.04 s, the whole suite
    # running beside it), which scaled the sleep's 2 s down to under 0.5 reference s: the
    # old limit of 0.5, which the sleep then passed unnamed
    budget = {**BUDGET, "budgets": {"suite": 4.0, "fast": 2.0}, "new_test_s": 0.2}
    budget["workers"] = 1  # the sessions run in one process
    budget["reference_s"] = reference_time(1)  # an empty interpreter's start, here and now
    budget["profile"] = {
        "suite": 1.0,
        "files": {"tests/test_quick.py": {"all": 0.01, "fast": 0.01}},
        "tests": {},
    }
    (tmp_path / "budget.json").write_text(json.dumps(budget))
    env = {**os.environ, "REFINE_BUDGET_FILE": str(tmp_path / "budget.json")}
    env["PYTHONPATH"] = str(ROOT)
    env.pop("REFINE_BUDGET", None)
    for name in ("REFINE_TEST_TMP", "PYTEST_XDIST_WORKER", "PYTEST_ADDOPTS"):
        env.pop(name, None)
    run = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist"]

    def session():
        return subprocess.run(run, cwd=tmp_path, env=env, capture_output=True, text=True)

    quiet = session()
    assert quiet.returncode == 0, quiet.stdout[-2000:]
    assert "within the budget of 4" in quiet.stdout
    # the line names the machine (its cores and load) and the workload's parts, or that
    # it said none: what a reading on another machine is set beside
    assert f"{os.cpu_count()} cores, load " in quiet.stdout
    assert "before the tests (no parts said)" in quiet.stdout
    # half the budget in wall seconds, ten times the new test's limit
    (tmp_path / "tests" / "test_sleepy.py").write_text(
        "import time\n\n\ndef test_sleepy():\n    time.sleep(2.0)\n"
    )
    sleepy = session()
    assert sleepy.returncode == 1, sleepy.stdout[-2000:]
    assert "2 passed" in sleepy.stdout  # every test passed: the time alone failed the run
    assert "over the time budget (tests/budget.json)" in sleepy.stdout
    assert "tests/test_sleepy.py::test_sleepy is not in the profile and took" in sleepy.stdout
    # the profile's runs had several workers: a run in one process is not judged against it
    (tmp_path / "budget.json").write_text(json.dumps({**budget, "workers": 2}))
    other = session()
    assert other.returncode == 0, other.stdout[-2000:]
    assert "(1 worker(s): the budget is for 2, as ./dev test runs)" in other.stdout
