"""The suite's time against its budget, in units that do not depend on the machine (a
pytest plugin, registered by ``tests/conftest.py``).

Machines of one kind differ by about 2x, and a busy machine is slower again, so seconds
say little. Before and after the tests, the run's first process times a reference
workload (:data:`WORKLOAD`: imports, one-thread torch training and Python, a few
seconds) as one copy per worker at the same time, so that it meets the contention the
tests met. Every time is then given in **reference seconds**: seconds times
``reference_s / measured``, where ``reference_s`` is the workload's time on the machine
that recorded the profile (``tests/budget.json``) and ``measured`` the slower of its two
times in this run. A run on a machine twice as slow, or beside two busy loops, reads
about the same in these units.

``tests/budget.json`` holds the budgets (the whole suite and ``-m "not slow"``), the
limits and the profile: each file's time and each test's over a second, in reference
seconds, from a whole run. A change that moves them says so in its commit;
``REFINE_BUDGET=record ./dev test`` writes the profile of a whole run (the budgets, the
limits and the reference time, which defines the units, are kept). ``REFINE_BUDGET=off``
times nothing and checks nothing.

A run of the whole suite or of the fast tests on the profile's number of workers (three,
as ``./dev test`` runs it; a run on another number, or one interrupted, is not timed)
fails (after its tests, as ``tests/leaks.py`` does) when:

- it takes more than its budget plus ``grace`` (25 %), naming the files and tests that
  grew most against the profile;
- a test not in the profile takes more than ``new_test_s`` (10 s), naming it.

The run's last line gives its time against the budget, the five slowest files and every
test or set-up over ``slow_s`` (1.5 s) that is not marked ``slow`` (a set-up of the
session's fixtures, the tiny models and stand-in servers every test shares, is named on
the first test of each worker that asks for it). A selection (a file, ``-k``)
times nothing and gets the line in plain seconds.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

BUDGET_FILE = Path(os.environ.get("REFINE_BUDGET_FILE") or Path(__file__).with_name("budget.json"))
SLOWEST = 5
SELECTIONS = {None: "suite", "not slow": "fast"}  # -m expression: the budget's name

# The reference workload, one copy per worker. Its parts are what the suite's time is
# made of, in about the shares they have there: a process started and its imports (torch,
# numpy and the standard library's modules: shared libraries mapped, compiled modules read
# and run), one-thread torch training of a small convolution (forward, backward and an
# optimiser's steps, as the tiny models' tests run), and Python code. It prints each
# part's seconds. About 4 s on the machine of the profile. An older workload of imports,
# Python and a 192 x 192 matmul (0.05 s of its 4 s on AVX-512 cores) read a CI machine
# as 1.4x this one: its tiny-model tests took twice their profile's reference seconds
# there, its browser tests the same (by these figures, it ran the workload's imports and
# Python faster than this machine, and convolutions slower).
WORKLOAD = """
import time
t0 = time.monotonic()
import json, os, re, zlib
os.environ["OMP_NUM_THREADS"] = "1"
import numpy, torch
torch.set_num_threads(1)
t1 = time.monotonic()
torch.manual_seed(0)
net = torch.nn.Sequential(
    torch.nn.Conv2d(8, 32, 3, padding=1), torch.nn.SiLU(), torch.nn.Conv2d(32, 8, 3, padding=1)
)
opt = torch.optim.AdamW(net.parameters(), lr=1e-3)
x = torch.randn(4, 8, 32, 32)
for _ in range(60):
    loss = (net(x) - x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
t2 = time.monotonic()
words = {}
for k in range(150_000):
    words[str(k)] = re.sub("[13579]", "o", str(k * k))
zlib.compress(json.dumps(words).encode())
t3 = time.monotonic()
print(json.dumps({"imports": t1 - t0, "torch": t2 - t1, "python": t3 - t2}))
"""


def reference_time(copies: int, parts: dict | None = None) -> float:
    """The workload's wall time, averaged over ``copies`` copies run at the same time
    (``parts``, when given, gets each part's mean seconds)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    started, procs = [], []
    for _ in range(max(1, copies)):
        started.append(time.monotonic())
        code = os.environ.get("REFINE_BUDGET_WORKLOAD") or WORKLOAD  # a test's own
        procs.append(
            subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE)
        )
    took, said = [], defaultdict(list)
    for t0, proc in zip(started, procs, strict=True):
        out, _ = proc.communicate()
        if proc.returncode != 0:
            raise RuntimeError("the budget's reference workload failed (tests/budget.py)")
        took.append(time.monotonic() - t0)
        try:
            for name, s in json.loads(out or b"{}").items():
                said[name].append(float(s))
        except (ValueError, AttributeError, TypeError):
            pass  # a test's own workload need not say its parts
    if parts is not None:
        parts.update({name: sum(v) / len(v) for name, v in said.items()})
    return sum(took) / len(took)


def machine() -> str:
    """The machine in a few words (its processor, cores and load), for the run's line:
    what a reading on another machine is set beside."""
    model = ""
    try:
        with open("/proc/cpuinfo") as f:
            named = (ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name"))
            model = next(named, "")
    except OSError:
        pass
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return f"{model or 'a processor'}, {os.cpu_count()} cores, load {load:.2f}"


def said(parts: dict) -> str:
    """A workload's parts in words: ``imports 1.6 s, torch 1.6 s, python 1.0 s``."""
    return ", ".join(f"{name} {s:.1f} s" for name, s in parts.items()) or "no parts said"


def workers_gone(timeout_s: float = 30.0) -> None:
    """Wait for this process's children (pytest-xdist's workers, ending) to exit, so that
    the reference after the tests does not meet them."""
    import psutil

    psutil.wait_procs(psutil.Process().children(recursive=True), timeout=timeout_s)


KEYS = ("budgets", "grace", "new_test_s", "slow_s", "reference_s", "workers", "profile")


def load_budget(path: Path = BUDGET_FILE) -> dict:
    """The budget file, checked: a UsageError naming it and what is wrong otherwise."""
    try:
        budget = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise pytest.UsageError(f"{path}: the suite's budget cannot be read ({err})") from err
    missing = [k for k in KEYS if k not in budget] if isinstance(budget, dict) else list(KEYS)
    if missing:
        raise pytest.UsageError(f"{path}: the suite's budget lacks {', '.join(missing)}")
    return budget


def profiled_tests(path: Path = BUDGET_FILE) -> dict[str, float]:
    """Each test's time in the profile (those over a second); none where the file cannot be
    read, which the budget's own check names before any test runs."""
    try:
        tests = load_budget(path)["profile"].get("tests", {})
    except (pytest.UsageError, AttributeError):
        return {}
    return dict(tests) if isinstance(tests, dict) else {}


def run_order(items: list, took: dict[str, float]) -> list:
    """``items`` (pytest's, or anything with ``path``, ``nodeid`` and ``keywords``) in the
    order the run takes them: modules with a slow test first, each module's tests together,
    its longest first by ``took`` (the rest in their order), those marked ``module_end``
    last in it, in their order: each ends what the module's other tests share (Ray's kept
    workers, which spare the next job a worker's start, about 6 CPU-s each).

    With ./dev test's --dist worksteal each worker starts on a third of the queue, and a
    worker that is done takes the tail of another's queue (a module split so builds its
    module fixtures on both). Measured: in file order with load scheduling a 20 s test could
    start last and one worker ended 110 s after the other; with each module's tests in file
    order, the browser module's longest test (20 s, mostly waiting on the page) was its last,
    taken by a worker that was done and run alone for the run's last 15 s. In this order the
    three workers ended within 4 s of each other."""
    slow = {item.path for item in items if "slow" in item.keywords}
    first: dict[Any, int] = {}
    for k, item in enumerate(items):
        first.setdefault(item.path, k)
    return sorted(
        items,
        key=lambda item: (
            item.path not in slow,
            first[item.path],
            "module_end" in item.keywords,
            0.0 if "module_end" in item.keywords else -took.get(item.nodeid, 0.0),
        ),
    )


@dataclass
class Timings:
    """What a run took, in reference seconds."""

    seconds: float  # the run's wall time
    by_file: dict[str, float]
    by_test: dict[str, float]
    unmarked: set[str] = field(default_factory=set)  # tests not marked slow


def scaled(got: Timings, by: float) -> Timings:
    """``got`` with every time multiplied by ``by``."""
    return Timings(
        got.seconds * by,
        {f: s * by for f, s in got.by_file.items()},
        {t: s * by for t, s in got.by_test.items()},
        set(got.unmarked),
    )


def verdict(selection: str, got: Timings, budget: dict) -> list[str]:
    """Why the run fails its budget (one line each, what grew named); empty when it holds."""
    limit = budget["budgets"][selection]
    allowed = limit * (1 + budget["grace"])
    out = []
    if got.seconds > allowed:
        out.append(
            f"the {selection} took {got.seconds:.0f} reference s, over its budget of "
            f"{limit:.0f} plus {budget['grace']:.0%} ({allowed:.0f}); what grew most:"
        )
        key = "all" if selection == "suite" else "fast"
        files = budget["profile"]["files"]
        grew = {f: s - files.get(f, {}).get(key, 0.0) for f, s in got.by_file.items()}
        for name, more in sorted(grew.items(), key=lambda kv: -kv[1])[:SLOWEST]:
            if more > 0:
                out.append(f"  file {name}: +{more:.1f} s ({got.by_file[name]:.1f} s now)")
        tests = budget["profile"]["tests"]
        grew = {t: s - tests.get(t, 0.0) for t, s in got.by_test.items()}
        for name, more in sorted(grew.items(), key=lambda kv: -kv[1])[:SLOWEST]:
            if more > 0:
                out.append(f"  test {name}: +{more:.1f} s ({got.by_test[name]:.1f} s now)")
    for name, took in sorted(got.by_test.items(), key=lambda kv: -kv[1]):
        if name not in budget["profile"]["tests"] and took > budget["new_test_s"]:
            out.append(
                f"{name} is not in the profile and took {took:.1f} reference s (the limit "
                f"is {budget['new_test_s']:.0f}): make it faster, or record the profile "
                "(REFINE_BUDGET=record) and say so in the commit"
            )
    return out


def line(
    seconds: float,
    limit: float | None,
    by_file: dict[str, float],
    tests: int,
    unit: str = "s",
    slow_unmarked: dict[str, float] | None = None,
    slow_s: float = 1.5,
) -> str:
    """The report: ``seconds`` against ``limit``, the slowest files, and the tests over
    the slow mark's limit that are not marked slow."""
    if limit is None:
        said = f"{seconds:.0f} {unit} for {tests} tests (a selection: no budget of its own)"
    elif seconds <= limit:
        said = f"{seconds:.0f} {unit} for {tests} tests, within the budget of {limit:.0f}"
    else:
        said = (
            f"{seconds:.0f} {unit} for {tests} tests, {seconds - limit:.0f} over the budget "
            f"of {limit:.0f}"
        )
    slowest = sorted(by_file.items(), key=lambda kv: -kv[1])[:SLOWEST]
    text = f"suite time: {said}"
    if slowest:
        text += "; slowest files: " + ", ".join(f"{name} {s:.0f}" for name, s in slowest)
    if slow_unmarked:
        named = sorted(slow_unmarked.items(), key=lambda kv: -kv[1])
        text += f"; over {slow_s:g} s and not marked slow: " + ", ".join(
            f"{name} {s:.1f}" for name, s in named
        )
    return text


def selection_of(config) -> str | None:
    """The budget of what this run selected: the whole suite or the fast tests, run from
    the repository's test folders with no file or keyword chosen; None otherwise."""
    opt = config.option
    whole = not getattr(opt, "keyword", "") and not getattr(opt, "deselect", None)
    whole = whole and set(config.args) <= {str(p) for p in config.getini("testpaths")} | {
        str(config.rootpath / p) for p in config.getini("testpaths")
    }
    markexpr = getattr(opt, "markexpr", "") or None
    return SELECTIONS.get(markexpr) if whole else None


def record(path: Path, got: Timings, min_test_s: float = 1.0) -> None:
    """The profile of a whole run, in reference seconds, into ``path``; the budgets, the
    limits and the reference time that defines the units are kept."""
    budget = load_budget(path)
    fast: dict[str, float] = defaultdict(float)
    for test, s in got.by_test.items():
        if test in got.unmarked:
            fast[test.split("::")[0]] += s
    budget["profile"] = {
        "suite": round(got.seconds, 1),
        "files": {
            f: {"all": round(s, 1), "fast": round(fast.get(f, 0.0), 1)}
            for f, s in sorted(got.by_file.items(), key=lambda kv: -kv[1])
        },
        "tests": {
            t: round(s, 1)
            for t, s in sorted(got.by_test.items(), key=lambda kv: -kv[1])
            if s >= min_test_s
        },
    }
    path.write_text(json.dumps(budget, indent=1) + "\n")


class Budget:
    """The plugin's state in the run's first process."""

    def __init__(self, config) -> None:
        self.config = config
        self.mode = os.environ.get("REFINE_BUDGET", "on")
        self.selection = selection_of(config)
        self.timed = self.selection is not None and self.mode != "off"
        self.timed = self.timed and not getattr(config.option, "collectonly", False)
        self.budget: dict = {}
        self.untimed = ""  # why a whole run is not timed
        self.before = self.after = None
        self.parts: tuple[dict, dict] = ({}, {})  # the workload's parts, before and after
        self.machine = ("", "")  # machine(), before and after
        self.start = 0.0
        self.end = 0.0
        self.by_file: dict[str, float] = defaultdict(float)
        self.by_test: dict[str, float] = defaultdict(float)
        self.unmarked: set[str] = set()
        self.setup: dict[str, float] = {}  # each test's set-up (its fixtures made for it)
        self.text = ""

    def copies(self) -> int:
        n = getattr(self.config.option, "numprocesses", None)
        return n if isinstance(n, int) and n > 0 else 1

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session) -> None:
        """Before the workers start: the budget read and checked, and the reference
        timed. The profile was recorded with its number of workers, and a run's time
        depends on how many share the work: a whole run on another number is not timed."""
        if self.timed:
            self.budget = load_budget()
            if self.copies() != self.budget["workers"]:
                self.timed = False
                self.untimed = (
                    f"{self.copies()} worker(s): the budget is for {self.budget['workers']}, "
                    "as ./dev test runs"
                )
        if self.timed:
            self.before = reference_time(self.copies(), self.parts[0])
            self.machine = (machine(), "")
        self.start = time.monotonic()

    def pytest_runtest_logreport(self, report) -> None:
        """Every phase's time, as the workers report it to the run's first process."""
        self.by_file[report.nodeid.split("::")[0]] += report.duration
        self.by_test[report.nodeid] += report.duration
        if report.when == "setup":
            self.setup[report.nodeid] = report.duration
        if "slow" not in report.keywords:
            self.unmarked.add(report.nodeid)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session, exitstatus) -> None:
        """After every worker is done: the reference again, then the verdict."""
        self.end = time.monotonic()
        if not self.by_test:
            return
        # a run interrupted or broken is not judged on time, nor recorded
        whole = exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED)
        if not self.timed or not whole:
            unmarked = self.slow_unmarked(1.5, 1.0)
            self.text = line(
                self.end - self.start, None, self.by_file, len(self.by_test), "s", unmarked
            )
            if self.untimed:
                self.text = self.text.replace("a selection: no budget of its own", self.untimed)
            return
        workers_gone()
        try:
            self.after = reference_time(self.copies(), self.parts[1])
            self.machine = (self.machine[0], machine())
        except RuntimeError as err:  # said, and the run fails: its time cannot be told
            self.text = f"suite time: not told ({err})"
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
            return
        budget = self.budget
        # the slower of the two readings: a machine's speed moves during a run (one CI run
        # read 2.94 s before and 2.30 s after), and a run fails on time only when it is over
        # however fast the machine was
        scale = budget["reference_s"] / max(self.before, self.after)
        raw = Timings(self.end - self.start, dict(self.by_file), dict(self.by_test), self.unmarked)
        got = scaled(raw, scale)
        unmarked = self.slow_unmarked(budget["slow_s"], scale)
        self.text = line(
            got.seconds,
            budget["budgets"][self.selection],
            got.by_file,
            len(got.by_test),
            "reference s",
            unmarked,
            budget["slow_s"],
        ) + (
            f" (the reference workload took {self.before:.2f} s before the tests "
            f"({said(self.parts[0])}) and {self.after:.2f} s after ({said(self.parts[1])}), "
            f"{budget['reference_s']:.2f} s on the profile's machine; "
            f"{self.end - self.start:.0f} s here, on {self.machine[0]} before and "
            f"{self.machine[1].rsplit('load ', 1)[-1]} after)"
        )
        if self.mode == "record" and self.selection == "suite":
            if exitstatus == pytest.ExitCode.OK:  # a whole, passing run only
                record(BUDGET_FILE, got)  # in the file's units, which stay the same
                self.text += f"; the profile is recorded in {BUDGET_FILE.name}"
            else:
                self.text += "; tests failed: the profile is not recorded"
            return
        failed = verdict(self.selection, got, budget)
        if failed:
            reporter = self.config.pluginmanager.get_plugin("terminalreporter")
            if reporter is not None:
                reporter.write_line("")  # after the progress line, which may not have ended
                reporter.section("over the time budget (tests/budget.json)", red=True)
                for text in failed:
                    reporter.write_line(text)
            else:
                print("\n".join(failed))
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def slow_unmarked(self, slow_s: float, scale: float) -> dict[str, float]:
        """The tests not marked slow whose set-up, or whose run (call and tear-down), took
        over ``slow_s`` reference seconds. A set-up is a module's or the session's fixtures
        made for the first test that asks for them: mark the module's tests, or share it."""
        out = {}
        for test in self.unmarked:
            setup = self.setup.get(test, 0.0) * scale
            run = self.by_test[test] * scale - setup
            if run > slow_s:
                out[test] = run
            if setup > slow_s:
                out[f"{test} (its set-up)"] = setup
        return out

    def pytest_unconfigure(self, config) -> None:
        """Written once pytest's own summary is out."""
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None and self.text:
            reporter.write_line(self.text)


def register(config) -> None:
    """The plugin, in the run's first process only (a worker's tests are timed there)."""
    if not hasattr(config, "workerinput"):
        config.pluginmanager.register(Budget(config), "suite-budget")
