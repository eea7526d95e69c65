"""Localized edits (``--localize``): the edit restricted to boxes the observer draws, and
the drift inside and outside them.

1. Boxes a person gave (``--edit-box``) restrict every edit of the run: recorded on each
   round with ``source`` "by hand", and no grounding call is made. Otherwise, after the
   parent is scored and the round's changes planned, one grounding call asks the
   observer (``assets/prompts/ground.txt``, structured output) for a box around each item
   the edit removes, replaces or tones down, and where each item it adds belongs:
   [x0, y0, x1, y1] as fractions of the width and height. The boxes are recorded on the
   round (``regions``); a box out of [0, 1] is clipped, an empty one dropped, an item
   without one named in ``regions_note``.
2. The editor is given the boxes (``regions``): an inpainting editor (``localizes =
   "mask"``) edits inside the mask they make and pastes the original pixels outside it
   back exactly; an API editor (``localizes = "instruction"``) gets the region in the
   instruction, and the original's pixels are pasted back outside it beyond a feathered
   band (:data:`refine.backends.regions.FEATHER`). An editor with neither is refused before
   the run begins.
3. Each candidate's drift is measured twice: inside, 1 - the cosine of the image
   embeddings of the boxes' crops (parent and candidate, averaged over the boxes);
   outside, 1 - SSIM over the windows wholly outside them and their feathered band
   (:func:`metrics.drift.ssim_outside`). ``max_drift_outside`` rejects a candidate that
   changed what it was not asked to change.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel

from refine.records import Feedback, PlannedChange, Region, RunSpec

# editors that can restrict an edit, as the refusal names them
LOCALIZING = (
    "gemini:<image model> (the region in the instruction)",
    "inpaint:<diffusers model> (a mask; the pixels outside pasted back)",
)


class GroundedBox(BaseModel):
    item: str
    box: list[float]


class Grounding(BaseModel):
    boxes: list[GroundedBox]


def check(spec: RunSpec, backends: Any) -> None:
    """A localized run's refusal, in one line, when its editor can restrict no edit."""
    from refine.loop.review_file import has_boxes

    if not (spec.localize or spec.edit_boxes or has_boxes(spec)) or spec.strategy == "regenerate":
        return
    editor = backends.get("editor")
    if getattr(editor, "localizes", None) not in ("mask", "instruction"):
        name = backends.names.get("editor") or getattr(editor, "id", "?")
        flag = "--edit-box" if spec.edit_boxes else "--localize" if spec.localize else "--review"
        raise ValueError(
            f"{flag}: the editor {name} can restrict no edit to a region; editors that "
            f"can: {'; '.join(LOCALIZING)}"
        )


def items(
    changes: Sequence[PlannedChange], feedback: Feedback | None = None
) -> list[tuple[str, str]]:
    """The items a round's boxes are asked for, with their kind: what the edit removes,
    replaces or tones down (hallucinated; a stereotype candidate of ``feedback``, or a
    change of no dimension: exaggerated), what it adds (missing)."""
    stereotypes = {e.candidate.casefold() for e in (feedback.exaggerated if feedback else [])}
    out = []
    for c in changes:
        if c.kind == "add":
            out.append((c.item, "missing"))
        elif c.kind in ("remove", "replace", "tone down"):
            wrong = c.dimension is None or c.item.casefold() in stereotypes
            out.append((c.item, "exaggerated" if wrong else "hallucinated"))
    return list(dict.fromkeys(out))


# how far past [0, 1] a coordinate may stray and be clipped (a model's rounding); a box
# further out is on another scale (pixels, 0-1000) and is dropped, named
SLACK = 0.02


def clipped(box: Sequence[float]) -> list[float] | None:
    """A box clipped to [0, 1]; None when it is not four numbers, is not on that scale, or
    is empty."""
    if len(box) != 4 or any(not -SLACK <= float(v) <= 1 + SLACK for v in box):
        return None
    x0, y0, x1, y1 = (min(1.0, max(0.0, float(v))) for v in box)
    return [x0, y0, x1, y1] if x0 < x1 and y0 < y1 else None


