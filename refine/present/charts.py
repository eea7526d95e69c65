"""Every chart of the reports and the app, drawn with matplotlib as inline SVG: the run's
metric curves, signed bars (FAITH gain per run), means with intervals, scatters, the
histogram of a tau calibration, the SoS heatmap and strip plot, and a tune's loss.

The same rules hold for all of them:
- one colour per metric in every chart (each metric's ``colour`` in the catalog,
  colour-blind-safe), several series of one metric told apart by line style; what is not
  a metric (generators, a loss) takes :data:`OTHER_COLOURS` and a marker shape of its own;
- axes titled, with units where there are any; every series in a legend;
- text stays text in the SVG and is drawn at 12 px at the width it is shown at: a chart a
  phone would shrink is drawn twice, for a wide column and for a phone, and the page's
  styles (:data:`CHART_CSS`) show the one that fits, so that no text is below 11 px;
- each drawn thing a reader or a test wants carries its numbers as ``data-*`` attributes
  (a series its values, a bar its value, a cell its SoS) and says them on hover.
"""

from __future__ import annotations

import functools
import json
import re
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from html import escape
from typing import Any

from metrics.catalog import CATALOG, CUBE, heading_of, of_series
from metrics.catalog import label as metric_label

# one colour per metric, the same in every chart (the catalog's: Okabe and Ito's
# colour-blind-safe palette, then Tol's muted colours for the rarer metrics); several series
# of one metric (best FAITH, FAITH per language, SoS per language) share its colour, told
# apart by their line style


def metric_colour(name: str) -> str | None:
    """The colour the catalog gives the metric ``name`` (None: it gives none)."""
    m = CATALOG.get(name) or next((c for c in CUBE if c.name == name), None)
    return m.colour if m else None


# what is not a metric (a generator, a loss): Tol's muted colours the metrics' leave,
# each with a marker shape of its own, so that a colour is never the only difference
OTHER_COLOURS = ("#332288", "#117733", "#AA4499", "#88CCEE", "#DDCC77")
MARKERS = ("o", "s", "^", "D", "v")
LINE_STYLES = ("-", "--", ":", "-.")
REFERENCE = "#555555"  # reference lines: a target, a zero, a percentile, tau
GRID = "#d0d7de"
# the chart drawn twice, for a wide column and for a phone: each at the width it is shown at,
# so that its text is never below 11 px; the page's styles show the one that fits. A small
# chart (SMALL) fits a phone as it is and is drawn once
WIDE, NARROW, SMALL = (600, 12.0), (300, 12.0), (320, 12.0)
CHART_CSS = (
    ".chart-narrow{display:none}"
    "@media (max-width:640px){.chart-wide{display:none}.chart-narrow{display:block}}"
)


@dataclass(frozen=True)
class Mark:
    """What an SVG group drawn with the id ``gid`` says of itself: a class, its numbers as
    ``data-*`` attributes (floats to 6 decimals, lists as JSON) and a hover title."""

    cls: str
    data: dict[str, Any] = field(default_factory=dict)
    title: str | None = None

    def attributes(self) -> str:
        out = [f'class="{self.cls}"']
        for key, value in self.data.items():
            if isinstance(value, list | tuple):
                out.append(f"data-{key}='{escape(json.dumps(_rounded(value)))}'")
            elif isinstance(value, float):
                out.append(f'data-{key}="{value:.6f}"')
            else:
                out.append(f'data-{key}="{escape(str(value))}"')
        return " ".join(out)


def _rounded(value: Any) -> Any:
    if isinstance(value, list | tuple):
        return [_rounded(v) for v in value]
    return round(value, 6) if isinstance(value, float) else value


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
        colour = metric_colour(key) or next(others)
        if name.startswith("best "):  # a wide pale band under its metric's line
            out[name] = (colour, "band", None)
            continue
        k = seen.get(key, 0)
        seen[key] = k + 1
        style = LINE_STYLES[k % len(LINE_STYLES)]
        out[name] = (colour, style, "o" if style == "-" else None)
    return out


def colour_of(name: str, k: int = 0) -> str:
    """A metric's colour (by name or label), else the ``k``-th of :data:`OTHER_COLOURS`."""
    metric = of_series(name)
    key = metric.name if metric else name
    return metric_colour(key) or OTHER_COLOURS[k % len(OTHER_COLOURS)]


