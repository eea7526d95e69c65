"""Run views turned into what the app's widgets take (no model code, no gradio import).

Every value comes from :mod:`refine.views`; this module only changes its shape (the chart
as inline SVG, the checklist as highlighted-text pairs).
"""

from __future__ import annotations

from refine.records import Round, Run
from refine.views import (
    CHART_X,
    CHART_Y,
    TABLE_HEADERS,
    before_after,
    caire_text,
    chart_range,
    gallery,
    language_gallery,
    languages_text,
    metric_rows,
    metric_series,
    rounds_table,
)

__all__ = [
    "CHECK_COLOURS",
    "TABLE_HEADERS",
    "before_after",
    "caire_text",
    "checklist",
    "gallery",
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
    "exaggerated": "#8250df",
}


def metric_chart(run: Run) -> str:
    """The metric series as an inline SVG line chart (the same chart as the report's),
    accepted / rejected marks under the axis."""
    from refine.report import line_chart

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
    )


def check_text(c) -> str:
    """A checklist item with why it counts: a missing or hallucinated phrase names its
    closest counterpart and their similarity (tau decides)."""
    m = c.match
    if c.kind == "aligned" or not m.best_match or m.similarity is None:
        return f"{m.phrase} "
    return f"{m.phrase} (closest: {m.best_match}, {m.similarity:.2f}) "


def checklist(r: Round) -> list[tuple[str, str | None]]:
    """Highlighted-text pairs per dimension: (phrase, aligned|missing|hallucinated), then
    the stereotypes seen as exaggerated; dimension names as unlabelled headers."""
    from refine.views import checklist as view

    by_dim, exaggerated = view(r)
    out: list[tuple[str, str | None]] = []
    for d, items in by_dim.items():
        out.append((f"{d}: ", None))
        out.extend((check_text(c), c.kind) for c in items)
        out.append(("\n", None))
    if exaggerated:
        out.append(("stereotypes: ", None))
        out.extend((f"{e.candidate} ", "exaggerated") for e in exaggerated)
    return out