def ground(
    observer: Any, image: Any, activity: str, country: str, asked: list[tuple[str, str]]
) -> tuple[list[Region], str | None]:
    """The observer's boxes for ``asked`` (item, kind), and what it left out."""
    from refine.assets import prompt_template

    listed = "\n".join(
        f"- {item} ({'missing' if kind == 'missing' else 'in the image'})" for item, kind in asked
    )
    prompt = prompt_template("ground").format(activity=activity, country=country, items=listed)
    answer = observer.ask_json(image, prompt, Grounding)
    by_item = {" ".join(b.item.split()).casefold(): b.box for b in answer.boxes}
    regions, left, off = [], [], []
    for item, kind in asked:
        given = by_item.get(" ".join(item.split()).casefold())
        box = clipped(given) if given is not None else None
        if box is None:
            (left if given is None else off).append(item)
            continue
        regions.append(Region(item=item, kind=kind, box=box))
    notes = [f"no box for: {'; '.join(left)}"] if left else []
    notes += [f"a box not in [0, 1] or empty, dropped: {'; '.join(off)}"] if off else []
    return regions, "; ".join(notes) or None


def for_round(
    run: Any, parent_image: Any, changes: Sequence[PlannedChange], backends: Any, calls: Any,
    feedback: Feedback | None = None, reviewed: Any = None,
) -> tuple[list[Region], str | None]:  # fmt: skip
    """A localized edit round's boxes (one observer call) and its note; none when the run
    is not localized or the round changes nothing an item names. A grounding call that
    fails leaves the edit unrestricted, and the note says why."""
    from refine import usage
    from refine.loop.review_file import ReviewLine

    # a person's boxes and region drawn at the pause or in the review file: this edit's, no
    # grounding call (the run's --edit-box where they marked none)
    own = reviewed.boxes if isinstance(reviewed, ReviewLine) else []
    drawn = reviewed.drawn() if isinstance(reviewed, ReviewLine) else None
    by_hand = own or ([] if drawn is not None else run.spec.edit_boxes)
    if by_hand or drawn is not None:
        regions = [Region(box=b, source="by hand") for b in by_hand]
        if drawn is not None:
            from refine.backends.regions import drawn_box
            from refine.records import MIN_REGION_AREA

            box = drawn_box(drawn, parent_image.size, MIN_REGION_AREA)
            regions.append(Region(box=box, source="by hand", mask=reviewed.mask))
        return regions, None
    if not run.spec.localize:
        return [], None
    asked = items(changes, feedback)
    if not asked:
        return [], "nothing to ground: the edit is not restricted"
    try:
        with backends.using("observer") as observer:
            regions, note = ground(
                observer, parent_image, run.spec.activity, run.references.country, asked
            )
    except (usage.StopRequested, usage.BudgetExhausted, usage.QuotaSpent):
        raise
    except Exception as err:  # the edit goes on unrestricted, and the round says why
        from refine.backends.loading import describe_error

        calls.add(1)
        return [], f"grounding failed ({describe_error(err)[:300]}): the edit is not restricted"
    calls.add(1)
    if not regions:
        return [], "the observer drew no box: the edit is not restricted"
    return regions, note


def measure(candidates: Sequence[Any], parent: Any, regions: Sequence[Region], store: Any,
            backends: Any) -> None:  # fmt: skip
    """Each candidate's drift inside and outside the boxes, added to its record."""
    import numpy as np

    from metrics.drift import ssim_outside
    from refine.backends.regions import pixels, reach

    if not regions:
        return
    boxes = [r.box for r in regions]
    drawn = [store.load_mask(r.mask) for r in regions if r.mask]
    # the boxes and the regions drawn, and their feathered band (a drawn region's box is
    # its bounding box: inside, its crop is compared)
    mask = reach([r.box for r in regions if not r.mask], parent.size, drawn[0] if drawn else None)
    with backends.using("image_embedder") as embedder:
        for c in candidates:
            if c.drift is None:
                continue
            child = store.load_image(c.image)
            if child.size != parent.size:
                child = child.resize(parent.size)
            crops = [parent.crop(pixels(b, parent.size)) for b in boxes]
            crops += [child.crop(pixels(b, parent.size)) for b in boxes]
            e = embedder.encode_images(crops).float().cpu().numpy()
            e = e / np.linalg.norm(e, axis=1, keepdims=True)
            n = len(boxes)
            cosines = [float(e[k] @ e[n + k]) for k in range(n)]
            s = ssim_outside(parent, child, mask)
            c.drift = c.drift.model_copy(
                update={
                    "inside": float(np.mean([1.0 - v for v in cosines])),
                    # SSIM is at most 1: a value past it is float rounding (identical
                    # windows, an edit pasted back), read as no drift
                    "outside": None if s is None else max(0.0, 1.0 - s),
                }
            )
