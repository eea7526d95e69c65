"""What the terminal shows of a bench's results record: FAITH, quality and Vendi per
generator, the paired differences, the baselines and the EXAG variants."""

from __future__ import annotations

from typing import Any

from metrics.catalog import HEADLINE, label, made_by
from refine.numbers import MISSING, interval_text, shown


def _with_interval(stat: dict | None) -> str:
    """``0.712 [0.650, 0.770]``, each EXAG variant's apart where they differ, or the dash."""
    return interval_text(stat) if stat else MISSING


def variants(summary: dict[str, Any]) -> list[str]:
    """The EXAG variants a bench's FAITH was made with, over its generators."""
    found = set()
    for row in summary["generators"].values():
        stat = row.get(HEADLINE) or {}
        found.update([stat["variant"]] if stat.get("variant") else [])
        found.update(stat.get("by_variant") or {})
    return sorted(found)


def bench_lines(results: Any) -> list[str]:
    """The bench's leaderboard, a line per generator, then the paired differences, the
    baselines asked for and how EXAG was made."""
    summary = results.summary
    head = label(HEADLINE)
    lines = [f"{'generator':40} {'prompts':>7} {head:>22} {'quality':>22} {'Vendi':>7}"]
    for name, row in summary["generators"].items():
        faith, quality = _with_interval(row.get(HEADLINE)), _with_interval(row.get("quality"))
        vendi = shown(row["vendi"]["mean"], "7.2f", 7)
        lines.append(f"{name:40} {row['prompts']:>7} {faith:>22} {quality:>22} {vendi}")
    for p in summary["paired"]:
        if p["mean_difference"] is not None:
            lines.append(
                f"{p['other']} - {p['base']}: {head} {p['mean_difference']:+.4f} over "
                f"{p['prompts']} prompts, better on {100 * p['share_improved']:.0f}%"
            )
    for name in results.config.get("baselines") or ():
        got = [
            f"{g} {_with_interval(row[name]).strip()}"
            for g, row in summary["generators"].items()
            if name in row
        ]
        why = summary.get("missing", {}).get(name)
        if got or why:
            lines.append(f"{name}: " + ("; ".join(got) if got else f"not computed: {why}"))
    found = variants(summary)
    if found:
        lines.append("EXAG: " + "; ".join(made_by(v) for v in found))
    return lines
