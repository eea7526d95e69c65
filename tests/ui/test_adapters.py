"""Run records to widget values, on a run made through the fake Gemini server."""

from __future__ import annotations

import pytest

from refine.loop.refiner import Refiner
from tests.runs import begin
from ui.adapters import (
    TABLE_HEADERS,
    TABLE_WIDTHS,
    before_after,
    checklist,
    gallery,
    glossary_markdown,
    metric_rows,
    rounds_table,
)

ACT, COUNTRY = "people eating food at home", "Iran"


def test_adapters_show_the_run(world, backends, options, tmp_path):
    run = begin(
        Refiner("gemini", backends=backends, backend_options=options),
        ACT,
        COUNTRY,
        out=tmp_path,
        rounds=2,
        target=1.0,
        max_drift=2.0,
    )
    run_dir = tmp_path / run.id
    # the glossary says which EXAG the run used: no photos here, so the MLLM variant
    first = glossary_markdown(run).splitlines()[0]
    assert first.startswith("- **EXAG in this run**: exag:mllm (the judge's expected 1-5")
    assert "not comparable with the paper's Table 1" in first and first.endswith("; tau 0.52")
    assert not glossary_markdown().startswith("- **EXAG in this run**")
    items = gallery(run, run_dir)
    assert [p for p, _ in items] == [str(run_dir / r.best.image) for r in run.rounds]
    assert items[0][1].startswith("\u25cf round 0: initial, FAITH ")
    assert items[1][1].startswith("\u2713 round 1: accepted") and items[1][1].endswith("(best)")
    assert items[2][1].startswith("\u2717 round 2: rejected")
    rows = metric_rows(run)
    faith = [x["value"] for x in rows if x["metric"] == "FAITH"]
    assert faith == [pytest.approx(r.best.scores.faith, abs=1e-4) for r in run.rounds]
    drift = [x for x in rows if x["metric"] == "drift"]
    assert [x["round"] for x in drift] == [1, 2]  # round 0 has no parent
    assert drift[0]["value"] == pytest.approx(
        1 - run.rounds[1].best.drift.embedding_cosine, abs=1e-4
    )
    table = rounds_table(run)
    assert [row[1] for row in table] == ["initial", "accepted", "rejected"]
    # a width per column, the reason's the widest, and round to reason within a desktop's
    # 800 px (a column added without its width would shift every width after it)
    assert len(TABLE_WIDTHS) == len(TABLE_HEADERS) == len(table[0])
    px = [int(w.removesuffix("px")) for w in TABLE_WIDTHS]
    reason = TABLE_HEADERS.index("reason")
    assert px[reason] == max(px) and sum(px[: reason + 1]) <= 800
    assert table[2][TABLE_HEADERS.index("reason")] == run.rounds[2].reason
    quality = TABLE_HEADERS.index("quality ↑")
    # to 3 decimals, as everything else shows them
    assert [row[quality] for row in table] == [round(r.best.scores.quality, 3) for r in run.rounds]
    # round 0 has no drift: a dash, never a made-up number
    assert [row[TABLE_HEADERS.index("drift ↓")] for row in table][0] == "\u2013"
    faith = TABLE_HEADERS.index("FAITH ↑")
    assert [row[faith] for row in table] == [round(r.best.scores.faith, 3) for r in run.rounds]
    marks = checklist(run.rounds[0])
    hamburgers = next(t for t, k in marks if t.startswith("hamburgers"))
    assert dict(marks)[hamburgers] == "hallucinated"
    # why it counts: its closest reference and their similarity (at most tau)
    (h,) = [x for x in run.rounds[0].best.feedback.hallucinated if x.phrase == "hamburgers"]
    assert hamburgers == f"hamburgers (closest: {h.best_match}, {h.similarity:.2f}) "
    assert h.similarity <= run.spec.tau
    assert ("oversized hookahs ", "exaggerated") in marks
    assert ("setting: ", None) in marks and any(k == "missing" for _, k in marks)
    # split: what to fix, and what the image gets right; together, every item once
    to_fix, ok = checklist(run.rounds[0], part="fix"), checklist(run.rounds[0], part="ok")
    assert {k for _, k in to_fix} == {None, "missing", "hallucinated", "exaggerated"}
    assert {k for _, k in ok} == {None, "aligned"}
    items = sorted(x for x in marks if x[1] is not None)
    assert sorted(x for x in to_fix + ok if x[1] is not None) == items
    assert ("stereotypes: ", None) in to_fix and ("stereotypes: ", None) not in ok
    with pytest.raises(ValueError, match="part is 'fix', 'ok' or None"):
        checklist(run.rounds[0], part="all")
    first = str(run_dir / run.rounds[0].best.image)
    assert before_after(run, run_dir, 0) == (first, first)  # round 0 alone
    assert before_after(run, run_dir, 2) == (
        str(run_dir / run.rounds[1].best.image),
        str(run_dir / run.rounds[2].best.image),
    )


