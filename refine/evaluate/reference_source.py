"""Where a run's references come from: one order, for the command line, the app's service,
the tasks and ``refine agree`` alike, and the answer says which place gave them.

The order (:data:`ORDER`), first found wins:

1. ``visitor``: the references a visitor of the app built or reviewed (their own folder);
2. ``shared``: the ones built for everyone under ``--out`` (``OUT/references``);
3. ``data``: the descriptor packs in the data directory (``$REFINE_DATA_DIR/packs/*.json``,
   default ``~/.cache/cultural-refine/data``; empty until packs are put there);
4. ``bundled``: the pack that ships with the toolkit (``assets/packs/cultivate.json``);
5. ``built``: the ones built earlier with ``refine refs build`` (its cache);
6. ``new``: built now with the profile's language models, when the caller asks for it.

A references file given by hand (``--refs``, a batch line's ``refs``) is not looked up: it
is used as given.

The references found carry the activity's and country's photo set as their reference
images where the data directory has one (:mod:`refine.evaluate.photo_sets`), and the answer
says so.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from refine.evaluate.data_dir import data_dir
from refine.evaluate.references import Pack, ReferenceNotFound, find_references
from refine.records import ReferencePack

ORDER = ("visitor", "shared", "data", "bundled", "built", "new")
WORDS = {
    "visitor": "your own references",
    "shared": "references built here for everyone",
    "data": "a descriptor pack of the data directory",
    "bundled": "the bundled pack",
    "built": "references built earlier with refine refs build",
    "new": "references built now with the profile's language models",
}


def data_packs(data: Path | None = None) -> list[Path]:
    """The descriptor packs of the data directory (``packs/*.json``), in the order looked."""
    folder = (data if data is not None else data_dir()) / "packs"
    return sorted(folder.glob("*.json")) if folder.is_dir() else []


def catalog(data: Path | None = None) -> tuple[Pack, dict[str, str]]:
    """The activities a user's machine knows: the bundled catalog, each activity's
    descriptors and stereotype candidates taken from the first pack of the data directory
    that has descriptors for it (as :class:`ReferenceSource` finds them), else the bundled
    ones; and per country where its descriptors come from (a data pack's file name, or
    ``bundled``; no entry for a country with none)."""
    from refine.evaluate.references import load_pack

    bundled = load_pack()  # cached: shared, never changed here
    # a country that a data pack changes is copied before it is (its entry and its
    # activities); the rest are the bundled pack's own. A deep copy of the whole pack took
    # 8 ms a call, and the app asks on every country picked
    countries = dict(bundled.countries)
    origin: dict[str, str] = {
        k: "bundled"
        for k, c in countries.items()
        if any(a.get("descriptors") for a in c["activities"].values())
    }
    for path in reversed(data_packs(data)):  # the first pack wins: applied last
        try:
            pack = load_pack(str(path))
        except ValueError:
            continue
        for name, entry in pack.countries.items():
            key = bundled.country_key(name)
            if key is None:
                continue
            taken = {
                phrase: act
                for phrase, act in entry.get("activities", {}).items()
                if act.get("descriptors") and phrase in countries[key]["activities"]
            }
            if taken:
                mine = dict(countries[key]["activities"])
                for phrase, act in taken.items():
                    mine[phrase] = {**mine[phrase], **act}
                countries[key] = {**countries[key], "activities": mine}
                origin[key] = path.name
    return Pack(bundled.name, bundled.source, countries, bundled.path), origin


@dataclass(frozen=True)
class Found:
    """References and where they came from (one of :data:`ORDER`, and the file or pack)."""

    pack: ReferencePack
    origin: str
    where: str
    photos: str = ""  # the photo set's description, when one was given to the references

    def describe(self) -> str:
        """``references: the bundled pack (cultivate.json)``, and the photo set's origin
        when there is one."""
        said = f"references: {WORDS[self.origin]} ({self.where})"
        return f"{said}; {self.photos}" if self.photos else said


@dataclass(frozen=True)
class ReferenceSource:
    """The places to look, in :data:`ORDER`; a place left None is not looked in."""

    visitor: Path | None = None
    shared: Path | None = None
    data: Path | None = None
    bundled: str | None = "cultivate"
    built: Path | None = None
    build: Callable[[str, str], ReferencePack] | None = None

    @classmethod
    def default(
        cls,
        shared: str | Path | None = None,
        visitor: str | Path | None = None,
        build: Callable[[str, str], ReferencePack] | None = None,
    ) -> ReferenceSource:
        """Every place a user's machine has: the data directory, the bundled pack, the
        cache of ``refine refs build``; with ``shared`` (``OUT/references``) and a
        ``visitor``'s folder when given, and ``build`` to build when nothing is found."""
        from refine.io.files import cache_dir

        return cls(
            visitor=Path(visitor) if visitor is not None else None,
            shared=Path(shared) if shared is not None else None,
            data=data_dir(),
            built=cache_dir() / "refs",
            build=build,
        )

    def find(self, activity: str, country: str) -> Found:
        """The first references found for ``activity`` in ``country``; a
        :class:`ReferenceNotFound` saying what was looked for and how to get some."""
        why = None
        for origin, look in self._places():
            try:
                found = look(activity, country)
            except ReferenceNotFound as err:
                why = why or str(err)
                continue
            if found is not None:
                return self._with_photos(Found(found[0], origin, found[1]))
        raise ReferenceNotFound(
            f"{why or f'no references for {activity!r} in {country}'}; or build references "
            f'with language models: `refine refs build "{activity}" --country {country}`'
        )

    def _with_photos(self, found: Found) -> Found:
        """``found`` with the activity's and country's photo set as its reference images
        (:mod:`refine.evaluate.photo_sets`), where the data directory has one and the
        references carry no photos of their own."""
        if self.data is None or found.pack.reference_images:
            return found
        from refine.evaluate.photo_sets import find_photo_set

        seen = find_photo_set(found.pack.activity, found.pack.country, self.data)
        if seen is None:
            return found
        pack = found.pack.model_copy(update={"reference_images": list(seen.files)})
        return Found(pack, found.origin, found.where, seen.describe())

    def _places(self) -> Iterator[tuple[str, Callable]]:
        if self.visitor is not None and self.visitor != self.shared:
            yield "visitor", self._built_in(self.visitor)
        if self.shared is not None:
            yield "shared", self._built_in(self.shared)
        if self.data is not None:
            yield "data", self._data_packs
        if self.bundled is not None:
            yield "bundled", self._bundled
        if self.built is not None:
            yield "built", self._built_in(self.built)
        if self.build is not None:
            yield "new", self._build

    @staticmethod
    def _built_in(folder: Path) -> Callable:
        def look(activity: str, country: str):
            from refine.evaluate.refs_build import built_path, load_built

            pack = load_built(activity, country, folder)
            return None if pack is None else (pack, str(built_path(activity, country, folder)))

        return look

    def _data_packs(self, activity: str, country: str):
        for path in data_packs(self.data or Path()):
            try:
                return find_references(activity, country, str(path)), str(path)
            except ReferenceNotFound:
                continue
        return None

    def _bundled(self, activity: str, country: str):
        pack = find_references(activity, country, self.bundled or "cultivate")
        return pack, f"{self.bundled}.json"

    def _build(self, activity: str, country: str):
        assert self.build is not None
        return self.build(activity, country), "the profile's language models"


def activity_category(activity: str, country: str) -> str | None:
    """The CULTIVate category of an activity of a country in the bundled pack."""
    entry = catalog()[0].countries.get(country, {}).get("activities", {}).get(activity) or {}
    return entry.get("category")


def prompt_set(activity: str, prompts: str = "auto") -> str:
    """The prompts references of ``activity`` are built with: ``ahead`` or ``toolkit`` as
    asked, or for ``auto`` AHEaD's (Tab. 15-21) where the activity is one of the CULTIVate
    catalog's, in any country, and the toolkit's for any other."""
    if prompts not in ("auto", "ahead", "toolkit"):
        raise ValueError(f"--prompts: auto, ahead or toolkit, not {prompts!r}")
    if prompts != "auto":
        return prompts
    wanted = " ".join(activity.split()).casefold()
    pack = catalog()[0]
    known = any(
        a.casefold() == wanted for c in pack.countries.values() for a in c.get("activities", {})
    )
    return "ahead" if known else "toolkit"
