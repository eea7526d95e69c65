"""The one charts module: every chart drawn with matplotlib carries its numbers, keeps a
metric's colour in every chart, escapes what it is given, reads no label as TeX, and
leaves matplotlib's settings as it found them."""

from __future__ import annotations

import html
import json
import re

import pytest

from refine.present import charts


@pytest.fixture(autouse=True)
def drawn_afresh():
    """Each test draws its line charts itself (none is a drawing an earlier test cached)."""
    charts._line_chart_drawn.cache_clear()
    yield
    charts._line_chart_drawn.cache_clear()


HOSTILE = "<script>alert(1)</script> $\\frac{$ & 'q'"
SOS = {
    "cultures": ["Japanese", HOSTILE],
    "languages": ["en", "fr"],
    "percentile_25": -0.1,
    "pairs": [
        {"culture": c, "language": g, "sos": v, "strongly_surface_led": v < -0.1}
        for (c, g), v in zip(
            [("Japanese", "en"), ("Japanese", "fr"), (HOSTILE, "en"), (HOSTILE, "fr")],
            (0.2, -0.15, 0.05, -0.3),
            strict=True,
        )
    ],
}


def _every_chart(label: str = HOSTILE) -> dict[str, str]:
    return {
        "line": charts.line_chart({"FAITH": [0.2, 0.5], "HAL": [0.3, None]}, ["0", label]),
        "bars": charts.bar_chart([0.1, -0.2, None], [label, "b", "c"], label),
        "means": charts.mean_bars([(label, 0.6, (0.5, 0.7)), ("b", None, None)], label),
        "scatter": charts.scatter({label: [(0.5, 1.5)], "b": [(0.2, 2.0)]}, label),
        "xy": charts.xy_plot([(0.1, 2.0), (0.4, 4.5)], "faith", label),
        "heatmap": charts.heatmap(SOS),
        "strip": charts.strip_plot(SOS),
        "histogram": charts.histogram([0.1, 0.15, 0.9, 1.0], [(0.5, label, True)], label),
        "steps": charts.step_chart({label: [(1, 0.7), (2, 0.5)]}, label),
    }


@pytest.mark.slow
def test_what_a_chart_is_given_is_escaped_and_never_read_as_tex():
    import matplotlib

    before = {k: matplotlib.rcParams[k] for k in charts.RC}
    drawn = _every_chart()
    for name, svg in drawn.items():
        assert "<script" not in svg, name
        assert "<script>alert(1)</script>" in html.unescape(svg), name  # shown, as text
    # a "$" is a dollar sign: the label is written as given, not as TeX
    assert "$\\frac{$" in html.unescape(drawn["bars"])
    # the settings are the drawing's only
    assert {k: matplotlib.rcParams[k] for k in charts.RC} == before


@pytest.mark.slow
def test_each_drawing_carries_its_numbers_once_per_width():
    line = charts.line_chart({"FAITH": [0.2, 0.5], "best FAITH": [0.2, 0.5]}, ["0", "1"])
    found = re.findall(
        r'id="(\w)-series-\d" class="series" data-name="([^"]+)" '
        r"data-values='([^']+)'",
        line,
    )
    assert sorted((w, n, tuple(json.loads(v))) for w, n, v in found) == [
        ("n", "FAITH", (0.2, 0.5)),
        ("n", "best FAITH", (0.2, 0.5)),
        ("w", "FAITH", (0.2, 0.5)),
        ("w", "best FAITH", (0.2, 0.5)),
    ]
    bars = charts.bar_chart([0.125, -0.25], ["a", "b"], "gain")
    values = re.findall(
        r'id="w-bar-\d" class="bar" data-label="(\w)" data-value="([-0-9.]+)"', bars
    )
    assert values == [("a", "0.125000"), ("b", "-0.250000")]
    assert "<title>b: -0.250</title>" in bars  # said on hover
    for svg in _every_chart("x").values():  # the wide and the narrow drawing apart
        drawn = [i for i in re.findall(r'<g id="([^"]+)" class=', svg)]
        assert drawn and len(drawn) == len(set(drawn))
    counts = re.findall(
        r'id="w-bin-\d+" class="bin" data-bin="[0-9.]+" data-count="(\d+)"',
        _every_chart()["histogram"],
    )
    assert [int(c) for c in counts][:4] == [0, 0, 1, 1] and sum(map(int, counts)) == 4
    assert int(counts[18]) == int(counts[19]) == 1  # 1.0 counts in the last bin