# the settings every chart is drawn under (and nothing else is: they are set for the
# drawing only): text stays text, searchable and crisp; the same chart gets the same ids;
# a label is shown as written, never read as TeX (a "$" in a name is a dollar sign)
RC = {"svg.fonttype": "none", "svg.hashsalt": "refine", "text.parse_math": False}


def _figure(width: int, height: float) -> Any:
    from matplotlib.figure import Figure

    return Figure(figsize=(width / 72, height / 72), dpi=72, layout="constrained")


def _axes(fig: Any, font: float, x_title: str, y_title: str, grid: str = "y") -> Any:
    """Axes with their titles (wrapped to the figure's width), ticks at ``font`` px, a
    light grid along ``grid`` ("x", "y", "both" or none) and no top or right frame."""
    import textwrap

    ax = fig.add_subplot()
    width = fig.get_figwidth() * fig.dpi

    def wrapped(title: str, chars: float) -> str:  # an arrow stays beside its word
        glued = title.replace(" \u2191", "\u00a0\u2191").replace(" \u2193", "\u00a0\u2193")
        return textwrap.fill(glued, int(chars))

    # an axis title is centred on the axes, which take about half a narrow figure
    ax.set_xlabel(wrapped(x_title, width * 0.5 / (font * 0.6)), fontsize=font)
    ax.set_ylabel(wrapped(y_title, width * 0.9 / (font * 0.62)), fontsize=font)
    ax.tick_params(labelsize=font)
    if grid:
        ax.grid(axis=grid, color=GRID, linewidth=0.8)
        ax.set_axisbelow(True)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    return ax


def _short(text: str, most: int) -> str:
    """``text`` cut to ``most`` characters: a phrase at its end (``people eating food…``),
    a name in its middle, where names of one family differ least
    (``gemini:g…3.1-flash-image``); the whole text is in the mark's title."""
    if len(text) <= most:
        return text
    if " " in text:
        return text[: most - 1].rstrip() + "\u2026"
    head = most // 3
    return text[:head].rstrip() + "\u2026" + text[-(most - head - 1) :].lstrip()


def _tick(label: str, most: int) -> str:
    """A row's label: its parts (``country · generator``) on lines of their own, each cut
    to ``most`` characters."""
    return "\n".join(_short(part, most) for part in label.split(" \u00b7 "))


def _rows_height(labels: list[str], font: float, extra: float) -> float:
    """A figure tall enough for one row per label, each as many lines high as it has, and
    for an axis title beside a few rows."""
    lines = max((label.count(" \u00b7 ") + 1 for label in labels), default=1)
    return extra + max(len(labels) * font * (1.25 * lines + 0.9), 9 * font)


def _svg(
    fig: Any,
    width: int,
    legend_titles: list[str] | None = None,
    marks: dict[str, Mark] | None = None,
    prefix: str = "",
) -> str:
    """The figure as inline SVG that scales with the page (at most ``width`` px): its text
    stays text, legend entries (text gids ``{prefix}legend-k``) say on hover what they
    mean, and each group in ``marks`` carries its class, numbers and title."""
    import io

    _laid_out(fig)
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
    for k, title in enumerate(legend_titles or []):
        hover = f"<title>{escape(title)}</title>" if title else ""
        gid = f"{prefix}legend-{k}"
        svg = svg.replace(f'<g id="{gid}">', f'<g id="{gid}" class="legend-item">{hover}')
    for gid, mark in (marks or {}).items():
        hover = f"<title>{escape(mark.title)}</title>" if mark.title else ""
        svg = svg.replace(f'<g id="{gid}">', f'<g id="{gid}" {mark.attributes()}>{hover}', 1)
    return svg


def _laid_out(fig: Any) -> None:
    """``fig`` laid out by its layout engine, which is then taken off, so that ``savefig``
    draws it once. savefig lays a constrained figure out in a dry draw of all its
    artists, then draws it again; laid out here alone, with the SVG renderer savefig
    would take, the figure gives the same text (all 90 drawings of the report tests
    compared equal; tests/unit/test_charts.py keeps one of each kind) for 20 % less CPU
    (0.25 -> 0.20 s a line and a bar chart at two widths)."""
    from matplotlib.backends.backend_svg import FigureCanvasSVG

    engine = fig.get_layout_engine()
    if engine is None:
        return
    FigureCanvasSVG(fig)
    engine.execute(fig)
    fig.set_layout_engine(None)


