"""What the terminal shows of a score's results record: FAITH, ALIGN, HAL and EXAG per
image, what each misses, hallucinates and exaggerates, the expectations it meets, how EXAG
was read and the baselines."""

from __future__ import annotations

from typing import Any

from metrics.catalog import CATALOG
from refine.numbers import shown


def _fmt(value: float | None) -> str:
    return shown(value, "6.3f", 6)


def score_lines(results: Any) -> list[str]:
    """The lines of ``refine score``'s results."""
    from refine.records import Scores

    config = results.config
    images = [im for cell in results.cells for im in cell.get("images") or ()]
    lines = []
    if config.get("tau_source") != "given":
        lines.append(f"tau {config['tau']:g} ({config['tau_source']})")
    lines += [
        f"\n{config['activity']} - {config['country']}",
        f"{'FAITH':>6} {'ALIGN':>6} {'HAL':>6} {'EXAG':>6}  image",
    ]
    for im in images:
        s = im["scores"]["values"]
        lines.append(
            f"{_fmt(s['faith'])} {_fmt(s['align'])} {_fmt(s['hal'])} {_fmt(s['exag'])}  "
            f"{im['file']}"
        )
    for im in images:
        fb = im["feedback"]
        lines.append(f"\n{im['file']}:")
        for kind in ("missing", "hallucinated"):
            lines.append(f"  {kind}: {', '.join(m['phrase'] for m in fb[kind]) or '-'}")
        seen = [x["candidate"] for x in fb["exaggerated"]]
        lines.append(f"  stereotypes seen: {', '.join(seen) or '-'}")
        ex = im.get("expectations")
        for kind in ("explicit", "implicit") if ex else ():
            share = ex[f"{kind}_met"]
            if share is not None:
                missed = [
                    c["statement"] for c in ex["checks"] if c["kind"] == kind and not c["met"]
                ]
                lines.append(
                    f"  {kind} expectations met: {100 * share:.0f}%"
                    + (f"; missed: {'; '.join(missed)}" if missed else "")
                )
    if images:
        lines.append(f"\nEXAG: {Scores.model_validate(images[0]['scores']).made_by()}")
    for name in config.get("baselines") or ():
        for im in images:
            why = ""
            if name == "tifa":  # the questions the judge did not answer yes
                no = [a["question"] for a in im["scores"]["tifa"] or () if a["p_yes"] <= 0.5]
                why = f"  (answered no: {' '.join(no)})" if no else ""
            value = _fmt(im["scores"]["values"].get(name))
            lines.append(f"{CATALOG[name].label} {value}  {im['file']}{why}")
    return lines
