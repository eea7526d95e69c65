"""One set of real photos per activity and country, found by activity and country alone.

A photo set is what the paper's EXAG (Eq. 3-4) measures a stereotype against: its mean
image-text score on real photos of the activity in the country. Where it comes from, first
found wins (:data:`ORDER`):

1. ``given``: photos a command is given (``--reference-images`` on run and score, or a
   references file's ``reference_images``), used as they are; or photos made the
   activity's set with ``refine photos add`` (kept in the data directory like a search's);
2. ``searched``: real photos collected with ``refine photos search`` from Wikimedia
   Commons, each with its licence, author and page, in the data directory under
   ``photos/<country>/<activity>-<hash>/`` with ``set.json`` beside them;
3. ``fetched``: the photos the AHEaD paper used, downloaded with
   ``refine data fetch ahead --photos`` (``ahead/<commit>/photos/photos.json``).

``run``, ``score``, ``bench``, ``batch``, the app and ``calibrate-tau`` take the set of their
activity and country with no file list: :func:`with_photo_set` gives references their set.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ORDER = ("given", "searched", "fetched")  # a set's origins; one set per activity and country
SET_FILE = "set.json"
WORDS = {
    "given": "given with refine photos add",
    "searched": "searched on Wikimedia Commons",
    "fetched": "from the AHEaD paper's photos",
}


@dataclass(frozen=True)
class PhotoSet:
    """Real photos of ``activity`` in ``country``: their files (absolute paths), where the
    set came from (one of :data:`ORDER`) and its record (a ``set.json``, a ``photos.json``
    or the folder given), and each photo's details (address, licence, author, score)."""

    activity: str
    country: str
    origin: str
    where: str
    files: tuple[str, ...]
    photos: tuple[dict[str, Any], ...] = field(default_factory=tuple)

    def describe(self) -> str:
        """``photos: 5 photos searched on Wikimedia Commons (…/set.json)``."""
        return f"photos: {len(self.files)} {WORDS[self.origin]} ({self.where})"

    def document(self) -> dict[str, Any]:
        """What ``refine photos ... --json`` prints: the set and each photo's details."""
        return {
            "activity": self.activity,
            "country": self.country,
            "origin": self.origin,
            "record": self.where,
            "photos": [{**p, "path": f} for p, f in zip(self.photos, self.files, strict=True)],
        }


def set_folder(activity: str, country: str, data: Path | None = None) -> Path:
    """Where ``refine photos search`` keeps the set of ``activity`` in ``country``."""
    import hashlib

    from refine.evaluate.data_dir import data_dir
    from refine.io.files import slug

    root = data if data is not None else data_dir()
    # the names' own hash after their slugs: two names never share a folder (a slug is cut
    # to its length, and a name in another script has no letters a slug keeps)
    tag = hashlib.sha1(f"{_same(country)}|{_same(activity)}".encode()).hexdigest()[:8]
    return root / "photos" / slug(country, 40) / f"{slug(activity, 80)}-{tag}"


def searched(activity: str, country: str, data: Path | None = None) -> PhotoSet | None:
    """The set ``refine photos search`` made for ``activity`` in ``country``, its files
    that are still there; None when there is none."""
    folder = set_folder(activity, country, data)
    record = folder / SET_FILE
    if not record.is_file():
        return None
    try:
        doc = json.loads(record.read_text(encoding="utf-8"))
        photos = [p for p in doc.get("photos", []) if (folder / p["file"]).is_file()]
        named = (str(doc.get("activity", activity)), str(doc.get("country", country)))
    except (ValueError, KeyError, TypeError, AttributeError):
        return None  # a damaged record is not a set; a new search rewrites it
    # two names can share a folder (cut to its length, or written in another script)
    if [_same(a) for a in named] != [_same(activity), _same(country)] or not photos:
        return None
    files = tuple(str((folder / p["file"]).resolve()) for p in photos)
    origin = "given" if doc.get("origin") == "given" else "searched"
    return PhotoSet(named[0], named[1], origin, str(record), files, tuple(photos))


