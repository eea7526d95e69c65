"""What is saved under a service's ``out`` and who may change it: run folders named by a
client, confined to ``out``; each run's owner (the hash of a visitor id, in ``.owner``);
each visitor's references folder; the saved runs as cards for the gallery."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from refine.io.files import atomic_write_text, confined
from refine.io.store import RunStore
from refine.numbers import shown
from refine.records import Run
from refine.train.export import find_runs

OWNER_FILE = ".owner"  # the hash of the visitor who started the run
NOT_YOURS = "this run belongs to another visitor: you can watch it, not stop or steer it"
READ_ONLY = (
    "this run was made outside the app (or before runs had owners): it can be opened and "
    "watched here, not changed"
)


def visitor_hash(visitor: str) -> str:
    """What a run folder keeps of a visitor id: its SHA-256 (the id itself is never
    written, so a folder that is read or downloaded gives no one another visitor's id)."""
    import hashlib

    return hashlib.sha256(f"refine-visitor\x00{visitor}".encode()).hexdigest()


class RunFolders:
    """The folders under ``out`` and the visitors' rights to them (``admins``: visitor ids
    that change the shared references and tune from every run)."""

    def __init__(self, out: str | Path, admins: tuple[str, ...] | list[str] = ()) -> None:
        self.out = Path(out)
        self.admins = frozenset(admins)

    @property
    def references_dir(self) -> Path:
        """Where references built through this service are kept (inside ``out``)."""
        return self.out / "references"

    @property
    def tunes_dir(self) -> Path:
        """Where the app's tunes are kept (inside ``out``; their folders are not runs)."""
        return self.out / "tunes"

    def is_admin(self, visitor: str | None) -> bool:
        return visitor is not None and visitor in self.admins

    def claim(self, run_dir: str | Path, visitor: str) -> None:
        """Make ``visitor`` the owner of the run in ``run_dir`` (a run this service started)."""

        atomic_write_text(Path(run_dir) / OWNER_FILE, visitor_hash(visitor) + "\n")

    def owner_of(self, run_dir: str | Path) -> str | None:
        """The hash of the visitor who owns a run, or None (a run made outside the app)."""
        path = Path(run_dir) / OWNER_FILE
        if path.is_symlink() or not path.is_file():
            return None
        text = path.read_text(encoding="utf-8", errors="replace").strip()
        return text if len(text) == 64 else None

    def owns(self, run_dir: str | Path, visitor: str | None) -> bool:
        owner = self.owner_of(run_dir)
        return owner is not None and visitor is not None and owner == visitor_hash(visitor)

    def check_owner(self, run_dir: str | Path, visitor: str | None) -> None:
        """Nothing when ``visitor`` owns the run; else a ValueError saying why not (another
        visitor's run, or a run without an owner: read-only)."""
        owner = self.owner_of(run_dir)
        if owner is None:
            raise ValueError(READ_ONLY)
        if visitor is None or owner != visitor_hash(visitor):
            raise ValueError(NOT_YOURS)

    def check_set(self, folder: str | Path, visitor: str | None) -> None:
        """Nothing when ``visitor`` may rate the images of ``folder`` (inside ``out``):
        a run of theirs, or a folder holding, at any depth, no run of another visitor's
        (runs made outside the app, with no owner, may be rated). Else a ValueError."""
        import os

        folder = Path(folder)
        if (folder / "run.json").is_file():
            self.check_owner(folder, visitor)
            return
        mine = visitor_hash(visitor) if visitor is not None else None
        for here, dirs, files in os.walk(folder):  # links are not followed
            dirs[:] = [d for d in dirs if not d.startswith(".")]
            if "run.json" in files:
                owner = self.owner_of(here)
                if owner is not None and owner != mine:
                    raise ValueError(
                        "this folder holds another visitor's run: pick a set of your own"
                    )

    def visitor_references_dir(self, visitor: str | None) -> Path:
        """Where ``visitor``'s references are written: the shared folder for an admin (or
        without a visitor: a script's own service), else one of the visitor's own."""
        if visitor is None or self.is_admin(visitor):
            return self.references_dir
        return self.references_dir / "visitors" / visitor_hash(visitor)[:32]

    def memory_store(self, visitor: str | None) -> Path:
        """The store ``--memory`` reads and adds to for ``visitor``'s runs: one of their own
        inside ``out`` (a hint quotes an instruction, so no visitor is given another's
        words); without a visitor (a script's own service), one shared by its runs."""
        name = "shared" if visitor is None else visitor_hash(visitor)[:32]
        return self.out / ".memory" / f"{name}.jsonl"

    def runs_of(self, visitor: str | None) -> list[Path]:
        """The saved runs (tunes' folders left out) whose data ``visitor`` may learn from:
        every run for an admin or a script (no visitor), else the visitor's own."""

        try:
            runs = [p for p in find_runs([self.out]) if self.tunes_dir not in p.parents]
        except ValueError:
            return []
        if visitor is None or self.is_admin(visitor):
            return runs
        return [p for p in runs if self.owns(p, visitor)]

    def inside(self, value: str | Path | None, what: str = "folder") -> Path:
        """A folder named by a client (relative to ``out``, or a path inside it), confined
        to ``out``: no ``..`` out of it, no link on the way (refine.io.files.confined).
        Else a ValueError."""

        path = confined(self.out, value, what)
        if not path.is_dir():
            raise ValueError(f"{str(value).strip()!r} is not a {what} inside this app's folder")
        return path

    def resolve(self, value: str | Path | None) -> Path:
        """The folder of a saved run named by a client (a run id, a path relative to ``out``
        or a path inside it), confined to ``out`` (see :meth:`inside`) and holding a real
        ``run.json``. Anything else is refused with a ValueError."""
        text = str(value or "").strip()
        if not text:
            raise ValueError("no run given: start one or open a saved run")
        try:
            path = self.inside(text, "run")
        except ValueError:
            raise ValueError(f"{text!r} is not a run of this app") from None
        record = path / "run.json"
        if not record.is_file() or record.is_symlink():
            raise ValueError(f"{text!r} is not a run of this app")
        return path

    def opened(self, run_dir: str | Path) -> tuple[Run, Path]:
        """A saved run inside ``out`` and its folder (no models needed); refused when it
        names images that are links or lie outside its folder."""
        path = self.resolve(run_dir)
        run = RunStore(path).load()
        for name in run.file_names():
            if (path / name).is_symlink():
                raise ValueError(f"{path.name}: {name} is a link, not an image of the run")
        return run, path

    def open(self, run_dir: str | Path) -> Run:
        """A saved run inside ``out`` (see :meth:`opened`)."""
        return self.opened(run_dir)[0]

    def runs(self) -> list[Path]:
        """Saved run directories under ``out`` (no links followed), newest first."""
        if not self.out.is_dir():
            return []
        found = []
        for record in self.out.rglob("run.json"):
            try:
                found.append(self.resolve(record.parent))
            except ValueError:
                continue
        return sorted(found, key=lambda p: p.stat().st_mtime, reverse=True)

    def saved(self, limit: int = 50) -> list[tuple[str, str]]:
        """(label, run id relative to ``out``) of the ``limit`` newest saved runs: activity,
        country, best FAITH, status and id (each record is read, so the list is short)."""
        return [(card.label, card.id) for card in self.cards(limit)]

    def cards(self, limit: int = 50, visitor: str | None = None) -> list[SavedRun]:
        """The ``limit`` newest saved runs, each with its best image for a thumbnail; those
        of ``visitor`` marked "yours", a roll-back marked with the run and round it
        continues."""
        out = []
        root = self.out.resolve()
        for path in self.runs()[:limit]:
            try:
                run, path = self.opened(path)
            except (ValueError, OSError):
                continue
            best = run.best()
            faith = best.best.scores.faith if best is not None else None
            said = shown(faith)
            label = (
                f"{run.spec.activity} - {run.references.country} - best FAITH {said} - "
                f"{run.status} - {run.id}"
            )
            image = None
            if best is not None and (path / best.best.image).is_file():
                image = path / best.best.image
            when = (run.created or run.updated)[:16].replace("T", " ")
            caption = (
                f"{run.references.country}: {run.spec.activity} \u00b7 best FAITH {said}"
                f" \u00b7 {when}"
            )
            marks = []
            if visitor is not None and self.owns(path, visitor):
                marks.append("yours")
            if run.branched_from:
                parent = Path(str(run.branched_from.get("run", ""))).name
                marks.append(
                    f"rolled back from round {run.branched_from.get('round', 0)} of {parent}"
                )
            if marks:
                caption += " \u00b7 " + ", ".join(marks)
                label += " - " + ", ".join(marks)
            out.append(SavedRun(str(path.resolve().relative_to(root)), label, caption, image))
        return out


def phrase(value: Any, what: str, limit: int = 120) -> str:
    """An activity or country from a client: one line of printable text, not too long."""
    text = " ".join(str(value or "").split())
    if not text:
        raise ValueError(f"give the {what}")
    if len(text) > limit or not text.isprintable():
        raise ValueError(f"the {what} must be printable text of at most {limit} characters")
    return text


@dataclass
class SavedRun:
    id: str  # the run's folder relative to the service's ``out``
    label: str  # activity - country - best FAITH - status - id
    caption: str  # a short one, under a thumbnail
    image: Path | None  # the best image (None before round 0 is saved)
