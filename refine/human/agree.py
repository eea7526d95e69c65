"""Which metric agrees with people: human ratings joined to the metrics stored for the same
images, correlations with intervals, and the raters' own agreement as the ceiling.

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

Metrics are found by image content (SHA-256), so copied or renamed images still join: in
bench folders (``cells.jsonl``), run folders (``run.json``; every candidate's scores, the
chosen image's expectations met share and CAIRE score) and folders of those. With
``compute``, images without stored metrics are observed and scored by the profile (the
row's activity and country); ``clipscore`` (Hessel's 2.5 x max(cos, 0)) is always
computed from the row's prompt with the profile's image embedder, a CLIP.

``agree.json`` names its conventions (:data:`CONVENTIONS`); one written before them holds
CLIPScore as 100 x max(cos, 0), which :func:`read_agreement` reads as ``clipscore100``,
never as ``clipscore``.
"""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from metrics.catalog import (
    BENCH_EXPECTATIONS,
    BENCH_IMAGE,
    VARIANT_BOUND,
    image_extras,
    names,
)
from metrics.expectations import met_share
from metrics.stats import CORRELATIONS, correlation_interval, correlation_p, krippendorff_alpha
from refine.backends.selection import Backends
from refine.harness.tasks.bench.cells import BenchStore
from refine.io.files import file_sha256, json_value
from refine.profiles import load_profile
from refine.progress import Countdown
from refine.records import variant_name

QUESTIONS = ("alignment", "faithfulness", "expectations_met")
FEW_IMAGES = 30  # below this many rated images, agree warns that its figures are rough
# compared unless --metrics says (CLIPScore, a baseline, costs no model call)
DEFAULT_METRICS = (*BENCH_IMAGE, *names("human"), "clipscore")
# how agree.json's figures are scaled, written into it: a file without them was written
# when its clipscore was 100 x max(cos, 0)
CONVENTIONS = {"clipscore": "2.5 x max(cos, 0) (Hessel et al., 2021)"}
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


@dataclass
class Stored:
    """The metrics stored for one image of a bench or run folder."""

    file: Path
    activity: str | None
    country: str | None
    values: dict[str, float]
    generator: str | None = None
    category: str | None = None


class StoredMetrics:
    """Metrics stored for images, found by content (SHA-256). Images with the same bytes
    stay apart (two prompts can give one picture with different references and scores);
    ``find`` says which one a rating means, or that it cannot tell."""

    def __init__(self) -> None:
        self.by_sha: dict[str, list[Stored]] = {}

    def add(
        self,
        image: Path,
        activity: Any,
        country: Any,
        values: dict[str, Any],
        generator: Any = None,
        category: Any = None,
    ) -> None:
        if not image.is_file():
            return
        got = {k: float(v) for k, v in values.items() if v is not None}
        entries = self.by_sha.setdefault(file_sha256(image), [])
        here = image.resolve()
        for e in entries:  # the same file seen twice (a run inside a scanned folder)
            if e.file == here:
                e.values.update(got)
                return
        entries.append(
            Stored(
                here, activity or None, country or None, got, generator or None, category or None
            )
        )

    def meta(self, rating: Rating) -> Stored | None:
        """The stored image a rating means, where its bytes and its activity and country
        pick one (its generator and category)."""
        entries = self.by_sha.get(rating.sha256, [])
        same_file = [e for e in entries if e.file == rating.image]
        entries = same_file or entries
        for attr in ("activity", "country"):
            wanted = getattr(rating, attr)
            if wanted and len(entries) > 1:
                entries = [e for e in entries if _same(getattr(e, attr), wanted)] or entries
        return entries[0] if len(entries) == 1 else None

    def find(self, rating: Rating) -> tuple[dict[str, float] | None, bool]:
        """The metrics of the rated image and whether it was ambiguous: (None, False) when
        no stored image has its bytes; (None, True) when several do, with different
        metrics, and neither the file itself nor the rating's activity and country pick
        one."""
        entries = self.by_sha.get(rating.sha256, [])
        same_file = [e for e in entries if e.file == rating.image]
        if same_file:
            entries = same_file
        for attr in ("activity", "country"):
            wanted = getattr(rating, attr)
            if wanted and len(entries) > 1:
                entries = [e for e in entries if _same(getattr(e, attr), wanted)] or entries
        if not entries:
            return None, False
        if any(e.values != entries[0].values for e in entries[1:]):
            return None, True
        return entries[0].values, False

    def put(self, sha: str, values: dict[str, float], image: Path) -> None:
        """Metrics computed for a rated image (``compute_missing``)."""
        entries = self.by_sha.setdefault(sha, [])
        if not entries:
            entries.append(Stored(image, None, None, {}))
        for e in entries:
            e.values.update(values)


