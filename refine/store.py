"""The run store: one directory per run, ``run.json`` written atomically after every round.

Images are written before the record that names them (PNG encoding runs on a writer
thread, overlapping the next model call; saving the record waits for it), and the record
is replaced by rename, so a run killed at any point keeps every completed round and can
be resumed. Recently written images stay in memory, so a parent is not read back.

Run directories are created exclusively (a suffix on a name already taken, so runs started
in the same second by several threads or processes never collide). While a process drives
a run it holds ``.lock`` (its PID and host): a second process, or a second driver in the
same process, is refused with the PID that holds it; a lock whose process is gone is taken
over, and the temp files a killed write left behind are removed. Files are written with
the user's umask.
"""

from __future__ import annotations

import json
import os
import re
import socket
import tempfile
import time
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from refine.records import Run

if TYPE_CHECKING:
    from PIL import Image

RUN_FILE = "run.json"
LOCK_FILE = ".lock"


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


FILE_MODE = 0o666 & ~_umask()


class RunLocked(RuntimeError):
    """Another process (or another driver in this one) is working on the run."""


def slug(text: str, limit: int = 40) -> str:
    s = re.sub(r"[^a-z0-9]+", "-", text.casefold()).strip("-")
    return s[:limit].strip("-") or "run"


def new_run_id(activity: str, country: str) -> str:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return f"{stamp}-{slug(country, 20)}-{slug(activity)}"


def append_jsonl(path: Path, row: Any) -> None:
    """Append one JSON line and sync it; a line a kill left unfinished is closed first, so
    the new one starts on a line of its own (readers skip the cut one)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    cut = False
    if path.is_file() and path.stat().st_size:
        with open(path, "rb") as f:
            f.seek(-1, os.SEEK_END)
            cut = f.read(1) != b"\n"
    with open(path, "a", encoding="utf-8") as f:
        f.write(("\n" if cut else "") + json.dumps(row, ensure_ascii=False) + "\n")
        f.flush()
        os.fsync(f.fileno())


def atomic_write_text(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.chmod(tmp, FILE_MODE)  # mkstemp makes 0600; a run's files follow the umask
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class RunStore:
    """Reads and writes one run directory; never writes outside it."""

    RECENT = 8  # images kept in memory

    def __init__(self, directory: str | Path) -> None:
        self.dir = Path(directory).resolve()
        self._writer: ThreadPoolExecutor | None = None
        self._pending: list[Future] = []
        self._recent: OrderedDict[str, Image.Image] = OrderedDict()
        self._locked = False

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
        """``pid@host`` of the live process holding the lock, or None."""
        try:
            text = (self.dir / LOCK_FILE).read_text(encoding="utf-8").strip()
        except OSError:
            return None
        pid, _, host = text.partition("@")
        if host and host != socket.gethostname():
            return text  # another machine's process: it cannot be checked from here
        try:
            os.kill(int(pid), 0)
        except (ValueError, ProcessLookupError):
            return None  # a stale lock: its process is gone
        except PermissionError:
            return text  # alive, owned by someone else
        return text

    def acquire(self) -> None:
        """Hold the run for this process; refused while another live driver holds it. A
        stale lock is taken over and leftover temp files are removed."""
        me = f"{os.getpid()}@{socket.gethostname()}"
        lock = self.dir / LOCK_FILE
        for _ in range(3):
            try:
                fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, FILE_MODE)
            except FileExistsError:
                held = self.holder()
                if held is not None:
                    raise RunLocked(
                        f"{self.dir} is in use by process {held}; wait for it to end, or stop it"
                    ) from None
                lock.unlink(missing_ok=True)
                continue
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(me)
            self._locked = True
            for leftover in self.dir.glob(".*.tmp"):
                leftover.unlink(missing_ok=True)
            return
        raise RunLocked(f"{self.dir}: could not take the lock")

    def release(self) -> None:
        if self._locked:
            (self.dir / LOCK_FILE).unlink(missing_ok=True)
            self._locked = False

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
            return Run.model_validate(json.loads(path.read_text(encoding="utf-8")))
        except (json.JSONDecodeError, ValueError) as err:
            raise ValueError(f"{path}: not a valid run record ({err})") from err


def _write_png(path: Path, image: Image.Image) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    image.save(tmp, format="PNG", compress_level=1)  # fast; lossless all the same
    os.chmod(tmp, FILE_MODE)
    os.replace(tmp, path)
