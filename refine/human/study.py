"""A rating study: a set of images (:class:`refine.human.rating.RatingSet`) rated under a
protocol (:mod:`refine.human.protocols`), with who rates it and how well they attend.

The set's folder keeps, beside ``ratings.jsonl``:

* ``.study.json``: the protocol the set is rated under (the whole protocol, so that a
  user's file can move or change without changing what was asked) and the study's seed;
* ``.profiles.json``: each rater's profile and consent, given once before the first image;
* ``.attention/``: the attention check's image.

What a rater sees next (:meth:`Study.next_for`): an attention check when one is due (after
every ``attention.every`` images); else, of the images they qualify for that still want
raters (``raters_per_image``, per rater country with ``every_country``), the one with the
fewest raters so far, ties in the rater's own order (so images fill evenly and a rater
goes on where they stopped); at the end, ``repeats.count`` of their rated images again.

Each answer is one line of ``ratings.jsonl``: ``image``, ``rater``, ``protocol``, ``kind``
(``rate``, ``attention`` or ``repeat``), ``answers`` (question id -> value), ``reasons``,
``options`` (the choices shown, for questions whose choices come from the item),
``passed`` (an attention check's outcome), ``time``, ``image_sha256``, ``prompt``,
``activity``, ``country``, ``language``. A rater is flagged (:meth:`Study.flags`) when they
fail more checks, or answer more repeats inconsistently, than the protocol allows.
"""

from __future__ import annotations

import json
import random
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from refine.human.protocols import Protocol, RaterProfile, load_protocol
from refine.human.rating import _APPEND, Item, RatingSet
from refine.io.files import append_jsonl, atomic_write_text, file_sha256, json_lines

# one answer checked against what its rater is shown and appended at a time: two clicks
# of one rater (or raters of one image) never both pass the check
_RECORDING = threading.Lock()
STUDY = ".study.json"
PROFILES = ".profiles.json"
ATTENTION = ".attention"
KINDS = ("rate", "attention", "repeat")


@dataclass(frozen=True)
class Slot:
    """What a rater is shown next: an item and why (``rate``, ``attention``, ``repeat``)."""

    item: Item
    kind: str
    options: dict[str, list[str]]  # the choices of questions whose choices come from the item