def with_variant(values: dict[str, Any], variant: str | None) -> dict[str, Any]:
    """``values`` with each variant-bound metric under its variant's key
    (``exag@exag:mllm``); unchanged where the variant is not known."""
    if variant is None:
        return values
    out = dict(values)
    for m in VARIANT_BOUND:
        if m in out:
            out[f"{m}@{variant}"] = out.pop(m)
    return out


def variant_keys(m: str, found: dict[Path, dict[str, float]]) -> list[tuple[str, str | None]]:
    """(stored key, variant) for metric ``m``: ``m`` itself, and for a variant-bound metric
    each ``m@variant`` any image has."""
    keys = {k for values in found.values() for k in values if k.startswith(f"{m}@")}
    out: list[tuple[str, str | None]] = [(m, None)]
    out += [(k, k.split("@", 1)[1]) for k in sorted(keys)]
    return out


def _same(a: str | None, b: str) -> bool:
    return a is not None and a.casefold().strip() == b.casefold().strip()


def stored_metrics(sources: Sequence[str | Path]) -> StoredMetrics:
    """Metrics stored for images in bench folders, run folders and folders of either
    (one level down)."""
    found = StoredMetrics()
    for source in sources:
        folder = Path(source)
        if not folder.is_dir():
            raise ValueError(f"{folder}: no such folder")
        if not _collect(folder, found):
            subs = [p for p in sorted(folder.iterdir()) if p.is_dir()]
            if not any([_collect(p, found) for p in subs]):
                raise ValueError(f"{folder}: no bench (cells.jsonl) or run (run.json) inside")
    return found


def _collect(folder: Path, found: StoredMetrics) -> bool:
    if (folder / "cells.jsonl").is_file():
        for cell in BenchStore(folder).records():
            for im in cell["images"]:
                # read per image from folders
                stored = (*BENCH_IMAGE, *image_extras(), *BENCH_EXPECTATIONS)
                values = {m: im.get(m) for m in stored}
                checks = im.get("expectations") or []
                if checks:
                    values["expectations"] = met_share(c["met"] for c in checks)
                values = with_variant(values, variant_name(im.get("exag_variant")))
                found.add(
                    folder / im["file"], cell.get("activity"), cell.get("country"), values,
                    cell.get("generator"), cell.get("category"),
                )  # fmt: skip
        return True
    if (folder / "run.json").is_file():
        from refine.io.store import RunStore

        run = RunStore(folder).load()
        for r in run.rounds:
            for j, c in enumerate(r.candidates):
                values: dict[str, Any] = {
                    m: c.scores.value(m) for m in (*BENCH_IMAGE, *image_extras())
                }
                if j == r.chosen and r.expectations and r.expectations.checks:
                    checks = r.expectations.checks
                    values["expectations"] = met_share(x.met for x in checks)
                    values.update({m: getattr(r.expectations, m) for m in BENCH_EXPECTATIONS})
                if j == r.chosen and r.caire:
                    values["caire"] = r.caire.labels[0].score
                values = with_variant(values, c.scores.variants.get("exag"))
                found.add(folder / c.image, run.spec.activity, run.spec.country, values)
        return True
    return False


# -- agreement -------------------------------------------------------------------------


