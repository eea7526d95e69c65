"""metrics.catalog: each metric once, with a range and a direction; the bench's rows, the
agree command and the app's series take their names from it, and no other list of metric
names is written out in the code."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from metrics import catalog

ROOT = Path(__file__).resolve().parents[2]


def test_each_metric_once_with_a_range_and_a_direction():
    for group in (catalog._ALL, catalog.CUBE):
        assert len({m.name for m in group}) == len(group)
        for m in group:
            assert m.label and m.help.endswith(".") and m.better in ("higher", "lower")
            assert m.high is None or m.low < m.high, m.name
    assert catalog.metric("hal").better == "lower" and catalog.metric("hal").heading == "HAL ↓"
    assert catalog.metric("faith").heading == "FAITH ↑"
    assert catalog.label("cube_diversity") == "cube_diversity"  # not in the main table


def test_bench_rows_and_agree_read_the_catalog():
    from metrics.catalog import agree_metrics
    from refine.harness.tasks.bench.summary import row_fields
    from refine.present.views import series_names

    per_image = [f for f in row_fields() if f in catalog.CATALOG]
    # AHEaD's, then every other image metric the catalog computes (a group registered since
    # included), the prompt's diversity and the expectations, each in catalog order
    others = [m.name for m in catalog.computed("image") if m.group != "ahead"]
    assert per_image == [
        *catalog.names("ahead", level="image"),
        *others,
        *catalog.names("diversity"),
        *catalog.names("expectations"),
    ]
    assert {*catalog.names("quality"), *catalog.names("baseline")} <= set(others)
    assert set(catalog.BENCH_IMAGE) | {"quality", "explicit_met", "caire"} <= set(agree_metrics())
    series = series_names()
    assert series[0] == catalog.label("faith") and catalog.label("clip_iqa") in series


def _literal_lists(path: Path):
    """Tuples, lists and sets written out in a file, of three or more strings."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Tuple | ast.List | ast.Set) and len(node.elts) >= 3:
            values = [e.value for e in node.elts if isinstance(e, ast.Constant)]
            if len(values) == len(node.elts) and all(isinstance(v, str) for v in values):
                yield node.lineno, values


