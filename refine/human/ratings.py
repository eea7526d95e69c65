"""People's ratings of images, read from a ratings file or a study's answers.

A ratings file is CSV (a header row) or JSONL (one object a line), one rating a row:

* ``image`` (required): the image file, relative to the ratings file (or absolute);
* ``rater`` (required): who rated;
* ``alignment`` and/or ``faithfulness``: the CulturalFrames questions, whole numbers 1-5
  (image-prompt alignment; overall cultural faithfulness); at least one of them;
* ``expectations`` and ``unmet`` (optional): the statements shown and those the rater
  marked as not met (JSON lists, or ``;`` between them in CSV); their met share is the
  question ``expectations_met``;
* ``comment``, ``time``, ``image_sha256``, ``prompt``, ``activity``, ``country``
  (optional; the app's Rate view writes all of them).

A study's rows (:mod:`refine.human.study`) hold answers under a protocol instead.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from refine.io.files import file_sha256, json_value

QUESTIONS = ("alignment", "faithfulness", "expectations_met")
FIELDS = {
    "image",
    "rater",
    "alignment",
    "faithfulness",
    "expectations",
    "unmet",
    "comment",
    "time",
    "image_sha256",
    "prompt",
    "activity",
    "country",
    # a study's rows (refine.human.study): answers under a protocol
    "protocol",
    "kind",
    "answers",
    "reasons",
    "options",
    "passed",
    "language",
    # an answer brought from an annotation tool (refine.human.exchange): which tool, and
    # the seconds the rater spent on it as the tool measured them
    "source",
    "lead_time_s",
}


@dataclass
class Rating:
    image: Path
    sha256: str
    rater: str
    answers: dict[str, float]  # question -> value
    prompt: str | None = None
    activity: str | None = None
    country: str | None = None
    protocol: str | None = None  # the study's protocol (None: the quick questions' columns)
    choices: dict[str, str] = field(default_factory=dict)  # nominal answers (SoS's culture)
    rater_country: str | None = None  # from the rater's profile in the set, where given
    language: str | None = None  # the prompt's language (an SoS bank's image)


def _list(value: Any, where: str, name: str) -> list[str]:
    if value in (None, ""):
        return []
    if isinstance(value, str):
        try:
            got = json.loads(value) if value.lstrip().startswith("[") else value.split(";")
        except json.JSONDecodeError:
            got = value.split(";")
    else:
        got = value
    if not isinstance(got, list) or not all(isinstance(s, str) for s in got):
        raise ValueError(f"{where}: {name} must be a list of statements")
    return [" ".join(s.split()) for s in got if s.strip()]


def _score(value: Any, where: str, name: str) -> float | None:
    if value in (None, ""):
        return None
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{where}: {name} {value!r} is not a number") from None
    if v != int(v) or not 1 <= v <= 5:
        raise ValueError(f"{where}: {name} {value!r} is out of range (a whole number 1-5)")
    return v


def load_ratings(
    path: str | Path, exclude_flagged: bool = False, excluded: list[str] | None = None
) -> list[Rating]:
    """The ratings of a file (see the module docstring). Every problem is listed in one
    ValueError, one line each, naming the file, the line and what is wrong. A study's rows
    (under a protocol) give each scored question's score; attention checks and repeats
    are not ratings. ``exclude_flagged``: leave out raters the protocol's checks flag
    (their names added to ``excluded``)."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{path}: no such file")
    text = path.read_text(encoding="utf-8")
    rows: list[tuple[str, Any]] = []
    problems: list[str] = []
    if path.suffix.lower() == ".csv":
        reader = csv.DictReader(text.splitlines())
        header = set(reader.fieldnames or [])
        for need in ("image", "rater"):
            if need not in header:
                problems.append(f"{path}: missing column {need!r} (columns: image, rater, ...)")
        if not header & {"alignment", "faithfulness"}:
            problems.append(f"{path}: missing column 'alignment' or 'faithfulness'")
        if problems:
            raise ValueError("\n".join(problems))
        rows = [(f"{path}:{k}", r) for k, r in enumerate(reader, start=2)]
    else:
        for k, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                try:
                    rows.append((f"{path}:{k}", json_value(line)))
                except json.JSONDecodeError as err:
                    problems.append(f"{path}:{k}: not JSON ({err.msg})")
    out: list[Rating] = []
    hashed: dict[Path, str] = {}
    studies = _study_protocols(path, rows)
    countries = _rater_countries(path, studies)
    if exclude_flagged:
        from refine.human.study import flags_of

        for name, protocol in studies.items():
            mine = [r for _, r in rows if isinstance(r, dict) and r.get("protocol") == name]
            flagged = sorted(w for w, f in flags_of(mine, protocol).items() if f["flagged"])
            if excluded is not None:
                excluded += flagged
            rows = [
                (w, r)
                for w, r in rows
                if not (
                    isinstance(r, dict) and r.get("protocol") == name and r.get("rater") in flagged
                )
            ]
    for where, row in rows:
        try:
            if not isinstance(row, dict):
                raise ValueError(f"{where}: each rating is an object")
            if row.get("protocol") and row.get("kind", "rate") != "rate":
                continue  # an attention check or a repeat: how a rater attends, not a rating
            unknown = sorted(set(k for k in row if k) - FIELDS)
            if unknown:
                raise ValueError(f"{where}: unknown column {unknown[0]!r}")
            for need in ("image", "rater"):
                if not str(row.get(need) or "").strip():
                    raise ValueError(f"{where}: no {need}")
            answers = {}
            if row.get("protocol"):
                answers, shown, unmet = _study_answers(row, studies, where)
            else:
                for q in ("alignment", "faithfulness"):
                    v = _score(row.get(q), where, q)
                    if v is not None:
                        answers[q] = v
                shown = _list(row.get("expectations"), where, "expectations")
                unmet = _list(row.get("unmet"), where, "unmet")
            if unmet and not shown:
                raise ValueError(f"{where}: unmet expectations need the expectations shown")
            stray = [s for s in unmet if s not in shown]
            if stray:
                raise ValueError(f"{where}: unmet {stray[0]!r} is not among the expectations")
            if shown:
                answers["expectations_met"] = 1.0 - len(unmet) / len(shown)
            if not answers and not row.get("protocol"):
                raise ValueError(f"{where}: no alignment or faithfulness rating")
            choices = row.pop("_choices", {}) if row.get("protocol") else {}
            if not answers and not choices:
                continue
            image = Path(str(row["image"]))
            image = image if image.is_absolute() else path.parent / image
            if not image.is_file():
                raise ValueError(f"{where}: unknown image {row['image']!r} (no such file)")
            # each file read once (CulturalFrames: about 10,400 ratings of 3,637 images)
            sha = hashed.get(image) or hashed.setdefault(image, file_sha256(image))
            given = str(row.get("image_sha256") or "")
            if given and given != sha:
                raise ValueError(f"{where}: {row['image']} has changed since it was rated")
            out.append(
                Rating(
                    image.resolve(),
                    sha,
                    str(row["rater"]).strip(),
                    answers,
                    row.get("prompt") or None,
                    row.get("activity") or None,
                    row.get("country") or None,
                    row.get("protocol") or None,
                    choices,
                    countries.get(str(row["rater"]).strip()),
                    row.get("language") or None,
                )
            )
        except ValueError as err:
            problems.append(str(err))
    if problems:
        raise ValueError("\n".join(problems))
    if not out:
        raise ValueError(f"{path}: no ratings")
    return out


