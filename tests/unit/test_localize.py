"""Localized edits from records and arrays alone: the mask the boxes make, the drift
outside them, the boxes' checks, the words an API editor gets, the refusal of an editor
that cannot restrict an edit, and the decision on drift outside."""

from __future__ import annotations

import re

import numpy as np
import pytest
from PIL import Image

from metrics.drift import ssim_outside
from refine.backends.regions import inside, mask_image, paste_outside, pixels, region_words
from refine.loop import localize, policy
from refine.records import Candidate, Drift, Feedback, PlannedChange, Region, RunSpec, Scores


def test_the_mask_is_the_boxes():
    boxes = [[0.1, 0.2, 0.5, 0.6], [0.8, 0.0, 1.0, 0.1]]
    got = inside(boxes, (100, 50))  # width 100, height 50
    want = np.zeros((50, 100), dtype=bool)
    want[10:30, 10:50] = True  # y 0.2-0.6 of 50, x 0.1-0.5 of 100
    want[0:5, 80:100] = True
    assert np.array_equal(got, want)
    assert np.array_equal(np.asarray(mask_image(boxes, (100, 50))), want.astype(np.uint8) * 255)
    assert pixels([0.0, 0.0, 0.001, 0.001], (100, 50)) == (0, 0, 1, 1)  # at least a pixel
    # every pixel the box touches: 0.29 of 100 is pixel 29 (0.29 * 100 is 28.999...)
    assert pixels([0.29, 0.0, 0.571, 1.0], (100, 50)) == (29, 0, 58, 50)


def test_drift_outside_is_zero_when_only_the_box_changed():
    rng = np.random.default_rng(1)
    parent = Image.fromarray(rng.integers(0, 255, (64, 96, 3), dtype=np.uint8))
    boxes = [[0.25, 0.25, 0.5, 0.75]]
    region = inside(boxes, parent.size)
    changed = np.asarray(parent).copy()
    changed[region] = 255 - changed[region]
    child = Image.fromarray(changed)
    # outside unchanged: SSIM 1 there (float rounding of equal windows aside)
    assert 1.0 - ssim_outside(parent, child, region) == pytest.approx(0.0, abs=1e-12)
    # the same change seen by the whole-image SSIM
    from metrics.drift import ssim

    assert ssim(parent, child) < 0.9
    # a change outside the box is seen
    out = changed.copy()
    out[:, :20] = 0  # the left fifth, all outside the box (it starts at x 24)
    assert 1.0 - ssim_outside(parent, Image.fromarray(out), region) > 0.1
    # no window wholly outside: None
    assert ssim_outside(parent, child, np.ones((64, 96), dtype=bool)) is None
    # pasting the original back outside makes the outside the original's, exactly
    pasted = paste_outside(parent, Image.fromarray(out), mask_image(boxes, parent.size))
    assert np.array_equal(np.asarray(pasted)[~region], np.asarray(parent)[~region])


def test_boxes_are_checked_and_clipped():
    assert Region(item="a", kind="missing", box=[0, 0, 1, 1]).box == [0, 0, 1, 1]
    for bad in ([0.5, 0, 0.4, 1], [0, 0, 1.2, 1], [0, 0.3, 1, 0.3]):
        with pytest.raises(ValueError, match="x0 < x1"):
            Region(item="a", kind="missing", box=bad)
    assert localize.clipped([-0.01, 0.1, 1.01, 0.5]) == [0.0, 0.1, 1.0, 0.5]  # rounding
    assert localize.clipped([0.5, 0.1, 0.5, 0.5]) is None and localize.clipped([1, 2]) is None
    # another scale (pixels, 0-1000): dropped, never read as the whole image
    assert localize.clipped([0, 0, 500, 700]) is None
    assert localize.clipped([120, 80, 400, 300]) is None
    words = region_words([[0.1, 0.2, 0.5, 0.6]])
    assert "x 0.10-0.50, y 0.20-0.60" in words and "exactly as it is" in words
    changes = [
        PlannedChange(kind="remove", dimension="objects", item="hamburgers"),
        PlannedChange(kind="tone down", dimension=None, item="hookahs"),
        PlannedChange(kind="replace", dimension="setting", item="neon", reference="rug"),
        PlannedChange(kind="add", dimension="objects", item="flatbread"),
        PlannedChange(kind="other", item="read as Iran"),
    ]
    assert localize.items(changes) == [
        ("hamburgers", "hallucinated"), ("hookahs", "exaggerated"), ("neon", "hallucinated"),
        ("flatbread", "missing"),
    ]  # fmt: skip
    # a stereotype the plan replaces carries a dimension: the feedback names it exaggerated
    from refine.records import Exaggerated

    fb = Feedback(exaggerated=[Exaggerated(candidate="Neon")])
    assert ("neon", "exaggerated") in localize.items(changes, fb)


