"""The suite's time line (tests/budget.py): the run's time against the budget of what was
selected, and the slowest files, slowest first."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from tests.budget import budget_of, line


def config(args=("tests",), markexpr="", keyword=""):
    option = SimpleNamespace(markexpr=markexpr, keyword=keyword, deselect=None)
    return SimpleNamespace(
        option=option,
        args=list(args),
        rootpath=Path("/repo"),
        getini=lambda name: ["tests"] if name == "testpaths" else None,
    )


def test_the_budget_is_the_whole_suites_or_the_fast_tests():
    assert budget_of(config()) == 300.0
    assert budget_of(config(args=())) == 300.0
    assert budget_of(config(args=["/repo/tests"])) == 300.0
    assert budget_of(config(markexpr="not slow")) == 60.0
    assert budget_of(config(markexpr="slow")) is None
    assert budget_of(config(args=["tests/unit/test_stats.py"])) is None
    assert budget_of(config(keyword="leak")) is None


def test_the_line_says_over_or_within_and_names_the_slowest_files_first():
    files = {f"t{k}.py": float(k) for k in range(1, 8)}
    over = line(546.4, 300.0, files, 781)
    assert over == (
        "suite time: 546 s for 781 tests, 246 s over the budget of 300 s; slowest files: "
        "t7.py 7 s, t6.py 6 s, t5.py 5 s, t4.py 4 s, t3.py 3 s"
    )
    assert line(58.0, 60.0, {"a.py": 30.2}, 500) == (
        "suite time: 58 s for 500 tests, within the budget of 60 s; slowest files: a.py 30 s"
    )
    assert "a selection: no budget of its own" in line(3.0, None, {"a.py": 3.0}, 2)
