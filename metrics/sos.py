"""Surface-over-Semantics (SoS): does an image follow the prompt's language or its culture?

Seed paper "SoS", Sec. 4.1. Given image embeddings labelled with the culture asked for
and the language of the prompt:

* the **semantic centroid** of a culture is the mean of the (L2-normalised) embeddings
  of all images of that culture, whatever their prompt language;
* the **surface centroid** of a language is the mean of the embeddings of all images
  prompted in that language, whatever their culture;
* ``SoS(e) = cos(semantic centroid of its culture, e) - cos(surface centroid of its
  language, e)``: positive when the image sits closer to its culture than to its
  language (semantics lead), negative when the language's look dominates (surface leads);
* per (culture, language) the mean SoS of its images.

Centroids form a :class:`SosBank` that can be saved (``.npz``) and reused to score new
images against the same cultures and languages.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from metrics.baselines import clipscore


def _check_embeddings(embeddings, n_labels: int | None = None) -> np.ndarray:
    e = np.asarray(embeddings, dtype=np.float64)
    if e.ndim != 2 or e.shape[0] == 0:
        raise ValueError(f"embeddings must be an [images x dims] matrix, got shape {e.shape}")
    if not np.isfinite(e).all():
        raise ValueError("embeddings contain NaN or infinite values")
    norms = np.linalg.norm(e, axis=1, keepdims=True)
    if (norms == 0).any():
        row = int(np.flatnonzero(norms[:, 0] == 0)[0])
        raise ValueError(f"embedding row {row} is all zeros")
    if n_labels is not None and n_labels != e.shape[0]:
        raise ValueError(f"{n_labels} label rows for {e.shape[0]} embeddings")
    return e / norms


def _cosine_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise cosine between matching rows of a and b."""
    na = np.linalg.norm(a, axis=1)
    nb = np.linalg.norm(b, axis=1)
    return (a * b).sum(axis=1) / (na * nb)


@dataclass
class SosBank:
    """Semantic centroids per culture and surface centroids per language."""

    cultures: list[str]
    languages: list[str]
    semantic: np.ndarray  # [cultures, d]
    surface: np.ndarray  # [languages, d]
    embedder: str = ""

    @classmethod
    def build(
        cls,
        embeddings,
        cultures: Sequence[str],
        languages: Sequence[str],
        embedder: str = "",
    ) -> SosBank:
        if len(cultures) != len(languages):
            raise ValueError(f"{len(cultures)} culture labels but {len(languages)} language labels")
        e = _check_embeddings(embeddings, len(cultures))
        c_names = sorted(set(cultures))
        l_names = sorted(set(languages))
        c_pos = {c: k for k, c in enumerate(c_names)}
        l_pos = {lang: k for k, lang in enumerate(l_names)}
        c_idx = np.array([c_pos[c] for c in cultures])
        l_idx = np.array([l_pos[lang] for lang in languages])
        semantic = np.stack([e[c_idx == k].mean(axis=0) for k in range(len(c_names))])
        surface = np.stack([e[l_idx == k].mean(axis=0) for k in range(len(l_names))])
        return cls(c_names, l_names, semantic, surface, embedder)

    def score(self, embeddings, cultures: Sequence[str], languages: Sequence[str]) -> np.ndarray:
        """SoS of each image against this bank's centroids."""
        if len(cultures) != len(languages):
            raise ValueError(f"{len(cultures)} culture labels but {len(languages)} language labels")
        e = _check_embeddings(embeddings, len(cultures))
        if e.shape[1] != self.semantic.shape[1]:
            raise ValueError(
                f"embeddings have {e.shape[1]} dimensions but the bank has {self.semantic.shape[1]}"
            )
        c_pos = {c: k for k, c in enumerate(self.cultures)}
        l_pos = {lang: k for k, lang in enumerate(self.languages)}
        for c in cultures:
            if c not in c_pos:
                raise ValueError(f"culture {c!r} is not in the bank ({', '.join(self.cultures)})")
        for lang in languages:
            if lang not in l_pos:
                raise ValueError(
                    f"language {lang!r} is not in the bank ({', '.join(self.languages)})"
                )
        sem = self.semantic[[c_pos[c] for c in cultures]]
        surf = self.surface[[l_pos[lang] for lang in languages]]
        return _cosine_rows(sem, e) - _cosine_rows(surf, e)

    def save(self, path: str | Path) -> None:
        np.savez(
            Path(path),
            cultures=np.asarray(self.cultures, dtype=str),
            languages=np.asarray(self.languages, dtype=str),
            semantic=self.semantic,
            surface=self.surface,
            embedder=np.asarray(self.embedder, dtype=str),
        )

    @classmethod
    def load(cls, path: str | Path) -> SosBank:
        with np.load(Path(path), allow_pickle=False) as data:
            missing = {"cultures", "languages", "semantic", "surface"} - set(data.files)
            if missing:
                raise ValueError(f"{path}: not an SoS bank (missing {', '.join(sorted(missing))})")
            return cls(
                [str(c) for c in data["cultures"]],
                [str(x) for x in data["languages"]],
                data["semantic"],
                data["surface"],
                str(data["embedder"]) if "embedder" in data.files else "",
            )


