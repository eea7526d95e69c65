"""Every chart of the reports and the app, as inline SVG: the run's metric curves, signed
bars (FAITH gain per run), means with intervals, scatters, the tau histogram, and the SoS
heatmap and strip plot. One colour per metric series (``COLOURS``), the rest in ``PALETTE``
order."""

from __future__ import annotations

import json
import re
from html import escape
from typing import Any

from metrics.catalog import heading_of, of_series
from refine.present import views

COLOURS = dict(
    zip(
        views.METRICS,
        ("#1f6feb", "#2da44e", "#cf222e", "#bf8700", "#57606a", "#6e40c9", "#fb8f44", "#bf3989"),
        strict=True,
    )
)

PALETTE = ("#0a7ea4", "#e16f24", "#8250df", "#1b7c83", "#bc4c00", "#6639ba", "#116329")


# one colour per metric, the same in every chart: Okabe and Ito's colour-blind-safe
# palette, then Tol's muted colours for the rarer metrics; several series of one metric
# (best FAITH, FAITH per language, SoS per language) share its colour, told apart by
# their line style
METRIC_COLOURS = {
    "faith": "#0072B2",
    "align": "#009E73",
    "hal": "#D55E00",
    "exag": "#E69F00",
    "drift": "#555555",
    "quality": "#CC79A7",
    "clip_iqa": "#56B4E9",
    "sos": "#000000",
    "caire": "#882255",
    "explicit_met": "#44AA99",
    "implicit_met": "#999933",
}
OTHER_COLOURS = ("#332288", "#88CCEE", "#117733", "#DDCC77", "#AA4499")
LINE_STYLES = ("-", "--", ":", "-.")
# the chart drawn twice, for a wide column and for a phone: each at the width it is shown at,
# so that its text is never below 11 px; the page's styles show the one that fits
WIDE, NARROW = (600, 12.0), (300, 12.0)
CHART_CSS = (
    ".chart-narrow{display:none}"
    "@media (max-width:640px){.chart-wide{display:none}.chart-narrow{display:block}}"
)


def series_styles(names: list[str]) -> dict[str, tuple[str, str, str | None]]:
    """(colour, line style, marker) of each series: its metric's colour; the first series
    of a metric solid with dots, the next ones dashed, dotted, ...; a "best" series a wide
    pale band (``band``) under its metric's line."""
    seen: dict[str, int] = {}
    others = iter(OTHER_COLOURS * (1 + len(names)))
    out = {}
    for name in names:
        metric = of_series(name)
        key = metric.name if metric else name
        colour = METRIC_COLOURS.get(key) or next(others)
        if name.startswith("best "):  # a wide pale band under its metric's line
            out[name] = (colour, "band", None)
            continue
        k = seen.get(key, 0)
        seen[key] = k + 1
        style = LINE_STYLES[k % len(LINE_STYLES)]
        out[name] = (colour, style, "o" if style == "-" else None)
    return out


def _svg(fig: Any, width: int, legend_titles: list[str]) -> str:
    """The figure as inline SVG that scales with the page (at most ``width`` px): its text
    stays text, legend entries say on hover what they mean."""
    import io

    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None})
    svg = buf.getvalue()
    svg = svg[svg.index("<svg") :]
    svg = re.sub(
        r'<svg ([^>]*?)width="[^"]*" height="[^"]*"',
        rf'<svg class="chart" \1width="100%" style="max-width:{width}px;height:auto"',
        svg,
        count=1,
    )
    for k, title in enumerate(legend_titles):
        hover = f"<title>{escape(title)}</title>" if title else ""
        svg = svg.replace(f'<g id="legend-{k}">', f'<g id="legend-{k}" class="legend-item">{hover}')
    return svg


