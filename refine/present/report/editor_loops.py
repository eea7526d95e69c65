"""The editor bench's page: each editor's loops side by side (FAITH, quality, drift), the
loop where its quality falls below the guard marked, FAITH and quality against the loop a
line per editor, overall and per country."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from refine.harness.results import Results
from refine.numbers import MISSING
from refine.present.charts import line_chart
from refine.present.html import document, escape, interval_text, raw, write_page
from refine.present.report.forgetting import forgetting_table

BELOW = "\u25bc below the guard"


def write_editor_loops_page(folder: str | Path, results: Results | None = None) -> Path:
    """``editor_loops.html`` in the bench folder, from its results record."""
    results = results or Results.read(folder, "editor-loops")
    return write_page(Path(folder) / "editor_loops.html", render_editor_loops(results))


def _columns(localize: bool) -> list[tuple[str, str]]:
    cols = [("faith", "FAITH \u2191"), ("quality", "quality \u2191"), ("drift", "drift")]
    if localize:
        cols.append(("drift_outside", "drift outside boxes"))
    return cols + [("drift_from_source", "drift from source")]


def side_by_side(by_editor: dict[str, Any], localize: bool) -> str:
    """A row a loop, each editor's columns beside the others'; the loop where an editor's
    mean quality first falls below its guard is marked."""
    cols = _columns(localize)
    editors = list(by_editor)
    top = "".join(f'<th colspan="{len(cols)}">{escape(e)}</th>' for e in editors)
    sub = "".join(f"<th>{escape(t)}</th>" for _ in editors for _, t in cols)
    loops = max((len(s["loops"]) for s in by_editor.values()), default=0)
    body = []
    for k in range(loops):
        cells = []
        for e in editors:
            s = by_editor[e]
            row = s["loops"][k] if k < len(s["loops"]) else None
            for m, _ in cols:
                if row is None:
                    cells.append(f"<td>{MISSING}</td>")
                    continue
                text = escape(interval_text(row[m]))
                if m == "faith" and row["prompts"] < s["prompts"]:  # some chains ended
                    text += f" ({row['prompts']} of {s['prompts']} prompts)"
                if m == "quality" and s.get("first_below_guard") == k:
                    text += f" <strong>{BELOW}</strong>"
                cells.append(
                    f'<td data-editor="{escape(e)}" data-loop="{k}" data-metric="{m}" '
                    f'data-mean="{raw(row[m]["mean"])}">{text}</td>'
                )
        body.append(f"<tr><td>{k}</td>{''.join(cells)}</tr>")
    guards = "; ".join(
        f"{escape(e)}: {MISSING if s['guard'] is None else format(s['guard'], '.3f')}"
        for e, s in by_editor.items()
    )
    return (
        f'<table><tr><th rowspan="2">loop</th>{top}</tr><tr>{sub}</tr>{"".join(body)}</table>'
        f"<p>The quality guard (the source's quality less the loop's largest allowed drop, "
        f"mean over prompts): {guards}.</p>"
    )


def _charts(by_editor: dict[str, Any], where: str) -> str:
    loops = max((len(s["loops"]) for s in by_editor.values()), default=0)
    labels = [str(k) for k in range(loops)]
    out = []
    for m, title in (("faith", "FAITH \u2191"), ("quality", "quality \u2191")):
        series = {
            e: [r[m]["mean"] for r in s["loops"]] + [None] * (loops - len(s["loops"]))
            for e, s in by_editor.items()
        }
        out.append(
            line_chart(
                series,
                labels,
                title=f"{title.split()[0]} over the loops{where}",
                x_title="edits in a row (loop)",
                y_title=f"{title} (mean over prompts)",
            )
        )
    return "".join(out)


def render_editor_loops(results: Results) -> str:
    summary, config = results.summary, results.config
    localize = bool(config.get("localize"))
    scorer = ", ".join(f"{k} {v}" for k, v in config["scorer"].items())
    parts = [
        f"<p>Each editor edited every prompt's source image {config['loops']} times in a row, "
        "each edit from the one before with the loop's instruction for it"
        f"{', restricted to the observer’s boxes' if localize else ''}; every edit kept and "
        f"scored by {escape(scorer)}. Means over prompts with 95% bootstrap intervals; drift "
        "is from the image before (1 \u2212 the cosine of their image embeddings).</p>",
        side_by_side(summary["editors"], localize),
        _charts(summary["editors"], ""),
    ]
    rows = [(e, s.get("forgetting")) for e, s in summary["editors"].items()]
    if any(f for _, f in rows):
        how = "along each chain, every edit from the one before"
        parts += ["<h2>Fixes forgotten</h2>", forgetting_table(rows, "editor", how)]
    countries = sorted({c for by in summary.get("countries", {}).values() for c in by})
    for country in countries:
        by = {e: cs[country] for e, cs in summary["countries"].items() if country in cs}
        parts += [
            f"<h2>{escape(country)}</h2>",
            side_by_side(by, localize),
            _charts(by, f" ({country})"),
        ]
    return document("Editors over many edits", "".join(parts))