def mean_by_pair(
    values: Sequence[float] | np.ndarray, cultures: Sequence[str], languages: Sequence[str]
) -> dict[tuple[str, str], float]:
    """Mean value per (culture, language) pair, in first-seen order."""
    sums: dict[tuple[str, str], list[float]] = {}
    for v, c, lang in zip(np.asarray(values).tolist(), cultures, languages, strict=True):
        sums.setdefault((c, lang), []).append(v)
    return {k: float(np.mean(v)) for k, v in sums.items()}


def sos_scores(
    embeddings,
    cultures: Sequence[str],
    languages: Sequence[str],
    bank: SosBank | None = None,
) -> tuple[np.ndarray, dict[tuple[str, str], float], SosBank]:
    """SoS per image and per (culture, language); the bank is built from the inputs if not given."""
    bank = bank or SosBank.build(embeddings, cultures, languages)
    per_image = bank.score(embeddings, cultures, languages)
    return per_image, mean_by_pair(per_image, cultures, languages), bank


# SoS Sec. 4.2: an image's tendency, named as the human annotators' options are
SEMANTIC, SURFACE = "semantic", "surface"


def sos_label(sos: float) -> str | None:
    """The tendency an image's SoS says (Eq. 1: positive with the semantics of the prompt,
    negative with the surface of its language); None at exactly 0."""
    return SEMANTIC if sos > 0 else SURFACE if sos < 0 else None


def caption_label(semantic_cos: float, surface_cos: float) -> str | None:
    """SoS Sec. 4.2's caption classifier: Hessel's CLIPScore (2.5 x max(cos, 0)) of the
    image with the caption naming the prompt's culture and with the one naming the
    culture of the prompt's language; the higher names the tendency (None on a tie, as
    when both cosines are at or below 0)."""
    sem, sur = clipscore(semantic_cos), clipscore(surface_cos)
    return SEMANTIC if sem > sur else SURFACE if sur > sem else None


def label_agreement(
    predicted: Sequence[str | None], reference: Sequence[str | None]
) -> dict[str, float | int | None]:
    """How a classifier's labels match reference labels, where both give one (SoS Tab. 2's
    columns): ``n``, ``accuracy`` (the share equal), ``precision_surface`` and
    ``precision_semantic`` (of the images it calls surface, or semantic, the share the
    reference calls so too); None where nothing is counted."""
    if len(predicted) != len(reference):
        raise ValueError(f"{len(predicted)} labels against {len(reference)}")
    both = [(p, r) for p, r in zip(predicted, reference, strict=True) if p and r]

    def share(pairs: list[tuple[str, str]]) -> float | None:
        return sum(p == r for p, r in pairs) / len(pairs) if pairs else None

    return {
        "n": len(both),
        "accuracy": share(both),
        "precision_surface": share([b for b in both if b[0] == SURFACE]),
        "precision_semantic": share([b for b in both if b[0] == SEMANTIC]),
    }
