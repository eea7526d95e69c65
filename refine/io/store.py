"""The run store: one directory per run, ``run.json`` written atomically after every round.

Images are written before the record that names them (PNG encoding runs on a writer
thread, overlapping the next model call; saving the record waits for it), and the record
is replaced by rename, so a run killed at any point keeps every completed round and can
be resumed. Recently written images stay in memory, so a parent is not read back.

Run directories are created exclusively (a suffix on a name already taken, so runs started
in the same second by several threads or processes never collide). While a process drives
a run it holds an OS lock (``flock``) on ``.lock``, where it writes its PID and host: a
second process, or a second driver in the same process, is refused with the PID that holds
it; the OS drops the lock of a process that is gone, however it ended, and the temp files a
killed write left behind are removed. Files are written atomically with the user's umask
(refine.io.files).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from refine.io.files import FILE_MODE, atomic_write, atomic_write_text, is_temp, slug
from refine.records import Run

if TYPE_CHECKING:
    from PIL import Image

RUN_FILE = "run.json"
LOCK_FILE = ".lock"


class RunLocked(RuntimeError):
    """Another process (or another driver in this one) is working on the run."""


_HELD: dict[Path, list] = {}  # the folders this process holds (held): [depth, store]
_HELD_LOCK = threading.Lock()


@contextlib.contextmanager
def held(folder: str | Path) -> Iterator[None]:
    """``folder`` (a task's: a bench's, a batch's, a bank's) held by this process as a run
    folder is (its ``.lock``), or RunLocked naming the process that holds it: two
    processes on one folder would both send, and pay for, the same cells. Within this
    process it may be held again (a command that holds its folder and runs its task there):
    one process a folder."""
    path = Path(folder).resolve()
    with _HELD_LOCK:
        if path in _HELD:
            _HELD[path][0] += 1
        else:
            store = RunStore(path)
            store.dir.mkdir(parents=True, exist_ok=True)
            store.acquire()
            _HELD[path] = [1, store]
    try:
        yield
    finally:
        with _HELD_LOCK:
            _HELD[path][0] -= 1
            if _HELD[path][0] == 0:
                _HELD.pop(path)[1].release()


def new_run_id(activity: str, country: str) -> str:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return f"{stamp}-{slug(country, 20)}-{slug(activity)}"


class RunStore:
    """Reads and writes one run directory; never writes outside it."""

    RECENT = 8  # images kept in memory

    def __init__(self, directory: str | Path) -> None:
        self.dir = Path(directory).resolve()
        self._writer: ThreadPoolExecutor | None = None
        self._pending: list[Future] = []
        self._recent: OrderedDict[str, Image.Image] = OrderedDict()
        self._lock_fd: int | None = None

    @classmethod
    def create(cls, root: str | Path, run_id: str) -> RunStore:
        """A new, empty run directory ``root/run_id`` (``run_id-2``, ... when taken)."""
        if slug(run_id, 200) != run_id:
            raise ValueError(f"run id {run_id!r} is not safe for a file name")
        root = Path(root).resolve()
        root.mkdir(parents=True, exist_ok=True)
        n = 1
        while True:
            path = root / (run_id if n == 1 else f"{run_id}-{n}")
            try:
                path.mkdir()  # exclusive: exactly one creator succeeds
                return cls(path)
            except FileExistsError:
                n += 1

    # -- the lock ----------------------------------------------------------------------

    def holder(self) -> str | None:
        """``pid@host`` of the process holding the run (as it wrote it), or None when no
        process holds it. Held means an OS lock on ``.lock``, which the OS releases when
        its process ends, however it ends."""
        lock = self.dir / LOCK_FILE
        try:
            fd = os.open(lock, os.O_RDONLY)
        except OSError:
            return None
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                text = os.pread(fd, 256, 0).decode("utf-8", "replace").strip()
                return text or "another process"
            fcntl.flock(fd, fcntl.LOCK_UN)
            return None
        finally:
            os.close(fd)

    def acquire(self) -> None:
        """Hold the run for this process, or RunLocked naming who holds it. One OS lock
        (``flock``) decides: of processes racing for a run exactly one gets it, and there
        is no moment when the file exists without its owner holding it. A lock whose
        process is gone is free (the OS dropped it); temp files a killed write left behind
        are removed."""
        me = f"{os.getpid()}@{socket.gethostname()}"
        lock = self.dir / LOCK_FILE
        for attempt in range(50):
            fd = os.open(lock, os.O_RDWR | os.O_CREAT, FILE_MODE)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                if attempt < 2:  # a moment's look by holder() also blocks: ask again
                    time.sleep(0.02)
                    continue
                held = self.holder() or "another process"
                raise RunLocked(
                    f"{self.dir} is in use by process {held}; wait for it to end, or stop it"
                ) from None
            try:
                same = os.fstat(fd).st_ino == os.stat(lock).st_ino
            except FileNotFoundError:
                same = False
            if not same:  # released (and removed) by its holder between open and lock
                os.close(fd)
                continue
            os.ftruncate(fd, 0)
            os.pwrite(fd, me.encode(), 0)
            os.fsync(fd)
            self._lock_fd = fd
            for leftover in self.dir.glob(".*"):
                if is_temp(leftover):
                    leftover.unlink(missing_ok=True)
            return
        raise RunLocked(f"{self.dir}: could not take the lock")

    def release(self) -> None:
        """Give the run up: the lock file goes while still held, then the lock."""
        fd, self._lock_fd = self._lock_fd, None
        if fd is not None:
            try:
                (self.dir / LOCK_FILE).unlink(missing_ok=True)
            finally:
                os.close(fd)

    def _inside(self, name: str) -> Path:
        path = (self.dir / name).resolve()
        if path.parent != self.dir:
            raise ValueError(f"{name!r} would be written outside the run directory")
        return path

    def save_image(self, name: str, image: Image.Image) -> str:
        """Queue ``image`` for writing as ``name``; :meth:`flush` (and :meth:`save`) wait."""
        path = self._inside(name)
        image = image.convert("RGB") if image.mode != "RGB" else image.copy()
        if self._writer is None:
            self._writer = ThreadPoolExecutor(1, thread_name_prefix="run-store")
        self._pending.append(self._writer.submit(_write_png, path, image))
        self._recent[name] = image
        while len(self._recent) > self.RECENT:
            self._recent.popitem(last=False)
        return name

    def flush(self) -> None:
        """Wait until every queued image is on disk; a failed write is raised here."""
        pending, self._pending = self._pending, []
        for future in pending:
            future.result()

    def close(self) -> None:
        """Write what is queued, stop the writer thread and release the lock."""
        try:
            self.flush()
        finally:
            if self._writer is not None:
                self._writer.shutdown(wait=True)
                self._writer = None
            self.release()

    def save_mask(self, name: str, mask: Image.Image) -> str:
        """Write a region's mask as ``name``: a one-channel PNG (L), as drawn."""
        path = self._inside(name)
        mask = mask.convert("L")
        _write_png(path, mask)
        return name

    def load_mask(self, name: str) -> Image.Image:
        """A region's mask, one channel (L)."""
        from PIL import Image as PILImage

        with PILImage.open(self._inside(name)) as im:
            return im.convert("L")

    def copy_in(self, source: RunStore, name: str) -> str:
        """``name`` of another run's folder copied here, byte for byte (a roll back's
        images and masks)."""
        import shutil

        source.flush()
        path = self._inside(name)
        atomic_write(path, lambda tmp: shutil.copyfile(source._inside(name), tmp))
        return name

    def load_image(self, name: str) -> Image.Image:
        from PIL import Image as PILImage

        if name in self._recent:
            return self._recent[name].copy()
        with PILImage.open(self._inside(name)) as im:
            return im.convert("RGB")

    def save(self, run: Run) -> None:
        self.flush()
        run.updated = time.strftime("%Y-%m-%dT%H:%M:%S")
        atomic_write_text(self._inside(RUN_FILE), run.model_dump_json(indent=1))

    def load(self) -> Run:
        path = self.dir / RUN_FILE
        if not path.is_file():
            raise ValueError(f"{self.dir} is not a run directory (no {RUN_FILE})")
        try:
            return Run.read(json.loads(path.read_text(encoding="utf-8")))
        except (json.JSONDecodeError, ValueError) as err:
            raise ValueError(f"{path}: not a valid run record ({err})") from err


