"""How an editor bench's cells are summarised: per editor (and per editor and country),
each loop's FAITH, quality and drift (from the image before, outside the edit's boxes, and
from the source), a mean over prompts with its 95% bootstrap interval; the quality guard
and the first loop whose mean quality falls below it; the share of prompts below it by
each loop."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from metrics.catalog import EDITOR_LOOP, pooled
from metrics.stats import mean_of
from refine.harness.cells import Cell
from refine.harness.tasks.loop_benches import forgetting_line, forgetting_sum
from refine.numbers import interval_text, shown

FIGURES = (*EDITOR_LOOP, "drift_outside", "drift_from_source")


def by_loop(cells: list[Cell], loops: int, seed: int) -> dict[str, Any]:
    """One editor's loops 0..``loops`` over ``cells`` (its prompts)."""
    rows = []
    guards = [c.data.get("guard") for c in cells]
    guard = mean_of(guards)
    first = None
    for k in range(loops + 1):
        at = [next((r for r in c.images if r["loop"] == k), None) for c in cells]
        row: dict[str, Any] = {"loop": k, "prompts": sum(r is not None for r in at)}
        for f in FIGURES:
            values = [None if r is None else r.get(f) for r in at]
            row[f] = pooled(f, values, seed)
        below = [  # of the prompts whose chain reached this loop
            g is not None and r["quality"] is not None and r["quality"] < g - 1e-9
            for r, g in zip(at, guards, strict=True)
            if r is not None
        ]
        row["below_guard"] = sum(below) / len(below) if below else None
        q = row["quality"]["mean"]
        if first is None and k and guard is not None and q is not None and q < guard - 1e-9:
            first = k
        rows.append(row)
    return {"prompts": len(cells), "guard": guard, "first_below_guard": first, "loops": rows,
            "forgetting": forgetting_sum(cells)}  # fmt: skip


def summarise(
    cells: list[Cell], editors: Sequence[str], loops: int, seed: int = 42
) -> dict[str, Any]:
    out: dict[str, Any] = {"editors": {}, "countries": {}}
    for e in editors:
        mine = [c for c in cells if c.inputs["editor"] == e]
        out["editors"][e] = by_loop(mine, loops, seed)
        out["countries"][e] = {
            country: by_loop([c for c in mine if c.inputs["country"] == country], loops, seed)
            for country in sorted({c.inputs["country"] for c in mine})
        }
    return out


def loop_lines(results: Any) -> list[str]:
    """Each editor's loops on the terminal: FAITH, quality and drift, the guard marked."""
    summary = results.summary
    lines = []
    for e, s in summary["editors"].items():
        guard = shown(s["guard"], ".3f")
        lines.append(f"{e} ({s['prompts']} prompt(s); quality guard {guard})")
        lines.append("  loop  FAITH                  quality                drift")
        for row in s["loops"]:
            mark = "  below the guard" if s["first_below_guard"] == row["loop"] else ""
            lines.append(
                f"  {row['loop']:>4}  {interval_text(row['faith']):<22} "
                f"{interval_text(row['quality']):<22} "
                f"{interval_text(row['drift'])}{mark}"
            )
        lines.append(f"  {forgetting_line(s.get('forgetting'))}")
    return lines


def failed_chains(cells: list[dict[str, Any]]) -> list[str]:
    """A line for each chain a failure ended (an editor that cannot load fails every chain
    it is given): how many of its edits were made, and why it ended."""
    return [
        f"{c['editor']}: {c['activity']} ({c['country']}): failed after "
        f"{max(0, len(c['images']) - 1)} of {c['loops']} edit(s): {c['failed']}"
        for c in cells
        if c.get("failed")
    ]