def _legend(fig: Any, font: float, narrow: bool, names: list[str], prefix: str) -> None:
    """The legend beside the chart, or under it on a phone (two columns where the names
    are short); its entries get the gids ``_svg`` gives hover titles to."""
    short = max((len(n) for n in names), default=0) <= 14
    legend = fig.legend(
        loc="outside lower center" if narrow else "outside right upper",
        ncols=2 if narrow and short else 1,
        fontsize=font,
        frameon=False,
    )
    for k, text in enumerate(legend.get_texts()):
        text.set_gid(f"{prefix}legend-{k}")


Draw = Callable[[tuple[int, float], str], str]


# matplotlib's settings are global: one drawing at a time, so that a drawing of one thread
# (the app's handlers run on several) never runs under another's settings or leaves them
_DRAWING = threading.RLock()


# drawings made, by what they were drawn from (see _figure_html), the latest last
_DRAWN: OrderedDict[Any, str] = OrderedDict()
_DRAWN_MOST = 64


def _frozen(value: Any) -> Any:
    """``value`` as a key that equals another only for the same content of the same types
    (1, 1.0 and True are written differently); TypeError for anything else (a function,
    an array), whose drawing is then not kept."""
    import dataclasses

    if isinstance(value, float):  # by its text: -0.0 and 0.0 are equal but written apart
        return (type(value), repr(value))
    if value is None or isinstance(value, str | bool | int):
        return (type(value), value)
    if isinstance(value, list | tuple):
        return (type(value), tuple(_frozen(v) for v in value))
    if isinstance(value, dict):
        return (type(value), tuple((_frozen(k), _frozen(v)) for k, v in value.items()))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = dataclasses.fields(value)
        return (type(value), tuple((f.name, _frozen(getattr(value, f.name))) for f in fields))
    raise TypeError(f"not a key: {type(value).__name__}")


def _drawing_key(title: str, draw: Draw, cls: str, sizes: Any) -> Any:
    """What a drawing is made from: ``draw``'s code and the values it holds, or None when
    one of those cannot be a key."""
    try:
        held = tuple(_frozen(cell.cell_contents) for cell in draw.__closure__ or ())
    except (TypeError, ValueError):  # ValueError: a cell not filled yet
        return None
    return (draw.__code__, held, title, cls, _frozen(sizes))


def _figure_html(title: str, draw: Draw, cls: str = "", sizes=(WIDE, NARROW)) -> str:
    """``draw(size, prefix)`` once per size, in a ``<figure>`` titled ``title``: wide and
    narrow drawings shown by :data:`CHART_CSS`, or a single one.

    A chart drawn before from the same values is given again (the latest 64 are kept):
    pages are written again with what they showed (a report made again, a bench resumed,
    the app's views), and a drawing costs about 50 ms of CPU a width, 40 % of it
    matplotlib's layout; in the suite 31 % of the charts were drawn again so."""
    key = _drawing_key(title, draw, cls, sizes)
    with _DRAWING:
        if key is not None and key in _DRAWN:
            _DRAWN.move_to_end(key)
            return _DRAWN[key]
    html = _figure_drawn(title, draw, cls, sizes)
    if key is not None:
        with _DRAWING:
            _DRAWN[key] = html
            while len(_DRAWN) > _DRAWN_MOST:
                _DRAWN.popitem(last=False)
    return html


def _figure_drawn(title: str, draw: Draw, cls: str, sizes: Any) -> str:
    from matplotlib import rc_context

    def drawn(size: tuple[int, float], prefix: str) -> str:
        with _DRAWING, rc_context(RC):
            return draw(size, prefix)

    kind = f"chart-figure {cls}".strip()
    head = f'<figure class="{kind}" aria-label="{escape(title)}">'
    caption = f"<figcaption>{escape(title)}</figcaption>" if title else ""
    if len(sizes) == 1:
        return f"{head}{caption}{drawn(sizes[0], 's-')}</figure>"
    wide, narrow = sizes
    return (
        f"<style>{CHART_CSS}</style>{head}{caption}"
        f'<div class="chart-wide">{drawn(wide, "w-")}</div>'
        f'<div class="chart-narrow">{drawn(narrow, "n-")}</div></figure>'
    )


