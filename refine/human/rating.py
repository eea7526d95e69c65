"""The sets of images people rate (the app's Rate view, under a study's protocol:
:mod:`refine.human.study`): one image at a time in an order of the rater's own, answers
appended to ``ratings.jsonl`` beside the images as they are given (nothing is lost on a
reload; several raters share one file; ``refine agree`` reads it).

A set is a folder: a run (``run.json``: every image of the run, its prompt and
expectations), a bench (``cells.jsonl``) or concepts folder (``concepts.jsonl``), a
folder of runs or benches, or any folder of images (PNG, JPEG, WebP; an optional
``prompts.json`` maps file names to prompts). Image paths stay relative to the set.
"""

from __future__ import annotations

import json
import random
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

from refine.io.files import atomic_write_text, json_lines, plain_file_inside

RATINGS = "ratings.jsonl"
ITEMS = "items.json"  # a packed rater's folder: its images and what they show
RATERS = ".raters.json"  # rater name -> the hash of the app visitor who rates under it
_APPEND = threading.Lock()


@dataclass(frozen=True)
class Item:
    image: str  # relative to the set's folder, "/" separated
    prompt: str = ""
    expectations: tuple[str, ...] = ()
    activity: str | None = None
    country: str | None = None  # an SoS bank's: the culture its prompt asked for
    language: str | None = None  # an SoS bank's: the language of its prompt


@dataclass
class RatingSet:
    folder: Path
    items: list[Item] = field(default_factory=list)

    @property
    def ratings_path(self) -> Path:
        return self.folder / RATINGS

    @classmethod
    def open(cls, folder: str | Path) -> RatingSet:
        """The images of ``folder`` (see the module docstring); ValueError when none."""
        folder = Path(folder)
        items: dict[str, Item] = {}
        if not _collect(folder, folder, items):
            for sub in sorted(p for p in folder.iterdir() if p.is_dir() and not p.is_symlink()):
                _collect(folder, sub, items)
        if not items:
            _plain(folder, items)
        if not items:
            raise ValueError(f"{folder.name}: no images to rate (PNG, JPEG or WebP)")
        return cls(folder, sorted(items.values(), key=lambda i: i.image))

    @classmethod
    def cached(cls, folder: str | Path) -> RatingSet:
        """:meth:`open`, kept while nothing it reads changed (the folder's entries, its
        subfolders' and their run.json / cells.jsonl / concepts.jsonl / prompts.json):
        a set of thousands of images is not read again at every click."""
        folder = Path(folder)
        key = str(folder.resolve())
        sig = _signature(folder)
        with _CACHE_LOCK:
            hit = _CACHE.get(key)
            if hit is not None and hit[0] == sig:
                _CACHE.move_to_end(key)
                return hit[1]
        opened = cls.open(folder)
        with _CACHE_LOCK:
            _CACHE[key] = (sig, opened)
            while len(_CACHE) > 8:
                _CACHE.popitem(last=False)
        return opened

    def item(self, image: str) -> Item:
        """The set's item of that name (a client's value: anything else is refused)."""
        for it in self.items:
            if it.image == image:
                return it
        raise ValueError(f"{image!r} is not an image of this set")

    def claim(self, rater: str, visitor: str) -> None:
        """Rate under ``rater`` as ``visitor`` (a visitor hash): the first visitor to use a
        name in this set keeps it; another is refused (nobody's answers are written under
        someone else's name). The claims are kept in the set's hidden ``.raters.json``."""

        path = self.folder / RATERS
        with _APPEND:
            claims: dict[str, str] = {}
            if path.is_file() and not path.is_symlink():
                try:
                    loaded = json.loads(path.read_text(encoding="utf-8"))
                    claims = loaded if isinstance(loaded, dict) else {}
                except json.JSONDecodeError:
                    claims = {}
            held = claims.get(rater)
            if held == visitor:
                return
            if held is not None:
                raise ValueError(
                    f"the rater name {rater!r} is taken in this set by another visitor: "
                    "rate under a name of your own"
                )
            claims[rater] = visitor
            atomic_write_text(path, json.dumps(claims, indent=1, ensure_ascii=False))

    def order(self, rater: str) -> list[Item]:
        """The items in the rater's own random order (the same on every visit)."""
        items = list(self.items)
        random.Random(f"{rater}\x00{self.folder.name}").shuffle(items)
        return items


