"""An SoS bank read (``Bank``, what ``refine.harness.tasks.sos_bank`` builds) and its
analysis: per (culture, language) SoS, the distribution per language
and the share of strongly surface-led pairs (the page: refine.present.report.sos).

Conventions: SoS(image) = cos(semantic centroid of its culture, e) - cos(surface centroid
of its prompt language, e), centroids from the bank itself (``metrics.sos``). A pair's SoS
is the mean over its images; its median is kept too. A pair is *strongly surface-led* when
its median SoS is at or below the 25th percentile of the SoS of every image in the bank
(numpy's linear interpolation).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel

from metrics.sos import SosBank

LANGUAGES = {
    "en": "English",
    "am": "Amharic",
    "ar": "Arabic",
    "zh": "Chinese",
    "fi": "Finnish",
    "fr": "French",
    "de": "German",
    "hi": "Hindi",
    "it": "Italian",
    "ja": "Japanese",
    "ko": "Korean",
    "ru": "Russian",
    "es": "Spanish",
    "tr": "Turkish",
    "fa": "Persian",
    "pt": "Portuguese",
    "sw": "Swahili",
    "yo": "Yoruba",
}
MANIFEST = "bank.json"


class BankError(ValueError):
    """A bad bank setting or folder; the message says what to do."""


def check_bank_folder(path: str | Path) -> None:
    """A folder that holds an SoS bank (its manifest), without reading it: a
    :class:`BankError` saying how to build one otherwise."""
    path = Path(path)
    if not (path / MANIFEST).is_file():
        raise BankError(
            f"{path}: not an SoS bank (no {MANIFEST}); build one with "
            "`refine sos bank --cultures ... --languages ... --concept ... --out DIR`"
        )


class Translation(BaseModel):
    translation: str


class Bank:
    """A bank folder: its manifest and what its finished cells hold."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        check_bank_folder(self.path)
        self.manifest = json.loads((self.path / MANIFEST).read_text(encoding="utf-8"))

    @property
    def cells(self) -> dict[str, dict[str, Any]]:
        return self.manifest["cells"]

    def done(self) -> list[dict[str, Any]]:
        return [c for c in self.cells.values() if c["done"]]

    def data(self) -> tuple[np.ndarray, list[str], list[str], list[str]]:
        """Embeddings, cultures, languages and image paths of every finished cell."""
        rows, cultures, languages, images = [], [], [], []
        for cell in self.done():
            e = np.load(self.path / cell["embeddings"])
            rows.append(e)
            cultures += [cell["culture"]] * len(e)
            languages += [cell["language"]] * len(e)
            images += cell["images"]
        if not rows:
            raise BankError(f"{self.path}: no finished cells yet; run the bank build again")
        return np.concatenate(rows), cultures, languages, images

    def centroids(self) -> Any:

        return SosBank.load(self.path / "centroids.npz")


def analyse(
    bank_dir: str | Path,
    classifiers: tuple[str, ...] = (),
    caption_models: dict[str, str] | None = None,
    surface: str | Path | None = None,
    device: str | None = None,
) -> dict[str, Any]:
    """The analysis as plain data (what ``--json`` prints and the HTML shows); with
    ``classifiers``, the SoS paper's caption classifiers beside SoS's own labels
    (:mod:`refine.evaluate.sos_captions`)."""

    bank = Bank(bank_dir)
    e, cultures, languages, images = bank.data()
    centroids = SosBank.build(
        e, cultures, languages, embedder=bank.manifest["settings"]["embedder"]
    )
    per_image = centroids.score(e, cultures, languages)
    q25 = float(np.percentile(per_image, 25))
    pairs = []
    for c in centroids.cultures:
        for lang in centroids.languages:
            idx = [i for i in range(len(per_image)) if cultures[i] == c and languages[i] == lang]
            if not idx:
                continue
            values = per_image[idx]
            median = float(np.median(values))
            pairs.append(
                {
                    "culture": c,
                    "language": lang,
                    "n": len(idx),
                    "sos": float(values.mean()),
                    "median": median,
                    "strongly_surface_led": median <= q25,
                    "images": [images[i] for i in idx],
                    "image_sos": [float(v) for v in values],
                }
            )
    by_language = {}
    for lang in centroids.languages:
        means = np.array([p["sos"] for p in pairs if p["language"] == lang])
        by_language[lang] = {
            "pairs": len(means),
            "mean": float(means.mean()),
            "median": float(np.median(means)),
            "min": float(means.min()),
            "max": float(means.max()),
            "strongly_surface_led": sum(
                1 for p in pairs if p["language"] == lang and p["strongly_surface_led"]
            ),
        }
    led = [p for p in pairs if p["strongly_surface_led"]]
    captioned = None
    if classifiers:
        from refine.evaluate.sos_captions import classify

        captioned = classify(
            bank, e, cultures, languages, images, per_image, classifiers, caption_models,
            surface, device,
        )  # fmt: skip
    return {
        "bank": str(bank.path),
        "concept": bank.manifest["settings"]["concept"],
        "embedder": bank.manifest["settings"]["embedder"],
        "generator": bank.manifest["settings"]["generator"],
        "images": len(per_image),
        "cells_done": len(bank.done()),
        "cells": len(bank.cells),
        "percentile_25": q25,
        "share_strongly_surface_led": len(led) / len(pairs),
        "pairs": pairs,
        "by_language": by_language,
        "cultures": centroids.cultures,
        "languages": centroids.languages,
        **({"caption_classifiers": captioned} if captioned is not None else {}),
    }