# --- the run's metric curves -------------------------------------------------------------


def _line_svg(
    series: dict[str, list[float | None]],
    labels: list[str],
    marks: list[str] | None,
    y_range: tuple[float, float],
    target: float | None,
    x_title: str,
    y_title: str,
    size: tuple[int, float],
    prefix: str,
    errors: dict[str, list[float | None]] | None = None,
) -> str:
    width, font = size
    narrow = width < 500
    fig = _figure(width, width * (1.2 if narrow else 0.55))
    ax = _axes(fig, font, x_title, y_title)
    xs = list(range(len(labels)))
    styles = series_styles(list(series))
    titles, groups = [], {}
    errors = errors or {}
    for k, (name, values) in enumerate(series.items()):
        colour, style, marker = styles[name]
        points = [(x, v) for x, v in zip(xs, values, strict=True) if v is not None]
        spread = errors.get(name)
        if spread is not None:  # ± one standard error where a value was sampled
            lows, highs = zip(
                *[
                    (v - e, v + e) if v is not None and e is not None else (v, v)
                    for v, e in zip(values, spread, strict=True)
                ],
                strict=True,
            )
            kept = [x for x, v in zip(xs, values, strict=True) if v is not None]
            band = ax.fill_between(
                kept,
                [lows[x] for x in kept],
                [highs[x] for x in kept],
                color=colour,
                alpha=0.18,
                linewidth=0,
                zorder=1,
            )
            gid = f"{prefix}error-{k}"
            band.set_gid(gid)
            groups[gid] = Mark("error-band", {"name": name, "errors": list(spread)})
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
        gid = f"{prefix}series-{k}"
        line.set_gid(gid)
        data = {"name": name, "values": list(values)}
        if spread is not None:
            data["errors"] = list(spread)
        groups[gid] = Mark("series", data)
        metric = of_series(name)
        titles.append(metric.explain() if metric else "")
    if target is not None:
        # over the curves (zorder 4): a quality line at the target's level hid it
        ax.axhline(
            target,
            linestyle=":",
            color=REFERENCE,
            linewidth=1.2,
            label=f"target {target:g}",
            zorder=4,
        ).set_gid(f"{prefix}target")
        groups[f"{prefix}target"] = Mark("target", {"target": f"{target:g}"})
        titles.append("the FAITH at which the run stops")
    symbols = {"accepted": "\u2713", "rejected": "\u2717"}
    ticks = [
        f"{label}\n{symbols.get(marks[i], chr(0x2022))}" if marks else label
        for i, label in enumerate(labels)
    ]
    ax.set_xticks(xs, ticks)
    if len(xs) == 1:
        ax.set_xlim(-0.5, 0.5)
    lo, hi = y_range
    ax.set_ylim(lo, hi + 0.02 * (hi - lo))
    ax.xaxis.label.set_gid(f"{prefix}x-title")
    ax.yaxis.label.set_gid(f"{prefix}y-title")
    groups[f"{prefix}x-title"] = groups[f"{prefix}y-title"] = Mark("axis-title")
    _legend(fig, font, narrow, [heading_of(n) for n in series], prefix)
    return _svg(fig, width, titles, groups, prefix)


def line_chart(
    series: dict[str, list[float | None]],
    labels: list[str],
    marks: list[str] | None = None,
    title: str = "",
    y_range: tuple[float, float] = (0.0, 1.0),
    target: float | None = None,
    x_title: str = "",
    y_title: str = "",
    errors: dict[str, list[float | None]] | None = None,
) -> str:
    """A line chart of values in ``y_range``: the x axis's labels carry ``marks``
    (✓ accepted, ✗ rejected, • other), ``target`` is a dotted line; every series in the
    legend with its direction arrow (a series of the same metric in its colour, another
    line style), axes titled; each line carries its values in ``data-values``. A series
    named in ``errors`` (a standard error per value, None where it has none) is drawn in a
    shaded band of ± one error, and carries them in ``data-errors``."""
    # each value with its type: 1, 1.0 and True are equal keys but are written differently
    frozen = tuple(
        (name, tuple(values), tuple(map(type, values))) for name, values in series.items()
    )
    spread = tuple((name, tuple(e)) for name, e in (errors or {}).items() if name in series)
    marks = None if marks is None else tuple(marks)
    return _line_chart_drawn(
        frozen, tuple(labels), marks, title, tuple(y_range), target, x_title, y_title, spread
    )