class _Backends:
    def __init__(self, localizes):
        self.names = {"editor": "x:editor"}
        self.editor = type("E", (), {"localizes": localizes})()

    def get(self, role):
        return self.editor


def test_an_editor_that_cannot_restrict_an_edit_is_refused():
    spec = RunSpec(activity="a", country="b", localize=True)
    with pytest.raises(ValueError, match=r"^--localize: the editor x:editor can restrict no "
                       r"edit to a region; editors that can: gemini:"):  # fmt: skip
        localize.check(spec, _Backends(None))
    localize.check(spec, _Backends("mask"))
    localize.check(spec, _Backends("instruction"))
    localize.check(RunSpec(activity="a", country="b"), _Backends(None))  # not asked for


def cand(faith, outside):
    drift = Drift(embedding_cosine=0.9, ssim=0.9, embedder="e", inside=0.3, outside=outside)
    scores = Scores(values={"align": 0.5, "hal": 0.5, "exag": None, "faith": faith})
    return Candidate(seed=0, image="x.png", observed={}, scores=scores, feedback=Feedback(),
                     drift=drift)  # fmt: skip


def test_an_edit_that_changed_too_much_outside_is_rejected():
    parent = cand(0.3, None)
    kept = policy.decide_edit([cand(0.8, 0.3), cand(0.6, 0.02)], parent, 0, 0.01, 2.0,
                              max_drift_outside=0.05)  # fmt: skip
    assert kept.chosen == 1 and kept.decision == "accepted"
    gone = policy.decide_edit([cand(0.8, 0.3)], parent, 0, 0.01, 2.0, max_drift_outside=0.05)
    assert gone.decision == "rejected"
    assert "changed too much outside its boxes (smallest 1 - SSIM there 0.300 > 0.05)" in (
        gone.reason
    )
    # off by default, however far outside (1 - SSIM can pass 1)
    assert policy.decide_edit([cand(0.8, 1.4)], parent, 0, 0.01, 2.0).decision == "accepted"


class _Embedder:
    """An image's embedding: its mean colour, and a constant (never the zero vector)."""

    def encode_images(self, images):
        import torch

        rows = [[*np.asarray(im, dtype=np.float64).mean(axis=(0, 1)), 50.0] for im in images]
        return torch.tensor(rows)


class _Models:
    def using(self, role):
        import contextlib

        return contextlib.nullcontext(_Embedder())


def test_drift_inside_is_the_crops_and_outside_the_rest():
    rng = np.random.default_rng(2)
    parent = Image.fromarray(rng.integers(0, 255, (64, 96, 3), dtype=np.uint8))
    boxes = [[0.25, 0.25, 0.5, 0.75]]
    region = inside(boxes, parent.size)
    in_box, out_box = np.asarray(parent).copy(), np.asarray(parent).copy()
    in_box[region] = [255, 0, 0]  # only the box repainted
    out_box[~region] = [0, 0, 255]  # only the outside repainted
    children = {"in.png": Image.fromarray(in_box), "out.png": Image.fromarray(out_box)}

    class Store:
        def load_image(self, name):
            return children[name]

    drift = Drift(embedding_cosine=0.5, ssim=0.5, embedder="e")
    cands = [
        Candidate(
            seed=0, image=n, observed={}, scores=Scores(values={}), feedback=Feedback(), drift=drift
        )  # fmt: skip
        for n in children
    ]
    regs = [Region(item="x", kind="missing", box=boxes[0])]
    localize.measure(cands, parent, regs, Store(), _Models())
    changed_in, changed_out = (c.drift for c in cands)

    def one_minus_cos(a, b):
        e = _Embedder().encode_images([a, b]).numpy()
        return 1 - float(e[0] @ e[1] / np.linalg.norm(e[0]) / np.linalg.norm(e[1]))

    crop = pixels(boxes[0], parent.size)
    want = one_minus_cos(parent.crop(crop), children["in.png"].crop(crop))
    assert changed_in.inside == pytest.approx(want, abs=1e-6) and want > 0.01
    assert changed_in.outside == pytest.approx(0.0, abs=1e-12)
    assert changed_out.inside == pytest.approx(0.0, abs=1e-6)  # the crop is the parent's
    assert changed_out.outside > 0.1