def _line_svg(
    series: dict[str, list[float | None]],
    labels: list[str],
    marks: list[str] | None,
    y_range: tuple[float, float],
    target: float | None,
    x_title: str,
    y_title: str,
    size: tuple[int, float],
) -> str:
    import matplotlib

    matplotlib.rcParams["svg.fonttype"] = "none"  # text stays text: searchable, crisp
    matplotlib.rcParams["svg.hashsalt"] = "refine"  # the same chart, the same ids
    from matplotlib.figure import Figure

    width, font = size
    narrow = width < 500
    height = width * (1.2 if narrow else 0.55)
    fig = Figure(figsize=(width / 72, height / 72), dpi=72, layout="constrained")
    ax = fig.add_subplot()
    xs = list(range(len(labels)))
    styles = series_styles(list(series))
    titles = []
    for k, (name, values) in enumerate(series.items()):
        colour, style, marker = styles[name]
        points = [(x, v) for x, v in zip(xs, values, strict=True) if v is not None]
        band = style == "band"  # seen around its metric's line where the two agree
        (line,) = ax.plot(
            [p[0] for p in points],
            [p[1] for p in points],
            linestyle="-" if band else style,
            marker=marker,
            markersize=4,
            color=colour,
            alpha=0.3 if band else 1.0,
            linewidth=7 if band else 2.4 if style == "-" else 1.8,
            label=heading_of(name),
            zorder=1 if band else 3 if style == "-" else 2,
        )
        line.set_gid(f"series-{k}")
        metric = of_series(name)
        titles.append(metric.explain() if metric else "")
    if target is not None:
        ax.axhline(
            target, linestyle=":", color="#555555", linewidth=1.2, label=f"target {target:g}"
        ).set_gid("target")
        titles.append("the FAITH at which the run stops")
    symbols = {"accepted": "\u2713", "rejected": "\u2717"}
    other = "\u2022"
    ticks = [
        f"{label}\n{symbols.get(marks[i], other)}" if marks else label
        for i, label in enumerate(labels)
    ]
    ax.set_xticks(xs, ticks)
    if len(xs) == 1:
        ax.set_xlim(-0.5, 0.5)
    lo, hi = y_range
    ax.set_ylim(lo, hi + 0.02 * (hi - lo))
    ax.set_xlabel(x_title, fontsize=font, gid="x-title")
    ax.set_ylabel(y_title, fontsize=font, gid="y-title")
    ax.tick_params(labelsize=font)
    ax.grid(axis="y", color="#d0d7de", linewidth=0.8)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    where = "outside lower center" if narrow else "outside right upper"
    # on a phone the legend goes under the chart, in two columns where the names are short
    short = max((len(heading_of(n)) for n in series), default=0) <= 14
    columns = 2 if narrow and short else 1
    legend = fig.legend(loc=where, ncols=columns, fontsize=font, frameon=False)
    for k, text in enumerate(legend.get_texts()):
        text.set_gid(f"legend-{k}")
    svg = _svg(fig, width, titles)
    for k, (name, values) in enumerate(series.items()):  # each line carries its values
        data = json.dumps([None if v is None else round(v, 6) for v in values])
        svg = svg.replace(
            f'<g id="series-{k}">',
            f'<g id="series-{k}" class="series" data-name="{escape(name)}" '
            f"data-values='{escape(data)}'>",
        )
    for axis in ("x", "y"):
        svg = svg.replace(f'<g id="{axis}-title">', f'<g id="{axis}-title" class="axis-title">')
    if target is not None:
        svg = svg.replace(
            '<g id="target">', f'<g id="target" class="target" data-target="{target:g}">', 1
        )
    return svg


def line_chart(
    series: dict[str, list[float | None]],
    labels: list[str],
    marks: list[str] | None = None,
    title: str = "",
    y_range: tuple[float, float] = (0.0, 1.0),
    target: float | None = None,
    x_title: str = "",
    y_title: str = "",
) -> str:
    """A line chart of values in ``y_range`` drawn with matplotlib, as inline SVG: the
    x axis's labels carry ``marks`` (✓ accepted, ✗ rejected, • other), ``target`` is a
    dotted line; every series in the legend with its direction arrow (a series of the
    same metric in its colour, another line style), axes titled. Drawn for a wide column
    and for a phone (see :data:`CHART_CSS`); each line carries its values in
    ``data-values``."""
    args = (series, labels, marks, y_range, target, x_title, y_title)
    return (
        f"<style>{CHART_CSS}</style>"
        f'<figure class="chart-figure" aria-label="{escape(title)}">'
        f"<figcaption>{escape(title)}</figcaption>"
        f'<div class="chart-wide">{_line_svg(*args, WIDE)}</div>'
        f'<div class="chart-narrow">{_line_svg(*args, NARROW)}</div></figure>'
    )


