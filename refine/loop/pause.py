"""The pause before an edit, where a person reviews the round (the app's review, or any
front's ``review`` callback): the instruction they apply, the regions they mark on the
image (boxes, or a region drawn with a brush), and a change of the references the run aims
for (:mod:`refine.loop.aims`).

A front's answer is the instruction's text, or a :class:`Review` with the rest. What it
marks joins the round's line of the review file (``--review FILE``) and takes its place
where both say the same thing: the person at the pause has the last word.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from refine.events import ReviewWaiting
from refine.loop import aims
from refine.loop.review_file import ReviewLine
from refine.records import MAX_REGIONS, MIN_REGION_AREA, ReferenceEdit, by_hand_boxes


@dataclass
class Review:
    """A person's answer at the pause: the instruction to apply, the boxes and the drawn
    ``mask`` (a one-channel image of the image's size, white over the region) the edit is
    restricted to, and a change of the references from this round on."""

    instruction: str
    boxes: list[list[float]] = field(default_factory=list)
    mask: Any = None
    references: ReferenceEdit | None = None

    def check(
        self, image_size: tuple[int, int], references: Any, move: str = "edit",
        localizes: str | None = "mask",
    ) -> None:  # fmt: skip
        """What the front may hand the loop: regions only for an edit (``move``) by an
        editor that restricts one (``localizes``: ``mask`` or ``instruction``), at most
        :data:`MAX_REGIONS` of them, each at least :data:`MIN_REGION_AREA` of the image, a
        mask of the image's size with one channel, and a change the references can take;
        a ValueError says what is not (the pause goes on waiting)."""
        from refine.backends.regions import drawn_box
        from refine.loop.localize import LOCALIZING

        if self.boxes or self.mask is not None:
            if move != "edit":
                raise ValueError(
                    "this round draws a new image (regenerate): a region restricts an edit"
                )
            if localizes not in ("mask", "instruction"):
                raise ValueError(
                    "this run's editor can restrict no edit to a region; editors that can: "
                    + "; ".join(LOCALIZING)
                )
        self.boxes = by_hand_boxes(self.boxes)
        if len(self.boxes) + (self.mask is not None) > MAX_REGIONS:
            raise ValueError(f"at most {MAX_REGIONS} regions a round, boxes and the drawn one")
        if self.mask is not None:
            drawn_box(self.mask, image_size, MIN_REGION_AREA)
        if self.references is not None and not self.references.empty():
            aims.changed_references(references, self.references)


def ask(
    refiner: Any, run: Any, store: Any, k: int, instruction: str, source: str, written: Any,
    line: Any, move: str = "edit",
) -> tuple[str, str, Any] | None:  # fmt: skip
    """Round ``k``'s pause (where the refiner has a ``review``): the instruction applied
    and who wrote it, and the round's line (the review file's, with what the person marked
    joined); None where the person stopped the run (its stop reason said)."""
    if refiner.review is None:
        return instruction, source, _kept(line, k, store)
    refiner._emit(
        ReviewWaiting(
            round=k,
            instruction=instruction,
            source=source,
            changes=tuple(c.phrase() for c in written.changes),
            move=move,
        )
    )
    answer = refiner.review(k, instruction, run)
    if answer is None or refiner._stop.is_set():
        run.stop_reason = refiner._stop_why
        return None
    text = (answer if isinstance(answer, str) else answer.instruction).strip()
    if not text:
        raise ValueError(f"round {k}: the reviewed instruction is empty")
    if text != instruction:
        instruction, source = text, "person"
    if isinstance(answer, Review):
        line = _joined(line, answer, k)
        if answer.references is not None and not answer.references.empty():
            aims.change(run, k, answer.references, refiner.backends, source="app")
    return instruction, source, _kept(line, k, store)


def _joined(line: Any, answer: Review, k: int) -> Any:
    """The round's line with the person's regions: theirs replace the file's where they
    marked any."""
    if not answer.boxes and answer.mask is None:
        return line
    base = line if isinstance(line, ReviewLine) else ReviewLine(round=k)
    joined = base.model_copy(update={"boxes": list(answer.boxes), "mask": None})
    joined._drawn = None if answer.mask is None else answer.mask.convert("L")
    return joined


def _kept(line: Any, k: int, store: Any) -> Any:
    """The round's line with its drawn region kept in the run's folder
    (``round_KK_mask.png``, named in its ``mask``): the round's record names it."""
    if not isinstance(line, ReviewLine):
        return line
    drawn = line.drawn()
    if drawn is None:
        return line
    name = f"round_{k:02d}_mask.png"
    store.save_mask(name, drawn)
    kept = line.model_copy(update={"mask": name})
    kept._drawn = drawn.convert("L")
    return kept
