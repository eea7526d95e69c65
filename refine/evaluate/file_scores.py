"""Scores of what files hold, with no image model: AHEaD of descriptor sets, SoS of
labelled embeddings and CAIRE's spread of 1-5 scores (``refine metrics``). Each returns the
document ``--json`` prints; a file that is not what it should be raises
:class:`refine.io.inputs.InputError` naming it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from metrics import ahead
from metrics.ahead import faithfulness
from refine.io.inputs import InputError, load_json


def _round(x: float | None, digits: int = 4) -> float | None:
    return None if x is None else round(float(x), digits)


def _match(m: Any) -> dict[str, Any]:
    return {
        "dimension": m.dimension,
        "phrase": m.phrase,
        "status": m.status,
        "best_match": m.best_match,
        "similarity": _round(m.similarity),
    }


def _score(score: Any, exag: Any = None, image: int | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"align": score.align, "hal": score.hal}
    feedback: dict[str, Any] = {
        "references": [_match(m) for m in score.references],
        "predictions": [_match(m) for m in score.predictions],
    }
    if exag is not None:
        value = exag.value if image is None else exag.per_image[image]
        ranked = exag.exaggerated_overall() if image is None else exag.exaggerated(image)
        out["exag"] = value
        out["faith"] = faithfulness(score.align, score.hal, value)
        feedback["exaggerated"] = [{"candidate": c, "excess": _round(e)} for c, e in ranked]
    out["per_dimension"] = {
        dim: {
            "align": s.align,
            "hal": s.hal,
            "n_references": s.n_references,
            "n_predictions": s.n_predictions,
        }
        for dim, s in score.per_dimension.items()
    }
    out["feedback"] = feedback
    return out


def ahead_document(
    refs: dict[str, list[str]],
    preds: list[dict[str, list[str]]],
    embedder: Any,
    tau: float,
    mode: str,
    exag: Any = None,
) -> dict[str, Any]:
    """AHEaD of ``preds`` (one descriptor map an image) against ``refs``: each image's
    (``mode`` single) or the pooled predictions' with DDIV and SDIV (multi); with ``exag``
    (a :class:`metrics.ahead.Exaggeration`), EXAG and FAITH too."""
    common = {"tau": tau, "mode": mode, "embedder": embedder.id, "n_images": len(preds)}
    if mode == "single":
        scores = ahead.score_images(refs, preds, embedder, tau)
        return {**common, "images": [_score(s, exag, i) for i, s in enumerate(scores)]}
    multi = ahead.score_pooled(refs, preds, embedder, tau)
    d = _score(multi.pooled, exag)
    if multi.ddiv is not None:
        d["ddiv"] = multi.ddiv
        d["sdiv"] = multi.sdiv
        for dim, s in d["per_dimension"].items():
            if dim in multi.ddiv_per_dimension:
                s["ddiv"] = multi.ddiv_per_dimension[dim]
                s["sdiv"] = multi.sdiv_per_dimension[dim]
    d["feedback"] = d.pop("feedback")  # last, for readability
    return {**common, **d}


def vendi_document(
    matrix: np.ndarray, kernel: bool, q: float, quality: np.ndarray | None = None, where: Any = None
) -> dict[str, Any]:
    """The Vendi score of ``matrix`` (embeddings, or a similarity ``kernel``) of order ``q``,
    and with ``quality`` (one score an item) its quality-weighted forms."""
    import math

    from metrics import vendi

    score = vendi.vendi_from_kernel if kernel else vendi.vendi_from_embeddings
    try:
        value = score(matrix, q)
    except ValueError as err:
        raise InputError(f"{where}: {err}") from err
    n = matrix.shape[0]
    doc: dict[str, Any] = {"vendi": value, "q": "inf" if math.isinf(q) else q, "n": n}
    if quality is not None:
        doc["qvendi"] = vendi.quality_weighted(value, quality)
        doc["qvendi_per_item"] = doc["qvendi"] / n
    return doc


def sos_document(
    embeddings: np.ndarray,
    cultures: list[str],
    languages: list[str],
    bank: Path | None = None,
    save_bank: Path | None = None,
    where: Path | None = None,
) -> dict[str, Any]:
    """SoS of each embedding against the centroids of ``bank`` (a saved ``.npz``), or of
    the embeddings themselves, and its mean per (culture, language); ``save_bank`` writes
    the centroids built from them. ``where`` names the embeddings' file in messages."""
    from metrics.sos import SosBank, mean_by_pair

    built = None
    if bank is None or save_bank is not None:
        try:
            built = SosBank.build(embeddings, cultures, languages)
        except ValueError as err:
            raise InputError(f"{where}: {err}") from err
    if bank is not None:
        if not bank.exists():
            raise InputError(f"{bank}: file not found")
        try:
            used = SosBank.load(bank)
        except (ValueError, OSError) as err:
            raise InputError(f"{bank}: not a readable SoS bank ({err})") from err
    else:
        used = built
    try:
        per_image = used.score(embeddings, cultures, languages)
    except ValueError as err:
        raise InputError(f"{bank or where}: {err}") from err
    pairs = mean_by_pair(per_image, cultures, languages)
    counts: dict[tuple[str, str], int] = {}
    for key in zip(cultures, languages, strict=True):
        counts[key] = counts.get(key, 0) + 1
    if save_bank is not None:
        try:
            built.save(save_bank)
        except OSError as err:
            raise InputError(f"{save_bank}: cannot write the bank ({err.strerror})") from err
    return {
        "images": [
            {"culture": c, "language": lang, "sos": float(v)}
            for c, lang, v in zip(cultures, languages, per_image.tolist(), strict=True)
        ],
        "pairs": [
            {"culture": c, "language": lang, "sos": v, "n": counts[(c, lang)]}
            for (c, lang), v in pairs.items()
        ],
        "bank": str(bank) if bank else None,
        "saved_bank": str(save_bank) if save_bank else None,
    }


def caire_diversity_document(path: Path) -> dict[str, Any]:
    """CAIRE's spread over the images of ``{"labels": [...], "scores": [[1-5 a label] an
    image]}`` (:func:`metrics.caire.diversity`)."""
    from metrics.caire import diversity

    doc = load_json(path)
    if not isinstance(doc, dict) or "labels" not in doc or "scores" not in doc:
        raise InputError(f'{path}: expected {{"labels": [...], "scores": [[...], ...]}}')
    labels, rows = doc["labels"], doc["scores"]
    if not isinstance(labels, list) or not all(isinstance(x, str) for x in labels):
        raise InputError(f"{path}: 'labels' must be a list of strings")
    if not isinstance(rows, list) or not all(isinstance(r, list) for r in rows):
        raise InputError(f"{path}: 'scores' must be a list of rows, one per image")
    for n, row in enumerate(rows):
        if len(row) != len(labels):
            raise InputError(f"{path}: scores[{n}] has {len(row)} values for {len(labels)} labels")
        bad = [
            v
            for v in row
            if isinstance(v, bool) or not isinstance(v, int | float) or not 1 <= v <= 5
        ]
        if bad:
            raise InputError(f"{path}: scores[{n}] holds {bad[0]!r}; scores lie in 1..5")
    try:
        return diversity(labels, rows)
    except ValueError as err:
        raise InputError(f"{path}: {err}") from err
