"""Reference descriptors and stereotype candidates from descriptor packs in ``assets/packs``.

The bundled pack ``cultivate`` is built from the public CULTIVate / AHEaD data (see its
``source``): 16 countries, 576 activities, refined descriptors for six countries.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from refine.assets import assets_dir
from refine.records import ReferencePack


class ReferenceNotFound(ValueError):
    """The pack has no descriptors for this activity and country; the message suggests."""


@dataclass(frozen=True)
class Pack:
    name: str
    source: str
    countries: dict[str, Any]
    path: Path

    def country_key(self, country: str) -> str | None:
        folded = country.strip().casefold().replace("_", " ")
        for key in self.countries:
            if key.casefold() == folded:
                return key
        return None

    def activities(self, country: str | None = None) -> list[str]:
        keys = [self.country_key(country)] if country else list(self.countries)
        return sorted({a for k in keys if k for a in self.countries[k]["activities"]})


def packs_dir() -> Path:
    return assets_dir() / "packs"


@cache
def load_pack(name_or_path: str = "cultivate") -> Pack:
    path = Path(name_or_path)
    if path.suffix != ".json":
        path = packs_dir() / f"{name_or_path}.json"
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in packs_dir().glob("*.json")))
        raise ValueError(f"unknown descriptor pack {name_or_path!r}; bundled packs: {known}")
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data.get("countries"), dict):
        raise ValueError(f"{path}: a descriptor pack needs a 'countries' object")
    return Pack(data.get("name", path.stem), data.get("source", ""), data["countries"], path)


def suggest(word: str, options: list[str]) -> str:
    """``; did you mean 'X'?`` for the nearest of ``options`` (spelling, or a part of one)."""
    close = difflib.get_close_matches(word, options, n=3, cutoff=0.6)
    if not close:
        low = word.casefold()
        close = [o for o in options if low in o.casefold() or o.casefold() in low][:3]
    return f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""


def find_references(activity: str, country: str, pack: str = "cultivate") -> ReferencePack:
    """The pack's descriptors and stereotype candidates for ``activity`` in ``country``."""
    p = load_pack(pack)
    key = p.country_key(country)
    if key is None:
        raise ReferenceNotFound(
            f"the {p.name} pack has no country {country!r}{suggest(country, list(p.countries))} "
            f"(countries: {', '.join(p.countries)}); write a references file for others"
        )
    entries = p.countries[key]["activities"]
    phrase = activity.strip()
    entry = entries.get(phrase) or next(
        (v for k, v in entries.items() if k.casefold() == phrase.casefold()), None
    )
    if entry is None:
        raise ReferenceNotFound(
            f"the {p.name} pack has no activity {activity!r} for {key}"
            f"{suggest(phrase, list(entries))}; `refine refs list --country {key}` lists them"
        )
    if not entry.get("descriptors"):
        with_refs = [k for k in p.countries if _has_descriptors(p, k, phrase)]
        raise ReferenceNotFound(
            f"the {p.name} pack has no reference descriptors for {phrase!r} in {key} (only "
            f"stereotype candidates); countries with descriptors for it: "
            f"{', '.join(with_refs) or 'none'}; or give a references file (--refs)"
        )
    stereotypes = list(entry.get("stereotypes") or p.countries[key].get("stereotypes", []))
    return ReferencePack(
        activity=phrase,
        country=key,
        descriptors=entry["descriptors"],
        stereotypes=stereotypes,
        source=f"{p.name} pack ({p.path.name}): {p.source}",
    )


def _has_descriptors(p: Pack, country: str, phrase: str) -> bool:
    entry = p.countries[country]["activities"].get(phrase)
    return bool(entry and entry.get("descriptors"))


def load_references_file(path: str | Path, activity: str, country: str) -> ReferencePack:
    """A user's references: ``{"descriptors": {...}, "stereotypes": [...]}`` or a plain
    ``{dimension: [phrases]}`` object."""
    from pydantic import ValidationError

    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise ValueError(f"{path}: cannot read references ({err})") from err
    if not isinstance(data, dict):
        raise ValueError(f"{path}: references must be a JSON object")
    if "descriptors" not in data:
        data = {"descriptors": data}
    images = data.get("reference_images", [])
    if not isinstance(images, list) or not all(isinstance(x, str) for x in images):
        raise ValueError(f"{path}: reference_images must be a list of image paths")
    # paths relative to the references file
    images = [str((path.parent / x).resolve()) for x in images]
    missing = [x for x in images if not Path(x).is_file()]
    if missing:
        raise ValueError(f"{path}: reference image {missing[0]} does not exist")
    try:
        return ReferencePack(
            activity=activity,
            country=country,
            descriptors=data["descriptors"],
            stereotypes=data.get("stereotypes", []),
            source=str(path),
            reference_images=images,
        )
    except ValidationError as err:
        first = err.errors()[0]
        raise ValueError(f"{path}: {first['msg']}") from err
