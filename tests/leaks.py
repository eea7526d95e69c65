"""The check that no test leaves anything behind (a pytest plugin, loaded by
``tests/conftest.py``). It fails the run when

* a test process ends its session with a child process still running (given ten seconds
  to end): it is killed and named, as an error at the teardown of that process's last
  test, once every other fixture is torn down;
* a test process ends its session with a socket listening that was not listening when
  its session began (reported the same way);
* once every test process has ended, a file or folder made during the run is still in the
  repository's tree, or in the system's temporary folder (top level) where that folder is
  checked strictly (below). Each is named with the tests it appeared during (with two
  workers, a test of the other worker may share the blame).

The system's temporary folder is shared with every other program on the machine, and
Linux keeps no record of which process made a file (fanotify, which would tell, needs
privileges a user's run does not have). So a new entry there fails the run only where
nothing else runs: under CI (``CI`` set to true, as CI services do) or with
``REFINE_STRICT_TMP=1``. Elsewhere (a developer's machine, with a browser and an editor
writing to ``/tmp``) it is reported as a warning that names it and the tests it
appeared during. Either way an entry is set aside when it belongs to another user, or
when it is gone within a moment of the check (``GONE_S``): the test processes have
ended by then, so what still comes and goes is another program's.

Tests keep their files in pytest's ``tmp_path``. What libraries put in the temporary
folder (``tempfile``), and pytest's ``tmp_path`` folders, go to a folder of the test
session (:func:`session_folder`: the process that starts the run makes it, points
``TMPDIR`` at it and removes it at the end).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# made and kept by tools, not by tests: the environment, caches of imports and linters
SKIP_DIRS = {".git", ".venv", "__pycache__", ".pytest_cache", ".ruff_cache", ".hypothesis"}
# how long a child process that is ending may take to end
GRACE_S = float(os.environ.get("REFINE_LEAK_GRACE_S", "10"))
# how long an entry of the system's temporary folder is watched, once the tests have
# ended, for another program removing it (a test's leftover stays); tests/unit/test_leaks.py
# shortens both for the runs it makes, whose leftovers stay on purpose
GONE_S = float(os.environ.get("REFINE_LEAK_GONE_S", "2"))
_OWNER = False  # this process made the session folder (the run's first process)
_RAY_TMP = ""  # the short folder of sockets (session_folder), where this process made it
# work a test handed on to finish while the next tests run (closing a server: see
# tests/ui/clients.py close_later), waited for, GRACE_S each, before the session's check
_FINISHING: list = []


def finish_later(work, *args, **kwargs) -> None:
    """Run ``work(*args, **kwargs)`` on a thread of its own; the session's end waits for it
    before it looks for what was left running."""
    import threading

    thread = threading.Thread(target=work, args=args, kwargs=kwargs, daemon=True)
    thread.start()
    _FINISHING.append(thread)


def _wait_for_finishing() -> list[str]:
    late = []
    while _FINISHING:
        thread = _FINISHING.pop()
        thread.join(GRACE_S)
        if thread.is_alive():
            late.append(f"work handed on by a test did not end in {GRACE_S:g} s: {thread!r}")
    return late


def session_folder() -> Path:
    """The test session's temporary folder: made by the run's first process (which then
    owns it), inherited by the workers through the environment. ``TMPDIR`` and the
    toolkit's cache point into it."""
    global _OWNER, _RAY_TMP
    if not os.environ.get("REFINE_TEST_TMP"):
        system = tempfile.gettempdir()
        made = tempfile.mkdtemp(prefix="refine-tests-", dir=system)
        # pytest's own folders (tmp_path) go there too: the app under test serves files
        # from the temporary folder, as Gradio does by default
        os.environ.update(REFINE_TEST_TMP=made, REFINE_SYSTEM_TMP=system, TMPDIR=made)
        os.environ.setdefault("REFINE_CACHE_DIR", str(Path(made) / "cache"))
        # which models give log-probabilities is not remembered from one test to the next
        # (one stand-in server answers with and without them); tests of the memory name a
        # file of their own
        os.environ.setdefault("REFINE_JUDGE_MEMORY", "off")
        # the data directory's packs come before the bundled pack: a user's own stay out
        os.environ["REFINE_DATA_DIR"] = str(Path(made) / "data")
        # Ray's session and Chromium's profile keep sockets in their temporary folder, and
        # a socket's path has at most 107 bytes: nested in the session folder under a long
        # TMPDIR (a Mac's is about 49 characters) it is longer, and both failed to start.
        # They get a short folder (/tmp where there is one), made here and removed at the
        # end: Ray through RAY_TMPDIR (a user's own kept), Chromium through short_tmpdir
        root = "/tmp" if os.access("/tmp", os.W_OK) else system
        _RAY_TMP = tempfile.mkdtemp(prefix="rt-", dir=root)
        os.environ["REFINE_TEST_SHORT_TMP"] = _RAY_TMP
        os.environ.setdefault("RAY_TMPDIR", _RAY_TMP)
        tempfile.tempdir = None  # read TMPDIR again
        _OWNER = True
    return Path(os.environ["REFINE_TEST_TMP"])


