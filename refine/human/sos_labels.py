"""People's SoS labels (SoS Sec. 4.2, Tab. 2): each rater of an image of an SoS bank picks
the culture it shows among five (the culture its prompt asked for, the culture of its
prompt's language, three others: the ``sos`` protocol); the majority's pick names the
image's tendency, *semantic* where it is the prompt's culture, *surface* where it is the
language's, none otherwise or on a tie. Every method's labels (SoS's sign, the caption
classifiers') are then set against them: accuracy and the precision of each label, over
all images and without the English prompts."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from metrics.sos import SEMANTIC, SURFACE, label_agreement

QUESTION = "culture"  # the sos protocol's forced choice


def human_labels(ratings: Sequence[Any], surface: str | Path | None = None) -> dict[Path, Any]:
    """Per rated image (its resolved path): the majority's label, or None."""
    from refine.evaluate.sos_captions import surface_cultures
    from refine.human.ratings import latest_answers

    table = surface_cultures(surface)
    _, first, _ = latest_answers(ratings)
    picks: dict[Path, dict[str, str]] = {}
    for r in ratings:  # each rater's latest pick
        if QUESTION in r.choices:
            picks.setdefault(r.image, {})[r.rater] = r.choices[QUESTION]
    out: dict[Path, Any] = {}
    for image, by_rater in picks.items():
        counts = Counter(by_rater.values()).most_common()
        if len(counts) > 1 and counts[0][1] == counts[1][1]:
            out[image] = None  # a tie: no majority
            continue
        pick = counts[0][0].casefold()
        r = first.get(image)
        culture = (r.country or "") if r else ""
        lang = table.get((r.language or "") if r else "") or {}
        surface_names = {
            str(lang.get("identity", "")).casefold(),
            str(lang.get("country", "")).casefold(),
        }
        out[image] = (
            SEMANTIC if pick == culture.casefold() else SURFACE if pick in surface_names else None
        )
    return out


def method_labels(result: dict[str, Any]) -> dict[str, list[Any]]:
    """Each method's label of every image of an analysis: ``sos`` (the sign of its SoS),
    and each caption classifier's."""
    from metrics.sos import sos_label

    images = [
        (p, i, v) for p in result["pairs"] for i, v in zip(p["images"], p["image_sos"], strict=True)
    ]
    out = {"sos": [sos_label(v) for _, _, v in images]}
    captioned = (result.get("caption_classifiers") or {}).get("classifiers") or {}
    if captioned:
        # the classifiers' labels are in the analysis's image order, not the pairs'
        order = {name: k for k, name in enumerate(_analysis_images(result))}
        for name, c in captioned.items():
            out[name] = [c["labels"][order[i]] for _, i, _ in images]
    return out


def _analysis_images(result: dict[str, Any]) -> list[str]:
    return list((result.get("caption_classifiers") or {}).get("images") or [])


def agreement_rows(
    result: dict[str, Any], humans: dict[Path, Any], methods: Sequence[str]
) -> dict[str, dict[str, Any]]:
    """Per method, and per method without the English prompts (``NAME \\ en``): its
    agreement with people's labels on the images both label (SoS Tab. 2)."""
    first = Path(result["bank"])
    images = [(p["language"], (first / i).resolve()) for p in result["pairs"] for i in p["images"]]
    labels = method_labels(result)
    out: dict[str, dict[str, Any]] = {}
    for m in methods:
        if m not in labels:
            continue
        mine = labels[m]
        people = [humans.get(path) for _, path in images]
        out[m] = label_agreement(mine, people)
        keep = [k for k, (lang, _) in enumerate(images) if lang != "en"]
        out[f"{m} \\ en"] = label_agreement([mine[k] for k in keep], [people[k] for k in keep])
    return out
