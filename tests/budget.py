"""The suite's time against its budget, as the run's last line (a pytest plugin, registered
by ``tests/conftest.py``). A report, never a failure: a timed assertion fails on a busy
machine for work that is fine.

The whole suite has a budget of 300 s on a 2-core machine, and the fast tests
(``-m "not slow"``) one of 60 s. The line gives the run's time (what pytest's own last
line gives) against the budget of what was run, and the five files whose tests took the
longest (each test's set-up, call and tear-down summed per file, on whichever worker ran
it: with two workers the files add up to about twice the run's time). ``--durations=0``
lists every test, to find what grew within a file.
"""

from __future__ import annotations

import time
from collections import defaultdict

BUDGETS_S = {None: 300.0, "not slow": 60.0}  # by -m expression (None: the whole suite)
SLOWEST = 5

_start: float | None = None
_by_file: dict[str, float] = defaultdict(float)
_tests: set[str] = set()


def pytest_sessionstart(session) -> None:
    global _start
    _start = time.monotonic()


def pytest_runtest_logreport(report) -> None:
    """Every phase's time, as the workers report it to the run's first process."""
    _by_file[report.nodeid.split("::")[0]] += report.duration
    _tests.add(report.nodeid)


def budget_of(config) -> float | None:
    """The budget of what this run selected: the whole suite or the fast tests, run from
    the repository's test folders with no file or keyword chosen; None otherwise."""
    opt = config.option
    whole = not getattr(opt, "keyword", "") and not getattr(opt, "deselect", None)
    whole = whole and set(config.args) <= {str(p) for p in config.getini("testpaths")} | {
        str(config.rootpath / p) for p in config.getini("testpaths")
    }
    markexpr = getattr(opt, "markexpr", "") or None
    return BUDGETS_S.get(markexpr) if whole else None


def line(seconds: float, budget: float | None, by_file: dict[str, float], tests: int) -> str:
    """The report: ``seconds`` against ``budget`` and the slowest files."""
    if budget is None:
        said = f"{seconds:.0f} s for {tests} tests (a selection: no budget of its own)"
    elif seconds <= budget:
        said = f"{seconds:.0f} s for {tests} tests, within the budget of {budget:.0f} s"
    else:
        said = (
            f"{seconds:.0f} s for {tests} tests, {seconds - budget:.0f} s over the budget of "
            f"{budget:.0f} s"
        )
    slowest = sorted(by_file.items(), key=lambda kv: -kv[1])[:SLOWEST]
    files = ", ".join(f"{name} {s:.0f} s" for name, s in slowest)
    return f"suite time: {said}; slowest files: {files}" if files else f"suite time: {said}"


def pytest_unconfigure(config) -> None:
    """Written once pytest's own summary is out (in the run's first process only)."""
    if hasattr(config, "workerinput") or _start is None or not _tests:
        return
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None:
        return
    text = line(time.monotonic() - _start, budget_of(config), dict(_by_file), len(_tests))
    reporter.write_line(text)
