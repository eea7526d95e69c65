"""Run views turned into what the app's widgets take (no model code, no gradio import).

Every value comes from :mod:`refine.present.views`; this module only changes its shape (the chart
as inline SVG, the checklist as highlighted-text pairs).
"""

from __future__ import annotations

from refine.present.views import (
    CHART_X,
    CHART_Y,
    TABLE_HEADERS,
    before_after,
    caire_text,
    chart_range,
    exag_in,
    gallery,
    glossary,
    language_gallery,
    languages_text,
    metric_errors,
    metric_rows,
    metric_series,
    rounds_table,
    table_extras,
    table_headers,
)
from refine.records import Round, Run

__all__ = [
    "CHECK_COLOURS",
    "TABLE_HEADERS",
    "TABLE_WIDTHS",
    "table_headers",
    "table_widths",
    "before_after",
    "caire_text",
    "checklist",
    "timeline",
    "gallery",
    "GLOSSARY_TITLE",
    "glossary_markdown",
    "language_gallery",
    "languages_text",
    "metric_chart",
    "metric_rows",
    "rounds_table",
]

CHECK_COLOURS = {
    "aligned": "#2da44e",
    "missing": "#bf8700",
    "hallucinated": "#cf222e",
    "near match": "#0969da",
    "exaggerated": "#8250df",
    "met": "#2da44e",
    "not met": "#bf8700",
}


KIND_LABELS = {"near": "near match"}


def table_widths() -> list[str]:
    """The rounds table's column widths, in :func:`table_headers` order (round, decision,
    six metrics, a metric the catalog adds, reason, CAIRE, SoS, tokens): the numbers
    narrow and the reason wide enough to wrap in a few lines, so that round to reason fit
    the 800 px the table has on a desktop (with no metric added)."""
    extras = ["68px"] * len(table_extras())
    return [
        "62px",
        "86px",
        "68px",
        "80px",
        *["68px"] * 4,
        *extras,
        "230px",
        "140px",
        "150px",
        "150px",
    ]


TABLE_WIDTHS = table_widths()  # with the catalog as it is when this module loads


GLOSSARY_TITLE = "What the numbers mean (\u2191 higher is better, \u2193 lower is better)"


def glossary_markdown(run: Run | None = None) -> str:
    """The glossary of a run's numbers as a Markdown list (terms in bold); with a run,
    first the EXAG variant it used (the paper's with real photos, the MLLM variant
    without), the photos and the tau."""
    lines = [f"- **{term}**: {meaning}" for term, meaning in glossary()]
    if run is not None and run.rounds:
        lines.insert(0, f"- **EXAG in this run**: {exag_in(run.rounds[0].best.scores)}")
    return "\n".join(lines)


def timeline(run: Run) -> str:
    """What each round fixed and lost, descriptor by descriptor (the report's table)."""
    from refine.present.timeline import timeline_html

    return timeline_html(run)


def metric_chart(run: Run) -> str:
    """The metric series as an inline SVG line chart (the same chart as the report's),
    accepted / rejected marks under the axis."""
    from refine.present.charts import line_chart

    series = metric_series(run)
    labels = [str(r.index) for r in run.rounds]
    marks = [r.decision for r in run.rounds]
    return line_chart(
        series,
        labels,
        marks,
        "metrics per round",
        y_range=chart_range(series),
        target=run.spec.target,
        x_title=CHART_X,
        y_title=CHART_Y,
        errors=metric_errors(run),
    )


def check_text(c) -> str:
    """A checklist item with why it counts: a missing or hallucinated phrase names its
    closest counterpart and their similarity (tau decides)."""
    m = c.match
    if c.kind == "near":
        return f"{m.phrase} (near match of {m.best_match}, {m.similarity:.2f}: kept) "
    if c.kind == "aligned" or not m.best_match or m.similarity is None:
        return f"{m.phrase} "
    return f"{m.phrase} (closest: {m.best_match}, {m.similarity:.2f}) "


# what an edit should change; the rest of a checklist (aligned, near matches, met
# expectations) is what the image already gets right
TO_FIX = frozenset({"missing", "hallucinated", "exaggerated", "not met"})
NOTHING_TO_FIX = "nothing to fix: every descriptor in sight, no stereotype exaggerated"


def checklist(
    r: Round, near_margin: float | None = None, part: str | None = None
) -> list[tuple[str, str | None]]:
    """Highlighted-text pairs per dimension: (phrase, aligned|missing|hallucinated), then
    the stereotypes seen as exaggerated, then the expectations; dimension names as
    unlabelled headers. ``part``: ``"fix"`` keeps what an edit should change (missing,
    hallucinated, exaggerated, not met), ``"ok"`` what the image gets right, None both. A
    group with nothing of the part is left out whole."""
    from refine.present.views import checklist as view
    from refine.present.views import expectation_lines

    by_dim, exaggerated = view(r, near_margin)
    groups: list[tuple[str, list[tuple[str, str]]]] = [
        (f"{d}: ", [(check_text(c), KIND_LABELS.get(c.kind, c.kind)) for c in items])
        for d, items in by_dim.items()
    ]
    if exaggerated:
        groups.append(("stereotypes: ", [(f"{e.candidate} ", "exaggerated") for e in exaggerated]))
    for kind in ("explicit", "implicit"):
        lines = [x for x in expectation_lines(r) if x[0] == kind]
        if lines:
            met = sum(x[3] for x in lines)
            items = [(f"{text} ({p:.2f}) ", "met" if ok else "not met") for _, text, p, ok in lines]
            groups.append((f"{kind} expectations ({met}/{len(lines)} met): ", items))
    if part not in (None, "fix", "ok"):
        raise ValueError(f"part is 'fix', 'ok' or None, not {part!r}")
    out: list[tuple[str, str | None]] = []
    for header, items in groups:
        kept = [x for x in items if part is None or (x[1] in TO_FIX) == (part == "fix")]
        if kept:
            out += [(header, None), *kept, ("\n", None)]
    if part == "fix" and not out and groups:
        out.append((NOTHING_TO_FIX, None))
    return out


def progress_bar(fraction: float, text: str) -> str:
    """A progress bar with its words (``round 2 of 5 · editing, step 12 of 30 · ...``), as
    HTML an assistive reader announces (role progressbar, value in percent)."""
    from ui.safe import html_text as escape

    pct = round(100 * max(0.0, min(1.0, float(fraction))))
    return (
        f'<div class="refine-progress" role="progressbar" aria-valuemin="0" '
        f'aria-valuemax="100" aria-valuenow="{pct}" aria-label="run progress">'
        '<div style="height:10px;border-radius:5px;background:#e5e7eb;overflow:hidden">'
        f'<div class="refine-progress-fill" style="height:100%;width:{pct}%;'
        'background:#1f6feb;transition:width .3s"></div></div>'
        f'<div class="refine-progress-text" style="font-size:.9em;margin-top:4px">'
        f"{pct}% \u00b7 {escape(text)}</div></div>"
    )
