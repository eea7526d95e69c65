"""The agreement's charts as files a paper can use (``refine agree --figures png,svg,pdf``),
drawn with matplotlib in the style of the HTML pages (:mod:`refine.present.charts`: the
catalog's colour per metric, the same grid, frame and type sizes):

* ``agree-correlations``: each metric's Spearman correlation with people, with its 95%
  interval, per group of each ``--by`` grouping (pooled when there is none);
* ``agree-matrix``: the metric-metric Spearman correlations;
* ``agree-scatter``: each metric against the raters' mean answer, one panel a metric.

Each is written once per format asked for (``.png`` at 200 dpi, ``.svg`` with its text as
text, ``.pdf``), with no date in it, so the same agreement gives the same files.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

FORMATS = ("png", "svg", "pdf")
FONT = 11.0


def parse_formats(text: str) -> tuple[str, ...]:
    """Formats from ``png,svg,pdf``; a ValueError names one that is not."""
    names = [t.strip().lower() for t in text.split(",") if t.strip()]
    bad = [n for n in names if n not in FORMATS]
    if bad or not names:
        raise ValueError(f"--figures: {bad[0] if bad else text!r} is not one of png, svg, pdf")
    return tuple(dict.fromkeys(names))


def _question(result: Any) -> str | None:
    """The question the charts show: faithfulness where it was asked, else the first."""
    asked = list(result.alpha) or [q for by_q in result.table.values() for q in by_q]
    if not asked:
        return None
    return "faithfulness" if "faithfulness" in asked else asked[0]


def correlation_bars(result: Any) -> Any:
    """A figure of horizontal bars: per metric and group, Spearman with its interval."""
    from refine.present.charts import _axes, _figure, colour_of
    from refine.present.report.agreement import _label

    q = _question(result)
    groups: list[tuple[str, dict[str, Any]]] = []
    for by, table in result.by.items():
        for key, g in table.items():
            groups.append((f"{by}: {key}", g["metrics"]))
    if not groups:
        groups = [("all images", result.table)]
    metrics = [m for m in result.table if any(q in t.get(m, {}) for _, t in groups)]
    rows = [(m, name, t[m][q]) for m in metrics for name, t in groups if q in t.get(m, {})]
    fig = _figure(520, 60 + 16 * max(len(rows), 3))
    ax = _axes(fig, FONT, f"Spearman with people ({q}), 95% interval", "", grid="x")
    for y, (m, _, row) in enumerate(rows):
        v, iv = row["spearman"], row["spearman_interval"]
        if v is None:
            continue
        colour = colour_of(_label(m))
        ax.barh(y, v, color=colour, height=0.7)
        if iv:
            ax.errorbar(v, y, xerr=[[v - iv[0]], [iv[1] - v]], color="#333333", capsize=3, lw=1)
    ax.set_yticks(range(len(rows)), [f"{_label(m)} · {name}" for m, name, _ in rows])
    ax.invert_yaxis()
    ax.axvline(0, color="#333333", lw=0.8)
    ax.set_xlim(-1, 1)
    return fig


def matrix_figure(result: Any) -> Any:
    """The metric-metric Spearman matrix as a heat map, each cell's value written in it."""
    from matplotlib import colormaps

    from refine.present.charts import _figure
    from refine.present.report.agreement import _label

    names = result.matrix.get("metrics") or []
    values = result.matrix.get("spearman") or []
    size = 120 + 46 * max(len(names), 2)
    fig = _figure(size + 80, size)
    ax = fig.add_subplot()
    cmap = colormaps["RdBu"]
    for i, row in enumerate(values):
        for j, v in enumerate(row):
            colour = "#eeeeee" if v is None else cmap((v + 1) / 2)
            ax.add_patch(_square(j, i, colour))
            text = "–" if v is None else f"{v:+.2f}"
            dark = v is not None and abs(v) > 0.6
            ax.text(j, i, text, ha="center", va="center", fontsize=FONT - 1,
                    color="white" if dark else "#222222")  # fmt: skip
    labels = [_label(n) for n in names]
    ax.set_xticks(range(len(names)), labels, rotation=45, ha="right", fontsize=FONT)
    ax.set_yticks(range(len(names)), labels, fontsize=FONT)
    ax.set_xlim(-0.5, len(names) - 0.5)
    ax.set_ylim(len(names) - 0.5, -0.5)
    ax.set_title("Metric against metric (Spearman)", fontsize=FONT)
    for side in ax.spines.values():
        side.set_visible(False)
    return fig


def _square(x: float, y: float, colour: Any) -> Any:
    from matplotlib.patches import Rectangle

    return Rectangle((x - 0.5, y - 0.5), 1, 1, facecolor=colour, edgecolor="white")


def scatter_figure(result: Any) -> Any:
    """One panel per metric: its value against the raters' mean answer, per image."""
    from refine.present.charts import GRID, _figure, colour_of
    from refine.present.report.agreement import _label

    q = _question(result)
    panels = [(m, by_q[q]) for m, by_q in result.points.items() if q in by_q]
    cols = min(3, max(len(panels), 1))
    rows = (len(panels) + cols - 1) // cols or 1
    fig = _figure(200 * cols + 40, 190 * rows + 30)
    for k, (m, pairs) in enumerate(panels):
        ax = fig.add_subplot(rows, cols, k + 1)
        ax.plot([p[0] for p in pairs], [p[1] for p in pairs], "o", ms=4, alpha=0.7,
                color=colour_of(_label(m)))  # fmt: skip
        ax.set_xlabel(_label(m), fontsize=FONT)
        ax.set_ylabel(f"{q} (mean)", fontsize=FONT)
        ax.tick_params(labelsize=FONT - 1)
        ax.grid(color=GRID, linewidth=0.8)
        ax.set_axisbelow(True)
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
    return fig


def write_figures(result: Any, folder: str | Path, formats: Sequence[str]) -> list[Path]:
    """Each chart in each format, in ``folder``; returns the files written."""
    from matplotlib import rc_context

    from refine.present.charts import _DRAWING, RC

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    drawers = {
        "agree-correlations": correlation_bars,
        "agree-matrix": matrix_figure,
        "agree-scatter": scatter_figure,
    }
    written = []
    with _DRAWING, rc_context({**RC, "pdf.fonttype": 42}):
        for name, draw in drawers.items():
            if name == "agree-matrix" and not result.matrix.get("metrics"):
                continue
            if name != "agree-matrix" and _question(result) is None:
                continue
            fig = draw(result)
            for fmt in formats:
                path = folder / f"{name}.{fmt}"
                meta = {"Date": None} if fmt == "svg" else {"CreationDate": None}
                fig.savefig(path, format=fmt, dpi=200, metadata=None if fmt == "png" else meta)
                written.append(path)
    return written
