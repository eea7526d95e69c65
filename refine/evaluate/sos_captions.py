"""The SoS paper's caption classifiers (Sec. 4.2, Tab. 2, 11-12) on a bank, beside SoS.

For each image of a bank, two captions: one naming the culture its prompt asked for (the
semantics), one naming the culture of the prompt's language (the surface), from
``assets/sos/surface_cultures.json`` (the paper names none; the file says which this
toolkit chose, and ``--surface-cultures FILE`` takes another). Person banks use the
paper's caption "A photo of a {c} person" with SeeGULL identities; banks of an activity
use "A photo of {activity} in {c}" with countries. A classifier embeds the image and both
captions, takes Hessel's CLIPScore of each (:func:`metrics.sos.caption_label`) and names
the tendency of the higher. Its labels are compared with the labels SoS gives the same
images (positive: semantic, negative: surface), overall and per language, with
:func:`metrics.sos.label_agreement`.

Classifiers: ``clipscore`` on the bank's own embedder, whose image embeddings the bank
keeps (it must be a CLIP: ``clip:`` or ``hfclip:``), and ``mclip``, a multilingual CLIP,
by default ``hfclip:BAAI/AltCLIP-m9`` (AltCLIP, the text encoder of AltDiffusion-m9, one of
the paper's generators): the paper's mCLIP (Chen et al., 2023) is published only as
fairseq checkpoints, which no library this toolkit uses loads. ``--caption-model
NAME=EMBEDDER`` puts another CLIP in either's place; the images are then embedded anew.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from metrics.baselines import parse_names
from metrics.sos import caption_label, label_agreement, sos_label

CLASSIFIERS = ("clipscore", "mclip")
MCLIP = "hfclip:BAAI/AltCLIP-m9"
PERSON_CAPTION = "A photo of a {c} person"  # SoS Sec. 4.2
ACTIVITY_CAPTION = "A photo of {concept} in {c}"


def parse_classifiers(text: str | Sequence[str] | None) -> tuple[str, ...]:
    """Classifier names from ``a,b`` (``all``: both; ``none`` or nothing: none); a
    ValueError names one that is not a classifier."""
    return parse_names(text, CLASSIFIERS, "caption classifier")


def parse_caption_models(values: Sequence[str]) -> dict[str, str]:
    """``NAME=EMBEDDER`` items (``--caption-model``): a classifier's CLIP in place of its
    own; a ValueError names an item that is not one."""
    out = {}
    for item in values:
        name, sep, spec = item.partition("=")
        name, spec = name.strip(), spec.strip()
        if not sep or name not in CLASSIFIERS or not spec:
            raise ValueError(
                f"{item!r}: use NAME=EMBEDDER with NAME one of {', '.join(CLASSIFIERS)} "
                "(e.g. mclip=hfclip:BAAI/AltCLIP-m9)"
            )
        out[name] = spec
    return out


def surface_cultures(path: str | Path | None = None) -> dict[str, dict[str, str]]:
    """Each language's culture (``identity`` and ``country``): the bundled choice, or the
    file given (the same layout)."""
    if path is None:
        from importlib.resources import files

        text = (files("refine.assets") / "sos" / "surface_cultures.json").read_text("utf-8")
    else:
        text = Path(path).read_text(encoding="utf-8")
    try:
        languages = json.loads(text)["languages"]
        return {
            str(k): {"identity": str(v["identity"]), "country": str(v["country"])}
            for k, v in languages.items()
        }
    except (ValueError, KeyError, TypeError, AttributeError) as err:
        raise ValueError(
            f"{path}: not a surface-cultures file ({{'languages': {{'fr': {{'identity': "
            f"'French', 'country': 'France'}}, ...}}}}): {err}"
        ) from None


def captions(
    concept: str, culture: str, language: str, cultures: dict[str, dict[str, str]]
) -> tuple[str, str] | None:
    """(semantic caption, surface caption) of an image of ``culture`` prompted in
    ``language``; None where the language has no culture on record or it is the image's
    own (both captions would be one)."""
    mine = cultures.get(language)
    if mine is None:
        return None
    if concept == "person":
        surface = mine["identity"]
        sem, sur = PERSON_CAPTION.format(c=culture), PERSON_CAPTION.format(c=surface)
    else:
        surface = mine["country"]
        sem = ACTIVITY_CAPTION.format(concept=concept, c=culture)
        sur = ACTIVITY_CAPTION.format(concept=concept, c=surface)
    return None if surface.casefold() == culture.casefold() else (sem, sur)


def classify(
    bank: Any,
    embeddings: np.ndarray,
    cultures: Sequence[str],
    languages: Sequence[str],
    images: Sequence[str],
    per_image_sos: Sequence[float],
    names: Sequence[str],
    models: dict[str, str] | None = None,
    surface: str | Path | None = None,
    device: str | None = None,
) -> dict[str, Any]:
    """Each classifier's label of every image and its agreement with SoS's labels,
    overall and per language (see the module docstring)."""
    from refine.backends import create

    models = dict(models or {})
    table = surface_cultures(surface)
    concept = bank.manifest["settings"]["concept"]
    own = bank.manifest["settings"]["embedder"]
    pairs = [captions(concept, c, lang, table) for c, lang in zip(cultures, languages, strict=True)]
    texts = list(dict.fromkeys(t for p in pairs if p for t in p))
    reference = [sos_label(float(v)) for v in per_image_sos]
    out: dict[str, Any] = {
        "surface_cultures": {lang: table[lang] for lang in sorted(set(languages)) if lang in table},
        "unmapped_languages": sorted({lang for lang in languages if lang not in table}),
        "template": PERSON_CAPTION if concept == "person" else ACTIVITY_CAPTION,
        "sos_labels": reference,
        "classifiers": {},
    }
    for name in names:
        spec = models.get(name) or (own if name == "clipscore" else MCLIP)
        embedder = create("image_embedder", spec, shared=False, device=device)
        if not callable(getattr(embedder, "logit_scale", None)):
            raise ValueError(
                f"{name}: {spec} is not a CLIP (its CLIPScore needs one: clip:ARCH/TAG or "
                f"hfclip:ID); give one with --caption-model {name}=EMBEDDER"
            )
        if spec == own:
            e = np.asarray(embeddings, dtype=float)
        else:
            e = _embed_images(embedder, bank.path, images)
        t = embedder.encode_texts(texts).float().cpu().numpy() if texts else np.zeros((0, 1))
        row = {text: i for i, text in enumerate(texts)}
        labels: list[str | None] = []
        for k, p in enumerate(pairs):
            if p is None:
                labels.append(None)
                continue
            labels.append(caption_label(float(e[k] @ t[row[p[0]]]), float(e[k] @ t[row[p[1]]])))
        by_language = {
            lang: label_agreement(
                [x for x, la in zip(labels, languages, strict=True) if la == lang],
                [x for x, la in zip(reference, languages, strict=True) if la == lang],
            )
            for lang in sorted(set(languages))
        }
        out["classifiers"][name] = {
            "model": spec,
            "labels": labels,
            **label_agreement(labels, reference),
            "by_language": by_language,
        }
    return out


def _embed_images(embedder: Any, folder: Path, images: Sequence[str]) -> np.ndarray:
    from PIL import Image

    rows = []
    for start in range(0, len(images), 32):
        batch = []
        for name in images[start : start + 32]:
            with Image.open(folder / name) as im:
                batch.append(im.convert("RGB"))
        rows.append(embedder.encode_images(batch).float().cpu().numpy())
    return np.concatenate(rows).astype(float)
