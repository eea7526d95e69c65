"""A rating study taken to an annotation tool and its answers brought back
(``refine rate export`` and ``refine rate import``): what both tools' formats share.

Going out, each image of the set is an :class:`Outgoing`: the image, what it shows
(prompt, activity, country, language), its SHA-256 (how its answers find it again), each
question's text filled for it, the choices of the questions whose choices come from the
item, and the judge's readings where the judge answered the same question (a run's
expectation checks answer ``unmet``: the statements the judge found unmet), each named by
its model.

Coming back, each answer is a row of ``ratings.jsonl`` (the Rate view's) with the rater
and the time the tool gives, joined into the set by :class:`refine.human.packs.Joining`:
checked against the set's protocol, all or nothing, an answer the set holds already
skipped, a different one reported and never written over. Attention checks and repeats
are the Rate view's own checks; a tool's answers are of kind ``rate``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from refine.human.rating import Item
from refine.human.study import Study
from refine.io.files import file_sha256

MAX_IMPORT_MB = 500  # a tool's export file


@dataclass(frozen=True)
class Reading:
    """The judge's answer to one of the protocol's questions, for one image."""

    question: str
    value: Any  # as the protocol keeps it: a value, or a list of values
    model: str
    score: float | None = None


@dataclass
class Outgoing:
    item: Item
    sha256: str
    texts: dict[str, str]  # question id -> its text for this image
    options: dict[str, list[str]]  # questions whose choices come from the item
    readings: list[Reading] = field(default_factory=list)

    def meta(self) -> dict[str, Any]:
        it = self.item
        return {
            "image": it.image,
            "image_sha256": self.sha256,
            "prompt": it.prompt,
            "activity": it.activity,
            "country": it.country,
            "language": it.language,
        }


def filled(text: str, item: Item) -> str:
    """A question's text for an image, as the Rate view fills it (a tool does not know
    the rater's country: "your country")."""
    fields = {
        "activity": item.activity or "the activity",
        "country": item.country or "the country",
        "prompt": item.prompt or "the prompt",
        "rater_country": "your country",
    }
    for key, value in fields.items():
        text = text.replace("{" + key + "}", value)
    return text


def outgoing(study: Study) -> list[Outgoing]:
    """Every image of the study's set, as it goes to a tool."""
    readings = _run_readings(study)
    out = []
    for it in study.set.items:
        texts = {q.id: filled(q.text, it) for q in study.protocol.questions}
        out.append(
            Outgoing(
                it,
                file_sha256(study.folder / it.image),
                texts,
                study.item_options(it),
                readings.get(it.image, []),
            )
        )
    return out


def _run_readings(study: Study) -> dict[str, list[Reading]]:
    """The judge's readings of a run's images (a set that is a run, or holds runs), by the
    image's path in the set: the statements its expectation checks found unmet, for a
    protocol question whose choices are the item's expectations."""
    asks = [q.id for q in study.protocol.questions if q.options_from == "expectations"]
    if not asks:
        return {}
    from refine.io.store import RunStore

    out: dict[str, list[Reading]] = {}
    for record in sorted(study.folder.rglob("run.json")):
        if record.is_symlink():
            continue
        try:
            run = RunStore(record.parent).load()
        except ValueError:
            continue
        for r in run.rounds:
            if r.expectations is None or not r.expectations.checks:
                continue
            rel = (record.parent / r.best.image).relative_to(study.folder).as_posix()
            if not r.expectations.judge:  # a reading is named by its model, or not given
                continue
            unmet = [c.statement for c in r.expectations.checks if not c.met]
            out[rel] = [Reading(q, unmet, r.expectations.judge) for q in asks]
    return out


def answer_row(
    study: Study,
    image: str,
    rater: str,
    answers: dict[str, Any],
    reasons: dict[str, str],
    when: str,
    options: dict[str, list[str]],
    source: str,
) -> dict[str, Any]:
    """One answer as ``ratings.jsonl`` keeps it, for :class:`Joining` to check and join;
    ``image`` is the set's path of the image answered."""
    it = study.set.item(image)
    return {
        "image": image,
        "rater": rater,
        "protocol": study.protocol.name,
        "kind": "rate",
        "answers": answers,
        "reasons": reasons,
        "options": options,
        "time": when,
        "image_sha256": file_sha256(study.folder / image),
        "prompt": it.prompt,
        "activity": it.activity,
        "country": it.country,
        "language": it.language,
        "source": source,
    }


def read_export(path: str | Path) -> Any:
    """A tool's export file, read as JSON; a ValueError naming the file when it is none."""
    path = Path(path)
    if path.is_symlink() or not path.is_file():
        raise ValueError(f"{path}: no such file")
    if path.stat().st_size > MAX_IMPORT_MB * 1e6:
        raise ValueError(f"{path}: over {MAX_IMPORT_MB} MB, not a tool's export")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, RecursionError) as err:
        raise ValueError(f"{path}: not JSON ({err})") from None
