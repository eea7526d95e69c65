"""The real photos the AHEaD paper used, fetched by ``refine data fetch ahead --photos``.

The authors publish a manifest of them (``gt_images/top_5_gt_metadata.csv``: the top 5 by
CLIPScore of 10 English and 10 translated Google results per prompt), not the photos: each
row names a third-party address, and many are gone. This module downloads what is still
there, :data:`WORKERS` at a time, each tried :data:`TRIES` times with a growing wait; keeps
a file only when it decodes as an image; and writes beside the photos
(``ahead/<commit>/photos/``):

* ``photos.json``: every kept file with its sha256, address, country and activity, and the
  source commit;
* ``report.json``: how many photos were found per country and activity, every dead link
  with its reason, and every manifest row that joins no activity of the catalog.

Rows join the catalog's activities by country, category (the manifest's ``activity``) and
subactivity (``sub_activity``), which the catalog records for every activity. A second
fetch downloads only what is missing.
"""

from __future__ import annotations

import csv
import hashlib
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from refine.io.download import DownloadLimits

WORKERS = 8
TRIES = 3
# Wikimedia's servers ask every client to name itself (its User-Agent policy)
USER_AGENT = "cultural-refine/0.1 (reference photos for cultural image evaluation; urllib)"


@dataclass
class Photos:
    """What a photo fetch found: files kept (new and already there), dead links, rows
    joining no activity, and per country and activity how many photos it has."""

    folder: Path
    downloaded: int = 0
    kept: int = 0
    dead: list[dict[str, str]] = field(default_factory=list)
    unjoined: list[dict[str, str]] = field(default_factory=list)
    found: dict[str, dict[str, int]] = field(default_factory=dict)


