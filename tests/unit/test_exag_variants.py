"""EXAG variants are never mixed: a bench's means of EXAG and FAITH and an agreement's
correlations are taken per variant where images were scored by different ones."""

from __future__ import annotations

import pytest

from metrics.stats import mean_interval
from refine.harness.cells import Cell
from refine.harness.tasks.bench_summary import _stats, exag_variant, summarise
from refine.human.agree import _metric_keys, with_variant


def cell(act: str, gen: str, variant: str, exag: float, faith: float) -> Cell:
    image = {"exag": exag, "faith": faith, "align": 0.5, "hal": 0.2, "exag_variant": variant}
    return Cell(
        key=(gen, act, "Iran", (0,)),
        inputs={"generator": gen, "activity": act, "country": "Iran", "category": "eating"},
        outputs={"pooled_align": 0.5, "ddiv": 0.1, "sdiv": 0.0, "vendi": 1.0},
        images=[image],
    )


def test_a_bench_never_averages_exag_over_two_variants():
    cells = [
        cell("a", "g", "exag:ita", 0.05, 0.70),
        cell("b", "g", "exag:ita", 0.10, 0.60),
        cell("c", "g", "exag:mllm", 0.50, 0.40),
    ]
    assert [exag_variant(c) for c in cells] == ["exag:ita", "exag:ita", "exag:mllm"]
    row = _stats(cells, seed=0)
    # ALIGN does not depend on the variant: one mean over the three prompts
    assert row["align"]["mean"] == pytest.approx(0.5)
    for m, ita, mllm in (("exag", [0.05, 0.10], [0.50]), ("faith", [0.70, 0.60], [0.40])):
        assert row[m]["mean"] is None  # no mean over both
        by = row[m]["by_variant"]
        assert by["exag:ita"]["mean"] == pytest.approx(sum(ita) / 2)
        assert by["exag:ita"]["interval"] == mean_interval(ita, 0)
        assert by["exag:ita"]["prompts"] == 2
        assert by["exag:mllm"] == {"prompts": 1, "mean": pytest.approx(mllm[0]), "interval": None}
    # one variant: the plain mean, named
    one = _stats(cells[:2], seed=0)
    assert one["exag"]["mean"] == pytest.approx(0.075) and one["exag"]["variant"] == "exag:ita"


def test_generators_are_compared_on_prompts_of_the_same_variant():
    cells = [
        cell("a", "g1", "exag:ita", 0.05, 0.70),
        cell("a", "g2", "exag:ita", 0.05, 0.80),
        cell("b", "g1", "exag:mllm", 0.50, 0.40),
        cell("b", "g2", "exag:ita", 0.05, 0.90),  # b scored with photos for g2 only
    ]
    (paired,) = summarise(cells, ["g1", "g2"], seed=0)["paired"]
    assert paired["prompts"] == 1 and paired["mean_difference"] == pytest.approx(0.10)


def test_agreement_correlates_each_variant_apart():
    found = {
        "a": with_variant({"faith": 0.7, "align": 0.5}, "exag:ita"),
        "b": with_variant({"faith": 0.4, "align": 0.6}, "exag:mllm"),
        "c": with_variant({"faith": 0.6, "align": 0.4}, None),  # a record before variants
    }
    assert found["a"] == {"faith@exag:ita": 0.7, "align": 0.5}
    plan = _metric_keys(["faith", "align"], found)
    assert plan == [
        ("faith", "faith", "faith [no variant]", None),
        ("faith", "faith@exag:ita", "faith [exag:ita]", "exag:ita"),
        ("faith", "faith@exag:mllm", "faith [exag:mllm]", "exag:mllm"),
        ("align", "align", "align", None),
    ]
    # one variant only: the plain name, its variant said
    only = _metric_keys(["faith"], {"a": found["a"]})
    assert only == [("faith", "faith@exag:ita", "faith", "exag:ita")]