@functools.lru_cache(maxsize=32)
def _line_chart_drawn(
    series: tuple[tuple[str, tuple[float | None, ...], tuple[type, ...]], ...],
    labels: tuple[str, ...],
    marks: tuple[str, ...] | None,
    title: str,
    y_range: tuple[float, float],
    target: float | None,
    x_title: str,
    y_title: str,
    errors: tuple[tuple[str, tuple[float | None, ...]], ...] = (),
) -> str:
    """:func:`line_chart` for values it has drawn before: the app shows a run's chart again
    at every event of a round (each candidate, each stage) while its values change only
    when a round ends, and one drawing at two widths costs about 0.3 s of CPU. The
    drawing depends on its arguments alone (fixed ids, fixed hash salt), so a repeat is
    the same text."""
    args = ({name: list(v) for name, v, _ in series}, list(labels))
    args += (None if marks is None else list(marks),)
    rest = (y_range, target, x_title, y_title)
    spread = {name: list(e) for name, e in errors}
    return _figure_html(title, lambda size, prefix: _line_svg(*args, *rest, size, prefix, spread))


# --- bars ----------------------------------------------------------------------------------


def bar_chart(
    values: list[float | None],
    labels: list[str],
    title: str,
    x_title: str = "FAITH gain \u2191 (best round \u2212 round 0)",
    metric: str = "faith",
) -> str:
    """Signed values (FAITH gain per run) as horizontal bars from a zero line, one row per
    label, in the metric's colour: a loss hatched, each bar's value written at its end;
    a row without a value shows the dash."""
    colour = colour_of(metric)
    known = [abs(v) for v in values if v is not None]
    scale = max(known + [0.05])

    def draw(size: tuple[int, float], prefix: str) -> str:
        width, font = size
        narrow = width < 500
        fig = _figure(width, _rows_height(labels, font, 70))
        ax = _axes(fig, font, x_title, "", grid="x")
        groups = {}
        for k, (v, label) in enumerate(zip(values, labels, strict=True)):
            if v is None:
                ax.text(0, k, " \u2013", va="center", fontsize=font, color=REFERENCE)
                continue
            (bar,) = ax.barh(
                k,
                v,
                height=0.6,
                color=colour if v >= 0 else "white",
                edgecolor=colour,
                hatch=None if v >= 0 else "///",
                linewidth=1.2,
            ).patches
            gid = f"{prefix}bar-{k}"
            bar.set_gid(gid)
            groups[gid] = Mark("bar", {"label": label, "value": v}, f"{label}: {v:+.3f}")
            ax.annotate(
                f"{v:+.3f}",
                (v, k),
                xytext=(4 if v >= 0 else -4, 0),
                textcoords="offset points",
                va="center",
                ha="left" if v >= 0 else "right",
                fontsize=font,
            )
        ax.axvline(0, color=REFERENCE, linewidth=1)
        ax.set_yticks(range(len(labels)), [_tick(x, 18 if narrow else 34) for x in labels])
        ax.set_ylim(len(labels) - 0.5, -0.5)
        ax.set_xlim(-scale * 1.6, scale * 1.6)
        return _svg(fig, width, marks=groups, prefix=prefix)

    return _figure_html(title, draw, "bars")


