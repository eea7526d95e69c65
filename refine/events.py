"""What a run or a batch reports while it works: small typed events, each with ``describe()``.

The loop and the batch emit them; the CLI progress lines, the batch progress and the app
all show ``describe()`` (or read the fields), so every front end says the same thing.
"""

from __future__ import annotations

from dataclasses import dataclass

from refine.numbers import shown


@dataclass(frozen=True)
class ModelsLoading:
    """The models a run needs are being loaded (before round 0, never in a round)."""

    roles: tuple[str, ...]

    def describe(self) -> str:
        return f"loading models: {', '.join(self.roles)}"


@dataclass(frozen=True)
class RunStarted:
    run: str
    dir: str
    first: int = 0  # the first round this drive makes (rounds before it are kept)
    last: int = 0  # the last round it may make (the spec's rounds)

    def describe(self) -> str:
        return f"run {self.run} started in {self.dir}"


@dataclass(frozen=True)
class StageStarted:
    round: int
    stage: str  # generate, edit, observe, caire, languages
    n: int = 1
    candidate: int | None = None

    def describe(self) -> str:
        times = f" x{self.n}" if self.n > 1 else ""
        which = f" (candidate {self.candidate})" if self.candidate is not None else ""
        return f"round {self.round}: {self.stage}{times}{which}"


@dataclass(frozen=True)
class StepDone:
    """A step of a diffusion pipeline's denoising (generate or edit) is done."""

    round: int
    stage: str
    step: int
    total: int

    def describe(self) -> str:
        return f"round {self.round}: {self.stage} step {self.step} of {self.total}"


@dataclass(frozen=True)
class ReviewWaiting:
    round: int
    instruction: str
    source: str = "template"  # who wrote it (template, language model, user)
    changes: tuple[str, ...] = ()  # the items of the changes it was built from
    move: str = "edit"  # edit (the parent edited) or regenerate (a new image)

    def describe(self) -> str:
        return f"round {self.round}: waiting for the instruction to be reviewed"


@dataclass(frozen=True)
class RoundDecided:
    round: int
    decision: str
    reason: str = ""
    faith: float | None = None  # the chosen image's
    quality: float | None = None

    def describe(self) -> str:
        """``round 1: accepted, FAITH 0.712, quality 0.700 (FAITH 0.500 -> 0.712 ...)``."""
        text = f"round {self.round}: {self.decision}"
        if self.faith is not None:
            text += f", FAITH {self.faith:.3f}"
        if self.quality is not None:
            text += f", quality {self.quality:.3f}"
        if self.reason and self.round > 0:
            text += f" ({self.reason})"
        return text


@dataclass(frozen=True)
class RunFinished:
    run: str
    stop_reason: str | None

    def describe(self) -> str:
        return f"stopped: {self.stop_reason}"


@dataclass(frozen=True)
class BatchStarted:
    id: str
    dir: str
    total: int
    todo: int

    def describe(self) -> str:
        return f"batch {self.id} in {self.dir}: {self.todo} of {self.total} run(s) to do"


@dataclass(frozen=True)
class EntryChanged:
    """A batch entry started (``done`` is None) or ended (finished or failed)."""

    entry: int
    name: str
    status: str
    done: int | None = None
    total: int | None = None
    initial_faith: float | None = None
    best_faith: float | None = None
    error: str | None = None
    # the Ray engine: the worker that made the run, its runs so far and its rounds per
    # minute, and the whole batch's rounds per minute
    worker: str | None = None
    worker_runs: int | None = None
    worker_rounds_per_min: float | None = None
    rounds_per_min: float | None = None

    def describe(self) -> str:
        if self.done is None:
            return f"{self.name}: {self.status}"
        line = f"[{self.done}/{self.total}] {self.name}: {self.status}"
        if self.status == "finished":
            line += f", FAITH {_fmt(self.initial_faith)} -> {_fmt(self.best_faith)}"
        elif self.error:
            line += f" ({self.error})"
        if self.worker:
            line += (
                f" [worker {self.worker}: {self.worker_runs} run(s), "
                f"{shown(self.worker_rounds_per_min, '.1f')} rounds/min; "
                f"batch {shown(self.rounds_per_min, '.1f')} rounds/min]"
            )
        return line


@dataclass(frozen=True)
class EntryEvent:
    """A run's own event inside a batch, with the entry it belongs to."""

    entry: int
    name: str
    event: Event

    def describe(self) -> str:
        return f"{self.name}: {self.event.describe()}"


def _fmt(x: float | None) -> str:
    return shown(x)


Event = (
    ModelsLoading
    | RunStarted
    | StageStarted
    | StepDone
    | ReviewWaiting
    | RoundDecided
    | RunFinished
    | BatchStarted
    | EntryChanged
    | EntryEvent
)