@pytest.mark.slow
def test_the_app_and_the_report_draw_the_same_series(world, backends, options, tmp_path):
    """One source of views: the app's chart and the report's chart carry the same series
    (drift, SoS and CAIRE included) with the same values."""
    import re

    from refine.present.report.run import render_run
    from ui.adapters import metric_chart

    run = begin(
        Refiner("gemini", backends=backends, backend_options=options),
        ACT,
        COUNTRY,
        out=tmp_path,
        rounds=1,
        target=1.0,
        max_drift=2.0,
        caire_labels=["Turkey"],
    )

    def series(html: str) -> dict[str, str]:
        return dict(re.findall(r'data-name="([^"]+)" data-values=\'([^\']+)\'', html))

    app, report = series(metric_chart(run)), series(render_run(tmp_path / run.id))
    assert app == report
    assert {"FAITH", "drift", "best FAITH", "CAIRE Iran (0-1)"} <= set(app)
    assert app["CAIRE Iran (0-1)"] == "[0.25, 1.0]"  # Iran 2/5 then 5/5


def test_the_activity_list_follows_the_country():
    from refine.evaluate.references import load_pack
    from ui.app import ready_activities

    pack = load_pack()
    iran = pack.countries[pack.country_key("Iran")]["activities"]
    ready = ready_activities("Iran")
    assert "people eating food at home" in ready
    assert ready == sorted(iran) and all(iran[a].get("descriptors") for a in ready)
    assert len(ready) < len(pack.activities())  # not every country's activities
    france = pack.countries[pack.country_key("France")]["activities"]
    assert ready_activities("france") == sorted(france)  # none ready there: all, to build
    assert ready_activities("Atlantis") == []
    # what a hostile client may send instead of a picked country: nothing, never an error
    for sent in (None, ["Iran"], 5, {"c": "Iran"}, "Iran" * 100):
        assert ready_activities(sent) == []


@pytest.mark.slow
def test_the_apps_examples_can_run_from_the_bundled_pack(tmp_path):
    import gradio as gr

    from refine import settings
    from refine.service import RunService
    from ui.app import build_app

    demo = build_app(RunService("gemini", out=tmp_path))
    examples = [b for b in demo.blocks.values() if isinstance(b, gr.Dataset)]
    (dataset,) = examples
    rows = dataset.samples
    assert len(rows) == 3 and len({country for _, country in rows}) == 3
    for activity, country in rows:  # each has references: a run can start from it
        spec, refs = settings.load({"activity": activity, "country": country})
        assert refs.descriptors["objects"] and spec.country == country


@pytest.mark.parametrize("bad", ["nan", "inf", "1.5", "1; rm -rf /", None, ""])
def test_round_numbers_from_clients_must_be_whole(bad):
    from ui.app import _index

    with pytest.raises(ValueError, match="the round must be a whole number"):
        _index(bad, "round")
    assert _index("2", "round") == 2 and _index(3.0, "round") == 3