def mean_bars(
    rows: list[tuple[str, float | None, Any]],
    title: str = "",
    x_title: str = "FAITH \u2191 (mean, 95% interval)",
    metric: str = "faith",
) -> str:
    """Horizontal bars of means in 0..1 with their 95% intervals: rows of (label, mean,
    (lo, hi) or None), in the metric's colour, each mean written beside its interval."""
    colour = colour_of(metric)

    def draw(size: tuple[int, float], prefix: str) -> str:
        width, font = size
        narrow = width < 500
        fig = _figure(width, _rows_height([r[0] for r in rows], font, 70))
        ax = _axes(fig, font, x_title, "", grid="x")
        groups = {}
        for k, (label, mean, iv) in enumerate(rows):
            if mean is None:
                ax.text(0, k, " \u2013", va="center", fontsize=font, color=REFERENCE)
                continue
            (bar,) = ax.barh(k, mean, height=0.6, color=colour, alpha=0.85).patches
            gid = f"{prefix}bar-{k}"
            bar.set_gid(gid)
            data: dict[str, Any] = {"label": label, "mean": mean}
            hover = f"{label}: {mean:.3f}"
            if iv:
                data.update(lo=float(iv[0]), hi=float(iv[1]))
                hover += f" [{iv[0]:.3f}, {iv[1]:.3f}]"
                ax.plot([iv[0], iv[1]], [k, k], color="#1f2328", linewidth=2)
            groups[gid] = Mark("bar", data, hover)
            end = max(mean, iv[1]) if iv else mean
            ax.annotate(
                f"{mean:.3f}",
                (end, k),
                xytext=(4, 0),
                textcoords="offset points",
                va="center",
                fontsize=font,
            )
        ax.set_yticks(range(len(rows)), [_tick(r[0], 18 if narrow else 34) for r in rows])
        ax.set_ylim(len(rows) - 0.5, -0.5)
        ax.set_xlim(0, 1.25 if narrow else 1.15)
        ax.set_xticks([0, 0.5, 1.0] if narrow else [0, 0.25, 0.5, 0.75, 1.0])
        return _svg(fig, width, marks=groups, prefix=prefix)

    return _figure_html(title, draw, "bars")


def histogram(
    values: list[float],
    lines: list[tuple[float, str, bool]],
    x_title: str,
    y_title: str = "count",
    bins: int = 20,
    title: str = "",
) -> str:
    """Counts of ``values`` in ``bins`` equal bins over 0..1 (a value of 1 in the last),
    with vertical ``lines`` (value, legend label, emphasised); each bin carries its lower
    edge and count."""
    counts = [0] * bins
    for v in values:
        counts[min(bins - 1, max(0, int(v * bins)))] += 1

    def draw(size: tuple[int, float], prefix: str) -> str:
        width, font = size
        narrow = width < 500
        fig = _figure(width, width * (0.9 if narrow else 0.45))
        ax = _axes(fig, font, x_title, y_title)
        groups = {}
        for k, n in enumerate(counts):
            (bar,) = ax.bar(
                k / bins,
                n,
                width=1 / bins,
                align="edge",
                color=OTHER_COLOURS[0],
                edgecolor="white",
                linewidth=1,
            ).patches
            gid = f"{prefix}bin-{k}"
            bar.set_gid(gid)
            lo = k / bins
            groups[gid] = Mark(
                "bin", {"bin": f"{lo:.2f}", "count": n}, f"{lo:.2f} to {lo + 1 / bins:.2f}: {n}"
            )
        styles = iter(LINE_STYLES[1:] * (1 + len(lines)))
        for value, label, strong in lines:
            ax.axvline(
                value,
                color="#1f2328" if strong else REFERENCE,
                linestyle="-" if strong else next(styles),
                linewidth=2 if strong else 1.2,
                label=label,
            )
        ax.set_xlim(0, 1)
        if lines:
            _legend(fig, font, narrow, [x[1] for x in lines], prefix)
        return _svg(fig, width, marks=groups, prefix=prefix)

    return _figure_html(title, draw, "histogram")


# --- points --------------------------------------------------------------------------------


def scatter(
    points: dict[str, list[tuple[float, float]]],
    title: str = "",
    x_title: str = "FAITH (prompt mean) \u2191",
    y_title: str = "Vendi of the prompt's images \u2191",
) -> str:
    """Points (x in 0..1, y from 0) per group, one colour and marker shape per group, in a
    legend; each group carries its points."""
    ys = [y for pts in points.values() for _, y in pts] or [1.0]
    top = max(ys) * 1.1 or 1.0

    def draw(size: tuple[int, float], prefix: str) -> str:
        width, font = size
        narrow = width < 500
        fig = _figure(width, width * (0.95 if narrow else 0.5))
        ax = _axes(fig, font, x_title, y_title, grid="both")
        groups = {}
        for k, (name, pts) in enumerate(points.items()):
            (line,) = ax.plot(
                [p[0] for p in pts],
                [p[1] for p in pts],
                linestyle="none",
                marker=MARKERS[k % len(MARKERS)],
                markersize=6,
                alpha=0.8,
                color=OTHER_COLOURS[k % len(OTHER_COLOURS)],
                label=name,
            )
            gid = f"{prefix}points-{k}"
            line.set_gid(gid)
            groups[gid] = Mark("points", {"name": name, "points": [list(p) for p in pts]})
        ax.set_xlim(0, 1)
        ax.set_ylim(0, top)
        if points:
            _legend(fig, font, narrow, list(points), prefix)
        return _svg(fig, width, marks=groups, prefix=prefix)

    return _figure_html(title, draw, "scatter")