@contextmanager
def short_tmpdir():
    """``TMPDIR`` pointed at the session's short folder while a program that keeps sockets
    in its temporary folder starts (Playwright's driver, which makes Chromium's profile
    there), then as it was."""
    short, saved = os.environ.get("REFINE_TEST_SHORT_TMP"), os.environ.get("TMPDIR")
    if short:
        os.environ["TMPDIR"] = short
    try:
        yield
    finally:
        if short and saved is not None:
            os.environ["TMPDIR"] = saved


def system_tmp() -> Path:
    return Path(os.environ.get("REFINE_SYSTEM_TMP") or tempfile.gettempdir())


def _kept(rel: Path, name: str) -> bool:
    """Whether folder ``name`` under ``rel`` is watched (not a tool's own)."""
    venv = os.environ.get("REFINE_VENV", ".venv")
    return (
        name not in SKIP_DIRS and not name.endswith(".egg-info") and (rel / name).as_posix() != venv
    )


def _tree(root: Path) -> set[str]:
    """Every file and folder under ``root`` but the tools' own, as paths from it."""
    found: set[str] = set()
    for here, dirs, files in os.walk(root):
        rel = Path(here).relative_to(root)
        dirs[:] = [d for d in dirs if _kept(rel, d)]
        found.update((rel / name).as_posix() for name in [*dirs, *files])
    return found


def _tmp_entries() -> set[str]:
    """The temporary folder's entries, but pytest's own folder (which keeps the last three
    sessions)."""
    tmp = system_tmp()
    try:
        return {str(tmp / n) for n in os.listdir(tmp) if not n.startswith("pytest-of-")}
    except OSError:
        return set()


def snapshot() -> set[str]:
    """What a test could leave: the temporary folder's entries and the repository's tree."""
    return _tmp_entries() | {str(ROOT / p) for p in _tree(ROOT)}


class Tree:
    """The repository's tree as :func:`snapshot` gives it, kept up to date between tests by
    reading again only the folders whose modification time moved (a folder gains or loses
    an entry only so): a ``stat`` per folder instead of a walk of the whole tree, 0.3
    instead of 3.1 ms a look here, two looks a test. A folder whose time is close to the
    time of its reading is read again the next time too (an entry made within the same
    clock tick may leave the time as it was). It serves the blame only: the session's end
    compares whole snapshots."""

    # above the kernel's coarse clock tick (1 to 10 ms) and a file system's whole-second
    # times alike; a folder this recent is only read again, which costs little
    RECENT_NS = 2_000_000_000

    def __init__(self, root: Path) -> None:
        self.root = root
        # folder (from the root): its time as read (-1: read again), the folders in it to
        # read, and its entries' paths as snapshot() writes them
        self.folders: dict[Path, tuple[int, list[str], frozenset[str]]] = {}
        self._read(Path("."))

    def _read(self, rel: Path) -> None:
        import time

        kept: list[str] = []  # entries, as os.walk sorts them: a link to a folder is a
        inside: list[str] = []  # folder (left out when a tool's), never gone into
        now = time.time_ns()  # before the folder's time: a pause after it cannot hide it
        try:
            mtime = os.stat(self.root / rel).st_mtime_ns
            with os.scandir(self.root / rel) as it:
                for entry in it:
                    if not entry.is_dir():
                        kept.append(entry.name)
                    elif _kept(rel, entry.name):
                        kept.append(entry.name)
                        if not entry.is_symlink():
                            inside.append(entry.name)
        except OSError:
            self._forget(rel)
            return
        if now - mtime < self.RECENT_NS:
            mtime = -1
        old = self.folders.get(rel)
        here = str(self.root / rel.as_posix()) if rel != Path(".") else str(self.root)
        paths = frozenset(os.path.join(here, name) for name in kept)
        self.folders[rel] = (mtime, inside, paths)
        for d in inside:
            if (rel / d) not in self.folders:
                self._read(rel / d)
        for d in set(old[1] if old else ()) - set(inside):
            self._forget(rel / d)

    def _forget(self, rel: Path) -> None:
        for known in [k for k in self.folders if k == rel or rel in k.parents]:
            del self.folders[known]

    def entries(self) -> set[str]:
        """The tree now, each path as :func:`snapshot` writes it."""
        for rel in list(self.folders):
            if rel not in self.folders:  # forgotten with a folder above it
                continue
            try:
                moved = os.stat(self.root / rel).st_mtime_ns != self.folders[rel][0]
            except OSError:
                self._forget(rel)
                continue
            if moved:
                self._read(rel)
        return set().union(*(paths for _, _, paths in self.folders.values()))