def bar_chart(values: list[float | None], labels: list[str], title: str) -> str:
    """An SVG bar chart of signed values (FAITH gain per run) around a zero line."""
    width, height, left, top, bottom = 680, 220, 44, 24, 40
    w, h = width - left - 20, height - top - bottom
    known = [abs(v) for v in values if v is not None]
    scale = max(known + [0.05])
    n = max(len(values), 1)
    slot = w / n
    zero = top + h / 2
    out = [
        f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="{width}" '
        f'height="{height}" role="img" aria-label="{escape(title)}">',
        f'<text x="{left}" y="16" font-size="13" font-weight="600">{escape(title)}</text>',
        f'<line x1="{left}" x2="{left + w}" y1="{zero}" y2="{zero}" stroke="#57606a"/>',
        f'<text x="{left - 6}" y="{top + 4}" font-size="11" text-anchor="end">+{scale:.2f}</text>',
        f'<text x="{left - 6}" y="{top + h + 4}" font-size="11" '
        f'text-anchor="end">-{scale:.2f}</text>',
    ]
    for i, (v, label) in enumerate(zip(values, labels, strict=True)):
        cx = left + slot * i + slot * 0.15
        bw = slot * 0.7
        if v is not None:
            bh = (h / 2) * abs(v) / scale
            by = zero - bh if v >= 0 else zero
            colour = "#2da44e" if v > 0 else "#cf222e" if v < 0 else "#57606a"
            out.append(
                f'<rect class="bar" data-value="{v:.6f}" x="{cx:.1f}" y="{by:.1f}" '
                f'width="{bw:.1f}" height="{max(bh, 1):.1f}" fill="{colour}">'
                f"<title>{escape(label)}: {v:+.3f}</title></rect>"
            )
        out.append(
            f'<text x="{cx + bw / 2:.1f}" y="{top + h + 16}" font-size="11" '
            f'text-anchor="middle">{escape(label)}</text>'
        )
    out.append("</svg>")
    return "".join(out)


def mean_bars(rows: list[tuple[str, float | None, Any]], width: int = 680) -> str:
    """Horizontal bars with 95% intervals: (label, mean, (lo, hi) or None), values 0..1."""
    left, bar_h, gap = 260, 16, 6
    height = len(rows) * (bar_h + gap) + 24
    scale = width - left - 20
    parts = [
        f'<svg class="bars" width="100%" viewBox="0 0 {width} {height}" '
        f'role="img" aria-label="FAITH per country and generator">'
    ]
    for i, (label, mean, iv) in enumerate(rows):
        y = 8 + i * (bar_h + gap)
        parts.append(
            f'<text x="{left - 6}" y="{y + bar_h - 4}" font-size="11" text-anchor="end">'
            f"{escape(label)}</text>"
        )
        if mean is None:
            continue
        colour = PALETTE[i % len(PALETTE)]
        parts.append(
            f'<rect x="{left}" y="{y}" width="{scale * mean:.1f}" height="{bar_h}" '
            f'fill="{colour}" data-label="{escape(label)}" data-mean="{mean:.6f}"/>'
        )
        if iv:
            x0, x1, cy = left + scale * iv[0], left + scale * iv[1], y + bar_h / 2
            parts.append(
                f'<line x1="{x0:.1f}" x2="{x1:.1f}" y1="{cy}" y2="{cy}" stroke="#1f2328" '
                f'stroke-width="2"/>'
            )
        end = max(mean, iv[1]) if iv else mean
        parts.append(
            f'<text x="{left + scale * end + 4:.1f}" y="{y + bar_h - 4}" font-size="11">'
            f"{mean:.3f}</text>"
        )
    parts.append("</svg>")
    return "".join(parts)