def test_an_api_edit_pasted_back_keeps_every_pixel_beyond_the_feathered_band():
    from refine.backends.regions import feather_pixels, feathered_mask, paste_back, reach

    parent = Image.new("RGB", (100, 80), (10, 20, 30))
    edited = Image.new("RGB", (100, 80), (200, 100, 50))  # the model repainted it all
    box = [0.2, 0.25, 0.6, 0.75]
    out = np.asarray(paste_back(parent, edited, [box]))
    left, top, right, bottom = pixels(box, parent.size)
    assert (out[top:bottom, left:right] == (200, 100, 50)).all()  # the edit, inside
    beyond = ~reach([box], parent.size)
    assert (out[beyond] == (10, 20, 30)).all()  # the parent's own pixels, exactly
    band = feather_pixels(parent.size)
    assert band == 2 and beyond.sum() < 100 * 80 - (right - left) * (bottom - top)
    # within the band the edit fades out: one pixel out, half of it at a band of 2
    alpha = np.asarray(feathered_mask([box], parent.size))
    assert alpha[top + 5, right] == 128 and alpha[top + 5, right + band] == 0


@pytest.mark.parametrize(
    "given, said",
    [
        (["0.1,0.1,0.15,0.15"], "box 1 is under 1% of the image"),
        (["0.1,0.1,0.5"], "box 1 is four fractions in [0, 1]"),
        (["0.5,0.1,0.1,0.5"], "box 1 needs x0 < x1 and y0 < y1"),
        (["one,two,three,four"], "box 1 is x0,y0,x1,y1 (four numbers)"),
        (["0,0,0.5,0.5"] * 9, "at most 8 boxes, got 9"),
    ],
)
def test_boxes_by_hand_are_refused_in_one_line(given, said):
    from refine.records import by_hand_boxes

    with pytest.raises(ValueError, match=re.escape(said)):
        by_hand_boxes(given)
    assert by_hand_boxes([[0, 0, 0.5, 0.5]]) == [[0.0, 0.0, 0.5, 0.5]]  # a batch line's list
    with pytest.raises(ValueError, match="an observer's region names its item and kind"):
        Region(box=[0, 0, 0.5, 0.5])
    assert RunSpec(activity="a", country="Iran", edit_boxes=["0,0,0.5,0.5"]).edit_boxes


def test_a_review_file_changed_into_one_that_cannot_be_read_stops_the_run(tmp_path):
    from types import SimpleNamespace

    from refine.backends.regions import mask_array
    from refine.loop import review_file

    path = tmp_path / "review.jsonl"
    path.write_text('{"round": 1, "instruction": "Add a samovar."}\n')
    spec = SimpleNamespace(review_file=str(path))
    run = SimpleNamespace(stop_reason=None)
    line = review_file.entry(spec, 1)
    assert not review_file.stopped(run, 1, line) and run.stop_reason is None
    assert review_file.instruction_of(line, "written", "template") == ("Add a samovar.", "person")
    path.write_text('{"round": 1}\n{"round": 2, "decision": "mayb')  # saved half-way
    line = review_file.entry(spec, 2)
    assert review_file.stopped(run, 2, line)
    assert run.stop_reason.startswith("stopped before round 2: the review file can no longer")
    assert "line 2 is not JSON" in run.stop_reason and "--resume" in run.stop_reason
    with pytest.raises(ValueError, match="a region's mask is empty"):
        mask_array(Image.new("L", (8, 8), 0), (8, 8))
