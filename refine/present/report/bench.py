"""The bench leaderboard page: means with intervals per generator, FAITH per country,
FAITH against Vendi per prompt, the paired comparison, the best and worst images."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from metrics.catalog import (
    BENCH_EXPECTATIONS,
    BENCH_IMAGE,
    BENCH_PROMPT,
    HEADLINE,
    image_extras,
    label,
)
from refine.harness.results import Results, cell_mean, headline
from refine.numbers import MISSING
from refine.present.charts import mean_bars, scatter
from refine.present.html import document, escape, image_tag, interval_text, num, raw, write_page


def _paired_row(p: dict[str, Any]) -> str:
    iv = p["interval"]
    interval = MISSING if not iv else f"[{iv[0]:.4f}, {iv[1]:.4f}]"
    share = MISSING if p["share_improved"] is None else f"{100 * p['share_improved']:.0f}%"
    return (
        f"<tr><td>{escape(p['other'])} vs {escape(p['base'])}</td><td>{p['prompts']}</td>"
        f'<td data-metric="mean_difference" data-mean="{raw(p["mean_difference"])}">'
        f"{num(p['mean_difference'], 4)}</td><td>{interval}</td><td>{share}</td></tr>"
    )


def _bar(name: str, stat: dict[str, Any]) -> tuple[str, float | None, Any]:
    """A bar of the headline metric: its mean and interval, and where the EXAG variants
    were kept apart, the variant with the most prompts, named under the bar."""
    mean, interval, variant = headline(stat)
    return (f"{name} ({variant})" if stat.get("by_variant") else name), mean, interval


def write_bench_page(folder: str | Path, results: Results | None = None) -> Path:
    """``bench.html`` in the bench folder, from its results record (by default the one in
    the folder); returns its path."""
    results = results or Results.read(folder, "bench")
    return write_page(Path(folder) / "bench.html", render_bench_leaderboard(folder, results))


def render_bench_leaderboard(folder: str | Path, results: Results) -> str:
    """One self-contained HTML page of a bench's results record: the leaderboard with
    intervals, the headline metric (``metrics.catalog.HEADLINE``: FAITH) per country and
    against Vendi per prompt, the paired comparison, the best and worst images."""

    folder = Path(folder)
    summary, cells, config = results.summary, results.cells, results.config
    head_label = label(HEADLINE)
    bar_title = f"{head_label} \u2191 (mean, 95% interval)"
    names = list(summary["generators"])
    ranked = sorted(names, key=lambda g: -(headline(summary["generators"][g][HEADLINE])[0] or -1.0))

    def present(metrics: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(m for m in metrics if any(m in summary["generators"][g] for g in names))

    extras = image_extras()
    shown = (*BENCH_IMAGE, *present(extras), *BENCH_PROMPT) + present(BENCH_EXPECTATIONS)
    scores = (*BENCH_IMAGE, *extras)  # by label; the rest by name
    head = "".join(f'<th data-metric="{m}">{label(m) if m in scores else m}</th>' for m in shown)
    rows = []
    for g in ranked:
        s = summary["generators"][g]
        cells_html = "".join(
            f'<td data-generator="{escape(g)}" data-metric="{m}" '
            f'data-mean="{raw(s[m]["mean"])}">{escape(interval_text(s[m]))}</td>'
            if m in s
            else f'<td data-generator="{escape(g)}" data-metric="{m}">{MISSING}</td>'
            for m in shown
        )
        rows.append(
            f"<tr><td>{escape(g)}</td><td>{s['prompts']}</td><td>{s['images']}</td>"
            f"{cells_html}</tr>"
        )
    missing = "".join(
        f"<li>{escape(m)}: {escape(why)}</li>" for m, why in summary.get("missing", {}).items()
    )
    table = (
        '<table class="leaderboard"><tr><th>generator</th><th>prompts</th><th>images</th>'
        f"{head}</tr>{''.join(rows)}</table>"
    ) + (
        f'<p class="muted">Baselines asked for and not computed:</p><ul>{missing}</ul>'
        if missing
        else ""
    )
    bars = []
    for country in sorted({c for g in names for c in summary["countries"][g]}):
        for g in names:
            stat = summary["countries"][g].get(country)
            if stat:
                bars.append(_bar(f"{country} \u00b7 {g}", stat[HEADLINE]))
    cat_bars = []
    for cat in sorted({c for g in names for c in summary.get("categories", {}).get(g, {})}):
        for g in names:
            stat = summary["categories"][g].get(cat)
            if stat:
                cat_bars.append(_bar(f"{cat} \u00b7 {g}", stat[HEADLINE]))
    cat_html = (
        (
            f"<h2>{head_label} per activity category</h2>"
            f"{mean_bars(cat_bars, metric=HEADLINE, x_title=bar_title)}"
        )
        if cat_bars
        else ""
    )
    points = {
        g: [
            (cell_mean(c, HEADLINE), c["vendi"])
            for c in cells
            if c["generator"] == g and cell_mean(c, HEADLINE) is not None
        ]
        for g in names
    }
    paired = "".join(_paired_row(p) for p in summary["paired"])
    paired_html = (
        f"<h2>Paired comparison ({head_label}, same prompts and seeds)</h2><table><tr><th>pair</th>"
        "<th>prompts</th><th>mean difference</th><th>95% interval</th><th>prompts improved</th>"
        f"</tr>{paired}</table>"
        if paired
        else ""
    )
    extremes = []
    for country in sorted({c["country"] for c in cells}):
        images = [
            (im[HEADLINE], c["generator"], c["activity"], im)
            for c in cells
            if c["country"] == country
            for im in c["images"]
            if im[HEADLINE] is not None
        ]
        if not images:
            continue
        images.sort(key=lambda t: t[0])
        figs = []
        for end, (value, gen, act, im) in (("worst", images[0]), ("best", images[-1])):
            caption = f"{end}: {gen}, {act}, seed {im['seed']}, {head_label} {value:.3f}"
            figs.append(
                f"<figure>{image_tag(folder / im['file'], caption)}"
                f"<figcaption>{escape(caption)}</figcaption></figure>"
            )
        extremes.append(f'<h3>{escape(country)}</h3><div class="imgs">{"".join(figs)}</div>')
    scorer = ", ".join(f"{r} {n}" for r, n in config.get("scorer", {}).items())
    tau = f"tau {config.get('tau')} ({config.get('tau_source', '')})"
    body = (
        f'<p class="muted">{len(cells)} prompt cells; every image scored by one scorer: '
        f"{escape(scorer)}; {escape(tau)}; intervals: 95% bootstrap over prompts.</p>"
        f"<h2>Leaderboard</h2>{table}<h2>{head_label} per country</h2>"
        f"{mean_bars(bars, metric=HEADLINE, x_title=bar_title)}{cat_html}"
        f"<h2>{head_label} against diversity (Vendi) per prompt</h2>"
        f"{scatter(points, x_title=f'{head_label} (prompt mean) ↑')}"
        f"{paired_html}{_exaggerated_html(summary.get('exaggerated') or {})}"
        f"<h2>Best and worst images per country</h2>{''.join(extremes)}"
    )
    return document("Benchmark: cultural faithfulness of generators", body)


def _exaggerated_html(top: dict[str, list[dict[str, Any]]]) -> str:
    """AHEaD Tab. 12: each country and activity category's most exaggerated stereotype
    candidates."""
    if not top:
        return ""
    rows = "".join(
        f"<tr><td>{escape(pair)}</td><td>"
        + "; ".join(
            f"{escape(r['candidate'])} ({r['images']} image{'s' if r['images'] != 1 else ''}"
            + (f", excess {r['mean_excess']:.3f}" if r["mean_excess"] is not None else "")
            + ")"
            for r in found
        )
        + "</td></tr>"
        for pair, found in top.items()
    )
    return (
        "<h2>Most exaggerated stereotype candidates (AHEaD Tab. 12)</h2>"
        '<p class="muted">Per country and activity category, as AHEaD groups them (an '
        "activity with no CULTIVate category: by its phrase, said so), over every "
        "generator's images: the candidates the most images exaggerate (EXAG), then by their "
        "mean excess over the real photos' VQAScore where EXAG(ITA) measured one; the first "
        "three.</p>"
        f"<table><tr><th>country / activity category</th><th>top 3</th></tr>{rows}</table>"
    )