def scatter(points: dict[str, list[tuple[float, float]]], width: int = 680) -> str:
    """FAITH (x, 0..1) against Vendi (y) per prompt, one colour per generator."""
    height, pad = 300, 40
    ys = [y for pts in points.values() for _, y in pts] or [1.0]
    top = max(ys) * 1.1 or 1.0
    parts = [
        f'<svg class="scatter" width="100%" viewBox="0 0 {width} {height}" role="img" '
        'aria-label="FAITH against Vendi per prompt">',
        f'<line x1="{pad}" y1="{height - pad}" x2="{width - 10}" y2="{height - pad}" '
        'stroke="#8c959f"/>',
        f'<line x1="{pad}" y1="10" x2="{pad}" y2="{height - pad}" stroke="#8c959f"/>',
        f'<text x="{width / 2}" y="{height - 8}" font-size="12" text-anchor="middle">'
        "FAITH (prompt mean)</text>",
        f'<text x="12" y="{height / 2}" font-size="12" transform="rotate(-90 12 {height / 2})" '
        'text-anchor="middle">Vendi of the prompt\'s images</text>',
        f'<text x="{pad - 4}" y="{height - pad}" font-size="10" text-anchor="end">0</text>',
        f'<text x="{pad - 4}" y="16" font-size="10" text-anchor="end">{top:.2f}</text>',
        f'<text x="{pad}" y="{height - pad + 14}" font-size="10">0</text>',
        f'<text x="{width - 10}" y="{height - pad + 14}" font-size="10" text-anchor="end">1</text>',
    ]
    for i, (gen, pts) in enumerate(points.items()):
        colour = PALETTE[i % len(PALETTE)]
        for x, y in pts:
            cx = pad + (width - pad - 10) * x
            cy = height - pad - (height - pad - 10) * (y / top)
            parts.append(
                f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="4" fill="{colour}" '
                f'data-generator="{escape(gen)}" data-faith="{x:.6f}" data-vendi="{y:.6f}"/>'
            )
        parts.append(
            f'<text x="{width - 200}" y="{20 + 14 * i}" font-size="12" fill="{colour}">'
            f"\u25cf {escape(gen)}</text>"
        )
    parts.append("</svg>")
    return "".join(parts)


def xy_plot(pairs: list[tuple[float, float]], x_label: str, y_label: str) -> str:
    """A small scatter of (metric, mean human rating) per image, axes from the data."""
    width, height, pad = 320, 240, 40
    xs, ys = [p[0] for p in pairs], [p[1] for p in pairs]
    x0, x1 = min(xs), max(xs)
    y0, y1 = min(1.0, min(ys)), max(5.0, max(ys))
    xr = (x1 - x0) or 1.0
    parts = [
        f'<svg class="agree-scatter" width="{width}" height="{height}" role="img" '
        f'aria-label="{escape(x_label)} against {escape(y_label)}">',
        f'<line x1="{pad}" y1="{height - pad}" x2="{width - 10}" y2="{height - pad}" '
        'stroke="#8c959f"/>',
        f'<line x1="{pad}" y1="10" x2="{pad}" y2="{height - pad}" stroke="#8c959f"/>',
        f'<text x="{width / 2}" y="{height - 8}" font-size="11" text-anchor="middle">'
        f"{escape(x_label)} ({x0:.2f} to {x1:.2f})</text>",
        f'<text x="12" y="{height / 2}" font-size="11" transform="rotate(-90 12 {height / 2})" '
        f'text-anchor="middle">{escape(y_label)} (mean)</text>',
    ]
    for x, y in pairs:
        cx = pad + (width - pad - 20) * (x - x0) / xr
        cy = height - pad - (height - pad - 20) * (y - y0) / (y1 - y0)
        parts.append(
            f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="4" fill="#0969da" fill-opacity="0.7" '
            f'data-x="{x:.6f}" data-y="{y:.6f}"/>'
        )
    parts.append("</svg>")
    return "".join(parts)


def _colour(v: float, scale: float) -> str:
    """Diverging: red for surface-led (negative), blue for semantics-led (positive)."""
    t = max(-1.0, min(1.0, v / scale)) if scale > 0 else 0.0
    if t < 0:
        a = -t
        rgb = (255, round(255 * (1 - a * 0.75)), round(255 * (1 - a * 0.75)))
    else:
        rgb = (round(255 * (1 - t * 0.75)), round(255 * (1 - t * 0.55)), 255)
    return "#" + "".join(f"{v:02x}" for v in rgb)


