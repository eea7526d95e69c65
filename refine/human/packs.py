"""A study's images split among raters to rate elsewhere, and their answers joined back.

``refine rate pack SET --raters N --out DIR`` writes ``DIR/rater-01`` ... ``rater-N``: each
a set of its own (copies of its images, ``items.json`` with each image's prompt,
expectations, activity, country and language, and the study's ``.study.json``), which
another copy of the app opens as any set. Images are shuffled with the study's seed and
each goes to the protocol's ``raters_per_image`` raters (every rater when it names none),
always those with the fewest images so far, so that the folders are balanced.
``DIR/assignment.json`` says who has what.

``refine rate merge FOLDER ... --into SET`` appends the folders' answers to the set's
``ratings.jsonl``, joining images by content (SHA-256), and their raters' profiles, all
or nothing: every row is checked against the set's protocol and the pack's assignment
first, and a bad one writes nothing. An answer already in the set is skipped; one that
differs from what the set holds for the same rater, image and kind is a conflict:
reported, never written over.
"""

from __future__ import annotations

import json
import math
import random
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from refine.human.rating import ITEMS, RATINGS
from refine.human.study import ATTENTION, PROFILES, STUDY, Study
from refine.io.files import append_jsonl, atomic_write_json, file_sha256, json_lines, json_value

ASSIGNMENT = "assignment.json"


def pack(study: Study, raters: int, out: str | Path) -> dict[str, list[str]]:
    """Write one folder per rater under ``out`` (see the module docstring); returns
    each folder's images."""
    if raters < 1:
        raise ValueError(f"--raters: at least 1, got {raters}")
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise ValueError(f"{out}: not empty; pack into a new folder")
    k = min(study.protocol.raters_per_image or raters, raters)
    items = list(study.set.items)
    random.Random(f"{study.seed}\x00pack").shuffle(items)
    names = [f"rater-{i + 1:02d}" for i in range(raters)]
    given: dict[str, list[Any]] = {n: [] for n in names}
    for it in items:
        for name in sorted(names, key=lambda n: (len(given[n]), names.index(n)))[:k]:
            given[name].append(it)
    doc = json.loads((study.folder / STUDY).read_text(encoding="utf-8"))
    for name, mine in given.items():
        folder = out / name
        folder.mkdir(parents=True)
        listed = []
        for it in sorted(mine, key=lambda i: i.image):
            target = folder / it.image
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(study.folder / it.image, target)
            listed.append(
                {
                    "image": it.image,
                    "prompt": it.prompt,
                    "expectations": list(it.expectations),
                    "activity": it.activity,
                    "country": it.country,
                    "language": it.language,
                    "image_sha256": file_sha256(target),
                }
            )
        atomic_write_json(folder / ITEMS, {"items": listed})
        atomic_write_json(folder / STUDY, doc)
    assignment = {n: sorted(i.image for i in mine) for n, mine in given.items()}
    atomic_write_json(out / ASSIGNMENT, {"raters_per_image": k, "raters": assignment})
    return assignment


@dataclass
class Merged:
    added: int = 0
    already: int = 0
    conflicts: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)  # answers to images not in the set
    profiles: int = 0
    left: int = 0  # answers a tool kept as drafts or discarded: no rating


KINDS = ("rate", "repeat", "attention")
MAX_FILE_MB = 200  # one rater's ratings.jsonl


def merge(folders: list[str | Path], into: str | Path) -> Merged:
    """Join the answers (and profiles) of rater folders into the set ``into``: all of them
    or nothing. Every folder and row is checked first: a folder that is not a rated rater
    folder, or is a link; a row that is not a valid answer under the set's protocol (an
    answer that is not one of its options, a question left unanswered, another
    protocol's); an image the pack's assignment did not give that folder; a profile that
    does not parse; an attention check's image that is a link. One problem and nothing is
    written. Answers to images not in the set, and answers that differ from the set's, are
    reported and not written (never written over)."""
    target = Study.open(into)
    by_sha = {file_sha256(target.folder / it.image): it.image for it in target.set.items}
    joining = Joining(target)
    check = f"{ATTENTION}/{target.protocol.name}.png"  # the one check image there is
    for folder in map(Path, folders):
        ratings = _rater_folder(folder)
        assigned = _assigned(folder)
        rows = _rows(ratings)
        for k, row in enumerate(rows, 1):
            where = f"{ratings}:{k}"
            image = str(row.get("image", ""))
            if row.get("kind") == "attention":  # the check's image, and nothing else
                mapped = image if image == check else None
                own, theirs = target.folder / check, folder / check
                if mapped and (theirs.is_symlink() or (folder / ATTENTION).is_symlink()):
                    joining.problems.append(f"{where}: {check} is a link, not the check's image")
                    continue
                if mapped and not own.is_file() and theirs.is_file():
                    joining.copies.append((theirs, own))
            else:  # every other answer joins an image of the set by its content
                mapped = by_sha.get(str(row.get("image_sha256") or ""))
                if mapped is not None and assigned is not None and image not in assigned:
                    joining.problems.append(
                        f"{where}: {image} was not given to {folder.name} by the pack"
                    )
                    continue
            joining.take(where, row, mapped)
    joining.profiles(_profiles_of(folders, joining.problems))
    return joining.write()