def xy_plot(pairs: list[tuple[float, float]], x_label: str, y_label: str) -> str:
    """A small scatter of (metric, mean human rating 1..5) per image in the metric's
    colour, drawn once at a width a phone shows whole; x from the data."""
    xs = [p[0] for p in pairs] or [0.0]
    ys = [p[1] for p in pairs] or [3.0]

    def draw(size: tuple[int, float], prefix: str) -> str:
        width, font = size
        fig = _figure(width, width * 0.78)
        x_title = heading_of(metric_label(x_label))
        ax = _axes(fig, font, x_title, f"{y_label} (mean rating, 1\u20135)", grid="both")
        (line,) = ax.plot(
            xs if pairs else [],
            ys if pairs else [],
            linestyle="none",
            marker="o",
            markersize=5,
            alpha=0.7,
            color=colour_of(metric_label(x_label)),
        )
        gid = f"{prefix}points-0"
        line.set_gid(gid)
        mark = Mark("points", {"name": x_label, "points": [list(p) for p in pairs]})
        pad = (max(xs) - min(xs)) * 0.05 or 0.05
        ax.set_xlim(min(xs) - pad, max(xs) + pad)
        ax.set_ylim(min(0.8, min(ys) - 0.2), max(5.2, max(ys) + 0.2))
        return _svg(fig, width, marks={gid: mark}, prefix=prefix)

    return _figure_html("", draw, "agree-scatter", sizes=(SMALL,))


# --- SoS: cultures by languages ------------------------------------------------------------


def heatmap(result: dict[str, Any], key: str = "") -> str:
    """Cultures (rows) by languages (columns), each cell its pair's mean SoS on a diverging
    red (surface-led, negative) to blue (semantics-led, positive) scale, strongly
    surface-led pairs outlined, values written in the cells where they fit."""
    from matplotlib import colormaps
    from matplotlib.colors import Normalize

    cultures, languages = result["cultures"], result["languages"]
    cell = {(p["culture"], p["language"]): p for p in result["pairs"]}
    scale = max((abs(p["sos"]) for p in result["pairs"]), default=1.0) or 1.0
    norm, cmap = Normalize(-scale, scale), colormaps["RdBu"]

    def draw(size: tuple[int, float], prefix: str) -> str:
        from matplotlib.cm import ScalarMappable
        from matplotlib.patches import Rectangle

        width, font = size
        narrow = width < 500
        fig = _figure(width, _rows_height(cultures, font * 1.2, 110))
        ax = _axes(fig, font, "prompt language", "culture", grid="")
        groups = {}
        # the values are written where a cell is wide enough for "+0.123" at this size
        written = (width - 140) / max(len(languages), 1) > font * 4
        for i, c in enumerate(cultures):
            for j, lang in enumerate(languages):
                p = cell.get((c, lang))
                if p is None:
                    ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, color="#eeeeee"))
                    continue
                v = p["sos"]
                strong = bool(p["strongly_surface_led"])
                patch = Rectangle(
                    (j - 0.48, i - 0.48),
                    0.96,
                    0.96,
                    facecolor=cmap(norm(v)),
                    edgecolor="#000000" if strong else "none",
                    linewidth=2.5 if strong else 0,
                )
                ax.add_patch(patch)
                gid = f"{prefix}{key}cell-{i}-{j}"
                patch.set_gid(gid)
                note = ", strongly surface-led" if strong else ""
                groups[gid] = Mark(
                    "cell",
                    {"culture": c, "language": lang, "sos": float(v)},
                    f"{c} in {lang}: SoS {v:+.3f}{note}",
                )
                if written:
                    dark = abs(norm(v) - 0.5) > 0.3
                    ax.text(
                        j,
                        i,
                        f"{v:+.3f}",
                        ha="center",
                        va="center",
                        fontsize=font,
                        color="white" if dark else "#1f2328",
                    )
        ax.set_xlim(-0.5, len(languages) - 0.5)
        ax.set_ylim(len(cultures) - 0.5, -0.5)
        ax.set_xticks(range(len(languages)), languages)
        ax.set_yticks(range(len(cultures)), [_short(c, 12 if narrow else 24) for c in cultures])
        ax.xaxis.tick_top()
        ax.xaxis.set_label_position("top")
        for side in ("left", "bottom"):
            ax.spines[side].set_visible(False)
        bar = fig.colorbar(
            ScalarMappable(norm, cmap), ax=ax, location="bottom", shrink=0.9, aspect=30
        )
        scale_title = "SoS \u2191 (\u2212 surface-led, + semantics-led)"
        bar.set_label(scale_title.replace(" (", "\n(") if narrow else scale_title, fontsize=font)
        bar.ax.tick_params(labelsize=font)
        return _svg(fig, width, marks=groups, prefix=prefix)

    return _figure_html("", draw, "heatmap")


