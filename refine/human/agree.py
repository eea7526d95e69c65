"""Which metric agrees with people: ratings (:mod:`refine.human.ratings`) joined to the
metrics stored for the same images (:mod:`refine.human.stored`; those of images with none
stored are scored by :mod:`refine.harness.tasks.score.missing`), correlations with
intervals, and the raters' own agreement as the ceiling.

``agree.json`` names its conventions (:data:`CONVENTIONS`); one written before them holds
CLIPScore as 100 x max(cos, 0), which :func:`read_agreement` reads as ``clipscore100``,
never as ``clipscore``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from metrics.catalog import BENCH_IMAGE, VARIANT_BOUND, names
from metrics.stats import CORRELATIONS, correlation_interval, correlation_p, krippendorff_alpha
from refine.human.ratings import QUESTIONS, Rating, latest_answers
from refine.human.stored import StoredMetrics, variant_keys
from refine.progress import Countdown
from refine.usage import package_versions, toolkit_version

FEW_IMAGES = 30  # below this many rated images, agree warns that its figures are rough
# compared unless --metrics says (CLIPScore, a baseline, costs no model call)
DEFAULT_METRICS = (*BENCH_IMAGE, *names("human"), "clipscore")
# how agree.json's figures are scaled, written into it: a file without them was written
# when its clipscore was 100 x max(cos, 0)
CONVENTIONS = {"clipscore": "2.5 x max(cos, 0) (Hessel et al., 2021)"}
# agree.json's layout: 1, every file written before the field (read as it was); 2, with the
# schema, the toolkit's version and the package versions that decide the numbers
SCHEMA = 2


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
    schema: int = SCHEMA
    toolkit: str = ""  # the cultural-refine version that wrote it ("" before schema 2)
    packages: dict[str, str] = field(default_factory=dict)
    # the models the compared metrics were made with -> the weights each resolved to
    models: dict[str, str] = field(default_factory=dict)

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
            "schema": self.schema,
            "toolkit": self.toolkit,
            "packages": self.packages,
            "models": self.models,
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
            schema=doc.get("schema", 1),
            toolkit=doc.get("toolkit", ""),
            packages=doc.get("packages", {}),
            models=doc.get("models", {}),
        )  # fmt: skip


def read_agreement(path: str | Path) -> Agreement:
    """An ``agree.json``. One written before :data:`CONVENTIONS` holds its CLIPScore as
    100 x max(cos, 0): its ``clipscore`` figures are read under ``clipscore100``, so they
    are never taken for Hessel's 2.5 x max(cos, 0). A ValueError names a file that is no
    agreement."""
    path = Path(path)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        if int(doc.get("schema", 1)) > SCHEMA:
            raise ValueError(
                f"layout version {doc['schema']}, newer than this toolkit reads ({SCHEMA}): "
                "upgrade cultural-refine"
            )
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
        toolkit=toolkit_version(),
        packages=package_versions(),
        models=dict(stored.models),
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
