"""The strategies page: best-of-N against the loop's strategies at one budget per prompt,
per strategy and per country with intervals, each against best-of-N on the same prompts,
and FAITH against the calls spent, a line per strategy."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from refine.harness.results import Results
from refine.numbers import MISSING
from refine.present.charts import line_chart
from refine.present.html import document, escape, interval_text, raw, write_page
from refine.present.report.forgetting import forgetting_table

COLUMNS = (
    ("faith", "FAITH \u2191"),
    ("quality", "quality \u2191"),
    ("reached", "reached target"),
    ("calls", "calls used"),
    ("seconds", "seconds used"),
)
# how each column's mean and interval are written
FORMATS = {"reached": lambda x: f"{100 * x:.0f}%", "calls": lambda x: f"{x:.0f}"}
FORMATS["seconds"] = lambda x: f"{x:.1f}"


def _text(metric: str, stat: dict[str, Any]) -> str:
    form = FORMATS.get(metric)
    if form is None:
        return interval_text(stat)
    mean, iv = stat.get("mean"), stat.get("interval")
    if mean is None:
        return MISSING
    return form(mean) + (f" [{form(iv[0])}, {form(iv[1])}]" if iv else "")


def write_strategies_page(folder: str | Path, results: Results | None = None) -> Path:
    """``strategies.html`` in the bench folder, from its results record."""
    results = results or Results.read(folder, "strategies")
    return write_page(Path(folder) / "strategies.html", render_strategies(results))


def _table(rows: list[tuple[str, dict[str, Any]]], first: str) -> str:
    head = "".join(f"<th>{escape(t)}</th>" for _, t in COLUMNS)
    body = []
    for name, st in rows:
        cells = "".join(
            f'<td data-metric="{m}" data-mean="{raw(st[m]["mean"])}">{escape(_text(m, st[m]))}</td>'
            for m, _ in COLUMNS
        )
        body.append(f"<tr><td>{escape(name)}</td><td>{st['prompts']}</td>{cells}</tr>")
    return (
        f"<table><tr><th>{escape(first)}</th><th>prompts</th>{head}</tr>"
        + "".join(body)
        + "</table>"
    )


def _paired(rows: list[dict[str, Any]]) -> str:
    out = []
    for p in rows:
        iv = p["interval"]
        span = MISSING if not iv else f"[{iv[0]:+.4f}, {iv[1]:+.4f}]"
        share = MISSING if p["share_improved"] is None else f"{100 * p['share_improved']:.0f}%"
        diff = MISSING if p["mean_difference"] is None else f"{p['mean_difference']:+.4f}"
        out.append(
            f"<tr><td>{escape(p['other'])} \u2212 {escape(p['base'])}</td><td>{p['prompts']}</td>"
            f'<td data-metric="mean_difference" data-mean="{raw(p["mean_difference"])}">'
            f"{diff}</td><td>{span}</td><td>{share}</td></tr>"
        )
    return (
        "<table><tr><th>FAITH difference</th><th>prompts</th><th>mean</th>"
        "<th>95% interval</th><th>prompts improved</th></tr>" + "".join(out) + "</table>"
    )


def render_strategies(results: Results) -> str:
    summary, config = results.summary, results.config
    budget = []
    if config.get("budget_calls"):
        budget.append(f"{config['budget_calls']} model calls")
    if config.get("budget_seconds"):
        budget.append(f"{config['budget_seconds']:g} s of wall time")
    parts = [
        f"<p>Each strategy had {' and '.join(budget)} per prompt; target FAITH "
        f"{config.get('target')}; {config.get('candidates')} candidate(s) per editing round; "
        f"scored by {escape(', '.join(f'{k} {v}' for k, v in config['scorer'].items()))}. "
        "Means over prompts with 95% bootstrap intervals.</p>",
        _table(list(summary["strategies"].items()), "strategy"),
    ]
    if summary.get("paired"):
        parts += ["<h2>Against best-of-N on the same prompts</h2>", _paired(summary["paired"])]
    if summary.get("memory"):
        parts += [
            "<h2>With and without --memory, at the same calls</h2>",
            "<p>Each loop strategy whose writer was given the fixes earlier prompts' runs "
            "made (the bench's own store, filled as the prompts went), against the same "
            "strategy without them, on the same prompts.</p>",
            _paired(summary["memory"]),
        ]
    rows = [(s, st.get("forgetting")) for s, st in summary["strategies"].items()]
    if any(f for _, f in rows):
        how = "over each loop's kept rounds"
        parts += ["<h2>Fixes forgotten</h2>", forgetting_table(rows, "strategy", how)]
    curve = summary.get("curve") or {}
    if curve:
        labels = [str(x) for x in curve["calls"]]
        parts += [
            "<h2>FAITH against calls spent</h2>",
            "<p>The FAITH each strategy holds once that many calls are spent (best-of-N: its "
            "best candidate so far; a loop: its best round so far), the mean over prompts; "
            "a line starts when every prompt has an image.</p>",
            line_chart(
                curve["faith"],
                labels,
                title="FAITH against calls spent",
                target=config.get("target"),
                x_title="model calls spent",
                y_title="FAITH \u2191 (mean over prompts)",
            ),
        ]
    countries = sorted({c for by in summary.get("countries", {}).values() for c in by})
    for country in countries:
        rows = [(s, by[country]) for s, by in summary["countries"].items() if country in by]
        parts += [f"<h2>{escape(country)}</h2>", _table(rows, "strategy")]
        paired = (summary.get("paired_countries") or {}).get(country)
        if paired:
            parts.append(_paired(paired))
    return document("Strategies at equal cost", "".join(parts))