def run_left(where: str | Path, before: set[str]) -> Run | None:
    """The record of the run a failure ended in ``where``: the one run directory there not
    in ``before`` (None when there is no such one, or it has no round)."""
    where = Path(where)
    made = (
        [d for d in where.iterdir() if d.is_dir() and d.name not in before]
        if where.is_dir()
        else []
    )
    if len(made) != 1 or not (made[0] / "run.json").is_file():
        return None
    run = RunStore(made[0]).load()
    return run if run.rounds else None


def branches_of(run_dir: str | Path) -> list[tuple[str, int]]:
    """The runs rolled back from the run in ``run_dir`` and continued from one of its
    rounds, as (their folder's name, the round), oldest first. A roll-back is made beside
    its parent, named ``PARENT-from-rK`` (``-2``, ... when taken), and records its parent in
    ``branched_from``: only the folders so named are read."""
    source = Path(run_dir).resolve()
    found = []
    for folder in sorted(source.parent.glob(f"{source.name}-from-r*")):
        record = folder / "run.json"
        if folder.is_symlink() or not record.is_file():
            continue
        try:
            run = Run.read(json.loads(record.read_text(encoding="utf-8")))
        except ValueError:
            continue
        parent = run.branched_from or {}
        if Path(str(parent.get("run", ""))).resolve() == source:
            found.append((record.stat().st_mtime, folder.name, int(parent.get("round", 0))))
    return [(name, k) for _, name, k in sorted(found)]


def _write_png(path: Path, image: Image.Image) -> None:
    # compress level 1: fast, and lossless all the same
    atomic_write(path, lambda tmp: image.save(tmp, format="PNG", compress_level=1))