class Joining:
    """Answers joined into a set, all or nothing: each taken with where it comes from
    (:meth:`take`: checked against the set's protocol, an answer the set holds already
    skipped, a different one a conflict), the raters' profiles (:meth:`profiles`), then
    written at once (:meth:`write`), or nothing when any was a problem. ``refine rate
    merge`` and ``refine rate import`` both join through it."""

    def __init__(self, target: Study) -> None:
        self.target = target
        self.done = Merged()
        self.problems: list[str] = []
        self.copies: list[tuple[Path, Path]] = []
        self.new_rows: list[dict[str, Any]] = []
        self.new_profiles: dict[str, dict[str, Any]] = {}
        self.held: dict[tuple, dict[str, Any]] = {}
        mine = _rows(target.folder / RATINGS)
        for key, row in zip(_keys(mine), mine, strict=True):
            self.held.setdefault(key, row)
        self.taken: dict[Any, int] = {}  # attention checks answered, per rater

    def take(self, where: str, row: dict[str, Any], mapped: str | None) -> None:
        """One answer from ``where``, to the set's image ``mapped`` (None: not in the set)."""
        if mapped is None:
            self.done.unknown.append(f"{where}: {row.get('image', '')}")
            return
        why = _invalid(row, self.target)
        if why:
            self.problems.append(f"{where}: {why}")
            return
        row = {**row, "image": mapped}
        kind = row.get("kind", "rate")
        nth = None
        if kind == "attention":
            who = (row.get("protocol"), row.get("rater"))
            nth = self.taken[who] = self.taken.get(who, 0) + 1
        key = (row.get("protocol"), row.get("rater"), mapped, kind, nth)
        if key in self.held:
            if _answers(self.held[key]) == _answers(row):
                self.done.already += 1
            else:
                self.done.conflicts.append(
                    f"{where}: {row.get('rater')} on {mapped} "
                    f"({kind}): {_answers(row)} here, "
                    f"{_answers(self.held[key])} in the set (kept)"
                )
            return
        self.held[key] = row
        self.new_rows.append(row)

    def profiles(self, given: list[tuple[str, str, Any]]) -> None:
        """Raters' profiles, each (where, rater, data): one that does not parse is a
        problem; one that differs from the set's is a conflict (the set's kept)."""
        from refine.human.protocols import RaterProfile

        mine = self.target.profiles()
        for where, rater, data in given:
            try:
                parsed = RaterProfile.parse(data if isinstance(data, dict) else {})
            except ValueError as err:
                self.problems.append(f"{where}: {str(rater)[:60]}: {err}")
                continue
            held = mine.get(rater)
            if held is None and rater in self.new_profiles:
                held = RaterProfile.parse(self.new_profiles[rater])
            if held is not None and held != parsed:
                self.done.conflicts.append(
                    f"{where}: the profile of {rater} differs from the set's (kept)"
                )
                continue
            if held is None:
                self.new_profiles[rater] = data

    def write(self) -> Merged:
        """Everything taken, written; or, after any problem, a ValueError naming the
        first and nothing written."""
        if self.problems:
            more = f" (and {len(self.problems) - 1} more)" if len(self.problems) > 1 else ""
            raise ValueError(f"nothing merged: {self.problems[0]}{more}")
        for theirs, own in self.copies:
            if not own.is_file():
                own.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(theirs, own)
        for row in self.new_rows:
            append_jsonl(self.target.set.ratings_path, row)
        self.done.added = len(self.new_rows)
        for rater, data in self.new_profiles.items():
            self.target.give_profile(rater, data)
        self.done.profiles = len(self.new_profiles)
        return self.done


def _rater_folder(folder: Path) -> Path:
    """The ratings file of a rater folder; a ValueError when it is none."""
    if folder.is_symlink() or not folder.is_dir():
        link = " (a link)" if folder.is_symlink() else ""
        raise ValueError(f"{folder}: no such rater folder{link}")
    ratings = folder / RATINGS
    if ratings.is_symlink():
        raise ValueError(f"{ratings}: a link, not a rater's answers")
    if not ratings.is_file():
        raise ValueError(f"{folder}: no {RATINGS} (not a rated folder)")
    if ratings.stat().st_size > MAX_FILE_MB * 1e6:
        raise ValueError(f"{ratings}: over {MAX_FILE_MB} MB, not a rater's answers")
    return ratings


