"""Starting a run in tests as a script would: raw settings validated into a RunSpec and its
references (:func:`refine.settings.load`), then the Refiner's one entry,
:meth:`refine.loop.refiner.Refiner.start`."""

from __future__ import annotations

from typing import Any

from refine import settings


def begin(
    refiner: Any, activity: str, country: str, out: Any = "runs", references: Any = None, **raw: Any
) -> Any:
    """``refiner``'s run of ``activity`` in ``country`` with ``raw`` settings (``references``
    instead of the ones found)."""
    spec, found = settings.load({"activity": activity, "country": country, **raw})
    return refiner.start(spec, references or found, out)


def prepared(activity: str, country: str, **raw: Any) -> tuple[Any, Any]:
    """The spec and references of a run of ``activity`` in ``country`` with ``raw``
    settings, as :meth:`refine.service.RunService.start` takes them."""
    return settings.load({"activity": activity, "country": country, **raw})
