"""What every per-round step is given and answers to (see :mod:`refine.loop.steps`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from refine.backends.selection import Backends
    from refine.evaluate.assess import Assessor, CallCounter
    from refine.events import Event
    from refine.io.store import RunStore
    from refine.records import Round, Run, RunSpec


@dataclass
class StepContext:
    """What a step may use: the models, the run's files, progress, the call count."""

    backends: Backends
    store: RunStore
    emit: Callable[[Event], None]
    calls: CallCounter
    assessor: Assessor


class RoundStep(Protocol):
    name: str

    def check(self, spec: RunSpec, country: str, backends: Backends) -> None: ...

    def after_round(self, run: Run, r: Round, ctx: StepContext) -> None: ...
