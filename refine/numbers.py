"""How a number is said on screen (the command line, the pages, the app), in one place: a
value that is missing is a dash, never "n/a" in one place and 0 in another, and never a
made-up number."""

from __future__ import annotations

MISSING = "\u2013"  # an en dash: what every screen shows for a missing value


def shown(x: float | None, spec: str = ".3f", width: int = 0) -> str:
    """``x`` formatted with ``spec`` (right-aligned to ``width``), or the dash."""
    text = MISSING if x is None else format(x, spec)
    return f"{text:>{width}}" if width else text


def p_text(p: float) -> str:
    """A p-value as a table shows it: ``p=0.012``, or ``p<0.001``."""
    return "p<0.001" if p < 0.001 else f"p={p:.3f}"