def listening() -> set[tuple[str, int]]:
    """The TCP addresses this process listens on, asked of each of its sockets
    (``SO_ACCEPTCONN``). psutil reads ``/proc/net/tcp``, which costs about 4 ms of kernel
    time per read here and made this check, run twice a test, 6.5 % of the suite's CPU
    time; asking the process's own few sockets takes well under a millisecond.

    Each socket is asked through a duplicate of its descriptor, which stays open while it
    is asked, so a socket that another thread closes meanwhile (a server closed in the
    background) is asked all the same or skipped, never confused with a descriptor
    reused since. The duplicate shares the socket's flags, which Python may change when it
    wraps it (a default timeout makes it non-blocking), so they are put back through it."""
    import errno
    import fcntl
    import socket
    import stat

    fds = "/proc/self/fd" if os.path.isdir("/proc/self/fd") else "/dev/fd"
    found = set()
    for name in os.listdir(fds):
        try:
            copy = os.dup(int(name))
        except OSError as err:
            if err.errno == errno.EBADF:
                continue  # closed since the listing (the listing's own descriptor too)
            raise
        try:
            if not stat.S_ISSOCK(os.fstat(copy).st_mode):
                continue
            flags = fcntl.fcntl(copy, fcntl.F_GETFL)
            sock = socket.socket(fileno=copy)
            try:
                if sock.type == socket.SOCK_STREAM and sock.family in (
                    socket.AF_INET,
                    socket.AF_INET6,
                ):
                    if sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN):
                        found.add(tuple(sock.getsockname()[:2]))
            finally:
                sock.detach()  # the duplicate stays open until below
                if fcntl.fcntl(copy, fcntl.F_GETFL) != flags:
                    fcntl.fcntl(copy, fcntl.F_SETFL, flags)
        finally:
            os.close(copy)
    return found


class Watch:
    """What this process had when its session began, and what appeared during each test."""

    def __init__(self) -> None:
        import psutil

        me = psutil.Process()
        self.children = {p.pid for p in me.children(recursive=True)}
        self.ports = listening()
        self.before = snapshot()
        self.tree = Tree(ROOT)
        self.made: dict[str, list[str]] = {}  # path -> the tests it appeared during
        self.opened: dict[tuple[str, int], list[str]] = {}  # socket -> the same

    def now(self) -> set[str]:
        """What :func:`snapshot` gives, at a per-test cost (see :class:`Tree`)."""
        return _tmp_entries() | self.tree.entries()

    def during(self, nodeid: str, before: tuple[set[str], set]) -> None:
        for path in self.now() - before[0] - self.before:
            self.made.setdefault(path, []).append(nodeid)
        for port in listening() - before[1] - self.ports:
            self.opened.setdefault(port, []).append(nodeid)

    def processes_and_ports(self) -> list[str]:
        import psutil

        out = []
        me = psutil.Process()
        left = [p for p in me.children(recursive=True) if p.pid not in self.children]
        _, alive = psutil.wait_procs(left, timeout=GRACE_S)
        for proc in alive:
            try:
                what = " ".join(proc.cmdline())[:200] or proc.name()
                proc.kill()
            except psutil.Error:
                continue
            out.append(f"a child process was left running (killed now): pid {proc.pid}: {what}")
        for ip, port in sorted(listening() - self.ports):
            tests = ", ".join(dict.fromkeys(self.opened.get((ip, port), []))) or "a fixture"
            out.append(f"a socket was left listening on {ip}:{port} ({tests})")
        return out

    def files(self, blame: dict[str, list[str]]) -> tuple[list[str], list[str]]:
        """What was left: (failures, warnings). Entries of the system's temporary folder
        are failures only where it is checked strictly (:func:`strict_tmp`)."""

        def named(path: str) -> str:
            tests = ", ".join(dict.fromkeys(blame.get(path, []))) or "no test: a fixture"
            return f"{path} ({tests})"

        left = snapshot() - self.before
        system = {p for p in left if Path(p).parent == system_tmp()}
        fail = [
            f"a file was left outside the tests' temporary folders: {named(p)}"
            for p in sorted(left - system)
        ]
        warn = []
        for path in sorted(_still_there(_own(system))):
            if strict_tmp():
                fail.append(f"a file was left outside the tests' temporary folders: {named(path)}")
            else:
                warn.append(
                    f"a new entry in the system's temporary folder: {named(path)}; made by a "
                    "test or by another program on this machine (CI=true or "
                    "REFINE_STRICT_TMP=1 fails the run on it)"
                )
        return fail, warn


