"""How a batch's job is made: the refinement run of one entry, made or resumed in the
batch directory (see :mod:`refine.harness.tasks.batch.task`)."""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path
from typing import Any

from refine.events import Event, RunStarted
from refine.harness.tasks.batch.record import BatchEntry
from refine.io.files import atomic_write_text
from refine.io.store import LOCK_FILE
from refine.loop.refiner import Refiner
from refine.usage import QuotaSpent

log = logging.getLogger(__name__)


def claimed(root: Path, i: int) -> str | None:
    """The run directory a Ray worker started for entry ``i``, if any."""
    try:
        return json.loads((root / "runs" / ".claims" / f"{i}.json").read_text())["run_dir"]
    except (OSError, ValueError, KeyError):
        return None


def release_lock(root: Path, run_dir: str | None, dead: str | None) -> None:
    """Remove a run's lock when the dead worker held it (its host may be another)."""
    if not run_dir or not dead:
        return
    lock = root / run_dir / LOCK_FILE
    try:
        if lock.read_text(encoding="utf-8").strip() == dead:
            lock.unlink(missing_ok=True)
    except OSError:
        pass


class RunMaker:
    """Makes or resumes the runs of a batch's entries in the batch directory: one Refiner
    (one set of models) per process, a sibling sharing its models per thread. A worker
    that can tell the driver (the local engine) tells it every run event; one that cannot
    (a Ray worker) writes ``runs/.claims/<entry>.json`` as soon as its run starts, so a
    retry elsewhere resumes that run instead of starting another."""

    def __init__(
        self,
        profile: str,
        backends: dict[str, str],
        options: dict[str, dict[str, Any]],
        root: str,
        instances: Any = None,
    ) -> None:
        self.refiner = instances if instances is not None else Refiner(profile, backends, options)
        self.root = Path(root)
        self.local = threading.local()

    def describe(self) -> None:
        return None

    def make(self, job: tuple[int, BatchEntry], tell: Any = None) -> dict[str, Any]:
        """The entry's run made or resumed: ``{"run_dir": ..., "error": ...}`` (a run that
        fails is reported, not raised: the batch goes on)."""
        i, entry = job
        worker = getattr(self.local, "refiner", None)
        if worker is None:
            worker = self.local.refiner = self.refiner.sibling()
        root = self.root
        started: dict[str, str] = {}

        def on_event(event: Event) -> None:
            if isinstance(event, RunStarted) and "dir" not in started:
                started["dir"] = str(Path(event.dir).relative_to(root))
                if tell is None:
                    claim = root / "runs" / ".claims" / f"{i}.json"
                    claim.parent.mkdir(parents=True, exist_ok=True)
                    atomic_write_text(claim, json.dumps({"run_dir": started["dir"]}))
            if tell is not None:
                tell(event)

        worker.on_event = on_event
        run_dir = entry.run_dir or claimed(root, i)
        try:
            if run_dir and (root / run_dir / "run.json").is_file():
                worker.resume(root / run_dir)
                started.setdefault("dir", run_dir)
            else:
                worker.start(entry.spec, entry.references, out=root / "runs")
            return {"run_dir": started.get("dir"), "error": None}
        except QuotaSpent:  # every later run would meet it too: the batch stops here
            raise
        except Exception as err:  # recorded; the batch goes on
            log.debug("batch entry %d failed", i, exc_info=True)
            return {"run_dir": started.get("dir", run_dir), "error": f"{type(err).__name__}: {err}"}