_CACHE: OrderedDict[str, tuple[tuple, RatingSet]] = OrderedDict()
_CACHE_LOCK = threading.Lock()
_INDEXES = ("run.json", "cells.jsonl", "concepts.jsonl", "prompts.json", "bank.json", ITEMS)


def _signature(folder: Path) -> tuple:
    """What :meth:`RatingSet.open` depends on, cheaply: the folder's entries (but its
    ratings file), the modification times of its subfolders and the index files in both."""
    # a study's own files (.study.json, .profiles.json, .attention/) are not the set's
    entries = sorted(p for p in folder.iterdir() if p.name != RATINGS and p.name[:1] != ".")
    out: list[tuple] = [tuple(p.name for p in entries)]
    for d in [folder, *(p for p in entries if p.is_dir() and not p.is_symlink())]:
        if d is not folder:
            out.append((d.name, d.stat().st_mtime_ns))
        for name in _INDEXES:
            f = d / name
            if f.is_file():
                st = f.stat()
                out.append((d.name, name, st.st_mtime_ns, st.st_size))
    return tuple(out)


def _collect(root: Path, folder: Path, items: dict[str, Item]) -> bool:
    if (folder / "run.json").is_file():
        from refine.io.store import RunStore

        run = RunStore(folder).load()
        prompt = run.rounds[0].text if run.rounds else run.spec.activity
        expectations = tuple(e.statement for e in run.spec.expectations)
        for name in run.image_names():
            rel = plain_file_inside(root, folder / name)
            if rel:
                items[rel] = Item(rel, prompt, expectations, run.spec.activity, run.spec.country)
        return True
    if (folder / ITEMS).is_file():  # a packed rater's folder (refine rate pack)
        try:
            listed = json.loads((folder / ITEMS).read_text(encoding="utf-8")).get("items")
        except (json.JSONDecodeError, AttributeError):
            listed = None
        for entry in listed if isinstance(listed, list) else []:
            if not isinstance(entry, dict):
                continue
            rel = plain_file_inside(root, folder / str(entry.get("image", "")))
            if rel:
                items[rel] = Item(
                    rel,
                    str(entry.get("prompt") or ""),
                    tuple(str(e) for e in entry.get("expectations") or ()),
                    entry.get("activity"),
                    entry.get("country"),
                    entry.get("language"),
                )
        return True
    if (folder / "bank.json").is_file():  # an SoS bank: culture and language per image
        try:
            bank = json.loads((folder / "bank.json").read_text(encoding="utf-8"))
        except json.JSONDecodeError:
            bank = {}
        for cell in (bank.get("cells") or {}).values():
            prompts = list(cell.get("prompts") or [])
            for name in cell.get("images") or []:
                rel = plain_file_inside(root, folder / str(name))
                k = _prompt_index(str(name))
                prompt = prompts[k] if k is not None and k < len(prompts) else ""
                if rel:
                    items[rel] = Item(
                        rel, prompt, (), None, cell.get("culture"), cell.get("language")
                    )
        return True
    for cells in ("cells.jsonl", "concepts.jsonl"):
        if (folder / cells).is_file():
            for line in json_lines((folder / cells).read_text(encoding="utf-8")):
                try:
                    cell = json.loads(line)
                except json.JSONDecodeError:
                    continue
                for im in cell.get("images", []):
                    rel = plain_file_inside(root, folder / str(im.get("file", "")))
                    if rel:
                        items[rel] = Item(
                            rel,
                            cell.get("prompt", ""),
                            (),
                            cell.get("activity"),
                            cell.get("country"),
                        )
            return True
    return False


def _prompt_index(name: str) -> int | None:
    """The prompt an SoS bank's image was made from (``.../p{k}_s{seed}.png``)."""
    stem = Path(name).stem
    head = stem.split("_", 1)[0]
    return int(head[1:]) if head.startswith("p") and head[1:].isdigit() else None


def _plain(folder: Path, items: dict[str, Item]) -> None:
    prompts: dict[str, str] = {}
    named = folder / "prompts.json"
    if named.is_file():
        try:
            data = json.loads(named.read_text(encoding="utf-8"))
            prompts = {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}
        except json.JSONDecodeError:
            prompts = {}
    for path in sorted(folder.iterdir()):
        rel = plain_file_inside(folder, path)
        if rel:
            items[rel] = Item(rel, prompts.get(path.name, ""))
