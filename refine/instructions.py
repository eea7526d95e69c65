"""Feedback -> editing instruction, from the template ``assets/prompts/edit_instruction.txt``.

Remove hallucinated and exaggerated elements, add missing reference elements, keep the
aligned ones; at most ``max_changes`` changes, taken in turn from the exaggerated (largest
excess first), hallucinated (least supported first) and missing (furthest first) lists.
"""

from __future__ import annotations

from itertools import zip_longest

from refine.assets import prompt_template
from refine.records import CaireScore, Feedback


def planned_changes(feedback: Feedback, max_changes: int) -> list[str]:
    exaggerated = [f"Tone down the exaggerated {e.candidate}" for e in feedback.exaggerated]
    # an observed phrase already named as an exaggerated candidate is not listed twice
    covered = {(e.observed or "").casefold() for e in feedback.exaggerated}
    hallucinated = [
        f"Remove {h.phrase}"
        for h in sorted(feedback.hallucinated, key=lambda h: h.similarity or 0.0)
        if h.phrase.casefold() not in covered
    ]
    missing = [
        f"Add {m.phrase}" for m in sorted(feedback.missing, key=lambda m: m.similarity or 0.0)
    ]
    out: list[str] = []
    for group in zip_longest(exaggerated, hallucinated, missing):
        out.extend(c for c in group if c)
    # the same phrase may be both exaggerated and hallucinated: keep the first wording
    seen: set[str] = set()
    unique = []
    for c in out:
        key = c.split(" ", 1)[1].casefold().replace("the exaggerated ", "")
        if key not in seen:
            seen.add(key)
            unique.append(c)
    return unique[:max_changes]


def build_instruction(
    feedback: Feedback,
    activity: str,
    country: str,
    max_changes: int = 5,
    keep_max: int = 5,
    extra: list[str] | None = None,
) -> str | None:
    """The editing instruction, or ``None`` when the feedback asks for no change.
    ``extra`` changes (such as CAIRE's "reads as another culture" line) come first and
    count within ``max_changes``."""
    extra = list(extra or [])[:max_changes]
    changes = extra + planned_changes(feedback, max_changes - len(extra))
    if not changes:
        return None
    kept = [a.phrase for a in feedback.aligned][:keep_max]
    keep = f", in particular {', '.join(kept)}" if kept else ""
    return (
        prompt_template("edit_instruction")
        .format(
            activity=activity,
            country=country,
            changes="\n".join(f"- {c}." for c in changes),
            keep=keep,
        )
        .strip()
    )


def caire_change(caire: CaireScore | None, country: str) -> tuple[str | None, str | None]:
    """From a round's CAIRE result: a note when the image reads more as another culture
    than ``country`` (a higher 1-5 score), and the change that asks to fix it."""
    if not caire:
        return None, None
    scores = {s.label: s.score for s in caire.labels}
    own = next((v for k, v in scores.items() if k.casefold() == country.casefold()), None)
    if own is None:
        return None, None
    others = [(v, k) for k, v in scores.items() if k.casefold() != country.casefold()]
    if not others:
        return None, None
    top, other = max(others, key=lambda x: (x[0], -others.index(x)))
    if top <= own:
        return None, None
    note = f"reads more as {other} ({top}/5) than {country} ({own}/5)"
    change = (
        f"Make it read as {country} rather than {other}: replace what points to {other} "
        f"with what is typical of {country}"
    )
    return note, change
