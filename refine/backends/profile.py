"""A profile as the backends read it: one backend name per role, with its options and the
observer's calibrated tau. :mod:`refine.profiles` finds and loads them (TOML in
``assets/profiles/``); :class:`refine.backends.selection.Backends` takes one loaded."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from refine.backends.registry import create


@dataclass(frozen=True)
class Profile:
    name: str
    description: str
    roles: dict[str, str]
    path: Path
    options: dict[str, dict[str, Any]] = field(default_factory=dict)
    # language models that build references the pack lacks: proposers (list), refiner
    refs: dict[str, Any] = field(default_factory=dict)
    # the match threshold calibrated for this profile's observer, and where it comes from
    tau: float | None = None
    tau_source: str = ""
    # the seconds an editing round takes where the profile is slow enough to say so (the cpu
    # profile), and how that was measured
    round_seconds: float | None = None
    round_source: str = ""
    # what a model call costs, in USD per call by role (``[costs]``; a dry run's estimate),
    # and where the prices come from
    costs: dict[str, float] = field(default_factory=dict)
    costs_source: str = ""
    # the share of those prices a batch job pays (--batch; the Gemini Batch API's 0.5)
    costs_batch: float | None = None

    def backend(self, role: str) -> str:
        if role not in self.roles:
            raise ValueError(f"profile {self.name!r} names no backend for role {role!r}")
        return self.roles[role]

    def create(self, role: str, **overrides: Any) -> Any:
        """The profile's backend for ``role`` with its options (``overrides`` win)."""

        name = self.backend(role)
        options = {**self.options.get(role, {}), **overrides}
        try:
            return create(role, name, **options)
        except TypeError as err:
            raise ValueError(
                f"profile {self.name!r}: options.{role} do not fit backend {name!r} ({err})"
            ) from err