def _fill(svg: str, gid: str) -> str:
    """The colour matplotlib drew a group with (a line's stroke, a bar's fill)."""
    group = svg[svg.index(f'<g id="{gid}"') :]
    group = group[: group.index("</g>")]
    return re.search(r"(?:stroke|fill): (#[0-9a-f]{6})", group).group(1)


@pytest.mark.slow
def test_a_metric_has_one_colour_in_every_chart():
    faith = charts.metric_colour("faith").lower()
    line = charts.line_chart({"HAL": [0.3, 0.2], "FAITH": [0.2, 0.5]}, ["0", "1"])
    assert _fill(line, "w-series-1") == faith and _fill(line, "n-series-1") == faith
    assert _fill(line, "w-series-0") == charts.metric_colour("hal").lower()
    assert _fill(charts.mean_bars([("a", 0.5, None)]), "w-bar-0") == faith
    assert _fill(charts.bar_chart([0.5], ["a"], "gain"), "w-bar-0") == faith
    assert _fill(charts.xy_plot([(0.1, 2.0)], "faith", "q"), "s-points-0") == faith
    # every metric its own colour
    from metrics.catalog import CATALOG

    colours = [m.colour for m in CATALOG.values() if m.colour]
    assert len(colours) >= 11 and len(set(colours)) == len(colours)


def test_long_names_are_cut_where_they_differ():
    assert charts._short("gemini:gemini-3.1-flash-image", 18) == "gemini\u2026flash-image"
    assert charts._short("gemini:gemini-3-pro-image", 18) == "gemini\u20263-pro-image"
    assert charts._short("people eating food at home", 18) == "people eating foo\u2026"
    assert charts._tick("India \u00b7 gemini:gemini-3-pro-image", 40) == (
        "India\ngemini:gemini-3-pro-image"
    )


@pytest.mark.parametrize("values", [[], [None, None]])
def test_charts_without_values_draw_an_empty_frame(values):
    svg = charts.bar_chart(values, ["x"] * len(values), "gain")
    assert 'class="chart"' in svg and 'class="bar"' not in svg


@pytest.mark.slow
def test_a_line_chart_is_drawn_once_per_values(monkeypatch):
    drawn = []
    real = charts._line_svg
    monkeypatch.setattr(charts, "_line_svg", lambda *a: drawn.append(a[0]) or real(*a))
    series = {"FAITH": [0.25, None], "ALIGN": [0.5, 0.75]}
    first = charts.line_chart(series, ["0", "1"], ["accepted", "initial"], "run")
    again = charts.line_chart(
        {k: list(v) for k, v in series.items()}, ["0", "1"], ["accepted", "initial"], "run"
    )
    assert again == first and len(drawn) == 2  # the wide and the narrow drawing, once
    series["FAITH"][1] = 0.625  # a round ends: a new value is a new drawing
    changed = charts.line_chart(series, ["0", "1"], ["accepted", "initial"], "run")
    assert len(drawn) == 4 and drawn[-1] == {"FAITH": [0.25, 0.625], "ALIGN": [0.5, 0.75]}
    assert "[0.25, 0.625]" in changed and "[0.25, 0.625]" not in first
    assert (
        charts.line_chart(series, ["0", "1"], ["accepted", "rejected"], "run") != changed
    )  # marks count


