"""What a catalog metric's ``compute`` gives for one image when a bare number does not say
enough: the value, the variant of the formula that made it (``metrics.catalog.VARIANTS``),
how the judge was read for it, or why there is no value."""

from __future__ import annotations

from typing import NamedTuple

from metrics.judge import Reading


class Computed(NamedTuple):
    value: float | None
    variant: str | None = None  # the formula's short name (None: the metric has one)
    reading: Reading | None = None  # how the judge's answers were read for it
    note: str | None = None  # why there is no value


def as_computed(got: float | Computed | None) -> Computed:
    """A compute function's answer for one image as :class:`Computed` (a bare number is
    its value; None is no value, its reason the batch's)."""
    if isinstance(got, Computed):
        return got._replace(value=None if got.value is None else float(got.value))
    return Computed(None if got is None else float(got))
