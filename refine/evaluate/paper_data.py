"""The AHEaD paper's data, fetched from its authors' repository at the user's request.

``refine data fetch ahead`` downloads, from GitHub ``sinamalakouti/AHEaD`` at the data
commit :data:`COMMIT` (raw files under ``data/culturebench/``, or the same layout under
``--from URL``: a mirror, or the tests' stand-in server):

* the refined reference descriptors of the countries asked (default all 16 of CULTIVate),
  the set the bundled six come from (:data:`DESCRIPTORS`);
* the stereotype candidates per country and per subactivity;
* the manifest of the real photos the paper used (``gt_images/top_5_gt_metadata.csv``).

The files go to the data directory (``--data-dir``, else ``$REFINE_DATA_DIR``, else
``data`` in the cache folder: :func:`refine.evaluate.reference_source.data_dir`), under
``ahead/<commit>/`` in the repository's own layout, with ``source.json`` (the address,
the commit and every file's sha256). They never go into the package or a repository: the
authors' repository has no licence file, so the toolkit fetches at the user's request and
says so. From them a pack is written to ``packs/ahead.json``: the bundled catalog, every
activity joined to its descriptors by country, category and subactivity, which the
reference source's ``data`` place finds before the bundled pack. A second fetch downloads
only what is missing.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from refine.io.download import DownloadLimits

COMMIT = "38b80ef90f27d0c3d9803845945814b0c1664ac1"
SOURCE = f"https://raw.githubusercontent.com/sinamalakouti/AHEaD/{COMMIT}/data/culturebench"
DESCRIPTORS = (
    "llm_descriptors_proposer/gpt-4o/refiner/proposers_gemini-2.5-flash_gpt-4o/"
    "{slug}_descriptors.json"
)
DIMENSIONS = ("setting", "objects", "attire", "interaction", "spatial")  # AHEaD's five
# each proposer's own descriptors before the refiner (AHEaD Tab. 4's proposer-only rows)
PROPOSERS = {
    m: f"llm_descriptors_proposer/{m}/proposer/{{slug}}_descriptors.json"
    for m in ("gpt-4o", "gemini-2.5-flash")
}
PROPOSER_PACKS = "proposer-packs"  # beside the fetched files, never among packs/ (see below)
COUNTRY_CANDIDATES = "exaggeration_candidates/country_steorotype_candidates.json"
SUBACTIVITY_CANDIDATES = "subactivity_steorotype_candidates.json"
PHOTO_MANIFEST = "gt_images/top_5_gt_metadata.csv"
PACK = "ahead.json"
NOTICE = (
    "the AHEaD authors' data (GitHub sinamalakouti/AHEaD, commit 38b80ef), downloaded at "
    "your request: that repository has no licence file, so it is not shipped with the toolkit"
)
TRIES = 3  # a download is tried this many times, waiting 1 s, then 2 s, between tries


class FetchError(ValueError):
    """A fetch that cannot be done; the message names what and what to do."""


@dataclass
class Fetched:
    """What a fetch did: the files downloaded and those already there, the countries whose
    descriptors it has, what could not be downloaded (address: reason), and the pack."""

    folder: Path
    downloaded: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    countries: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    pack: Path | None = None
    activities: int = 0  # activities of the pack with descriptors
    proposer_packs: dict[str, Path] = field(default_factory=dict)  # proposer -> its pack
    photos: Any = None  # refine.evaluate.paper_photos.Photos, with --photos

    def document(self) -> dict[str, Any]:
        """What ``refine data fetch ahead --json`` prints."""
        doc = {
            "folder": str(self.folder),
            "pack": str(self.pack),
            "countries": self.countries,
            "activities_with_descriptors": self.activities,
            "downloaded": self.downloaded,
            "already_there": self.kept,
            "failed": self.failed,
            "proposer_packs": {k: str(v) for k, v in self.proposer_packs.items()},
        }
        if self.photos is not None:
            doc["photos"] = {
                "folder": str(self.photos.folder),
                "downloaded": self.photos.downloaded,
                "already_there": self.photos.kept,
                "dead": len(self.photos.dead),
                "rows_joining_no_activity": len(self.photos.unjoined),
            }
        return doc

    def exit_code(self) -> int:
        """0: everything fetched; 1: a data file was not; 3: only photos were not."""
        if self.failed:
            return 1
        return 3 if self.photos is not None and self.photos.dead else 0


def country_slug(country: str) -> str:
    """The file name part of a country upstream: ``south_africa``."""
    return country.lower().replace(" ", "_")


def fetch_ahead(
    data_dir: str | Path,
    countries: Sequence[str] = (),
    base_url: str = SOURCE,
    emit: Callable[[str], None] | None = None,
    photos: bool = False,
    limits: DownloadLimits | None = None,
    proposers: bool = False,
) -> Fetched:
    """Download the paper's data for ``countries`` (names of the bundled pack, default all)
    into ``data_dir`` and write the pack; with ``photos``, also the real photos its
    manifest lists (:mod:`refine.evaluate.paper_photos`); with ``proposers``, each
    proposer's own descriptors too, as a pack of its own under ``proposer-packs/``
    (:func:`proposer_pack`; never under ``packs/``, where every run would find them).
    Raises FetchError naming an unknown country or a fetch that got no descriptors at all."""
    from refine.evaluate.references import load_pack, suggest

    emit = emit or (lambda line: None)
    bundled = load_pack()
    names = []
    for name in countries:
        key = bundled.country_key(name)
        if key is None:
            hint = suggest(name, list(bundled.countries))
            raise FetchError(
                f"--countries: no CULTIVate country {name!r}{hint} "
                f"(countries: {', '.join(bundled.countries)})"
            )
        names.append(key)
    names = names or list(bundled.countries)
    folder = Path(data_dir) / "ahead" / COMMIT
    done = Fetched(folder)
    emit(f"fetching {NOTICE}, into {folder}")
    wanted = [COUNTRY_CANDIDATES, SUBACTIVITY_CANDIDATES, PHOTO_MANIFEST]
    wanted += [DESCRIPTORS.format(slug=country_slug(c)) for c in names]
    if proposers:
        wanted += [t.format(slug=country_slug(c)) for t in PROPOSERS.values() for c in names]
    base = base_url.rstrip("/")
    limits = limits or DownloadLimits()
    for n, rel in enumerate(wanted, 1):
        target = folder / rel
        if target.is_file():
            why = _not_valid(rel, target.read_bytes())
            if why is None:
                done.kept.append(rel)
                continue
            # a file an earlier fetch kept before files were checked: fetched again
            emit(f"[{n}/{len(wanted)}] {rel} on disk is not valid ({why}): fetching it again")
            target.unlink()
        url = f"{base}/{rel}"
        try:
            _download(url, target, limits, rel)
        except OSError as err:
            if str(err).startswith("cannot connect") and not done.downloaded:
                # nothing came from there yet: the network or the address, not this file
                raise FetchError(
                    f"cannot reach {base} ({err}); check the network, or name a mirror with --from"
                ) from None
            done.failed[url] = str(err)
            emit(f"[{n}/{len(wanted)}] not fetched: {url} ({err})")
            continue
        done.downloaded.append(rel)
        emit(f"[{n}/{len(wanted)}] {rel}")
    done.countries = [
        c for c in names if (folder / DESCRIPTORS.format(slug=country_slug(c))).is_file()
    ]
    if not done.countries:
        raise FetchError(
            f"no reference descriptors could be fetched from {base} "
            f"({len(done.failed)} download(s) failed; the first: "
            f"{next(iter(done.failed.values()), 'none')}); check the address (--from) and "
            "the network"
        )
    _write_source(folder, base, done)
    done.pack, done.activities = write_pack(folder, Path(data_dir) / "packs" / PACK)
    emit(
        f"pack: {done.pack} ({done.activities} activities with descriptors, "
        f"{len(done.countries)} countries)"
    )
    for proposer, template in PROPOSERS.items() if proposers else ():
        target = proposer_pack(data_dir, proposer)
        done.proposer_packs[proposer], _ = write_pack(folder, target, template, proposer)
        emit(f"proposer-only pack ({proposer}): {target}")
    if photos:
        from refine.evaluate.paper_photos import fetch_photos

        if not (folder / PHOTO_MANIFEST).is_file():
            raise FetchError(f"--photos: the photo manifest {PHOTO_MANIFEST} was not fetched")
        done.photos = fetch_photos(
            folder / "photos",
            folder / PHOTO_MANIFEST,
            names,
            bundled,
            COMMIT,
            emit,
            limits=limits,
        )
    return done


def _download(url: str, target: Path, limits: DownloadLimits, rel: str) -> None:
    """``url`` to ``target``, written atomically, only when it is what its kind needs
    (:func:`_not_valid`); an OSError saying why not (:mod:`refine.io.download`: http(s)
    only, a size cap, a time limit, tried :data:`TRIES` times for a network or server
    error)."""
    from refine.io.download import DownloadError, download
    from refine.io.files import atomic_write

    data = download(
        url,
        max_mb=limits.max_mb,
        timeout_s=limits.timeout_s,
        deadline=limits.deadline,
        tries=TRIES,
        sleep=lambda s: time.sleep(s),
    )
    why = _not_valid(rel, data)
    if why is not None:
        raise DownloadError(f"not kept: {why}")
    target.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(target, lambda tmp: tmp.write_bytes(data))


MANIFEST_COLUMNS = ("image_url", "country", "activity", "sub_activity")


def _not_valid(rel: str, data: bytes) -> str | None:
    """Why ``data`` is not the file ``rel`` of the authors' layout must be (None when it
    is): JSON of the shape the pack is written from, or the manifest's CSV with its
    columns. A page of HTML answered with status 200, a list or an empty body is never
    kept, so it cannot stop a later fetch."""
    if rel == PHOTO_MANIFEST:
        import csv
        import io

        try:
            header = next(csv.reader(io.StringIO(data.decode("utf-8"))), [])
        except (UnicodeDecodeError, csv.Error) as err:
            return f"not a CSV file ({type(err).__name__})"
        missing = [c for c in MANIFEST_COLUMNS if c not in header]
        return f"the manifest has no column {', '.join(missing)}" if missing else None
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as err:
        return f"not JSON ({type(err).__name__})"
    if not isinstance(doc, dict):
        return f"JSON of the wrong shape: a {type(doc).__name__}, not an object"
    if rel == COUNTRY_CANDIDATES:
        if not all(_strings(v) for v in doc.values()):
            return "JSON of the wrong shape: each country's candidates are not a list of text"
        return None
    if rel == SUBACTIVITY_CANDIDATES:
        ok = all(
            isinstance(cats, dict)
            and all(
                isinstance(subs, dict) and all(_strings(v) for v in subs.values())
                for subs in cats.values()
            )
            for cats in doc.values()
        )
        return None if ok else "JSON of the wrong shape: not country, category, subactivity"
    ok = all(
        isinstance(subs, dict)
        and all(
            isinstance(dims, dict)
            and all(
                isinstance(items, list) and all(isinstance(t, dict) for t in items)
                for items in dims.values()
            )
            for dims in subs.values()
        )
        for subs in doc.values()
    )
    if not ok or not doc:
        return "JSON of the wrong shape: not category, subactivity, dimension, descriptors"
    return None


def _strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(x, str) for x in value)


def _write_source(folder: Path, base: str, done: Fetched) -> None:
    from refine.io.files import atomic_write_json

    files = {
        p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name != "source.json"
    }
    atomic_write_json(
        folder / "source.json",
        {"source": base, "commit": COMMIT, "notice": NOTICE, "sha256": files},
    )


def proposer_pack(data_dir: str | Path, proposer: str) -> Path:
    """Where ``refine data fetch ahead --proposers`` writes a proposer's own pack."""
    return Path(data_dir) / "ahead" / COMMIT / PROPOSER_PACKS / f"{proposer}.json"


