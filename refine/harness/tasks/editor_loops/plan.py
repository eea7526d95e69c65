"""What an editor bench is asked for (see :mod:`refine.harness.tasks.editor_loops.task`): the
editors, the prompts, how many edits in a row, and how its cells are kept."""

from __future__ import annotations

from pydantic import Field, field_validator

from refine.backends.registry import split_name
from refine.harness.cells import CellFormat
from refine.harness.plan import BACKENDS, PROFILE, Backends, option
from refine.harness.tasks.bench.plan import PromptPlan

EDITOR_LOOP_CELLS = CellFormat(
    "editor_loops.jsonl",
    inputs=(
        "editor",
        "activity",
        "country",
        "loops",
        "seed",
        "localize",
        "tau",
        "scorer",
        "source",
    ),
    key=("editor", "activity", "country", "loops", "seed", "localize"),
    data=("run_dir", "stop_reason", "guard", "guard_loop", "failed", "forgetting"),
)


class EditorLoopPlan(PromptPlan):
    """Each editor's chain of ``loops`` edits on each prompt's source image."""

    positional = ("editors", "prompts")

    # editor backends ("gemini:...", "diffusers:...", "inpaint:...")
    editors: list[str] = option(
        help="An editor to compare (once per editor).", flag="--editor", given="repeat"
    )
    loops: int = option(3, "Edits in a row after the source image (loop 0).", ge=1, le=100)
    seed: int = option(42, "The seed of every prompt's source image.", ge=0, le=2**32 - 1)
    localize: bool = option(
        False, "Restrict each edit to the observer's boxes (a localized inpaint)."
    )
    tau: float | None = option(
        None, "The match threshold (the profile's when not given).", gt=0, le=1
    )
    profile: str = PROFILE
    backends: Backends = BACKENDS  # the other roles' overrides
    # the loop's guard: quality below the source's less this is marked
    max_quality_drop: float = Field(0.2, ge=0, le=1)

    @field_validator("editors")
    @classmethod
    def _editors(cls, value: list[str]) -> list[str]:
        if not value:
            raise ValueError("name at least one editor")
        if len(set(value)) != len(value):
            raise ValueError("an editor is named twice")
        for name in value:  # a name no backend answers to, said before anything runs
            try:
                split_name("editor", name)
            except ValueError as err:
                raise ValueError(f"{name!r}: {err}") from err
        return value

    @field_validator("backends")
    @classmethod
    def _no_editor(cls, value: dict[str, str]) -> dict[str, str]:
        if "editor" in value:
            raise ValueError("editor=...: name the editors with --editor")
        return value
