"""The session-end check of tests/leaks.py, on a pytest run of its own: a test that leaves
a process, a listening socket or a file outside its temporary folders fails the run and is
named; a test that keeps to its tmp_path passes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

CONFTEST = """
from tests.leaks import (  # noqa: F401
    nothing_left_running,
    pytest_runtest_protocol,
    pytest_sessionfinish,
    pytest_sessionstart,
    session_folder,
)

session_folder()
"""

TESTS = """
import os, socket, subprocess, sys, tempfile
from pathlib import Path

KEPT = []


def test_leaves_a_process():
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])


def test_leaves_a_socket():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    KEPT.append(s)


def test_leaves_a_file():
    (Path(os.environ["REFINE_SYSTEM_TMP"]) / "left.txt").write_text("x")


def test_a_child_leaves_a_file():
    path = Path(os.environ["REFINE_SYSTEM_TMP"]) / "child-left.txt"
    subprocess.run([sys.executable, "-c", f"open({str(path)!r}, 'w').close()"], check=True)


def test_keeps_to_its_folders(tmp_path):
    (tmp_path / "fine.txt").write_text("x")
    (Path(tempfile.gettempdir()) / "library-cache.txt").write_text("x")  # the session's
"""


def inner_run(tmp_path: Path, *select: str, ci: bool = True) -> subprocess.CompletedProcess:
    """pytest on the tests above, in a folder of its own, whose system temporary folder is
    one of this test's (so that what it leaves stays here); under CI (``CI=true``: the
    system's temporary folder checked strictly) unless ``ci`` is false."""
    (tmp_path / "run").mkdir(exist_ok=True)
    (tmp_path / "sys").mkdir(exist_ok=True)
    (tmp_path / "run" / "conftest.py").write_text(CONFTEST)
    (tmp_path / "run" / "test_inner.py").write_text(TESTS)
    drop = ("REFINE_TEST_TMP", "REFINE_SYSTEM_TMP", "PYTEST_XDIST_WORKER", "PYTEST_DEBUG_TEMPROOT")
    env = {k: v for k, v in os.environ.items() if k not in drop and not k.startswith("PYTEST_")}
    env = {k: v for k, v in env.items() if k not in ("CI", "REFINE_STRICT_TMP")}
    env.update(TMPDIR=str(tmp_path / "sys"), PYTHONPATH=str(ROOT), REFINE_LEAK_GRACE_S="1")
    env["REFINE_LEAK_GONE_S"] = "0.5"  # the files left here stay: the whole watch is waited
    if ci:
        env["CI"] = "true"
    args = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist"]
    args += ["--rootdir", str(tmp_path / "run"), *(f"test_inner.py::{t}" for t in select)]
    return subprocess.run(
        args, cwd=tmp_path / "run", env=env, capture_output=True, text=True, timeout=120
    )


@pytest.mark.slow
def test_a_run_that_leaves_things_behind_fails_and_names_them(tmp_path):
    done = inner_run(tmp_path)
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    assert "a child process was left running (killed now)" in out and "time.sleep(120)" in out
    assert "a socket was left listening on 127.0.0.1:" in out
    left = tmp_path / "sys" / "left.txt"
    assert f"{left} (test_inner.py::test_leaves_a_file)" in out
    child = tmp_path / "sys" / "child-left.txt"
    assert f"{child} (test_inner.py::test_a_child_leaves_a_file)" in out
    assert "library-cache" not in out and "fine.txt" not in out
    # the session's own folder is gone, and only what the leaky tests left is there
    assert sorted(p.name for p in (tmp_path / "sys").iterdir() if "pytest" not in p.name) == [
        "child-left.txt",
        "left.txt",
    ]


@pytest.mark.slow
def test_outside_ci_an_entry_of_the_system_folder_is_a_warning_that_names_it(tmp_path):
    """Where other programs may write to the system's temporary folder (no CI), a new
    entry there cannot be told from a test's: it is named, and the run passes."""
    done = inner_run(tmp_path, "test_leaves_a_file", ci=False)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    left = tmp_path / "sys" / "left.txt"
    assert f"a new entry in the system's temporary folder: {left} (" in out
    assert "test_inner.py::test_leaves_a_file" in out and "left behind" not in out


