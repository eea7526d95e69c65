"""The loop benches' forgetting table (refine.loop.tracking over each cell's run): per
strategy or editor, the fixes its edits made and how many a later edit undid, the items
they removed and how many came back, and where (per dimension)."""

from __future__ import annotations

from typing import Any

from refine.numbers import MISSING
from refine.present.html import escape


def _share(x: float | None) -> str:
    return MISSING if x is None else f"{100 * x:.0f}%"


def forgetting_table(rows: list[tuple[str, dict[str, Any] | None]], first: str, how: str) -> str:
    """A row per strategy or editor (a dash for one whose edits are not followed, as
    best-of-N's); ``how`` says which images were followed."""
    body = []
    for name, f in rows:
        if f is None:
            body.append(f'<tr><td>{escape(name)}</td><td colspan="6">{MISSING} (no edits '
                        "followed)</td></tr>")  # fmt: skip
            continue
        where = ", ".join(
            f"{escape(d)}: "
            + "; ".join(
                ([f"{x['forgotten']} of {x['fixed']} fixes forgotten"] if x["forgotten"] else [])
                + ([f"{x['came_back']} of {x['removed']} came back"] if x["came_back"] else [])
            )
            for d, x in f["dimensions"].items()
            if x["forgotten"] or x["came_back"]
        )
        body.append(
            f'<tr data-name="{escape(name)}" data-forgotten="{f["forgotten"]}" '
            f'data-fixed="{f["fixed"]}" data-came-back="{f["came_back"]}">'
            f"<td>{escape(name)}</td><td>{f['prompts']}</td><td>{f['fixed']}</td>"
            f"<td>{f['forgotten']} ({_share(f['forgotten_share'])})</td><td>{f['removed']}</td>"
            f"<td>{f['came_back']} ({_share(f['came_back_share'])})</td>"
            f"<td>{where or MISSING}</td></tr>"
        )
    return (
        f"<p>What the edits fixed and later undid, {escape(how)}: a reference descriptor "
        "made aligned and lost again by a later edit is forgotten; a hallucinated or "
        "exaggerated item removed and back later came back. Counts over every prompt.</p>"
        f"<table><tr><th>{escape(first)}</th><th>prompts</th><th>fixes made</th>"
        "<th>forgotten</th><th>items removed</th><th>came back</th>"
        "<th>per dimension</th></tr>" + "".join(body) + "</table>"
    )