def _assigned(folder: Path) -> set[str] | None:
    """The images the pack gave ``folder`` (its ``assignment.json`` beside it), or None
    when the folder comes with no assignment."""
    path = folder.parent / ASSIGNMENT
    if not path.is_file() or path.is_symlink():
        return None
    try:
        raters = json.loads(path.read_text(encoding="utf-8")).get("raters")
    except (ValueError, AttributeError, RecursionError):
        raise ValueError(f"{path}: not the pack's assignment (unreadable)") from None
    if not isinstance(raters, dict):
        raise ValueError(f"{path}: not the pack's assignment (no raters)")
    if folder.name not in raters:
        raise ValueError(f"{folder}: not a folder of the pack ({path} names no {folder.name})")
    return {str(x) for x in raters[folder.name] or []}


def _invalid(row: dict[str, Any], target: Study) -> str | None:
    """Why ``row`` is not an answer the set could have recorded (None when it is)."""
    rater = row.get("rater")
    if not isinstance(rater, str) or not rater.strip():
        return "the rater is not a name"
    if len(rater) > 60 or not rater.isprintable():
        return "the rater name must be printable text of at most 60 characters"
    if any(ch in rater for ch in "<>&\"'`"):  # a name, never markup (pages show it)
        return "the rater name holds markup characters (< > & quotes)"
    when = row.get("time")
    if when:
        from datetime import UTC, datetime, timedelta

        try:
            at = datetime.fromisoformat(str(when))
        except ValueError:
            return f"{str(when)[:40]!r} is not an ISO 8601 time"
        at = at if at.tzinfo else at.replace(tzinfo=UTC)
        if at > datetime.now(UTC) + timedelta(days=1):
            return f"its time {str(when)[:40]} is in the future"
    for key in ("lead_time_s",):  # the figures a tool gives beside the answers
        if key in row and not (isinstance(row[key], int | float) and math.isfinite(row[key])):
            return f"{key} {str(row[key])[:20]} is not a finite number"
    kind = row.get("kind", "rate")
    if kind not in KINDS:
        return f"{str(kind)[:40]!r} is not a kind of answer ({', '.join(KINDS)})"
    if row.get("protocol") != target.protocol.name:
        return (
            f"answered under {str(row.get('protocol'))[:40]!r}, not the set's "
            f"{target.protocol.name} protocol"
        )
    answers, reasons, options = row.get("answers"), row.get("reasons"), row.get("options")
    if not isinstance(answers, dict):
        return "no answers"
    if reasons is not None and not isinstance(reasons, dict):
        return "the reasons are not by question"
    if options is not None and not isinstance(options, dict):
        return "the options are not by question"
    try:
        kept, _ = target.protocol.check(answers, reasons, options, str(row.get("prompt") or ""))
    except (ValueError, TypeError) as err:
        return str(err)
    if kept != answers:
        return "its answers are not those the protocol keeps"
    return None


def _profiles_of(folders: list[str | Path], problems: list[str]) -> list[tuple[str, str, Any]]:
    """The profiles in the folders' ``.profiles.json``, each (where, rater, data)."""
    out = []
    for folder in map(Path, folders):
        path = folder / PROFILES
        if path.is_symlink():
            problems.append(f"{path}: a link, not the raters' profiles")
            continue
        if not path.is_file():
            continue
        try:
            theirs = json.loads(path.read_text(encoding="utf-8"))
        except (ValueError, RecursionError):
            problems.append(f"{path}: not JSON")
            continue
        if not isinstance(theirs, dict):
            problems.append(f"{path}: not the raters' profiles")
            continue
        out += [(str(path), rater, data) for rater, data in theirs.items()]
    return out


def _rows(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    out = []
    for line in json_lines(path.read_text(encoding="utf-8")):
        try:
            row = json_value(line)
        except json.JSONDecodeError:
            continue
        if isinstance(row, dict):
            out.append(row)
    return out


def _keys(rows: list[dict[str, Any]]) -> list[tuple]:
    """What each answer is to: a rater's image and kind; a rater takes the one attention
    check many times, each answer its own (the first, second, ... check)."""
    taken: dict[Any, int] = {}
    out = []
    for row in rows:
        kind = row.get("kind", "rate")
        nth = None
        if kind == "attention":
            who = (row.get("protocol"), row.get("rater"))
            nth = taken[who] = taken.get(who, 0) + 1
        out.append((row.get("protocol"), row.get("rater"), row.get("image"), kind, nth))
    return out


def _answers(row: dict[str, Any]) -> Any:
    if "answers" in row:
        return row["answers"], row.get("reasons") or {}
    return {k: row.get(k) for k in ("alignment", "faithfulness", "unmet", "comment")}
