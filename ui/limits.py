"""The operator's limits on what one visitor's run may ask of the app (``refine app
--max-rounds N --max-candidates N --max-run-minutes N --max-run-calls N``).

They sit below the command line's bounds, which sit below :class:`refine.records.RunSpec`'s
(app limit <= CLI bound <= RunSpec bound): :meth:`Limits.check` refuses an operator's limit
above them. Every app run gets the time and call limits as its budget (``budget_seconds``,
``budget_calls``); the run record's stop reason says which one ended it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from refine.settings import default, upper


@dataclass(frozen=True)
class Limits:
    rounds: int = 10  # editing rounds after round 0
    candidates: int = 8  # edit candidates per round
    run_minutes: float = 30.0  # wall time of one run
    run_calls: int = 400  # model calls of one run

    OPTIONS = {
        "rounds": "--max-rounds",
        "candidates": "--max-candidates",
        "run_minutes": "--max-run-minutes",
        "run_calls": "--max-run-calls",
    }

    def check(self) -> Limits:
        """Itself, when every limit is within the run settings' own bounds; else a
        ValueError naming the option."""
        for name, lowest in (("rounds", 0), ("candidates", 1)):
            value, most = getattr(self, name), upper(name)
            if int(value) != value or not lowest <= value <= most:
                raise ValueError(
                    f"{self.OPTIONS[name]}: a whole number from {lowest} to {most}, got {value}"
                )
        if not 0 < self.run_minutes <= 24 * 60:
            raise ValueError(f"--max-run-minutes: above 0 and at most 1440, got {self.run_minutes}")
        if int(self.run_calls) != self.run_calls or self.run_calls < 1:
            raise ValueError(f"--max-run-calls: a whole number of at least 1, got {self.run_calls}")
        return self

    def default_of(self, name: str) -> int:
        """What the form shows for ``rounds`` or ``candidates``: the run default, capped."""
        return min(default(name), getattr(self, name))

    def apply(self, numbers: dict[str, Any], kept: Any = None) -> dict[str, Any]:
        """The form's numbers with empty ones capped to the limits (or taken from ``kept``,
        a run spec a roll-back continues), refused above a limit with a message naming it;
        plus the run's budget (its time and its calls)."""
        out = dict(numbers)
        for name in ("rounds", "candidates"):
            value = out.get(name)
            if value is None:
                value = getattr(kept, name) if kept is not None and name != "rounds" else None
                value = self.default_of(name) if value is None else value
            self.refuse_above(name, value)
            out[name] = value
        out["budget_seconds"] = float(self.run_minutes) * 60.0
        out["budget_calls"] = int(self.run_calls)
        return out

    def refuse_above(self, name: str, value: float) -> None:
        """Refuse ``value`` of ``rounds`` or ``candidates`` above this app's limit, naming
        it and the option that sets it (any other setting: nothing to check)."""
        limit = getattr(self, name) if name in ("rounds", "candidates") else None
        if limit is not None and value > limit:
            what = "editing rounds" if name == "rounds" else "candidates per round"
            raise ValueError(
                f"{name}: {value:g} is above this app's limit of {limit} {what} "
                f"(the operator sets it with refine app {self.OPTIONS[name]})"
            )

    def describe(self) -> str:
        return (
            f"at most {self.rounds} editing rounds, {self.candidates} candidates per round, "
            f"{self.run_minutes:g} minutes and {self.run_calls} model calls per run"
        )
