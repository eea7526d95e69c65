"""What a round's edit (or regeneration) request carries beside the image and the
instruction: real photos (``--reference-guided``, :mod:`refine.loop.reference_photos`) and
the boxes it is restricted to (``--localize``, :mod:`refine.loop.localize`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from refine.loop import localize, memory, reference_photos, review_file
from refine.records import PlannedChange, ReferencePhoto, Region, RunSpec


@dataclass
class RoundRequest:
    given: dict[str, Any] = field(default_factory=dict)  # the backend call's extra arguments
    photos: list[ReferencePhoto] = field(default_factory=list)
    regions: list[Region] = field(default_factory=list)
    note: str | None = None  # why the edit has no boxes, or which items have none


def check_settings(spec: RunSpec, backends: Any, references: Any) -> None:
    """Before any model loads: the settings that need no model agree with each other and
    with the references (--memory with a writer that takes hints, --reference-guided with
    photos). A conflict was refused only once every model had loaded (22 s and more)."""
    memory.check(spec, backends)
    reference_photos.has_photos(spec, references)


def check(spec: RunSpec, backends: Any, references: Any) -> None:
    """Before a run begins: its editor (and generator) can carry what the run asks for."""
    reference_photos.check(spec, backends, references)
    if spec.review_file:  # every line checked before the run begins
        try:
            review_file.read_review(spec.review_file)
        except ValueError as err:
            raise ValueError(f"--review: {err}") from None
    localize.check(spec, backends)
    memory.check(spec, backends)


def round_request(
    run: Any, how: str, parent: Any, parent_image: Any, changes: Sequence[PlannedChange],
    backends: Any, calls: Any, reviewed: Any = None,
) -> RoundRequest:  # fmt: skip
    """A round's photos (for the editor, or the generator when it regenerates) and, for a
    localized edit of ``parent`` (its round), its boxes (one observer call; ``reviewed``:
    the round's line of the review file, whose boxes are the person's)."""
    role = "generator" if how == "regenerate" else "editor"
    photos, shown = reference_photos.for_round(run, changes, backends, role)
    out = RoundRequest(given={"references": shown} if shown else {}, photos=photos)
    if how == "edit":
        feedback = parent.best.feedback
        out.regions, out.note = localize.for_round(
            run, parent_image, changes, backends, calls, feedback, reviewed
        )
        boxes = [r.box for r in out.regions if not r.mask]
        if boxes:
            out.given["regions"] = boxes
        if any(r.mask for r in out.regions):  # a region drawn: the editor takes its mask
            out.given["mask"] = reviewed.drawn()
    return out


def record(r: Any, why: str | None, written: Any, extra: RoundRequest) -> None:
    """What round ``r``'s request was built from and carried: the move's reason, the
    planned changes, the photos and the boxes."""
    r.move_reason, r.changes = why, written.changes
    r.hints = list(getattr(written, "hints", []))
    r.reference_photos, r.regions, r.regions_note = extra.photos, extra.regions, extra.note