def strip_plot(result: dict[str, Any]) -> str:
    """Per language (rows), one dot per culture (and generator) at its pair's SoS, and the
    strong-surface threshold, the 25th percentile of the model-language pairs' medians, as
    a dashed line; each dot carries its culture, language and SoS."""
    languages = result["languages"]
    colour = colour_of("sos")

    def draw(size: tuple[int, float], prefix: str) -> str:
        width, font = size
        narrow = width < 500
        fig = _figure(width, _rows_height(languages, font, 90))
        ax = _axes(fig, font, "SoS \u2191 of a culture's images", "prompt language", grid="x")
        groups = {}
        row = {lang: i for i, lang in enumerate(languages)}
        for k, p in enumerate(result["pairs"]):
            (dot,) = ax.plot(
                [p["sos"]],
                [row[p["language"]]],
                linestyle="none",
                marker="o",
                markersize=6,
                alpha=0.7,
                color=colour,
            )
            gid = f"{prefix}pair-{k}"
            dot.set_gid(gid)
            groups[gid] = Mark(
                "pair",
                {"language": p["language"], "culture": p["culture"], "sos": float(p["sos"])},
                f"{p['culture']} in {p['language']}: {p['sos']:+.3f}",
            )
        q = result["percentile_25"]
        ax.axvline(
            q, color=REFERENCE, linestyle="--", linewidth=1.2, label=f"25th percentile {q:+.3f}"
        )
        ax.set_yticks(range(len(languages)), languages)
        ax.set_ylim(len(languages) - 0.5, -0.5)
        _legend(fig, font, narrow, [f"25th percentile {q:+.3f}"], prefix)
        return _svg(fig, width, marks=groups, prefix=prefix)

    return _figure_html("", draw, "distribution")


# --- a tune's loss -------------------------------------------------------------------------


def step_chart(
    series: dict[str, list[tuple[int, float]]],
    title: str,
    x_title: str = "step",
    y_title: str = "",
) -> str:
    """Lines of (step, value) per series, in :data:`OTHER_COLOURS` and line styles of
    their own; each line carries its steps and values."""

    def draw(size: tuple[int, float], prefix: str) -> str:
        width, font = size
        narrow = width < 500
        fig = _figure(width, width * (0.9 if narrow else 0.45))
        ax = _axes(fig, font, x_title, y_title)
        groups = {}
        for k, (name, pts) in enumerate(series.items()):
            (line,) = ax.plot(
                [p[0] for p in pts],
                [p[1] for p in pts],
                color=OTHER_COLOURS[k % len(OTHER_COLOURS)],
                linestyle=LINE_STYLES[k % len(LINE_STYLES)],
                linewidth=1.8,
                label=name,
            )
            gid = f"{prefix}series-{k}"
            line.set_gid(gid)
            groups[gid] = Mark(
                "series",
                {"name": name, "steps": [p[0] for p in pts], "values": [p[1] for p in pts]},
            )
        if series:
            _legend(fig, font, narrow, list(series), prefix)
        return _svg(fig, width, marks=groups, prefix=prefix)

    return _figure_html(title, draw, "steps")