@pytest.mark.slow
def test_an_entry_another_program_removes_at_once_is_not_blamed(tmp_path):
    """Once the tests have ended, an entry that goes within a moment was another
    program's: only the one that stays is kept for the report."""
    import threading

    from tests import leaks

    stays, goes = tmp_path / "stays", tmp_path / "goes"
    stays.write_text("x")
    goes.write_text("x")
    gone = threading.Event()

    def remove_later():
        threading.Event().wait(0.1)
        goes.unlink()
        gone.set()

    threading.Thread(target=remove_later, daemon=True).start()
    # the whole watch (1 s) to remove it in 0.1 s: ample beside busy cores
    assert leaks._still_there({str(stays), str(goes)}, seconds=1.0) == {str(stays)}
    assert gone.is_set()
    assert leaks._still_there(set()) == set()


@pytest.mark.slow
def test_a_run_that_keeps_to_its_folders_passes(tmp_path):
    done = inner_run(tmp_path, "test_keeps_to_its_folders")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "left behind" not in done.stdout
    assert [p.name for p in (tmp_path / "sys").iterdir() if "pytest" not in p.name] == []


def test_the_tree_kept_between_tests_is_the_tree_walked(tmp_path):
    """The blame's cheap look (folders read again only when their time moved) sees what a
    whole walk sees, as entries come and go, in new folders too, a tool's folder and what
    is under a link to a folder left out."""
    import shutil

    from tests.leaks import Tree, _tree

    def walked() -> set[str]:
        return {str(tmp_path / p) for p in _tree(tmp_path)}

    def settle(*folders: Path) -> None:  # times well in the past: not read again unless moved
        for folder in folders:
            os.utime(folder, ns=(1_000_000_000_000_000_000, 1_000_000_000_000_000_000))

    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "one.txt").write_text("x")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "far.txt").write_text("x")
    (tmp_path / "link").symlink_to(tmp_path / "elsewhere")
    settle(tmp_path, tmp_path / "a", tmp_path / "elsewhere")
    tree = Tree(tmp_path)
    assert tree.entries() == walked()
    assert str(tmp_path / "link") in walked() and str(tmp_path / "link" / "far.txt") not in walked()
    assert all(t >= 0 for t, _, _ in tree.folders.values())  # settled: read once only
    (tmp_path / "a" / "two.txt").write_text("x")
    (tmp_path / "b" / "c").mkdir(parents=True)
    (tmp_path / "b" / "c" / "deep.txt").write_text("x")
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / "__pycache__" / "m.pyc").write_text("x")
    seen = tree.entries()
    assert (
        seen == walked()
        and {str(tmp_path / "a" / "two.txt"), str(tmp_path / "b" / "c" / "deep.txt")} <= seen
    )
    assert not any("__pycache__" in p for p in seen)
    shutil.rmtree(tmp_path / "b")
    (tmp_path / "a" / "one.txt").unlink()
    settle(tmp_path, tmp_path / "a")
    assert tree.entries() == walked()
    # a folder whose time did not move is not read again: what it shows is what was read
    # (an entry made within the clock's tick is found because a recent folder is re-read)
    (tmp_path / "a" / "three.txt").write_text("x")
    settle(tmp_path / "a")
    assert str(tmp_path / "a" / "three.txt") not in tree.entries()


def test_rays_folder_is_short_whatever_the_temporary_folder():
    """Ray keeps its sockets in its session folder, and a socket's path has at most 107
    bytes: the session nests pytest's folders in TMPDIR, so under a 64-character TMPDIR
    every Ray test failed at set-up (and Chromium did not start). Ray's folder is a short
    one of the session (/tmp/rt-*, RAY_TMPDIR; Chromium's profile goes there too),
    removed at the end; its longest socket path is ray/session_<date>_<time>_
    <microseconds>_<pid>/sockets/plasma_store under it."""
    ray_tmp = os.environ["REFINE_TEST_SHORT_TMP"]
    if os.environ["RAY_TMPDIR"] != ray_tmp:
        pytest.skip("RAY_TMPDIR is the user's own")
    assert Path(ray_tmp).is_dir()
    assert not ray_tmp.startswith(os.environ["REFINE_TEST_TMP"])
    socket = "/ray/session_2026-12-06_13-38-18_667681_4194304/sockets/plasma_store"
    assert len((ray_tmp + socket).encode()) <= 107