def write_pack(
    folder: Path, out: Path, files: str = DESCRIPTORS, proposer: str | None = None
) -> tuple[Path, int]:
    """The pack of the fetched data: the bundled catalog, each activity of a fetched
    country joined to its descriptors (``files``: the refined set's, or a ``proposer``'s)
    by category and subactivity, and the fetched stereotype candidates; returns its path
    and the activities with descriptors."""
    from refine.evaluate.references import load_pack
    from refine.io.files import atomic_write_json

    bundled = load_pack()
    country_stereo = _json(folder / COUNTRY_CANDIDATES) or {}
    sub_stereo = _json(folder / SUBACTIVITY_CANDIDATES) or {}
    countries: dict[str, Any] = {}
    with_refs = 0
    for name, entry in bundled.countries.items():
        refs = _json(folder / files.format(slug=country_slug(name)))
        if refs is None:
            continue
        upstream = name.upper().replace(" ", "_")
        activities = {}
        for phrase, act in entry["activities"].items():
            category, sub = act.get("category"), act.get("subactivity")
            raw = (refs.get(category) or {}).get(sub) or {}
            descriptors = {
                d: [t["token"].strip() for t in raw.get(d, []) if t.get("token")]
                for d in DIMENSIONS
            }
            has = any(descriptors.values())
            with_refs += has
            activities[phrase] = {
                **act,
                "descriptors": descriptors if has else None,
                "stereotypes": (
                    (sub_stereo.get(upstream) or {}).get(category, {}).get(sub)
                    or act.get("stereotypes", [])
                ),
            }
        countries[name] = {
            "stereotypes": country_stereo.get(upstream) or entry.get("stereotypes", []),
            "activities": activities,
        }
    pack = {
        "name": f"ahead-proposer-{proposer}" if proposer else "ahead",
        "source": f"fetched: {NOTICE}"
        + (f"; {proposer}'s own descriptors, before the refiner" if proposer else ""),
        "dimensions": list(DIMENSIONS),
        "countries": countries,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(out, pack)
    load_pack.cache_clear()  # read again, as written
    return out, with_refs


def _json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None
