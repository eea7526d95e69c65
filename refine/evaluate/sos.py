"""An SoS bank read (``Bank``, what ``refine.harness.tasks.sos.bank`` builds) and its
analysis: per (culture, language) SoS, the distribution per language
and the share of strongly surface-led pairs (the page: refine.present.report.sos).

Conventions: SoS(image) = cos(semantic centroid of its culture, e) - cos(surface centroid
of its prompt language, e) (``metrics.sos``), the centroids pooled over the banks of every
generator analysed together (the SoS paper's Sec. 4.1) or per generator. A (culture,
language) pair's SoS is the mean over its images; its median is kept too. A model-language
pair is *strongly surface-led* when the median SoS of its images is at or below the 25th
percentile of the medians of all model-language pairs (Sec. 5.2; numpy's linear
interpolation).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import cache
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


# the authors' prompt file spells one culture two ways: "Hondurans" in its German rows only,
# "Honduran" in its 12 other languages, and its English prompts both ways ("A photo of a
# Hondurans person" beside "... a Honduran person": 18 for that culture, 9 for each other).
# One culture of 9 English prompts, as the paper counts them: 171 cultures x 14 languages x
# 9 prompts = 21,546 (its 1,539 English prompts in 14 languages), not 172 cultures and a
# German-only one whose other cells do not exist.
CULTURE_SPELLINGS = {"Hondurans": "Honduran"}


@cache
def person_prompts() -> dict[tuple[str, str], list[str]]:
    """(culture, language) -> the nine person prompts of SoS's bank
    (``assets/sos/multilingual_person_prompts.csv``), ``en`` from ``prompt_en``: one per
    template and person, the one that names the culture as spelt where the file has two;
    a culture spelt two ways is one (:data:`CULTURE_SPELLINGS`)."""
    import csv
    import re

    from refine.assets import assets_dir

    path = assets_dir() / "sos" / "multilingual_person_prompts.csv"
    out: dict[tuple[str, str], list[str]] = {}
    english: dict[str, dict[tuple[str, str], str]] = {}
    with open(path, encoding="utf-8", newline="") as fh:
        for row in csv.DictReader(fh):
            spelt = row["Culture"].strip()
            culture = CULTURE_SPELLINGS.get(spelt, spelt)
            out.setdefault((culture, row["Language"].strip()), []).append(
                row["prompt_translated"].strip()
            )
            kept = english.setdefault(culture, {})
            slot = (row["prompt_template"].strip(), row["Topic"].strip())
            said = row["prompt_en"].strip()
            named = re.search(rf"\b{re.escape(culture)}\b", said) is not None
            if slot not in kept or (
                named and not re.search(rf"\b{re.escape(culture)}\b", kept[slot])
            ):
                kept[slot] = said
    for culture, kept in english.items():
        out[(culture, "en")] = list(kept.values())
    return out


def person_cultures() -> list[str]:
    return sorted({c for c, _ in person_prompts()})


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


def _gather(bank_dirs: str | Path | Sequence[str | Path]) -> tuple[list[Bank], dict, list]:
    """The banks, the first's settings, and each bank's (bank, embeddings, cultures,
    languages, images): another bank's images by their path. Banks of another concept or
    embedder than the first are refused."""
    dirs = [bank_dirs] if isinstance(bank_dirs, str | Path) else list(bank_dirs)
    banks = [Bank(d) for d in dirs]
    if not banks:
        raise BankError("name at least one bank")
    first = banks[0].manifest["settings"]
    for b in banks[1:]:
        other = b.manifest["settings"]
        for key in ("embedder", "concept"):
            if other[key] != first[key]:
                raise BankError(
                    f"{b.path}: its {key} is {other[key]!r}, {banks[0].path}'s {first[key]!r}; "
                    "banks are pooled only when they embed the same concept the same way"
                )
    parts = []
    for k, b in enumerate(banks):
        e, cultures, languages, images = b.data()
        if k:
            images = [str(b.path / i) for i in images]
        parts.append((b, e, cultures, languages, images))
    return banks, first, parts


def analyse(
    bank_dirs: str | Path | Sequence[str | Path],
    classifiers: tuple[str, ...] = (),
    caption_models: dict[str, str] | None = None,
    surface: str | Path | None = None,
    device: str | None = None,
    centroids: str = "pooled",
) -> dict[str, Any]:
    """The analysis of one bank, or of several (one per generator, of the same concept and
    embedder), as plain data (what ``--json`` prints and the HTML shows).

    The centroids are built from the images of every bank together (``pooled``, as the
    SoS paper builds them, Sec. 4.1: "pooling images across all models rather than per
    model"), or from each bank's own (``per-generator``). Per generator, culture and
    language: the pair's mean and median SoS. Per generator and language (the paper's
    model-language pair, Sec. 5.2): the median SoS of its images; the pair is *strongly
    surface-led* when that median is at or below the 25th percentile of the medians of
    all model-language pairs (numpy's linear interpolation); each (culture, language)
    pair carries its model-language pair's flag. The languages are ordered by their mean
    SoS, most surface-led first (the heatmap's columns). With ``classifiers`` (one bank),
    the SoS paper's caption classifiers beside SoS's labels
    (:mod:`refine.evaluate.sos_captions`)."""

    if centroids not in ("pooled", "per-generator"):
        raise ValueError(f"centroids are 'pooled' or 'per-generator', not {centroids!r}")
    banks, first, parts = _gather(bank_dirs)
    e = np.concatenate([p[1] for p in parts])
    cultures = [c for p in parts for c in p[2]]
    languages = [g for p in parts for g in p[3]]
    images = [i for p in parts for i in p[4]]
    generator = [p[0].manifest["settings"]["generator"] for p in parts for _ in p[2]]
    names = list(dict.fromkeys(generator))
    if len(names) != len(banks):
        raise BankError("two banks of the same generator: give each generator's bank once")
    per_image = np.empty(len(e))
    if centroids == "pooled":
        pooled = SosBank.build(e, cultures, languages, embedder=first["embedder"])
        per_image[:] = pooled.score(e, cultures, languages)
        all_cultures, all_languages = pooled.cultures, pooled.languages
    else:
        start = 0
        for _, ei, ci, li, _ in parts:
            own = SosBank.build(ei, ci, li, embedder=first["embedder"])
            per_image[start : start + len(ei)] = own.score(ei, ci, li)
            start += len(ei)
        all_cultures = sorted(set(cultures))
        all_languages = sorted(set(languages))
    model_languages = []
    for g in names:
        for lang in all_languages:
            idx = [i for i in range(len(e)) if generator[i] == g and languages[i] == lang]
            if idx:
                values = per_image[idx]
                model_languages.append(
                    {
                        "generator": g,
                        "language": lang,
                        "n": len(idx),
                        "mean": float(values.mean()),
                        "median": float(np.median(values)),
                    }
                )
    q25 = float(np.percentile([m["median"] for m in model_languages], 25))
    strong = set()
    for m in model_languages:
        m["strongly_surface_led"] = m["median"] <= q25
        if m["strongly_surface_led"]:
            strong.add((m["generator"], m["language"]))
    pairs = []
    for g in names:
        for c in all_cultures:
            for lang in all_languages:
                idx = [
                    i
                    for i in range(len(e))
                    if generator[i] == g and cultures[i] == c and languages[i] == lang
                ]
                if not idx:
                    continue
                values = per_image[idx]
                pairs.append(
                    {
                        "generator": g,
                        "culture": c,
                        "language": lang,
                        "n": len(idx),
                        "sos": float(values.mean()),
                        "median": float(np.median(values)),
                        "strongly_surface_led": (g, lang) in strong,
                        "images": [images[i] for i in idx],
                        "image_sos": [float(v) for v in values],
                    }
                )
    by_language = {}
    for lang in all_languages:
        means = np.array([p["sos"] for p in pairs if p["language"] == lang])
        by_language[lang] = {
            "pairs": len(means),
            "mean": float(means.mean()),
            "median": float(np.median(means)),
            "min": float(means.min()),
            "max": float(means.max()),
            # the generators whose model-language pair is strongly surface-led
            "strongly_surface_led": sum(1 for g in names if (g, lang) in strong),
        }
    order = sorted(all_languages, key=lambda lang: (by_language[lang]["mean"], lang))
    captioned = None
    if classifiers:
        from refine.evaluate.sos_captions import classify

        captioned = classify(
            banks[0], e, cultures, languages, images, per_image, classifiers, caption_models,
            surface, device,
        )  # fmt: skip
        captioned["images"] = images  # the order of every classifier's labels
    return {
        "bank": str(banks[0].path),
        "banks": [str(b.path) for b in banks],
        "concept": first["concept"],
        "embedder": first["embedder"],
        "generator": ", ".join(names),
        "generators": names,
        "centroids": centroids,
        "images": len(per_image),
        "cells_done": sum(len(b.done()) for b in banks),
        "cells": sum(len(b.cells) for b in banks),
        "percentile_25": q25,
        "model_languages": model_languages,
        "share_strongly_surface_led": len(strong) / len(model_languages),
        "pairs": pairs,
        "by_language": {lang: by_language[lang] for lang in order},
        "cultures": all_cultures,
        "languages": order,
        **({"caption_classifiers": captioned} if captioned is not None else {}),
    }
