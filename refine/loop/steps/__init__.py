"""Per-round steps: measurements that run after a round is decided.

A step has ``check(spec, country, backends)``, called before a run spends anything (it
raises ``ValueError`` naming what is wrong), and ``after_round(run, round, ctx)``, which
fills its typed field of the round. A new per-round measurement is a new step here, not a
new block in the loop. Steps never import the loop.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from refine.loop.steps.caire import CaireStep
from refine.loop.steps.expectations import ExpectationsStep
from refine.loop.steps.languages import LanguagesStep

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


def default_steps() -> list[Any]:
    """The steps every run has; each does nothing unless its settings are given."""

    return [CaireStep(), LanguagesStep(), ExpectationsStep()]
