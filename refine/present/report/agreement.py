"""The page of ``refine agree``: alpha per question, correlations per metric and question
with their intervals, a scatter per metric."""

from __future__ import annotations

from typing import Any

from refine.numbers import MISSING, p_text
from refine.present.charts import xy_plot
from refine.present.html import document, escape, num, raw
from refine.present.report.agreement_groups import extras_html, groups_html


def _label(name: str) -> str:
    """A metric's label, with its variant (``EXAG [exag:ita]``)."""
    from metrics.catalog import CATALOG

    base, _, variant = name.partition("@")
    m = CATALOG.get(base)
    shown = m.label if m is not None else base
    return f"{shown} [{variant}]" if variant else shown


def render_agreement(result: Any) -> str:
    """One self-contained HTML page: the raters' alpha per question, per metric and
    question the three correlations with their intervals, and a scatter per metric."""

    def fig(v: float | None, iv: Any, p: float | None = None) -> str:
        if v is None:
            return MISSING
        shown = f"{v:+.3f}" + (f" [{iv[0]:+.3f}, {iv[1]:+.3f}]" if iv else "")
        return shown + (f' <span class="muted">{p_text(p)}</span>' if p is not None else "")

    ordinal = getattr(result, "alpha_ordinal", {})
    alpha = "".join(
        f'<tr><td>{escape(q)}</td><td data-question="{escape(q)}" data-alpha="{raw(a)}">'
        f'{num(a)}</td><td data-question="{escape(q)}" '
        f'data-alpha-ordinal="{raw(ordinal.get(q))}">{num(ordinal.get(q))}</td></tr>'
        for q, a in result.alpha.items()
    )
    notes = "".join(f"<li>{escape(n)}</li>" for n in result.notes())
    rows = []
    for m, by_q in result.table.items():
        for q, row in by_q.items():
            cells = "".join(
                f'<td data-metric="{m}" data-question="{q}" data-stat="{s}" '
                f'data-value="{raw(row[s])}">'
                f"{fig(row[s], row[s + '_interval'], row.get(s + '_p'))}</td>"
                for s in ("spearman", "kendall", "pearson")
            )
            rows.append(
                f"<tr><td>{escape(m)}</td><td>{escape(q)}</td><td>{row['n']}</td>{cells}</tr>"
            )
    from refine.human.agree import ranking

    ranked = []
    for q, entries in ranking(result.table).items():
        for e in entries:
            ranked.append(
                f'<tr><td>{escape(q)}</td><td data-rank="{e["rank"]}">{e["rank"]}</td>'
                f"<td>{escape(_label(e['metric']))}</td><td>{e['n']}</td>"
                f'<td data-metric="{escape(e["metric"])}" data-question="{escape(q)}" '
                f'data-agreement="{raw(e["agreement"])}">{fig(e["agreement"], e["interval"])}'
                "</td></tr>"
            )
    plots = []
    for m, by_q in result.points.items():
        q = "faithfulness" if "faithfulness" in by_q else next(iter(by_q))
        plots.append(
            f"<figure>{xy_plot(by_q[q], m, q)}<figcaption>{escape(m)}</figcaption></figure>"
        )
    missing = ", ".join(f"{m}: {n}" for m, n in result.missing.items() if n)
    body = (
        f'<p class="muted">{result.images} images, {len(result.raters)} raters '
        f"({escape(', '.join(result.raters))}). Correlations of each metric with the raters' "
        "mean answer per image, 95% bootstrap intervals; HAL and EXAG count faults, so "
        "agreeing with people shows as a negative correlation. Each rater counts once per "
        "image (their latest answer). Krippendorff's alpha between raters is the ceiling a "
        "metric can hope to reach: interval treats the 1-5 answers as distances (a 2 and a "
        "4 disagree four times as much as a 2 and a 3); ordinal uses only their order.</p>"
        + (f'<ul class="muted">{notes}</ul>' if notes else "")
        + "<h2>Metrics ranked by agreement with people</h2>"
        "<p class=\"muted\">Per question, each metric's Spearman correlation with the raters' "
        "mean, with its 95% interval, taken in the direction that means agreeing (negated "
        "for HAL, EXAG and the other metrics where lower is better): the table a paper "
        "shows.</p><table><tr><th>question</th><th>rank</th><th>metric</th><th>n</th>"
        f"<th>agreement (Spearman)</th></tr>{''.join(ranked)}</table>"
        + "<h2>Raters' agreement</h2><table><tr><th>question</th><th>alpha (interval)</th>"
        f"<th>alpha (ordinal)</th></tr>{alpha}</table>"
        "<h2>Metrics against people</h2><table><tr><th>metric</th><th>question</th><th>n</th>"
        f"<th>Spearman</th><th>Kendall tau-b</th><th>Pearson</th></tr>{''.join(rows)}</table>"
        + (f'<p class="muted">images without the metric: {escape(missing)}</p>' if missing else "")
        + extras_html(result)
        + groups_html(result)
        + f'<h2>Scatter per metric</h2><div class="imgs">{"".join(plots)}</div>'
    )
    return document("Agreement of metrics with human ratings", body)
