"""Descriptor dimensions and phrase normalisation shared by every metric.

A descriptor set maps each of the five dimensions of a scene to short visual phrases.
Phrases are compared after stripping surrounding whitespace and collapsing inner runs
of whitespace; two phrases that differ only by letter case are the same descriptor
(the first spelling is kept).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

DIMENSIONS: tuple[str, ...] = ("setting", "objects", "attire", "interaction", "spatial")


def normalise_phrases(phrases: Iterable[str]) -> list[str]:
    """Strip and de-duplicate phrases, keeping the first spelling and the order.

    Empty phrases are dropped.
    """
    seen: set[str] = set()
    out: list[str] = []
    for phrase in phrases:
        text = " ".join(phrase.split())
        key = text.casefold()
        if not text or key in seen:
            continue
        seen.add(key)
        out.append(text)
    return out


def normalise_descriptor_map(
    descriptors: Mapping[str, Sequence[str]],
    dimensions: Sequence[str] = DIMENSIONS,
) -> dict[str, list[str]]:
    """Return ``{dimension: phrases}`` over ``dimensions`` with normalised phrases.

    Raises ``ValueError`` naming the dimension when a key is not one of ``dimensions``
    or a phrase is not a string.
    """
    unknown = [key for key in descriptors if key not in dimensions]
    if unknown:
        raise ValueError(
            f"unknown dimension {unknown[0]!r}; expected one of {', '.join(dimensions)}"
        )
    out: dict[str, list[str]] = {}
    for dim in dimensions:
        phrases = descriptors.get(dim, [])
        if isinstance(phrases, str) or not isinstance(phrases, Sequence):
            raise ValueError(f"dimension {dim!r} must be a list of phrases, got {phrases!r}")
        for phrase in phrases:
            if not isinstance(phrase, str):
                raise ValueError(f"dimension {dim!r} has a non-string phrase {phrase!r}")
        out[dim] = normalise_phrases(phrases)
    return out
