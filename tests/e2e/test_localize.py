"""A localized edit in the stand-in world: the observer's boxes are asked for once and
recorded, the Gemini editor is given the region in its instruction, each candidate's drift
inside and outside the boxes is measured, and --max-drift-outside rejects an edit that
changed what it was not asked to change."""

from __future__ import annotations

import pytest

from refine.backends.regions import pixels, region_words
from refine.present import views
from refine.present.report.run import render_run
from tests.e2e.test_loop import ACT, COUNTRY, refiner
from tests.fakes.gemini_world import MISSING_BOX, WRONG_BOX
from tests.runs import begin


def test_a_localized_edit_in_boxes_and_its_drift(world, backends, options, tmp_path):
    world.skip_box = {"hamburgers"}  # the observer draws no box for one item
    run = begin(
        refiner(backends, options), ACT, COUNTRY, out=tmp_path, rounds=1, candidates=2,
        target=0.99, max_drift=2.0, writer="template", localize=True,
    )  # fmt: skip
    r1 = run.rounds[1]
    (asked,) = world.grounded  # one grounding call, with every item the edit touches
    for c in r1.changes:
        if c.kind != "other":
            assert f"- {c.item} (" in asked
    kinds = {g.item: g for g in r1.regions}
    assert kinds and "hamburgers" not in kinds and r1.regions_note == "no box for: hamburgers"
    for g in r1.regions:
        assert g.box == (MISSING_BOX if g.kind == "missing" else WRONG_BOX)
    # the editor was told the region
    boxes = [g.box for g in r1.regions]
    assert all(region_words(boxes) in text for text in world.edited)
    # each candidate's drift inside and outside: the world's edits repaint the whole
    # image in one colour, so the outside changed too, every window alike (its SSIM is
    # the whole image's)
    for c in r1.candidates:
        assert c.drift.inside is not None and 0.0 <= c.drift.inside <= 2.0
        assert c.drift.outside == pytest.approx(1.0 - c.drift.ssim, abs=1e-9)
        assert c.drift.outside > 0.01
    assert "(in " in views.drift_text(r1) and ", out " in views.drift_text(r1)
    page = render_run(tmp_path / run.id)
    assert f"the edit was restricted to {len(r1.regions)} box(es)" in page
    assert "drift inside" in page
    # the app's slider draws the boxes on the parent image
    before, _ = views.before_after(run, tmp_path / run.id, 1)
    left, top, _, _ = pixels(r1.regions[0].box, before.size)
    assert before.getpixel((left, top)) == views.REGION_COLOURS[r1.regions[0].kind]
    # a low --max-drift-outside rejects those edits, saying why
    strict = begin(
        refiner(backends, options), ACT, COUNTRY, out=tmp_path, rounds=1, candidates=2,
        target=0.99, max_drift=2.0, writer="template", localize=True, max_drift_outside=0.01,
    )  # fmt: skip
    s1 = strict.rounds[1]
    assert s1.decision == "rejected"
    assert s1.reason.startswith("every candidate changed too much outside its boxes")
    smallest = min(c.drift.outside for c in s1.candidates)
    assert f"{smallest:.3f} > 0.01" in s1.reason
