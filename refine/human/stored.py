"""Metrics stored for images, found by content (SHA-256), so copied or renamed images
still join: in bench folders and other cell folders whose cells list their images
(``cells.jsonl``: a bench's, a score's), run folders (``run.json``; every candidate's
scores, the chosen image's expectations met share and CAIRE score) and folders of those."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from metrics.catalog import BENCH_EXPECTATIONS, BENCH_IMAGE, VARIANT_BOUND, image_extras
from metrics.expectations import met_share
from refine.human.ratings import Rating
from refine.io.files import file_sha256, read_jsonl
from refine.records import variant_name


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
        # each model the folders' metrics were made with -> the weights it resolved to
        # (their results.json's or run.json's; several folders' different weights joined)
        self.models: dict[str, str] = {}
        # the bench cells read, without their observations and embeddings: what made each
        # value (their scorer, tau and each image's judge: refine.harness.ways)
        self.cells: list[dict[str, Any]] = []

    def made_with(self, models: dict[str, Any]) -> None:
        for model, weights in models.items():
            seen = set(filter(None, self.models.get(model, "").split(", ")))
            self.models[str(model)] = ", ".join(sorted(seen | set(str(weights).split(", "))))

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

    def collect(self, folder: str | Path) -> bool:
        """Add the metrics a bench, score or run folder stores; False: it is none of them."""
        return _collect(Path(folder), self)

    def put(self, sha: str, values: dict[str, float], image: Path) -> None:
        """Metrics computed for a rated image (:mod:`refine.harness.tasks.score.missing`)."""
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
        found.made_with(_results_models(folder))
        add_bench_cells(found, folder, (cell for _, cell in read_jsonl(folder / "cells.jsonl")))
        return True
    if (folder / "run.json").is_file():
        from refine.io.store import RunStore

        run = RunStore(folder).load()
        from refine.backends.provenance import weights_of

        found.made_with({i.get("id", k): weights_of(i) for k, i in run.backend_info.items()})
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


def stored_from_cells(folders: Sequence[Path], cells: Any) -> StoredMetrics:
    """The metrics of ``cells`` (a bench's, its images under the first folder), the models
    of every folder's results named."""
    found = StoredMetrics()
    for folder in folders:
        found.made_with(_results_models(folder))
    add_bench_cells(found, folders[0], cells)
    return found


def add_bench_cells(found: StoredMetrics, folder: Path, cells: Any) -> None:
    """The metrics of bench cells (``cells.jsonl``'s, or a recipe's with its second judges'
    values: refine.harness.judges) whose images are under ``folder``."""
    for cell in cells:
        found.cells.append(_made_part(cell))
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


def _made_part(cell: dict[str, Any]) -> dict[str, Any]:
    """What of a bench cell says what made its values (refine.harness.ways.made)."""
    keep = ("scorer", "tau", "rescored")
    images = [
        {k: v for k, v in im.items() if k == "judged" or isinstance(v, int | float)}
        for im in cell.get("images") or []
    ]
    return {**{k: cell[k] for k in keep if k in cell}, "images": images}


def _results_models(folder: Path) -> dict[str, Any]:
    """The models a cell folder's results.json names (none before its layout 2)."""
    import json

    path = folder / "results.json"
    try:
        doc = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    except ValueError:
        return {}
    models = doc.get("models") if isinstance(doc, dict) else None
    return models if isinstance(models, dict) else {}
