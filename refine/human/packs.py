"""A study's images split among raters to rate elsewhere, and their answers joined back.

``refine rate pack SET --raters N --out DIR`` writes ``DIR/rater-01`` ... ``rater-N``: each
a set of its own (copies of its images, ``items.json`` with each image's prompt,
expectations, activity, country and language, and the study's ``.study.json``), which
another copy of the app opens as any set. Images are shuffled with the study's seed and
each goes to the protocol's ``raters_per_image`` raters (every rater when it names none),
always those with the fewest images so far, so that the folders are balanced.
``DIR/assignment.json`` says who has what.

``refine rate merge FOLDER ... --into SET`` appends the folders' answers to the set's
``ratings.jsonl``, joining images by content (SHA-256), and their raters' profiles. An
answer already in the set is skipped; one that differs from what the set holds for the
same rater, image and kind is a conflict: reported, never written over.
"""

from __future__ import annotations

import json
import random
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from refine.human.rating import ITEMS, RATINGS
from refine.human.study import ATTENTION, PROFILES, STUDY, Study
from refine.io.files import append_jsonl, atomic_write_json, file_sha256

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


def merge(folders: list[str | Path], into: str | Path) -> Merged:
    """Join the answers (and profiles) of rater folders into the set ``into``."""
    target = Study.open(into)
    by_sha = {file_sha256(target.folder / it.image): it.image for it in target.set.items}
    held: dict[tuple, dict[str, Any]] = {}
    mine = _rows(target.folder / RATINGS)
    for key, row in zip(_keys(mine), mine, strict=True):
        held.setdefault(key, row)
    done = Merged()
    for folder in map(Path, folders):
        rows = _rows(folder / RATINGS)
        if not rows and not (folder / RATINGS).is_file():
            raise ValueError(f"{folder}: no {RATINGS} (not a rated folder)")
        check = f"{ATTENTION}/{target.protocol.name}.png"  # the one check image there is
        for k, (key, row) in enumerate(zip(_keys(rows), rows, strict=True), 1):
            image = str(row.get("image", ""))
            if row.get("kind") == "attention":  # the check's image, and nothing else
                mapped = image if image == check else None
                own, theirs = target.folder / check, folder / check
                if mapped and not own.is_file() and theirs.is_file() and not theirs.is_symlink():
                    own.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(theirs, own)
            else:  # every other answer joins an image of the set by its content
                mapped = by_sha.get(str(row.get("image_sha256") or ""))
            if mapped is None:
                done.unknown.append(f"{folder / RATINGS}:{k}: {image}")
                continue
            row = {**row, "image": mapped}
            key = (*key[:2], mapped, *key[3:])
            if key in held:
                if _answers(held[key]) == _answers(row):
                    done.already += 1
                else:
                    done.conflicts.append(
                        f"{folder / RATINGS}:{k}: {row.get('rater')} on {mapped} "
                        f"({row.get('kind', 'rate')}): {_answers(row)} here, "
                        f"{_answers(held[key])} in the set (kept)"
                    )
                continue
            held[key] = row
            append_jsonl(target.set.ratings_path, row)
            done.added += 1
        done.profiles += _merge_profiles(folder, target, done)
    return done


def _merge_profiles(folder: Path, target: Study, done: Merged) -> int:
    path = folder / PROFILES
    if not path.is_file():
        return 0
    theirs = json.loads(path.read_text(encoding="utf-8"))
    mine = target.profiles()
    n = 0
    for rater, data in theirs.items():
        try:
            if rater in mine and mine[rater].model_dump(mode="json") != data:
                done.conflicts.append(
                    f"{path}: the profile of {rater} differs from the set's (kept)"
                )
                continue
            if rater not in mine:
                target.give_profile(rater, data)
                n += 1
        except ValueError as err:
            done.conflicts.append(f"{path}: {rater}: {err}")
    return n


def _rows(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            row = json.loads(line)
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