def test_the_target_line_is_drawn_over_the_curves():
    """A curve at the target's level (quality 0.7, target 0.7) no longer hides the dotted
    target line: it is drawn after (over) every curve, at each width."""
    import re

    html = charts.line_chart(
        {"FAITH": [0.2, 0.5], "quality": [0.7, 0.7]}, ["0", "1"], target=0.7, title="run"
    )
    for svg in re.findall(r"<svg.*?</svg>", html, flags=re.S):
        ids = re.findall(r'id="([^"]*(?:series-\d+|target))"', svg)
        assert ids and ids[-1].endswith("target"), ids
        assert sum(i.endswith("target") for i in ids) == 1


@pytest.mark.slow
def test_a_chart_drawn_again_from_the_same_values_is_not_drawn_twice(monkeypatch):
    """The same values give the kept drawing (matplotlib is not asked again); a value
    changed, or of another type (1 against 1.0), gives a drawing of its own; a chart whose
    drawing holds something that cannot be a key (a function) is drawn every time."""
    import numpy as np

    from refine.present import charts

    made = []
    drawn = charts._figure_drawn

    def counted(*args):
        made.append(args[0])
        return drawn(*args)

    monkeypatch.setattr(charts, "_figure_drawn", counted)
    monkeypatch.setattr(charts, "_DRAWN", type(charts._DRAWN)())
    rows = [("gemini", 0.6, (0.5, 0.7)), ("flux", 0.4, None)]
    first = charts.mean_bars(rows, "kept")
    assert charts.mean_bars([("gemini", 0.6, (0.5, 0.7)), ("flux", 0.4, None)], "kept") == first
    assert made == ["kept"]
    other = charts.mean_bars([("gemini", 0.6, (0.5, 0.7)), ("flux", 0.41, None)], "kept")
    assert other != first and made == ["kept", "kept"]
    charts.bar_chart([1, None], ["a", "b"], "types")
    charts.bar_chart([1.0, None], ["a", "b"], "types")
    assert made.count("types") == 2
    charts.bar_chart([-0.0, None], ["a", "b"], "signs")
    charts.bar_chart([0.0, None], ["a", "b"], "signs")
    assert made.count("signs") == 2  # equal numbers, written "-0.000" and "+0.000"
    assert charts._drawing_key("t", lambda s, p: "plain", "", (1,)) is not None
    array = np.zeros(3)
    assert charts._drawing_key("t", lambda s, p: str(array), "", (1,)) is None
    assert charts._drawing_key("t", lambda s, p: str(counted), "", (1,)) is None


@pytest.mark.slow  # twelve drawings: 0.6-1.5 s
def test_a_chart_laid_out_once_is_the_chart_savefig_lays_out_in_its_dry_draw(monkeypatch):
    """Lines with a band and a legend, signed bars with their values written beside, and
    a heatmap with its colour bar are the same text whether they are laid out before they
    are saved (charts._laid_out) or by savefig's own dry draw (a layout with another
    renderer than savefig's fails here)."""
    kinds = {
        "line": lambda: charts.line_chart(
            {"FAITH": [0.1, 0.5, None], "ALIGN": [0.3, 0.2, 0.6]},
            ["r0", "r1", "r2"],
            ["\u2022", "\u2713", "\u2717"],
            target=0.8,
            y_title="score \u2191",
            errors={"FAITH": [0.02, 0.03, None]},
        ),
        "bars": lambda: charts.bar_chart([0.1, -0.2, None], ["Japan \u00b7 sdxl", "b", "c"], "g"),
        "heatmap": lambda: charts.heatmap(SOS),
    }
    for kind, draw in kinds.items():
        once = draw()
        charts._line_chart_drawn.cache_clear()
        with monkeypatch.context() as m:
            m.setattr(charts, "_DRAWN", type(charts._DRAWN)())
            m.setattr(charts, "_laid_out", lambda fig: None)
            assert draw() == once, kind
