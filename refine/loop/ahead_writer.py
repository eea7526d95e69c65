"""AHEaD's editing instruction (Tab. 32 of the paper, ``assets/prompts/edit_ahead.txt``),
filled from a round's lists and the references with no model call: ``--writer ahead``.

The template removes everything in HAL and EXAG (and anything of the wrong culture,
period or activity) and keeps ALIGN; its three conditional lines are resolved here, as
the paper states them:

* the correct interaction from the references, if HAL or EXAG mention the interaction;
* 1-3 different types of attire from the references, if they mention attire;
* 1 correct background from the references, if they mention the setting.

A hallucinated item's dimension is the observer's; a stereotype candidate's is that of
the reference closest to it (among objects, attire and setting, as the loop's own
replacement uses). The references added are the dimension's missing ones first (the
furthest from anything seen first), then its others not yet aligned. REFERENCE
DESCRIPTORS lists every reference descriptor (the paper's D^ref). All of HAL and EXAG
go in (the template says "all"): ``max_changes`` does not apply. After the image model
refuses a round, the next instruction leaves out the first of HAL and EXAG (one more each
refusal), as the other writers leave out the first planned change.
"""

from __future__ import annotations

from refine.assets import prompt_template
from refine.records import Feedback, PlannedChange

# dimension -> (how many references the template adds, its words for them)
ADDITIONS = {
    "interaction": (1, "Add correct interaction from REF DESC"),
    "attire": (3, "ADD 1-3 different types of attire from REF DESC"),
    "setting": (1, "ADD 1 correct background from REF DESC"),
}


def mentioned(feedback: Feedback) -> set[str]:
    """The dimensions HAL or EXAG mention."""
    dims = {h.dimension for h in feedback.hallucinated}
    dims |= {e.replacement_dimension for e in feedback.exaggerated if e.replacement_dimension}
    return dims


def additions(feedback: Feedback, references: dict[str, list[str]]) -> dict[str, list[str]]:
    """Per dimension HAL or EXAG mention (of interaction, attire and setting), the
    references the template adds: missing ones first, then others not aligned."""
    aligned = {(m.dimension, m.phrase.casefold()) for m in feedback.aligned}
    out = {}
    for dim in ADDITIONS:
        if dim not in mentioned(feedback):
            continue
        most = ADDITIONS[dim][0]
        missing = sorted(
            (m for m in feedback.missing if m.dimension == dim), key=lambda m: m.similarity or 0
        )
        chosen = [m.phrase for m in missing]
        chosen += [
            r
            for r in references.get(dim, [])
            if (dim, r.casefold()) not in aligned and r not in chosen
        ]
        if chosen[:most]:
            out[dim] = chosen[:most]
    return out


def without_first(feedback: Feedback, skip: int) -> Feedback:
    """``feedback`` without its first ``skip`` items of HAL, then of EXAG: what a round
    the image model refused ``skip`` times leaves out (the refused instruction led with
    them); the additions they alone pointed at go with them."""
    order = [("hal", p) for p in dict.fromkeys(h.phrase for h in feedback.hallucinated)]
    order += [("exag", c) for c in dict.fromkeys(e.candidate for e in feedback.exaggerated)]
    gone = set(order[:skip])
    return feedback.model_copy(
        update={
            "hallucinated": [h for h in feedback.hallucinated if ("hal", h.phrase) not in gone],
            "exaggerated": [e for e in feedback.exaggerated if ("exag", e.candidate) not in gone],
        }
    )


def ahead_instruction(
    feedback: Feedback,
    activity: str,
    country: str,
    references: dict[str, list[str]],
    skip: int = 0,
) -> tuple[str, list[PlannedChange]] | None:
    """Tab. 32 filled in, and the changes it asks for; None when HAL and EXAG are empty
    (the template removes what they list and adds only where they mention a dimension).
    ``skip``: the round was refused that many times, and its first ``skip`` items of HAL
    and EXAG are left out (:func:`without_first`)."""
    feedback = without_first(feedback, skip) if skip else feedback
    hal = list(dict.fromkeys(h.phrase for h in feedback.hallucinated))
    exag = list(dict.fromkeys(e.candidate for e in feedback.exaggerated))
    if not hal and not exag:
        return None
    align = list(dict.fromkeys(m.phrase for m in feedback.aligned))
    adds = additions(feedback, references)
    lines = [f"- {ADDITIONS[dim][1]}: {'; '.join(items)}" for dim, items in adds.items()]
    refs = [r for d in references for r in references.get(d, [])]  # the paper's D^ref
    text = (
        prompt_template("edit_ahead")
        .format(
            activity=activity,
            country=country,
            additions="".join(f"{line}\n" for line in lines),
            hal="; ".join(hal),
            exag="; ".join(exag) or "(none)",
            align="; ".join(align) or "(none)",
            refs="; ".join(refs) or "(none)",
        )
        .strip()
    )
    dim_of = {h.phrase: h.dimension for h in feedback.hallucinated}
    changes = [PlannedChange(kind="remove", dimension=dim_of[h], item=h) for h in hal]
    changes += [PlannedChange(kind="remove", dimension=None, item=e) for e in exag]
    changes += [
        PlannedChange(kind="add", dimension=dim, item=item)
        for dim, items in adds.items()
        for item in items
    ]
    return text, changes
