"""A run reviewed from a file (``--review FILE``): what a person would say at each pause of
the app, written ahead (or while the run goes: the file is read again before each round).

JSON Lines, one line a round: ``{"round": K, "instruction": "...", "boxes": [[x0, y0, x1,
y1], ...], "decision": "accept" | "reject" | "stop", "references": {"removed": [{"dimension":
"objects", "phrase": "carpet"}], "added": [...], "stereotypes_removed": [...],
"stereotypes_added": [...]}}``, every field but ``round`` optional.
For editing round K, ``instruction`` replaces the one written from the feedback (recorded
as the person's), ``boxes`` restrict that round's edit to them (by hand, as
``--edit-box``), ``decision`` decides the round by hand once its candidates are made
(``accept``: its best candidate becomes the run's best image; ``reject``: the parent is
kept), or ``stop`` stops the run before the round's edit; ``references`` changes what the
run aims for from round K on (:mod:`refine.loop.aims`: the round's instruction is the first
written against them, and every round before is re-matched against them). A line that
cannot be is refused in one line naming the file and the line, before the run begins."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator

from refine.records import MAX_REGIONS, ReferenceEdit, by_hand_boxes


class ReviewLine(BaseModel):
    model_config = ConfigDict(extra="forbid")

    round: int = Field(ge=1, le=10_000)
    instruction: str | None = Field(None, min_length=1, max_length=2000)
    boxes: list[list[float]] = Field(default_factory=list)
    decision: Literal["accept", "reject", "stop"] | None = None
    references: ReferenceEdit | None = None
    # a region drawn: a PNG of the image's size, one channel, white over the region (a
    # path, relative to the review file's folder); the app hands the drawn image itself
    mask: str | None = Field(None, min_length=1, max_length=1000)
    _drawn: Any = PrivateAttr(None)
    _folder: Path | None = PrivateAttr(None)

    @field_validator("boxes", mode="before")
    @classmethod
    def _boxes(cls, v: Any) -> list[list[float]]:
        return by_hand_boxes(v)

    def drawn(self) -> Any:
        """The region drawn (a one-channel PIL image), or None; a ValueError says why a
        mask file cannot be read."""
        if self._drawn is not None or self.mask is None:
            return self._drawn
        from PIL import Image, UnidentifiedImageError

        path = Path(self.mask)
        if not path.is_absolute() and self._folder is not None:
            path = self._folder / path
        try:
            with Image.open(path) as im:
                self._drawn = im.copy()
        except (OSError, UnidentifiedImageError) as err:
            raise ValueError(f"round {self.round}: cannot read the mask {path} ({err})") from None
        return self._drawn

    def regions(self) -> int:
        """How many regions the line restricts its round's edit to."""
        return len(self.boxes) + (self.mask is not None or self._drawn is not None)


def read_review(path: str | Path) -> dict[int, ReviewLine]:
    """The file's lines by round; a ValueError names the file, the line and the problem
    (the caller names the flag)."""
    from refine.io.files import json_lines, json_value

    where = Path(path)
    try:
        text = where.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise ValueError(f"cannot read {where} ({err})") from None
    out: dict[int, ReviewLine] = {}
    for n, line in enumerate(json_lines(text), start=1):
        if not line.strip():
            continue
        try:
            entry = ReviewLine.model_validate(json_value(line))
        except ValidationError as err:
            first = err.errors()[0]
            field = ".".join(str(x) for x in first["loc"])
            said = str(first["msg"]).removeprefix("Value error, ")
            raise ValueError(f"{where} line {n}: {field}: {said}") from None
        except ValueError as err:
            raise ValueError(f"{where} line {n} is not JSON ({err})") from None
        entry._folder = where.parent
        if entry.mask is not None:  # read now: its size is checked when its round comes
            drawn = entry.drawn()
            if drawn.mode not in ("L", "1"):
                raise ValueError(
                    f"{where} line {n}: the mask {entry.mask} has one channel (L or 1), "
                    f"not {drawn.mode}"
                )
        if entry.regions() > MAX_REGIONS:
            raise ValueError(f"{where} line {n}: at most {MAX_REGIONS} regions, boxes and mask")
        if entry.round in out:
            raise ValueError(f"{where} line {n}: round {entry.round} is reviewed twice")
        out[entry.round] = entry
    return out


def entry(spec: Any, k: int) -> ReviewLine | str | None:
    """Round ``k``'s line of the run's review file (read again: the file may grow while the
    run goes), None without one, or what is wrong with a file changed into one that cannot
    be read (the run then stops before the round, saying so: :func:`stopped`)."""
    if not spec.review_file:
        return None
    try:
        return read_review(spec.review_file).get(k)
    except ValueError as err:
        return str(err)


def has_boxes(spec: Any) -> bool:
    """Whether the run's review file restricts any round's edit to boxes or a mask."""
    lines = read_review(spec.review_file).values() if spec.review_file else []
    return any(e.boxes or e.mask for e in lines)


def stopped(run: Any, k: int, line: ReviewLine | str | None) -> bool:
    """Whether round ``k``'s line stops the run before anything of the round is asked for
    (said as its stop reason): a ``stop``, or a file that can no longer be read."""
    if isinstance(line, str):
        run.stop_reason = (
            f"stopped before round {k}: the review file can no longer be read ({line}); "
            "mend it and go on with refine run --resume"
        )
        return True
    if line is None or line.decision != "stop":
        return False
    run.stop_reason = f"stopped by the review file before round {k}"
    return True


def instruction_of(line: Any, instruction: str, source: str) -> tuple[str, str]:
    """The round's instruction and who wrote it: the line's (a person's), else as written."""
    if isinstance(line, ReviewLine) and line.instruction:
        return line.instruction, "person"
    return instruction, source


def decide(run: Any, r: Any, line: Any) -> None:
    """Round ``r`` decided by its line of the review file, where it says ``accept`` (its
    chosen candidate, else its best by FAITH, becomes the run's best image) or ``reject``
    (the best round before it stays), the rule's own reason kept beside."""
    from refine.loop import tracking
    from refine.loop.policy import faith_of

    if not isinstance(line, ReviewLine) or line.decision not in ("accept", "reject"):
        return
    decision = line.decision
    r.by_hand = True
    said = f"by hand (the review file; the rule said: {r.reason})"
    if decision == "accept":
        if r.chosen is None:
            r.chosen = max(range(len(r.candidates)), key=lambda i: faith_of(r.candidates[i]))
            r.tracked = tracking.track_round(run, r.index)
        r.decision, r.reason = "accepted", f"accepted {said}"
        run.best_round = r.index
        return
    r.decision, r.reason = "rejected", f"rejected {said}"
    if run.best_round == r.index:
        run.best_round = max(
            i for i, x in enumerate(run.rounds[: r.index]) if x.decision != "rejected"
        )
