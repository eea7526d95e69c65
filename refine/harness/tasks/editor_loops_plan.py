"""What an editor bench is asked for (see :mod:`refine.harness.tasks.editor_loops`): the
editors, the prompts, how many edits in a row, and how its cells are kept."""

from __future__ import annotations

from dataclasses import dataclass, field

from refine.harness.cells import CellFormat

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
    data=("run_dir", "stop_reason", "guard", "guard_loop", "failed"),
)


@dataclass
class EditorLoopPlan:
    editors: list[str]  # editor backends ("gemini:...", "diffusers:...", "inpaint:...")
    prompts: list[tuple[str, str]]  # (activity, country)
    loops: int = 3  # edits in a row after the source image (loop 0)
    seed: int = 42
    localize: bool = False  # each edit restricted to the observer's boxes (--localize)
    tau: float | None = None
    profile: str = "gemini"
    backends: dict[str, str] = field(default_factory=dict)  # the other roles' overrides
    max_quality_drop: float = 0.2  # the loop's guard: quality below source - this is marked

    def check(self) -> None:
        """A ValueError naming the option that cannot be, and what to do instead."""
        if not self.editors:
            raise ValueError("--editor: name at least one editor")
        if len(set(self.editors)) != len(self.editors):
            raise ValueError("--editor: an editor is named twice")
        if not 1 <= self.loops <= 100:
            raise ValueError(f"--loops: 1 to 100 edits in a row, got {self.loops}")
        if "editor" in self.backends:
            raise ValueError("--backend editor=...: name the editors with --editor")
        if not self.prompts:
            raise ValueError("no prompts: the countries and activities given leave none")
        if not 0.0 <= self.max_quality_drop <= 1.0:
            raise ValueError(f"the quality guard is 0 to 1, got {self.max_quality_drop:g}")
