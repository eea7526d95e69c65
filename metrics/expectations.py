"""Cultural expectations met: the share of an image's checked expectations the judge said
it meets (explicit ones, implicit ones, or all)."""

from __future__ import annotations

from collections.abc import Iterable


def met_share(met: Iterable[bool]) -> float | None:
    """The share of ``met`` that is true; None when nothing was checked."""
    flags = [bool(m) for m in met]
    return sum(flags) / len(flags) if flags else None