def heatmap(result: dict[str, Any]) -> str:
    """Cultures (rows) by languages (columns), the pair's mean SoS in each cell."""
    cultures, languages = result["cultures"], result["languages"]
    cell = {(p["culture"], p["language"]): p for p in result["pairs"]}
    scale = max((abs(p["sos"]) for p in result["pairs"]), default=1.0) or 1.0
    cw, ch, left, top = 64, 26, 150, 28
    width, height = left + cw * len(languages) + 10, top + ch * len(cultures) + 10
    parts = [
        f'<svg class="heatmap" xmlns="http://www.w3.org/2000/svg" width="{width}" '
        f'height="{height}" role="img" aria-label="SoS by culture and language">'
    ]
    for j, lang in enumerate(languages):
        x = left + j * cw + cw / 2
        parts.append(f'<text x="{x}" y="18" text-anchor="middle">{escape(lang)}</text>')
    for i, c in enumerate(cultures):
        y = top + i * ch
        parts.append(
            f'<text x="{left - 6}" y="{y + ch / 2 + 4}" text-anchor="end">{escape(c)}</text>'
        )
        for j, lang in enumerate(languages):
            x = left + j * cw
            p = cell.get((c, lang))
            if p is None:
                parts.append(
                    f'<rect x="{x}" y="{y}" width="{cw - 2}" height="{ch - 2}" fill="#eee"/>'
                )
                continue
            stroke = ' stroke="#000" stroke-width="2"' if p["strongly_surface_led"] else ""
            parts.append(
                f'<rect class="cell" data-culture="{escape(c)}" data-language="{escape(lang)}" '
                f'data-sos="{p["sos"]:.6f}" x="{x}" y="{y}" width="{cw - 2}" height="{ch - 2}" '
                f'fill="{_colour(p["sos"], scale)}"{stroke}/>'
                f'<text x="{x + cw / 2 - 1}" y="{y + ch / 2 + 4}" text-anchor="middle" '
                f'font-size="11">{p["sos"]:+.3f}</text>'
            )
    parts.append("</svg>")
    return "".join(parts)


def strip_plot(result: dict[str, Any]) -> str:
    """Per language, one dot per culture at its pair SoS, and the 25th-percentile line."""
    languages = result["languages"]
    values = [p["sos"] for p in result["pairs"]] + [result["percentile_25"]]
    lo, hi = min(values), max(values)
    span = (hi - lo) or 1.0
    w, rh, left = 520, 24, 60
    height = rh * len(languages) + 30

    def x(v: float) -> float:
        return left + (v - lo) / span * (w - left - 20)

    parts = [
        f'<svg class="distribution" xmlns="http://www.w3.org/2000/svg" width="{w}" '
        f'height="{height}" role="img" aria-label="SoS per language">'
    ]
    q = x(result["percentile_25"])
    parts.append(
        f'<line x1="{q:.1f}" y1="0" x2="{q:.1f}" y2="{height - 20}" stroke="#cf222e" '
        'stroke-dasharray="4 3"/>'
    )
    for i, lang in enumerate(languages):
        y = 12 + i * rh
        parts.append(f'<text x="{left - 8}" y="{y + 4}" text-anchor="end">{escape(lang)}</text>')
        for p in result["pairs"]:
            if p["language"] == lang:
                parts.append(
                    f'<circle class="pair" data-language="{escape(lang)}" '
                    f'data-sos="{p["sos"]:.6f}" cx="{x(p["sos"]):.1f}" cy="{y}" r="4" '
                    f'fill="#0969da" fill-opacity="0.7"><title>{escape(p["culture"])} '
                    f"{p['sos']:+.3f}</title></circle>"
                )
    parts.append(
        f'<text x="{left}" y="{height - 4}">{lo:+.3f}</text>'
        f'<text x="{w - 20}" y="{height - 4}" text-anchor="end">{hi:+.3f}</text>'
        f'<text x="{q:.1f}" y="{height - 4}" text-anchor="middle" fill="#cf222e">25th pct</text>'
        "</svg>"
    )
    return "".join(parts)