def add_given(
    activity: str, country: str, photos: list[Path], data: Path | None = None
) -> PhotoSet:
    """Make ``photos`` (checked image files) the set of ``activity`` in ``country``: copied
    into its folder with ``set.json`` (origin ``given``), replacing any set there."""
    import hashlib
    import shutil
    import time

    from refine.io.files import atomic_write_json

    folder = set_folder(activity, country, data)
    folder.mkdir(parents=True, exist_ok=True)
    kept = []
    for path in photos:
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        name = f"{digest[:16]}{path.suffix.lower()}"
        if not (folder / name).is_file():
            shutil.copyfile(path, folder / f"{name}.part")
            (folder / f"{name}.part").replace(folder / name)
        kept.append({"file": name, "sha256": digest, "given": str(path.resolve())})
    doc = {
        "schema": 1,
        "origin": "given",
        "activity": activity,
        "country": country,
        "made": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "photos": kept,
    }
    atomic_write_json(folder / SET_FILE, doc)
    names = {p["file"] for p in kept} | {SET_FILE}
    for old in folder.iterdir():
        if old.is_file() and old.name not in names:
            old.unlink()
    got = searched(activity, country, data)
    assert got is not None
    return got


def _same(name: str) -> str:
    return " ".join(name.split()).casefold()


@functools.lru_cache(maxsize=4)
def _fetched_index(record: str, mtime_ns: int, size: int) -> dict[tuple[str, str], list]:
    """The fetched photos of ``photos.json`` by (country, activity), read once for each
    version of the file (a bench looks up every cell's set; the record of all 16
    countries holds tens of thousands of entries)."""
    try:
        files = json.loads(Path(record).read_text(encoding="utf-8")).get("files", {})
    except (ValueError, AttributeError):
        return {}
    index: dict[tuple[str, str], list] = {}
    for rel, meta in sorted(files.items()):
        if isinstance(meta, dict):
            key = (_same(str(meta.get("country", ""))), _same(str(meta.get("activity", ""))))
            index.setdefault(key, []).append({"file": rel, **meta})
    return index


def fetched(activity: str, country: str, data: Path | None = None) -> PhotoSet | None:
    """The AHEaD paper's photos of ``activity`` in ``country`` that
    ``refine data fetch ahead --photos`` kept; None when none are there."""
    from refine.evaluate.data_dir import data_dir
    from refine.evaluate.paper_data import COMMIT

    folder = (data if data is not None else data_dir()) / "ahead" / COMMIT / "photos"
    record = folder / "photos.json"
    if not record.is_file():
        return None
    stat = record.stat()
    index = _fetched_index(str(record), stat.st_mtime_ns, stat.st_size)
    want = (_same(country), _same(activity))
    photos = [p for p in index.get(want, ()) if (folder / p["file"]).is_file()]
    if not photos:
        return None
    return PhotoSet(
        activity,
        country,
        "fetched",
        str(record),
        tuple(str((folder / p["file"]).resolve()) for p in photos),
        tuple(photos),
    )


def find_photo_set(activity: str, country: str, data: Path | None = None) -> PhotoSet | None:
    """The photo set of ``activity`` in ``country``: the one added or searched, else the
    paper's fetched photos; None when there is none."""
    return searched(activity, country, data) or fetched(activity, country, data)


def with_photo_set(refs: Any, data: Path | None = None) -> Any:
    """``refs`` (a :class:`refine.records.ReferencePack`) with its activity's and country's
    photo set as its reference images, unless it has photos already (given by hand, or
    listed in a references file) or there is no set."""
    if refs.reference_images:
        return refs
    found = find_photo_set(refs.activity, refs.country, data)
    if found is None:
        return refs
    return refs.model_copy(update={"reference_images": list(found.files)})