def strict_tmp() -> bool:
    """Whether a new entry of the system's temporary folder fails the run: under CI (where
    nothing else runs beside the tests) or when asked for."""
    flags = (os.environ.get("CI", ""), os.environ.get("REFINE_STRICT_TMP", ""))
    return any(f.strip().lower() in ("1", "true", "yes") for f in flags)


def _own(paths: set[str]) -> set[str]:
    """The entries that belong to this run's user (another user's are not the tests')."""
    mine = set()
    for path in paths:
        try:
            if os.lstat(path).st_uid == os.getuid():
                mine.add(path)
        except OSError:
            continue  # gone already
    return mine


def _still_there(paths: set[str], seconds: float | None = None) -> set[str]:
    """The entries that are still there after ``seconds`` (:data:`GONE_S`), looked at every
    0.1 s (returns at once when nothing is asked or everything is gone)."""
    import time

    deadline = time.monotonic() + (GONE_S if seconds is None else seconds)
    while paths and time.monotonic() < deadline:
        time.sleep(0.1)
        paths = {p for p in paths if os.path.lexists(p)}
    return paths


_WATCH: Watch | None = None


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session):
    global _WATCH
    _WATCH = Watch()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    before = (_WATCH.now() if _WATCH is not None else set(), listening())
    try:
        return (yield)
    finally:
        if _WATCH is not None:
            _WATCH.during(item.nodeid, before)


@pytest.fixture(scope="session", autouse=True)
def nothing_left_running():
    """Torn down after every other fixture of the session: then no child process and no
    listening socket of this process's tests may remain."""
    yield
    found = _wait_for_finishing()
    found += _WATCH.processes_and_ports() if _WATCH is not None else []
    if found:
        pytest.fail("left behind by the tests:\n" + "\n".join(found), pytrace=False)


def _remove(folder: Path) -> None:
    """Remove the session folder. multiprocessing keeps its own folder there (pymp-*) while
    this process lives and removes it at exit, among its finalizers (priority -100): a
    folder holding one is removed by a finalizer that runs after it."""
    if not folder.is_dir():
        return
    for path in folder.iterdir():
        if path.name.startswith("pymp-"):
            continue
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
    if not any(folder.iterdir()):
        folder.rmdir()
        return
    from multiprocessing.util import Finalize

    Finalize(None, shutil.rmtree, args=(folder,), kwargs={"ignore_errors": True}, exitpriority=-200)


def pytest_sessionfinish(session, exitstatus):
    """A worker hands what its tests made to the run's first process, which, once every
    worker is done, fails the run on what is still there, and removes the session folder."""
    if _WATCH is None or not os.environ.get("REFINE_TEST_TMP"):
        return
    folder = Path(os.environ["REFINE_TEST_TMP"])
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker:
        (folder / f"made-{worker}.json").write_text(json.dumps(_WATCH.made))
        return
    if not _OWNER:
        return
    blame: dict[str, list[str]] = {k: list(v) for k, v in _WATCH.made.items()}
    for made in folder.glob("made-*.json"):
        for path, tests in json.loads(made.read_text()).items():
            blame.setdefault(path, []).extend(tests)
    found, warned = _WATCH.files(blame)
    _remove(folder)
    if _RAY_TMP:  # the short folder of sockets, made by this process (session_folder)
        shutil.rmtree(_RAY_TMP, ignore_errors=True)
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    for title, lines, red in (
        ("files left behind", ["left behind by the tests:", *found], True),
        ("the system's temporary folder", warned, False),
    ):
        if len(lines) <= (1 if red else 0):
            continue
        if reporter is not None:
            reporter.ensure_newline()
            reporter.section(title, red=red, yellow=not red)
            for line in lines:
                reporter.write_line(line)
        else:
            print("\n".join(lines))
    if found:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
