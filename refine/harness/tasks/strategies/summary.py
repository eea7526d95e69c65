"""How the strategies cells are summarised: per strategy, and per strategy and country,
the final FAITH and quality, the share of prompts reaching the target, and the calls and
seconds used, each a mean over prompts with its 95% bootstrap interval; each strategy
against best-of-N on the same prompts (FAITH's mean paired difference, its interval by the
one paired bootstrap of :mod:`metrics.stats`, the share improved); and the curve of FAITH
against calls spent."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from metrics.catalog import pooled
from metrics.stats import paired_difference
from refine.harness.cells import Cell
from refine.harness.tasks.loop_benches import forgetting_line, forgetting_sum
from refine.harness.tasks.strategies.plan import BEST_OF_N, with_memory
from refine.numbers import interval_text, shown

CURVE_POINTS = 11  # the budget's calls split in ten


def stats(cells: list[Cell], seed: int) -> dict[str, Any]:
    """Each figure's mean over the cells (prompts) and its interval."""
    return {
        "prompts": len(cells),
        "faith": pooled("faith", [c.outputs.get("faith") for c in cells], seed),
        "quality": pooled("quality", [c.outputs.get("quality") for c in cells], seed),
        "reached": pooled("reached", [float(bool(c.data.get("reached"))) for c in cells], seed),
        "calls": pooled("calls", [c.data.get("calls") for c in cells], seed),
        "seconds": pooled("seconds", [c.data.get("seconds") for c in cells], seed),
        # what a loop's kept rounds fixed and undid (None: best-of-N, which edits nothing)
        "forgetting": forgetting_sum(cells),
    }


def paired(cells: list[Cell], other: str, seed: int, base: str = BEST_OF_N) -> dict[str, Any]:
    """``other`` against ``base`` (best-of-N; a strategy against itself with +memory) on
    the prompts both have a FAITH for: the mean of other - base, its interval and the
    share of prompts improved."""
    by = {s: _faith_by_prompt(cells, s) for s in (base, other)}
    common = sorted(k for k in by[other] if k in by[base])
    diffs = [by[other][k] - by[base][k] for k in common]
    return {"base": base, "other": other, "metric": "faith", **paired_difference(diffs, seed)}


def _faith_by_prompt(cells: list[Cell], strategy: str) -> dict[tuple[str, str], float]:
    return {
        (c.inputs["activity"], c.inputs["country"]): c.outputs["faith"]
        for c in cells
        if c.inputs["strategy"] == strategy and c.outputs.get("faith") is not None
    }


def best_by(steps: list[dict[str, Any]], calls: float, strategy: str) -> float | None:
    """The FAITH a strategy holds once ``calls`` are spent: best-of-N's best candidate so
    far, the loop's best round so far (None before its first image)."""
    held = None
    for s in steps:
        if s.get("calls") is None or s["calls"] > calls or s.get("faith") is None:
            continue
        if strategy == BEST_OF_N:
            held = s["faith"] if held is None else max(held, s["faith"])
        elif s.get("decision") in ("initial", "accepted"):
            held = s["faith"]
    return held


def curve(cells: list[Cell], strategies: Sequence[str], budget: int | None) -> dict[str, Any]:
    """Mean FAITH held over prompts at each of :data:`CURVE_POINTS` call counts up to the
    budget (without a calls budget, up to the most calls a cell used), a line per strategy
    (None where a prompt has no image yet)."""
    budget = budget or max((c.data.get("calls") or 0 for c in cells), default=0)
    if not budget:
        return {}
    xs = [round(budget * k / (CURVE_POINTS - 1)) for k in range(CURVE_POINTS)]
    lines: dict[str, list[float | None]] = {}
    for s in strategies:
        mine = [c for c in cells if c.inputs["strategy"] == s]
        points: list[float | None] = []
        for x in xs:
            held = [best_by(c.images, x, s) for c in mine]
            points.append(None if not held or None in held else sum(held) / len(held))
        lines[s] = points
    return {"calls": xs, "faith": lines}


def summarise(
    cells: list[Cell], strategies: Sequence[str], budget: int | None, seed: int = 42
) -> dict[str, Any]:
    out: dict[str, Any] = {"strategies": {}, "countries": {}, "paired": [], "paired_countries": {}}
    for s in strategies:
        mine = [c for c in cells if c.inputs["strategy"] == s]
        out["strategies"][s] = stats(mine, seed)
        out["countries"][s] = {
            country: stats([c for c in mine if c.inputs["country"] == country], seed)
            for country in sorted({c.inputs["country"] for c in mine})
        }
    if BEST_OF_N in strategies:
        others = [s for s in strategies if s != BEST_OF_N]
        out["paired"] = [paired(cells, s, seed) for s in others]
        for country in sorted({c.inputs["country"] for c in cells}):
            same = [c for c in cells if c.inputs["country"] == country]
            out["paired_countries"][country] = [paired(same, s, seed) for s in others]
    # each strategy with +memory against itself without, at the same calls
    out["memory"] = [
        paired(cells, s, seed, base=with_memory(s)[0])
        for s in strategies
        if with_memory(s)[1] and with_memory(s)[0] in strategies
    ]
    out["curve"] = curve(cells, strategies, budget)
    return out


def summary_lines(results: Any) -> list[str]:
    """The table of strategies on the terminal, then the paired differences."""
    summary = results.summary
    lines = ["strategy      prompts  FAITH                  quality                reached"
             "   calls    seconds"]  # fmt: skip
    for s, st in summary["strategies"].items():
        reached = shown(st["reached"]["mean"], ".0%")
        lines.append(
            f"{s:<13} {st['prompts']:>7}  {interval_text(st['faith']):<22} "
            f"{interval_text(st['quality']):<22} "
            f"{reached:>7}   {shown(st['calls']['mean'], '.0f'):>5}  "
            f"{shown(st['seconds']['mean'], '.1f'):>8}"
        )
        if st.get("forgetting"):
            lines.append(f"{'':<13} {forgetting_line(st['forgetting'])}")
    for p in [*(summary.get("paired") or []), *(summary.get("memory") or [])]:
        iv = p["interval"]
        span = f" [{iv[0]:+.4f}, {iv[1]:+.4f}]" if iv else ""
        share = shown(p["share_improved"], ".0%")
        lines.append(
            f"{p['other']} - {p['base']}: FAITH {shown(p['mean_difference'], '+.4f')}{span} "
            f"on {p['prompts']} prompt(s), better on {share}"
        )
    return lines
