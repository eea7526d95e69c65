"""A localized edit in the stand-in world: the observer's boxes are asked for once and
recorded, the Gemini editor is given the region in its instruction and its edit is pasted
back into the parent outside it (beyond a feathered band, every pixel the parent's), each
candidate's drift inside and outside the boxes is measured; boxes a person gives
(--edit-box) restrict every edit with no grounding call, recorded as by hand."""

from __future__ import annotations

import re

import numpy as np
import pytest
from PIL import Image

from refine.backends.regions import pixels, reach, region_words
from refine.present import views
from refine.present.report.run import render_run
from refine.records import Region
from tests.e2e.test_cli_run import cli
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
    # the world's edits repaint the whole image in one colour; pasted back, the parent's
    # pixels are kept beyond the feathered band: no drift outside, whatever was repainted
    for c in r1.candidates:
        assert c.drift.inside is not None and 0.0 <= c.drift.inside <= 2.0
        # SSIM of identical windows is 1 up to float64 rounding
        assert c.drift.outside == pytest.approx(0.0, abs=1e-9)
        assert c.drift.ssim < 0.99  # the whole image did change, inside the boxes
    assert "(in " in views.drift_text(r1) and ", out " in views.drift_text(r1)
    page = render_run(tmp_path / run.id)
    assert f"the edit was restricted to {len(r1.regions)} box(es)" in page
    assert "drift inside" in page
    # the app's slider draws the boxes on the parent image
    before, _ = views.before_after(run, tmp_path / run.id, 1)
    left, top, _, _ = pixels(r1.regions[0].box, before.size)
    assert before.getpixel((left, top)) == views.REGION_COLOURS[r1.regions[0].kind]


def test_boxes_given_by_hand_restrict_every_edit(world, backends, options, tmp_path):
    box = [0.1, 0.2, 0.5, 0.6]
    run = begin(
        refiner(backends, options), ACT, COUNTRY, out=tmp_path, rounds=2, candidates=1,
        target=0.99, max_drift=2.0, writer="template", edit_boxes=["0.1,0.2,0.5,0.6"],
    )  # fmt: skip
    assert not world.grounded  # no grounding call: the person's box is every edit's
    edits = [r for r in run.rounds[1:] if r.kind == "edit"]
    assert edits and all(r.regions == [Region(box=box, source="by hand")] for r in edits)
    assert world.edited and all(region_words([box]) in text for text in world.edited)
    parent = Image.open(tmp_path / run.id / run.rounds[0].best.image).convert("RGB")
    child = Image.open(tmp_path / run.id / edits[0].candidates[0].image).convert("RGB")
    a, b = np.asarray(parent), np.asarray(child)
    beyond = ~reach([box], parent.size)
    assert beyond.any() and (a[beyond] == b[beyond]).all()  # the parent's own pixels
    left, top, right, bottom = pixels(box, parent.size)
    assert (a[top:bottom, left:right] != b[top:bottom, left:right]).any()  # edited inside
    page = render_run(tmp_path / run.id)
    assert 'data-source="by hand"' in page and "by hand [0.10, 0.20, 0.50, 0.60]" in page
    # a box under 1% of the image: one line naming the flag, nothing written
    bad = cli("run", ACT, "--country", COUNTRY, "--edit-box", "0.1,0.1,0.15,0.15",
              "--out", tmp_path / "no")  # fmt: skip
    assert bad.returncode == 2
    assert bad.stderr == "error: --edit-box: box 1 is under 1% of the image: '0.1,0.1,0.15,0.15'\n"
    assert not (tmp_path / "no").exists()


def test_the_gemini_editor_takes_a_drawn_region_and_keeps_the_rest(world):
    """A region drawn by hand (a brush's one-channel mask): the API editor is told its
    bounding box and its edit is pasted back beyond the feathered band; a mask of another
    size or with colour channels is refused before any request."""
    from refine.backends import create
    from refine.backends.regions import mask_box

    editor = create("editor", "gemini:gemini-nano-banana-2.1", shared=False)
    parent = Image.new("RGB", (64, 48), (120, 80, 40))
    drawn = np.zeros((48, 64), dtype=bool)
    drawn[10:30, 8:24] = True
    mask = Image.fromarray(drawn.astype(np.uint8) * 255, mode="L")
    (out,) = editor.edit(parent, "add a samovar", [1], mask=mask)
    box = mask_box(drawn)
    assert box == [8 / 64, 10 / 48, 24 / 64, 30 / 48]
    assert region_words([box]) in world.edited[-1]
    a, b = np.asarray(parent), np.asarray(out.convert("RGB"))
    beyond = ~reach([], parent.size, mask)
    assert beyond.any() and (a[beyond] == b[beyond]).all()
    assert (a[drawn] != b[drawn]).any()  # the world repainted it: the edit is kept inside
    asked = len(world.edited)
    for wrong, said in (
        (mask.resize((32, 24)), "a region's mask is 32x24, the image 64x48"),
        (mask.convert("RGB"), "a region's mask has one channel (L or 1), not RGB"),
    ):
        with pytest.raises(ValueError, match=re.escape(said)):
            editor.edit(parent, "add a samovar", [1], mask=wrong)
    assert len(world.edited) == asked  # nothing sent
