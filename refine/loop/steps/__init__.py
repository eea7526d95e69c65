"""Per-round steps: measurements that run after a round is decided.

A step has ``check(spec, country, backends)``, called before a run spends anything (it
raises ``ValueError`` naming what is wrong), and ``after_round(run, round, ctx)``, which
fills its typed field of the round. A new per-round measurement is a new step here, not a
new block in the loop. Steps never import the loop.
"""

from __future__ import annotations

from refine.loop.steps.base import RoundStep, StepContext
from refine.loop.steps.caire import CaireStep
from refine.loop.steps.expectations import ExpectationsStep
from refine.loop.steps.languages import LanguagesStep

__all__ = ["RoundStep", "StepContext", "default_steps"]


def default_steps() -> list[RoundStep]:
    """The steps every run has; each does nothing unless its settings are given."""

    return [CaireStep(), LanguagesStep(), ExpectationsStep()]