@dataclass
class Agreement:
    images: int
    raters: list[str]
    alpha: dict[str, float | None]  # interval level
    table: dict[str, dict[str, dict[str, Any]]]  # metric -> question -> figures
    points: dict[str, dict[str, list[tuple[float, float]]]] = field(default_factory=dict)
    missing: dict[str, int] = field(default_factory=dict)  # metric -> images without it
    computed: int = 0
    alpha_ordinal: dict[str, float | None] = field(default_factory=dict)
    replaced: int = 0  # answers replaced by the same rater's later answer to the image
    identical: list[list[str]] = field(default_factory=list)  # rated files of equal bytes
    ambiguous: list[str] = field(default_factory=list)  # rated files matching several
    excluded: list[str] = field(default_factory=list)  # raters the study's checks flagged
    # refine.human.groups: per group (``by``), the raters' kappas, Fleiss' kappa of nominal
    # answers and their majority, the human-human ceiling, paired differences between
    # metrics' correlations, the metric-metric matrix
    by: dict[str, Any] = field(default_factory=dict)
    kappa: dict[str, Any] = field(default_factory=dict)
    fleiss: dict[str, Any] = field(default_factory=dict)
    ceiling: dict[str, Any] = field(default_factory=dict)
    differences: list[dict[str, Any]] = field(default_factory=list)
    matrix: dict[str, Any] = field(default_factory=dict)
    # what the extras are computed from (not written): answers per image, question and
    # rater, and each metric's value per image, by its shown name
    answers: dict[Path, dict[str, dict[str, float]]] = field(default_factory=dict, repr=False)
    values: dict[str, dict[Path, float]] = field(default_factory=dict, repr=False)

    def notes(self) -> list[str]:
        """What was done to the ratings before counting, one line each."""
        out = []
        if self.excluded:
            out.append(
                f"left out, flagged by the study's attention checks or repeated items: "
                f"{', '.join(self.excluded)}"
            )
        if self.replaced:
            out.append(
                f"{self.replaced} answers replaced by the same rater's later answer to the "
                "same image (each rater counts once per image)"
            )
        if self.images < FEW_IMAGES:
            out.append(
                f"only {self.images} images rated: below {FEW_IMAGES}, the correlations and "
                "alpha are rough (their intervals are wide); rate more images before "
                "drawing conclusions"
            )
        for group in self.identical:
            out.append(f"identical images kept apart: {', '.join(group)}")
        if self.ambiguous:
            out.append(
                f"left out, their bytes match stored images with different metrics "
                f"(add activity and country columns to tell them apart): "
                f"{', '.join(self.ambiguous)}"
            )
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "conventions": CONVENTIONS,
            "ranking": ranking(self.table),
            "images": self.images,
            "raters": self.raters,
            "alpha": self.alpha,
            "alpha_ordinal": self.alpha_ordinal,
            "metrics": self.table,
            "missing": self.missing,
            "computed": self.computed,
            "replaced": self.replaced,
            "identical": self.identical,
            "ambiguous": self.ambiguous,
            "excluded": self.excluded,
            "by": self.by,
            "kappa": self.kappa,
            "fleiss": self.fleiss,
            "ceiling": self.ceiling,
            "differences": self.differences,
            "matrix": self.matrix,
            "points": {m: {q: [list(p) for p in ps] for q, ps in by_q.items()}
                       for m, by_q in self.points.items()},
        }  # fmt: skip

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> Agreement:
        """An agreement read back from its ``to_dict`` (see :func:`read_agreement`)."""
        return cls(
            images=doc["images"],
            raters=doc["raters"],
            alpha=doc["alpha"],
            table=doc["metrics"],
            points={m: {q: [tuple(p) for p in ps] for q, ps in by_q.items()}
                    for m, by_q in doc.get("points", {}).items()},
            missing=doc.get("missing", {}),
            computed=doc.get("computed", 0),
            alpha_ordinal=doc.get("alpha_ordinal", {}),
            replaced=doc.get("replaced", 0),
            identical=doc.get("identical", []),
            ambiguous=doc.get("ambiguous", []),
            excluded=doc.get("excluded", []),
            by=doc.get("by", {}),
            kappa=doc.get("kappa", {}),
            fleiss=doc.get("fleiss", {}),
            ceiling=doc.get("ceiling", {}),
            differences=doc.get("differences", []),
            matrix=doc.get("matrix", {}),
        )  # fmt: skip


def read_agreement(path: str | Path) -> Agreement:
    """An ``agree.json``. One written before :data:`CONVENTIONS` holds its CLIPScore as
    100 x max(cos, 0): its ``clipscore`` figures are read under ``clipscore100``, so they
    are never taken for Hessel's 2.5 x max(cos, 0). A ValueError names a file that is no
    agreement."""
    path = Path(path)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        if "conventions" not in doc:
            for key in ("metrics", "missing", "points"):
                if "clipscore" in doc.get(key, {}):
                    doc[key]["clipscore100"] = doc[key].pop("clipscore")
        return Agreement.from_dict(doc)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
        raise ValueError(f"{path}: not an agree.json ({err})") from err