def manifest_rows(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as fh:
        return list(csv.DictReader(fh))


def join(rows: list[dict[str, str]], pack: Any) -> tuple[list[tuple[dict, str, str]], list]:
    """(row, country, activity phrase) for each row that joins the catalog by country,
    category and subactivity; and the rows that join none."""
    index: dict[tuple[str, str, str], str] = {}
    for country, entry in pack.countries.items():
        for phrase, act in entry["activities"].items():
            index[(country, str(act.get("category")), str(act.get("subactivity")))] = phrase
    joined, unjoined = [], []
    for row in rows:
        key = pack.country_key(str(row.get("country", "")).replace("_", " "))
        phrase = index.get((key or "", row.get("activity", ""), row.get("sub_activity", "")))
        if key is None or phrase is None:
            unjoined.append(row)
        else:
            joined.append((row, key, phrase))
    return joined, unjoined


def target_of(folder: Path, row: dict[str, str], country: str, phrase: str) -> Path:
    """Where a row's photo goes: ``photos/<country>/<activity>/<hash of its address>.<ext>``."""
    from refine.io.files import slug

    url = str(row.get("image_url") or "")
    ext = Path(url.split("?")[0]).suffix.lower()
    ext = ext if ext in (".jpg", ".jpeg", ".png", ".webp", ".gif") else ".jpg"
    name = hashlib.sha1(url.encode()).hexdigest()[:16] + ext
    return folder / slug(country, 40) / slug(phrase, 80) / name


def fetch_photos(
    folder: Path,
    manifest: Path,
    countries: Sequence[str],
    pack: Any,
    commit: str,
    emit: Callable[[str], None] | None = None,
    workers: int = WORKERS,
    limits: DownloadLimits | None = None,
) -> Photos:
    """Download the manifest's photos of ``countries`` into ``folder`` (see the module
    docstring), each under ``limits``; returns what was found. A row that cannot be
    fetched, for whatever reason, is a dead link with its reason: the others go on, and
    ``photos.json`` and ``report.json`` are written."""
    from refine.io.files import atomic_write_json
    from refine.progress import Countdown, bar

    emit = emit or (lambda line: None)
    rows = manifest_rows(manifest)
    joined, unjoined = join(rows, pack)
    wanted = set(countries)
    joined = [j for j in joined if j[1] in wanted]
    done = Photos(folder, unjoined=unjoined)
    todo = []
    for row, country, phrase in joined:
        target = target_of(folder, row, country, phrase)
        if target.is_file():
            done.kept += 1
        else:
            todo.append((row, country, phrase, target))
    emit(
        f"photos: {len(todo)} to fetch, {done.kept} already there, {len(unjoined)} row(s) "
        "joining no activity"
    )
    lock = threading.Lock()
    countdown = Countdown(len(todo))
    finished = [0]

    def one(job: tuple[dict, str, str, Path]) -> None:
        row, country, phrase, target = job
        try:
            why = fetch_image(str(row.get("image_url") or ""), target, limits)
        except Exception as err:  # one row never stops the others: said in the report
            why = f"{type(err).__name__}: {err}"
        with lock:
            finished[0] += 1
            if why:
                done.dead.append(
                    {
                        "url": str(row.get("image_url") or ""),
                        "reason": why,
                        "country": country,
                        "activity": phrase,
                    }
                )
            else:
                done.downloaded += 1
            left = countdown.tick()
            if finished[0] % 10 == 0 or finished[0] == len(todo):
                emit(
                    f"{bar(finished[0], len(todo))} {finished[0]}/{len(todo)} photos, "
                    f"{len(done.dead)} dead" + (f" · {left}" if left else "")
                )

    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="photo") as pool:
        list(pool.map(one, todo))
    import json

    # a fetch of some countries keeps what earlier fetches kept of the others
    record = folder / "photos.json"
    files: dict[str, Any] = {}
    if record.is_file():
        try:
            earlier = json.loads(record.read_text(encoding="utf-8")).get("files", {})
        except ValueError:
            earlier = {}
        files = {
            rel: meta
            for rel, meta in earlier.items()
            if isinstance(meta, dict)
            and meta.get("country") not in wanted
            and (folder / rel).is_file()
        }
    for row, country, phrase in joined:
        target = target_of(folder, row, country, phrase)
        if target.is_file():
            done.found.setdefault(country, {}).setdefault(phrase, 0)
            done.found[country][phrase] += 1
            files[target.relative_to(folder).as_posix()] = {
                "sha256": hashlib.sha256(target.read_bytes()).hexdigest(),
                "url": str(row.get("image_url") or ""),
                "country": country,
                "activity": phrase,
            }
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write_json(record, {"commit": commit, "files": dict(sorted(files.items()))})
    # and the report keeps what earlier fetches found of the other countries, and their
    # dead links
    found, dead = dict(done.found), list(done.dead)
    report = folder / "report.json"
    if report.is_file():
        try:
            earlier = json.loads(report.read_text(encoding="utf-8"))
        except ValueError:
            earlier = {}
        for country, counts in (earlier.get("found") or {}).items():
            if country not in wanted and isinstance(counts, dict):
                found[country] = counts
        dead += [
            d
            for d in earlier.get("dead") or []
            if isinstance(d, dict) and d.get("country") not in wanted
        ]
    atomic_write_json(
        report,
        {
            "found": dict(sorted(found.items())),
            "dead": sorted(dead, key=lambda d: (d["country"], d["activity"], d["url"])),
            "unjoined": unjoined,
        },
    )
    return done


def fetch_image(url: str, target: Path, limits: DownloadLimits | None = None) -> str | None:
    """Download ``url`` to ``target`` if it is an image of at most
    :data:`refine.io.images.MAX_PIXELS` declared pixels: None, or why not (an http(s)
    address only, the body streamed under ``limits``: :mod:`refine.io.download`)."""
    from refine.io.download import DownloadError, download
    from refine.io.files import atomic_write
    from refine.io.images import ImageError, checked_image_bytes

    limits = limits or DownloadLimits()
    try:
        data = download(
            url,
            max_mb=limits.max_mb,
            timeout_s=limits.timeout_s,
            deadline=limits.deadline,
            headers={"User-Agent": USER_AGENT},
            tries=TRIES,
            sleep=lambda s: time.sleep(s),
        )
        checked_image_bytes(data)
    except (DownloadError, ImageError) as err:
        return str(err)
    target.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(target, lambda tmp: tmp.write_bytes(data))
    return None