class Study:
    """A set rated under a protocol (see the module docstring)."""

    def __init__(self, rating_set: RatingSet, protocol: Protocol, seed: int = 0) -> None:
        self.set = rating_set
        self.protocol = protocol
        self.seed = seed

    @property
    def folder(self) -> Path:
        return self.set.folder

    @classmethod
    def open(cls, folder: str | Path, protocol: str | Path | None = None, seed: int = 0) -> Study:
        """The set in ``folder`` under its protocol: the one it is rated under, else
        ``protocol`` (a bundled name or a file; default ``quick``), recorded with
        ``seed``. Naming another protocol than the one a set was rated under is refused,
        as is a folder that is not one (a ValueError naming it)."""
        if not Path(folder).is_dir():
            raise ValueError(f"{folder}: no such folder of images to rate")
        rating_set = RatingSet.cached(folder)
        path = rating_set.folder / STUDY
        if path.is_file() and not path.is_symlink():
            kept = json.loads(path.read_text(encoding="utf-8"))
            had = Protocol.model_validate(kept["protocol"])
            if protocol is not None:
                asked = load_protocol(protocol)
                if asked.name != had.name and rating_set.ratings_path.is_file():
                    raise ValueError(
                        f"{rating_set.folder.name} is rated under the {had.name} protocol; "
                        f"rate it with that one, or copy the images to rate them under "
                        f"{asked.name}"
                    )
                if asked.name != had.name or (
                    asked != had and not rating_set.ratings_path.is_file()
                ):
                    return cls._start(rating_set, asked, seed)
                # rated already: what was asked stays as it was recorded
            return cls(rating_set, had, int(kept.get("seed", 0)))
        return cls._start(rating_set, load_protocol(protocol or "quick"), seed)

    @staticmethod
    def recorded(folder: str | Path) -> Protocol | None:
        """The protocol a set is rated under, read without writing anything (None where
        none is recorded yet)."""
        path = Path(folder) / STUDY
        if not path.is_file() or path.is_symlink():
            return None
        try:
            return Protocol.model_validate(json.loads(path.read_text(encoding="utf-8"))["protocol"])
        except (ValueError, KeyError, TypeError):
            return None

    @classmethod
    def _start(cls, rating_set: RatingSet, protocol: Protocol, seed: int) -> Study:
        doc = {"protocol": protocol.model_dump(mode="json"), "seed": seed}
        atomic_write_text(rating_set.folder / STUDY, json.dumps(doc, indent=1, ensure_ascii=False))
        return cls(rating_set, protocol, seed)

    # -- raters ------------------------------------------------------------------------

    def profiles(self) -> dict[str, RaterProfile]:
        path = self.folder / PROFILES
        if not path.is_file() or path.is_symlink():
            return {}
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError:
            return {}
        out = {}
        for rater, data in (doc if isinstance(doc, dict) else {}).items():
            try:
                out[str(rater)] = RaterProfile.model_validate(data)
            except ValueError:
                continue
        return out

    def profile(self, rater: str) -> RaterProfile | None:
        return self.profiles().get(rater)

    def give_profile(self, rater: str, data: dict[str, Any]) -> RaterProfile:
        """Keep a rater's profile and consent (a ValueError names the field to fix); it
        is given once per set: a second, different one is refused."""
        profile = RaterProfile.parse(data)
        with _APPEND:
            held = self.profiles()
            if rater in held and held[rater] != profile:
                raise ValueError(
                    f"{rater!r} gave a profile for this set already; rate under that one"
                )
            held[rater] = profile
            doc = {r: p.model_dump(mode="json") for r, p in held.items()}
            atomic_write_text(self.folder / PROFILES, json.dumps(doc, indent=1, ensure_ascii=False))
        return profile

    def qualification(self, rater: str) -> tuple[bool, str]:
        """Whether the rater may rate any image of the set, and what the study says."""
        profile = self.profile(rater)
        if profile is None:
            return False, "give your profile and consent first"
        if not self.protocol.qualify.country:
            return True, "you qualify for every image of this set"
        countries = sorted({it.country for it in self.set.items if it.country})
        mine = [c for c in countries if self.protocol.qualifies(profile, c)[0]]
        unplaced = any(not it.country for it in self.set.items)  # no country to ask for
        if not mine and not unplaced:
            why = self.protocol.qualify.text or "this study asks for raters of the country shown"
            return False, f"you do not qualify for this set: {why}"
        if not countries:
            return True, "the set's images name no country: you may rate every one"
        return True, f"you qualify for the images of {', '.join(mine) or 'no country named'}"

    def rater_country(self, rater: str) -> str | None:
        profile = self.profile(rater)
        return getattr(profile, self.protocol.rater_country) if profile else None

    # -- what comes next ---------------------------------------------------------------

    def rows(self) -> list[dict[str, Any]]:
        """Every answer of this protocol on record (a line cut by a kill is skipped)."""
        out = []
        path = self.set.ratings_path
        if path.is_file():
            for line in json_lines(path.read_text(encoding="utf-8")):
                try:
                    row = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if not isinstance(row, dict):
                    continue
                if row.get("protocol") == self.protocol.name:
                    out.append(row)
                elif self.protocol.name == "quick" and "protocol" not in row:
                    out.append(_earlier_quick(row))
        return out

    def next_for(self, rater: str) -> tuple[Slot | None, int, int]:
        """(what the rater sees next or None when done, images they rated, images they
        may rate in all)."""
        ok, why = self.qualification(rater)
        if not ok:
            raise ValueError(why)
        rows = self.rows()
        mine = [r for r in rows if r.get("rater") == rater]
        rated = [r["image"] for r in mine if r.get("kind") == "rate"]
        done = set(rated)
        eligible = {it.image for it in self._eligible(rater)}
        wanted = self._counts(rows, rater)
        att = self.protocol.attention
        checks = sum(r.get("kind") == "attention" for r in mine)
        if att.every and len(done) >= (checks + 1) * att.every:
            return Slot(self.attention_item(), "attention", {}), len(done), len(eligible)
        open_ = [
            (wanted.get(it.image, 0), k, it)
            for k, it in enumerate(self.set.order(rater))
            if it.image not in done
            and it.image in eligible
            and (
                self.protocol.raters_per_image is None
                or wanted.get(it.image, 0) < self.protocol.raters_per_image
            )
        ]
        total = len(done) + len(open_)
        if open_:
            item = min(open_, key=lambda t: (t[0], t[1]))[2]
            return Slot(item, "rate", self.item_options(item)), len(done), total
        again = {r["image"] for r in mine if r.get("kind") == "repeat"}
        for image in self.repeats_of(rater, rated):
            if image not in again:
                item = self.set.item(image)
                return (
                    Slot(item, "repeat", self._shown_options(rows, rater, image)),
                    len(done),
                    total,
                )
        return None, len(done), total

    def _eligible(self, rater: str) -> list[Item]:
        profile = self.profile(rater)
        return [
            it
            for it in self.set.items
            if profile and self.protocol.qualifies(profile, it.country)[0]
        ]

    def _counts(self, rows: list[dict[str, Any]], rater: str) -> dict[str, int]:
        """Raters so far per image (of the rater's country, with ``every_country``)."""
        field_name = self.protocol.rater_country
        held = self.profiles() if self.protocol.every_country else {}
        country = {who: getattr(p, field_name) for who, p in held.items()}
        mine = country.get(rater) if self.protocol.every_country else None
        seen: dict[str, set[str]] = {}
        for r in rows:
            if r.get("kind") != "rate":
                continue
            if mine is not None and country.get(str(r.get("rater"))) != mine:
                continue
            seen.setdefault(str(r.get("image")), set()).add(str(r.get("rater")))
        return {image: len(who) for image, who in seen.items()}

    def repeats_of(self, rater: str, rated: list[str]) -> list[str]:
        """The rater's images shown again at the end, chosen with the study's seed."""
        n = min(self.protocol.repeats.count, len(rated))
        if not n:
            return []
        return random.Random(f"{self.seed}\x00repeat\x00{rater}").sample(sorted(set(rated)), n)

    def item_options(self, item: Item) -> dict[str, list[str]]:
        """The choices of each question whose choices come from the item."""
        out = {}
        for q in self.protocol.questions:
            if q.options_from == "expectations":
                out[q.id] = list(item.expectations)
            elif q.options_from == "cultures":
                out[q.id] = culture_options(item, self.seed)
        return out

    def _shown_options(self, rows: list[dict[str, Any]], rater: str, image: str):
        for r in rows:
            if r.get("rater") == rater and r.get("image") == image and r.get("kind") == "rate":
                return dict(r.get("options") or {})
        return self.item_options(self.set.item(image))

    def attention_item(self) -> Item:
        """The attention check's image (drawn once): it says what to answer."""
        rel = f"{ATTENTION}/{self.protocol.name}.png"
        path = self.folder / rel
        if not path.is_file():
            draw_check(path, self.protocol.attention.text)
        return Item(rel, "(attention check)")

    # -- answers -----------------------------------------------------------------------

    def record(
        self,
        rater: str,
        image: str,
        kind: str,
        answers: dict[str, Any],
        reasons: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Check and append one answer: the slot must be the one the rater is shown (a
        client's value: anything else is refused)."""
        with _RECORDING:  # the slot checked and the answer appended together
            return self._record(rater, image, kind, answers, reasons)

    def _record(
        self, rater: str, image: str, kind: str, answers: dict[str, Any], reasons: Any
    ) -> dict[str, Any]:
        slot, _, _ = self.next_for(rater)
        if slot is None:
            raise ValueError("every image of this set is rated by you already")
        if (slot.item.image, slot.kind) != (image, kind):
            raise ValueError(f"{image!r} is not the image you are shown now; reload the set")
        kept, why = self.protocol.check(answers, reasons, slot.options, slot.item.prompt)
        it = slot.item
        row: dict[str, Any] = {
            "image": it.image,
            "rater": rater,
            "protocol": self.protocol.name,
            "kind": kind,
            "answers": kept,
            "reasons": why,
            "options": slot.options,
            "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "image_sha256": file_sha256(self.folder / it.image),
            "prompt": it.prompt,
            "activity": it.activity,
            "country": it.country,
            "language": it.language,
        }
        if kind == "attention":
            row["passed"] = all(
                str(kept.get(q)) == v for q, v in self.protocol.attention.answers.items()
            )
        with _APPEND:
            append_jsonl(self.set.ratings_path, row)
        return row

    def flags(self) -> dict[str, dict[str, Any]]:
        """Per rater: failed attention checks, inconsistent repeats, and whether that
        flags them (:func:`flags_of`)."""
        return flags_of(self.rows(), self.protocol)


def flags_of(rows: list[dict[str, Any]], protocol: Protocol) -> dict[str, dict[str, Any]]:
    """Per rater of ``rows`` (answers under ``protocol``): attention checks taken and
    failed, repeats answered and inconsistent, and whether that flags them."""
    out: dict[str, dict[str, Any]] = {}
    first: dict[tuple[str, str], dict[str, Any]] = {}
    for r in rows:
        who = str(r.get("rater"))
        f = out.setdefault(who, {"checks": 0, "failed_checks": 0, "repeats": 0, "inconsistent": 0})
        kind = r.get("kind")
        if kind == "rate":
            first.setdefault((who, str(r.get("image"))), r)
        elif kind == "attention":
            f["checks"] += 1
            f["failed_checks"] += not r.get("passed")
        elif kind == "repeat":
            f["repeats"] += 1
            before = first.get((who, str(r.get("image"))))
            if before is not None and not consistent(protocol, before["answers"], r["answers"]):
                f["inconsistent"] += 1
    for f in out.values():
        f["flagged"] = f["failed_checks"] > protocol.flag.failed_checks or (
            f["inconsistent"] > protocol.flag.inconsistent
        )
    return out


def consistent(protocol: Protocol, a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether a repeated image's answers hold: each scored answer within the protocol's
    tolerance, each other single choice the same."""
    for q in protocol.questions:
        if q.kind != "single" or q.id not in a or q.id not in b:
            continue
        if q.scored():
            sa, sb = q.score(str(a[q.id])), q.score(str(b[q.id]))
            if sa is not None and sb is not None and abs(sa - sb) > protocol.repeats.tolerance:
                return False
        elif a[q.id] != b[q.id]:
            return False
    return True


def _earlier_quick(row: dict[str, Any]) -> dict[str, Any]:
    """A rating the Rate view wrote before protocols (the quick questions' columns), read
    as a study's answer."""
    answers = {
        q: str(row[q]) for q in ("alignment", "faithfulness") if row.get(q) not in (None, "")
    }
    if row.get("unmet"):
        answers["unmet"] = list(row["unmet"])
    return {
        **row,
        "protocol": "quick",
        "kind": "rate",
        "answers": answers,
        "reasons": {"faithfulness": row["comment"]} if row.get("comment") else {},
        "options": {"unmet": list(row.get("expectations") or [])},
    }


def culture_options(item: Item, seed: int = 0) -> list[str]:
    """SoS Sec. 4.2's five choices for an image of an SoS bank: the culture its prompt
    asked for, the culture of its prompt's language and three others drawn at random,
    shuffled (the same for every rater of the image)."""
    from refine.evaluate.sos_captions import surface_cultures

    if not item.country or not item.language:
        raise ValueError(
            f"{item.image}: the sos protocol rates images of an SoS bank (each with its "
            "culture and prompt language)"
        )
    table = surface_cultures().get(item.language)
    if table is None:
        raise ValueError(f"{item.image}: no culture on record for the language {item.language!r}")
    pool = _identities()
    person = item.country in pool
    surface = table["identity"] if person else table["country"]
    if not person:
        from refine.evaluate.reference_source import catalog

        pool = list(catalog()[0].countries)
    others = sorted(set(pool) - {item.country, surface})
    draw = random.Random(f"{seed}\x00{item.image}")
    shown = [item.country, surface, *draw.sample(others, min(3, len(others)))]
    shown = list(dict.fromkeys(shown))
    draw.shuffle(shown)
    return shown


def _identities() -> list[str]:
    from refine.evaluate.sos import person_cultures

    return person_cultures()


def draw_check(path: Path, text: str) -> None:
    """An attention check's image: the instruction, written large on a plain background."""
    import textwrap

    from PIL import Image, ImageDraw, ImageFont

    image = Image.new("RGB", (768, 512), (245, 245, 240))
    draw = ImageDraw.Draw(image)
    try:
        font = ImageFont.load_default(size=34)
    except TypeError:  # Pillow before 10.1
        font = ImageFont.load_default()
    y = 60
    for line in textwrap.wrap(text or "Attention check", 36):
        draw.text((40, y), line, fill=(20, 20, 20), font=font)
        y += 48
    path.parent.mkdir(parents=True, exist_ok=True)
    image.save(path)