def _study_protocols(path: Path, rows: list[tuple[str, Any]]) -> dict[str, Any]:
    """The protocols a file's study rows name: the set's own (``.study.json`` beside the
    file) or a bundled one of that name."""
    from refine.human.protocols import BUNDLED, Protocol, load_protocol

    names = {str(r["protocol"]) for _, r in rows if isinstance(r, dict) and r.get("protocol")}
    out: dict[str, Any] = {}
    kept = path.parent / ".study.json"
    if names and kept.is_file():
        try:
            own = Protocol.model_validate(json.loads(kept.read_text(encoding="utf-8"))["protocol"])
            out[own.name] = own
        except (ValueError, KeyError, TypeError):
            pass
    for name in sorted(names - set(out)):
        if name not in BUNDLED:
            raise ValueError(
                f"{path}: ratings under the protocol {name!r}, which is neither bundled nor "
                f"the set's own ({kept.name} beside the file)"
            )
        out[name] = load_protocol(name)
    return out


def _rater_countries(path: Path, studies: dict[str, Any]) -> dict[str, str]:
    """Each rater's country, from the profiles kept beside the ratings file (the field the
    set's protocol names: where they were raised, by default)."""
    kept = path.parent / ".profiles.json"
    if not kept.is_file():
        return {}
    try:
        doc = json.loads(kept.read_text(encoding="utf-8"))
    except ValueError:
        return {}
    field_name = next((p.rater_country for p in studies.values()), "raised")
    return {
        str(r): str(p[field_name])
        for r, p in (doc.items() if isinstance(doc, dict) else [])
        if isinstance(p, dict) and p.get(field_name)
    }


def _study_answers(
    row: dict[str, Any], studies: dict[str, Any], where: str
) -> tuple[dict[str, float], list[str], list[str]]:
    """A study row's scores by question id, and the expectations shown and unmet (from a
    checkbox question whose choices are the image's expectations)."""
    protocol = studies[str(row["protocol"])]
    given = row.get("answers")
    if not isinstance(given, dict):
        raise ValueError(f"{where}: answers must be an object")
    unknown = sorted(set(given) - {q.id for q in protocol.questions})
    if unknown:
        raise ValueError(f"{where}: {unknown[0]!r} is not a question of {protocol.name}")
    answers = protocol.scores(given)
    row["_choices"] = {
        q.id: str(given[q.id])
        for q in protocol.questions
        if q.kind == "single" and not q.scored() and q.id in given
    }
    shown: list[str] = []
    unmet: list[str] = []
    options = row.get("options") if isinstance(row.get("options"), dict) else {}
    for q in protocol.questions:
        if q.options_from == "expectations":
            shown = _list(options.get(q.id), where, "expectations")
            unmet = _list(given.get(q.id), where, "unmet")
    return answers, shown, unmet


# -- metrics stored for images ---------------------------------------------------------


def latest_answers(
    ratings: Sequence[Rating],
) -> tuple[dict[Path, dict[str, dict[str, float]]], dict[Path, Rating], int]:
    """Per rated image file: question -> rater -> that rater's latest answer (a later row
    of the file replaces an earlier one); the image's first rating; how many answers
    were replaced."""
    answers: dict[Path, dict[str, dict[str, float]]] = {}
    first: dict[Path, Rating] = {}
    replaced = 0
    for r in ratings:
        first.setdefault(r.image, r)
        for q, v in r.answers.items():
            by_rater = answers.setdefault(r.image, {}).setdefault(q, {})
            replaced += r.rater in by_rater
            by_rater[r.rater] = v
    return answers, first, replaced
