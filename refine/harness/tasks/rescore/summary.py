"""What the terminal shows of a rescore's results record: what was recomputed, from which
bench, with how many model calls, and each generator's FAITH."""

from __future__ import annotations

from typing import Any


def rescore_lines(results: Any) -> list[str]:
    """The cells rescored, what they recomputed and their calls, then FAITH per generator."""
    calls = sum((c.get("rescored") or {}).get("model_calls", 0) for c in results.cells)
    first = (results.cells[0].get("rescored") or {}) if results.cells else {}
    source = (results.config.get("rescored_from") or {}).get("bench", "?")
    lines = [
        f"{len(results.cells)} cells rescored from {source}: recomputed "
        f"{', '.join(first.get('recomputed', []))}; {calls} model calls"
    ]
    for g, row in results.summary["generators"].items():
        faith = (row.get("faith") or {}).get("mean")
        lines.append(f"  {g}: FAITH {faith:.3f}" if faith is not None else f"  {g}: FAITH -")
    return lines
