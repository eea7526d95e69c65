"""How a number is said on screen (the command line, the pages, the app), in one place: a
value that is missing is a dash, never "n/a" in one place and 0 in another, and never a
made-up number."""

from __future__ import annotations

from typing import Any

MISSING = "\u2013"  # an en dash: what every screen shows for a missing value


def shown(x: float | None, spec: str = ".3f", width: int = 0) -> str:
    """``x`` formatted with ``spec`` (right-aligned to ``width``), or the dash."""
    text = MISSING if x is None else format(x, spec)
    return f"{text:>{width}}" if width else text


def with_error(x: float | None, stderr: float | None, spec: str = ".3f") -> str:
    """``0.712 ± 0.031``: a value read from sampled answers with its standard error; the
    value alone (:func:`shown`) where it has none (read by log-probabilities)."""
    text = shown(x, spec)
    return text if x is None or stderr is None else f"{text} \u00b1 {format(stderr, spec)}"


def p_text(p: float) -> str:
    """A p-value as a table shows it: ``p=0.012``, or ``p<0.001``."""
    return "p<0.001" if p < 0.001 else f"p={p:.3f}"


def interval_text(stat: dict[str, Any]) -> str:
    """``0.712 [0.650, 0.770]``, the dash where there is no mean, and each variant's
    apart where the values of different variants were not averaged together
    (``exag:ita: 0.050 [...]; exag:mllm: 0.300 [...]``)."""
    by = stat.get("by_variant")
    if by:
        return "; ".join(f"{v}: {interval_text(s)}" for v, s in by.items())
    mean, iv = stat.get("mean"), stat.get("interval")
    if mean is None:
        return MISSING
    return f"{mean:.3f}" + (f" [{iv[0]:.3f}, {iv[1]:.3f}]" if iv else "")