@pytest.mark.slow
def test_no_other_list_of_metric_names():
    known = {m.name for m in (*catalog._ALL, *catalog.CUBE)} | {m.label for m in catalog._ALL}
    found = []
    for folder in ("refine", "metrics", "ui"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path.name == "catalog.py":
                continue
            for line, values in _literal_lists(path):
                if sum(v in known for v in values) >= 3:
                    found.append(f"{path.relative_to(ROOT)}:{line}: {values}")
    assert not found, "metric names written out again; read metrics/catalog.py:\n" + "\n".join(
        found
    )


def test_series_and_columns_name_their_metric_and_its_direction():
    from metrics.catalog import CATALOG, heading_of, of_series

    cases = {
        "FAITH": "faith",
        "best FAITH": "faith",
        "FAITH fr": "faith",
        "HAL": "hal",
        "SoS ja": "sos",
        "CAIRE Iran (0-1)": "caire",
        "CAIRE 1-5": "caire",
        "explicit met": "explicit_met",
        "CLIP-IQA": "clip_iqa",
    }
    for series, name in cases.items():
        assert of_series(series) is CATALOG[name], series
    assert heading_of("HAL") == "HAL ↓" and heading_of("best FAITH") == "best FAITH ↑"
    assert heading_of("drift") == "drift ↓" and heading_of("round") == "round"
    assert of_series("reason") is None and of_series("HALO") is None
    assert CATALOG["vendi"].span == "at least 1 effective images"
    assert CATALOG["sdiv"].explain() == (
        "SDIV ↑ (higher is better; -1 to 1): Set diversity: pooled ALIGN less the images' "
        "mean ALIGN."
    )


def test_each_variant_is_a_named_formula_and_a_score_says_which_made_it():
    from metrics.ahead import faith, rubric_exag
    from metrics.catalog import VARIANTS, made_by, variant

    # (E[rating] - 1) / 4, its standard error through the same map
    assert rubric_exag(2.0) == (0.25, None)
    assert rubric_exag(3.4, 0.08) == pytest.approx((0.6, 0.02))
    with pytest.raises(ValueError, match=r"\[1, 5\]"):
        rubric_exag(0.5)
    assert faith(0.6, 0.3, 0.25) == (pytest.approx((0.6 + 0.7 + 0.75) / 3), "faith:ahead")
    assert faith(0.6, 0.3, None) == (pytest.approx(0.65), "faith:no-exag")
    assert {v.metric for v in VARIANTS.values()} == {"exag", "faith"}
    assert variant("exag:ita").source.startswith("AHEaD Eq. 3-4")
    with pytest.raises(KeyError, match="unknown variant 'exag:nope'"):
        variant("exag:nope")
    # in words: the name and its formula, the sampled reading beside it, or why it is missing
    assert made_by("faith:ahead") == "faith:ahead (mean(ALIGN, 1 - HAL, 1 - EXAG))"
    sampled = made_by("exag:judge-rubric", mode="sampled k=8", stderr=0.0123)
    assert sampled.startswith("exag:judge-rubric (the judge's 1-5 rating")
    assert sampled.endswith("[judge sampled k=8, s.e. 0.012]")
    assert made_by("exag:ita", mode="logprobs").endswith("(the winner's curse))")
    assert made_by(None, "no stereotype candidates") == "not computed: no stereotype candidates"
    # a record written before the names keeps its words
    assert made_by("judge-rating (1-5 rubric, (E[rating] - 1) / 4)") == (
        "judge-rating (1-5 rubric, (E[rating] - 1) / 4)"
    )


def test_every_image_metric_of_a_run_is_one_entry_and_its_function():
    """The image metrics an image's scores hold are the catalog's to compute: AHEaD's and
    the quality readings too, each by the pure function its entry holds, the ones that read
    others' values (FAITH) last."""
    from metrics.catalog import computed, computing_order

    image_groups = {"ahead", "quality", "baseline"}
    for m in catalog._ALL:
        if m.level == "image" and m.group in image_groups:
            assert m.compute is not None and m.compute.__module__.startswith("metrics."), m.name
            assert m.reads, m.name
    order = [m.name for m in computing_order()]
    assert sorted(order) == sorted(m.name for m in computed())
    readers = {m.name for m in computed() if "values" in m.reads}
    # what reads other metrics' values comes after every metric that reads none
    assert set(order[-len(readers) :]) == readers >= {"faith", "vie_overall"}
    assert order.index("exag") < order.index("faith")
    assert order.index("vie_sc") < order.index("vie_overall")


def test_ahead_and_quality_from_their_readings_by_hand():
    from metrics.ahead import ExagAnswer, align_of, exag_of, faith_of, hal_of
    from metrics.computed import Computed
    from metrics.judge import Reading
    from metrics.quality import quality_of

    class Matched:
        def __init__(self, align, hal):
            self.align, self.hal = align, hal

    matched = [Matched(0.5, 0.25), Matched(1.0, 0.0)]
    assert align_of(matched) == [0.5, 1.0] and hal_of(matched) == [0.25, 0.0]
    rubric = ExagAnswer("exag:judge-rubric", mode="sampled k=8", rating=3.0, rating_stderr=0.4)
    ita = ExagAnswer(
        "exag:ita", mode="logprobs", yes=(0.5, 0.1), baseline=(0.2, 0.3), candidates=("a", "b")
    )
    got = exag_of([rubric, ita, None])
    # (3 - 1) / 4 with s.e. 0.4 / 4; the largest excess over the photos, 0.5 - 0.2
    assert got[0] == Computed(0.5, "exag:judge-rubric", Reading("sampled", 8, 0.1))
    assert got[1].value == pytest.approx(0.3) and got[1].variant == "exag:ita"
    assert got[1].reading == Reading()
    assert got[2] == Computed(None, note="no stereotype candidates")
    with pytest.raises(ValueError, match="no EXAG variant reads answers named 'exag:other'"):
        exag_of([ExagAnswer("exag:other")])
    with pytest.raises(ValueError, match="exag:mllm reads a rating, and the answer has none"):
        exag_of([ExagAnswer("exag:mllm")])
    faiths = faith_of(
        [{"align": 0.5, "hal": 0.25, "exag": 0.5}, {"align": 0.5, "hal": 0.25}, {"hal": 0.1}]
    )
    assert faiths[0].value == pytest.approx((0.5 + 0.75 + 0.5) / 3)
    assert faiths[0].variant == "faith:ahead"
    assert faiths[1] == Computed(pytest.approx(0.625), "faith:no-exag")
    assert faiths[2] == Computed(None, note="ALIGN and HAL are needed")

    class Rated:
        def __init__(self, naturalness, artifacts):
            self.naturalness, self.artifacts = naturalness, artifacts

    # the lower rating over 10, each held to 0..10 first
    assert quality_of([Rated(8.0, 6.0), Rated(10.2, 9.0), None]) == [
        pytest.approx(0.6),
        pytest.approx(0.9),
        None,
    ]


def test_the_arithmetic_the_fronts_show_lives_in_metrics_by_hand():
    from metrics.ahead import ita_baseline
    from metrics.caire import unit_score
    from metrics.drift import drift_of
    from metrics.expectations import met_share
    from metrics.quality import quality_stderr

    # per candidate, the mean over two photos
    assert ita_baseline([[0.2, 0.4], [0.4, 0.8]]) == pytest.approx([0.3, 0.6])
    with pytest.raises(ValueError, match="at least one real photo"):
        ita_baseline([])
    # the lower rating's standard error over 10; none when the lower was not sampled
    assert quality_stderr(6.0, 8.0, 0.5, None) == pytest.approx(0.05)
    assert quality_stderr(9.0, 8.0, 0.5, None) is None
    assert drift_of(0.75) == pytest.approx(0.25) and drift_of(-1.0) == 2.0
    assert unit_score(1.0) == 0.0 and unit_score(4.0) == pytest.approx(0.75)
    assert met_share([True, False, True, True]) == 0.75 and met_share([]) is None


def test_every_prompt_figure_is_computed_by_its_catalog_entry():
    """pooled ALIGN, DDIV, SDIV, Vendi and qVendi have one home: the bench's cells, a
    rescore's and a concepts run's all call prompt_values."""
    from types import SimpleNamespace

    import numpy as np

    from metrics.catalog import BENCH_PROMPT, prompt_values

    pooled = SimpleNamespace(pooled=SimpleNamespace(align=0.5), ddiv=0.25, sdiv=-0.125)
    got = prompt_values(BENCH_PROMPT, pooled=pooled, embeddings=np.eye(4), weights=[0.5, 1.0])
    assert list(got) == ["pooled_align", "ddiv", "sdiv", "vendi", "qvendi"]
    assert (got["pooled_align"], got["ddiv"], got["sdiv"]) == (0.5, 0.25, -0.125)
    # four orthogonal images: four effective images (an eigendecomposition's rounding)
    assert got["vendi"] == pytest.approx(4.0, abs=1e-9)
    assert got["qvendi"] == pytest.approx(0.75 * got["vendi"], abs=1e-12)
    # a rescore keeps the images' Vendi and weighs it again; without one, no qVendi
    kept = prompt_values(["qvendi"], {"vendi": 2.0}, weights=[0.25, 0.75])
    assert kept == {"qvendi": 1.0}
    assert prompt_values(["qvendi"], {"vendi": None}, weights=[1.0]) == {"qvendi": None}
    with pytest.raises(KeyError):  # a reading not given is no figure
        prompt_values(["vendi"], weights=[1.0])


def test_a_metric_is_pooled_as_its_entry_says_and_tasks_pool_nowhere_else():
    """Every task's summary pools through catalog.pooled: the mean over prompts (None left
    out) with its bootstrap interval, drawn with the seed given; a pool the catalog does not
    know is refused when the metric is registered; no task module writes a mean or builds
    a {mean, interval} of its own."""
    from dataclasses import replace

    from metrics.stats import mean_interval

    values = [0.2, None, 0.4, 0.9]
    got = catalog.pooled("faith", values, seed=7)
    assert got["mean"] == pytest.approx(0.5, abs=1e-12)
    assert got["interval"] == mean_interval([0.2, 0.4, 0.9], 7)
    many = [i / 17 for i in range(17)]  # enough values for two seeds' draws to differ
    assert catalog.pooled("faith", many, 7) != catalog.pooled("faith", many, 8)
    assert catalog.pooled("seconds", [None]) == {"mean": None, "interval": None}
    odd = replace(catalog.metric("faith"), name="toy_median", pool="median")
    with pytest.raises(ValueError, match="toy_median: pool 'median' is not one of mean"):
        catalog.register(odd)
    assert not catalog.known("toy_median")
    tasks = ROOT / "refine" / "harness" / "tasks"
    for path in tasks.rglob("*.py"):
        text = path.read_text()
        assert "def _mean" not in text and '"interval": ' not in text, path
        assert "mean_interval(" not in text, path