def ranking(table: dict[str, dict[str, dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    """Per question, every metric ranked by how well it agrees with people: its Spearman
    correlation with the raters' mean, negated for a metric where lower is better (HAL,
    EXAG: agreeing shows as a negative correlation), its interval with it; strongest
    first, metrics without a correlation last. A metric's variant (``exag@exag:ita``)
    keeps its metric's direction."""
    from metrics.catalog import CATALOG

    out: dict[str, list[dict[str, Any]]] = {}
    for name, by_q in table.items():
        m = CATALOG.get(name.split("@", 1)[0])
        sign = -1.0 if m is not None and m.better == "lower" else 1.0
        for q, row in by_q.items():
            r, iv = row.get("spearman"), row.get("spearman_interval")
            out.setdefault(q, []).append(
                {
                    "metric": name,
                    "agreement": None if r is None else sign * r,
                    "interval": None if not iv else sorted([sign * iv[0], sign * iv[1]]),
                    "n": row.get("n", 0),
                }
            )
    for rows in out.values():
        rows.sort(key=lambda x: (x["agreement"] is None, -(x["agreement"] or 0.0)))
        for k, row in enumerate(rows, 1):
            row["rank"] = k
    return out


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


def agreement(
    ratings: Sequence[Rating],
    stored: StoredMetrics,
    metrics: Sequence[str] = DEFAULT_METRICS,
    seed: int = 0,
    reps: int = 1000,
    on_progress: Callable[[str], None] | None = None,
) -> Agreement:
    """Per metric and question: Spearman, Kendall tau-b and Pearson correlations of the
    metric with the raters' mean answer per image (each rater's latest answer), each with
    its 95% bootstrap interval (``seed``); Krippendorff's alpha per question over images
    x raters, at the interval and the ordinal level. Each rated file is one image, even
    when another has the same bytes (listed in ``identical``); a file whose bytes match
    stored images with different metrics that its activity and country cannot tell apart
    is left out (``ambiguous``)."""

    answers, first, replaced = latest_answers(ratings)
    images = sorted(answers, key=str)
    asked = list(dict.fromkeys(q for i in images for q in answers[i]))
    asked = [q for q in QUESTIONS if q in asked] + [q for q in asked if q not in QUESTIONS]
    units = {q: [list(answers[i].get(q, {}).values()) for i in images] for q in asked}
    alpha = {q: krippendorff_alpha(u, "interval") for q, u in units.items()}
    ordinal = {q: krippendorff_alpha(u, "ordinal") for q, u in units.items()}
    found: dict[Path, dict[str, float]] = {}
    ambiguous: list[str] = []
    for i in images:
        values, unclear = stored.find(first[i])
        if values is not None:
            found[i] = values
        elif unclear:
            ambiguous.append(i.name)
    table: dict[str, dict[str, dict[str, Any]]] = {}
    points: dict[str, dict[str, list[tuple[float, float]]]] = {}
    missing: dict[str, int] = {}
    emit = on_progress or (lambda line: None)
    # each metric and question: three correlations with their bootstrap intervals
    plan = _metric_keys(metrics, found)
    for m in metrics:
        keys = [k for mm, k, _, _ in plan if mm == m]
        missing[m] = sum(not any(k in found.get(i, {}) for k in keys) for i in images)
    countdown = Countdown(len(plan) * len(alpha))
    values: dict[str, dict[Path, float]] = {}
    for _, key, shown_as, variant in plan:
        have = [i for i in images if key in found.get(i, {})]
        if not have:
            countdown.total -= len(alpha)
            continue
        for q in alpha:
            left = countdown.left()
            where = f"agreement: {shown_as} / {q} ({countdown.done + 1} of {countdown.total})"
            emit(where + (f", {left}" if left else ""))
            countdown.tick()
            pairs = [
                (found[i][key], sum(answers[i][q].values()) / len(answers[i][q]))
                for i in have
                if answers[i].get(q)
            ]
            if len(pairs) < 2:
                continue
            x = [p[0] for p in pairs]
            y = [p[1] for p in pairs]
            row: dict[str, Any] = {"n": len(pairs)}
            if variant is not None:
                row["variant"] = variant
            for name, fn in CORRELATIONS.items():
                row[name] = fn(x, y)
                row[f"{name}_interval"] = correlation_interval(x, y, name, seed=seed, reps=reps)
                row[f"{name}_p"] = correlation_p(x, y, name)
            table.setdefault(shown_as, {})[q] = row
            points.setdefault(shown_as, {})[q] = pairs
        values[shown_as] = {i: found[i][key] for i in have}
    by_bytes: dict[str, list[str]] = {}
    # named from the folder they share (two generators' folders hold the same names)
    root = Path(os.path.commonpath([str(i.parent) for i in images])) if images else Path()
    for i in images:
        by_bytes.setdefault(first[i].sha256, []).append(i.relative_to(root).as_posix())
    identical = [names for names in by_bytes.values() if len(names) > 1]
    raters = sorted({r.rater for r in ratings})
    return Agreement(
        len(images),
        raters,
        alpha,
        table,
        points,
        missing,
        alpha_ordinal=ordinal,
        replaced=replaced,
        identical=identical,
        ambiguous=ambiguous,
        answers=answers,
        values=values,
    )


def _metric_keys(
    metrics: Sequence[str], found: dict[Path, dict[str, float]]
) -> list[tuple[str, str, str, str | None]]:
    """(metric, stored key, name in the table, variant) for each metric compared: a
    variant-bound metric once per EXAG variant its images were scored by, named plainly
    where there is one (``exag``) and with its variant where there are several
    (``exag [exag:ita]``); its images without a known variant (records older than the
    variants) count on their own."""
    out = []
    for m in metrics:
        keys = variant_keys(m, found) if m in VARIANT_BOUND else [(m, None)]
        have = [(k, v) for k, v in keys if any(k in values for values in found.values())]
        if len(have) <= 1:
            k, v = have[0] if have else (m, None)
            out.append((m, k, m, v))
            continue
        out += [(m, k, f"{m} [{v or 'no variant'}]", v) for k, v in have]
    return out


def compute_missing(
    ratings: Sequence[Rating],
    found: StoredMetrics,
    metrics: Sequence[str],
    profile: str = "gemini",
    backends: dict[str, str] | None = None,
    backend_options: dict[str, dict[str, Any]] | None = None,
    activity: str | None = None,
    country: str | None = None,
    on_progress: Callable[[str], None] | None = None,
) -> int:
    """Score the rated images that have no stored FAITH (the row's activity and country,
    else the ones given) and the CLIPScore of every image that has none stored, from its
    prompt (else the generation prompt of its activity and country); returns how many
    images were scored. A ValueError names an image that cannot be scored and why."""
    emit = on_progress or (lambda line: None)
    from PIL import Image

    # what every scored image has: AHEaD's, the quality readings, the catalog's own
    scored_metrics = (*BENCH_IMAGE, *image_extras())
    need_scores = [m for m in metrics if m in scored_metrics]
    todo: dict[str, Rating] = {}
    for r in ratings:
        if need_scores and r.sha256 not in found.by_sha:
            todo.setdefault(r.sha256, r)
    clip = "clipscore" in metrics
    if not todo and not clip:
        return 0
    models = Backends(load_profile(profile), backends or {}, backend_options)
    scored = 0
    if todo:
        from metrics.baselines import BASELINES
        from refine import settings
        from refine.evaluate.assess import Assessor

        # the baselines asked for are scored with them (CLIPScore below, from each prompt)
        compare = [m for m in metrics if m in BASELINES and m != "clipscore"]
        assessor = Assessor(models, compare=compare)
        tau, _ = models.tau()
        countdown = Countdown(len(todo))
        for sha, r in todo.items():
            act, ctry = r.activity or activity, r.country or country
            if not act or not ctry:
                raise ValueError(
                    f"{r.image.name}: no stored metrics; give --activity and --country (or "
                    "the activity and country columns) to score it, or --source the folder "
                    "it came from"
                )
            refs = settings.references(act, ctry)
            with Image.open(r.image) as im:
                _, scores, _, _ = assessor.assess(im.convert("RGB"), refs, tau=tau)
            values = {m: scores.value(m) for m in (*scored_metrics, *compare)}
            values = with_variant(values, scores.variants.get("exag"))
            found.put(sha, {m: float(v) for m, v in values.items() if v is not None}, r.image)
            scored += 1
            left = countdown.tick()
            emit(f"scored {scored} of {len(todo)} images" + (f", {left}" if left else ""))
    if clip:
        from metrics.baselines import clipscore

        with models.using("image_embedder") as embedder:
            if not callable(getattr(embedder, "logit_scale", None)):
                raise ValueError(
                    f"CLIPScore needs a CLIP image embedder (clip:ARCH/TAG or hfclip:ID); "
                    f"{models.names.get('image_embedder')} is not one (--backend "
                    "image_embedder=clip:ViT-B-32/openai, or leave clipscore out of --metrics)"
                )
            from refine.assets import prompt_template

            generate = prompt_template("generate").strip()
            for sha, r in {r.sha256: r for r in ratings}.items():
                entries = found.by_sha.get(sha, [])
                if entries and all("clipscore" in e.values for e in entries):
                    continue  # stored with the image (a bench's, for its generation prompt)
                act, ctry = r.activity or activity, r.country or country
                prompt = r.prompt or (
                    generate.format(activity=act, country=ctry) if act and ctry else None
                )
                if prompt is None:
                    continue
                with Image.open(r.image) as im:
                    image = embedder.encode_images([im.convert("RGB")])
                cos = float((image * embedder.encode_texts([prompt])).sum())
                found.put(sha, {"clipscore": clipscore(cos)}, r.image)
    return scored
