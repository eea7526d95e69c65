"""A dataset's own images scored, in place of generated ones: CulturalFrames' 3,637
images (``refine data fetch culturalframes``) by the metrics its Fig. 6 sets against its
raters.

Each image is scored for its own prompt (:class:`refine.evaluate.baselines.PromptedPack`):
the baselines asked (CLIPScore, TIFA, HPS v2, VQAScore, VIEScore, ...) read that prompt,
not the toolkit's generation prompt of an activity and country. Where the reference
source holds references for the prompt in its country (``refine refs build PROMPT
--country C`` writes them), the image is observed and scored by AHEaD too (FAITH, ALIGN,
HAL, EXAG); without them those stay unscored, and the count says how many images had
references. The scores go to ``scores.jsonl`` in the output folder, a row an image as it
is scored, so a run stopped half-way goes on where it stopped; rows scored by other models,
baselines or tau are scored again.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from refine.io.files import json_lines

SCORES = "scores.jsonl"
FIELDS = ("id", "prompt", "country", "model", "image", "image_sha256")


@dataclass
class Scored:
    """The rows of ``scores.jsonl`` (one an image), how many were scored now, and how many
    had references (and so AHEaD's scores)."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    now: int = 0
    with_references: int = 0


def read_prompts(folder: Path) -> list[dict[str, Any]]:
    """``prompts.jsonl`` of a fetched dataset; a ValueError names a row without a field."""
    path = folder / "prompts.jsonl"
    rows = []
    for k, line in enumerate(json_lines(path.read_text(encoding="utf-8")), 1):
        if not line.strip():
            continue
        row = json.loads(line)
        lacking = [f for f in FIELDS if not isinstance(row, dict) or not row.get(f)]
        if lacking:
            raise ValueError(f"{path}:{k}: no {lacking[0]}; fetch the dataset again")
        rows.append(row)
    return rows


def score_images(
    rows: Sequence[dict[str, Any]],
    folder: Path,
    out: Path,
    backends: Any,
    compare: Sequence[str],
    tau: float,
    baseline_models: Any = None,
    emit: Callable[[str], None] | None = None,
) -> Scored:
    """Each row's image (under ``folder``) scored by ``compare`` for its own prompt, and
    by AHEaD where references for it are found; kept in ``out/scores.jsonl``."""
    from PIL import Image

    from refine.evaluate.assess import scoring_assessor
    from refine.evaluate.reference_source import ReferenceNotFound, ReferenceSource
    from refine.io.files import append_jsonl
    from refine.progress import Countdown

    emit = emit or (lambda line: None)
    scoring = {
        "scorer": {r: n for r, n in backends.names.items() if r in _ROLES},
        "baselines": list(compare),
        "baseline_models": {k: str(v) for k, v in sorted((baseline_models or {}).items())},
        "tau": tau,
    }
    store = out / SCORES
    kept: dict[str, dict[str, Any]] = {}
    if store.is_file():
        for line in json_lines(store.read_text(encoding="utf-8")):
            try:
                row = json.loads(line) if line.strip() else None
            except json.JSONDecodeError:  # a line cut by a kill: that image is scored again
                continue
            if isinstance(row, dict) and row.get("scoring") == scoring:
                kept[row["id"]] = row
    done = Scored()
    assessor = scoring_assessor(backends, compare, baseline_models)
    source = ReferenceSource.default()
    todo = [r for r in rows if r["id"] not in kept]
    countdown = Countdown(len(todo))
    for row in rows:
        if row["id"] in kept:
            done.rows.append(kept[row["id"]])
            done.with_references += bool(kept[row["id"]]["references"])
            continue
        try:
            refs = source.find(row["prompt"], row["country"]).pack
        except ReferenceNotFound:
            refs = None
        with Image.open(folder / row["image"]) as im:
            image = im.convert("RGB")
        values = score_image(assessor, image, row["prompt"], row["country"], refs, tau)
        line = {**{f: row[f] for f in FIELDS}, "references": refs is not None,
                "values": values, "scoring": scoring}  # fmt: skip
        append_jsonl(store, line)
        done.rows.append(line)
        done.now += 1
        done.with_references += refs is not None
        left = countdown.tick()
        emit(f"scored {done.now} of {len(todo)} images" + (f", {left}" if left else ""))
    return done


_ROLES = ("observer", "judge", "text_embedder", "image_embedder", "llm")


def score_image(
    assessor: Any, image: Any, prompt: str, country: str, refs: Any, tau: float
) -> dict[str, float | None]:
    """One image's values for its own ``prompt``: the assessor's baselines, and with
    ``refs`` (references found for the prompt) every image metric AHEaD's assessment
    gives, the EXAG-bound ones under their variant."""
    from metrics.catalog import BENCH_IMAGE, image_extras
    from refine.evaluate.baselines import PromptedPack, baseline_readings
    from refine.human.stored import with_variant

    if refs is not None:
        pack = PromptedPack(**refs.model_dump(), prompt=prompt)
        (assessed,) = assessor.assess_many([image], pack, tau)
        names = (*BENCH_IMAGE, *image_extras(), *assessor.compare)
        values = {m: assessed.scores.value(m) for m in names}
        return with_variant(values, assessed.scores.variants.get("exag"))
    pack = PromptedPack(activity=prompt, country=country, descriptors={}, prompt=prompt)
    given = baseline_readings(
        assessor.backends, assessor.calls, assessor.compare, [image], pack,
        assessor.llm_cache, assessor.baseline_models,
    )  # fmt: skip
    only = list(assessor.compare)
    if "vie_overall" in only:  # its PQ: the judge's quality reading of the image
        given["quality_ratings"] = assessor.quality([image])
        only.append("quality")
    got, _ = assessor.computed([image], given, only=only)
    return {m: c.value for m, c in got[0].items()}


def stored(rows: Sequence[dict[str, Any]], folder: Path) -> Any:
    """The scores as :class:`refine.human.stored.StoredMetrics`, found by the images'
    content as the ratings' are."""
    from refine.human.stored import StoredMetrics

    found = StoredMetrics()
    for row in rows:
        found.add(folder / row["image"], None, row["country"], row["values"], row["model"])
        scoring = row.get("scoring") or {}  # what made its values (refine.harness.ways)
        found.cells.append(
            {"scorer": scoring.get("scorer") or {}, "tau": scoring.get("tau"),
             "images": [dict(row["values"])]}
        )  # fmt: skip
    return found
