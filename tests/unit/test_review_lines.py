"""A review file's drawn region (``mask``): read from beside the file when its round comes,
counted with the boxes against the bound, and a file that cannot be read said as such."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest
from PIL import Image

from refine.loop.review_file import has_boxes, read_review


def test_a_review_lines_mask_is_read_from_beside_the_file(tmp_path):
    drawn = np.zeros((20, 30), dtype="uint8")
    drawn[5:15, 10:25] = 255
    Image.fromarray(drawn, mode="L").save(tmp_path / "m.png")
    review = tmp_path / "review.jsonl"
    review.write_text(json.dumps({"round": 2, "mask": "m.png"}) + "\n")
    (line,) = read_review(review).values()
    got = line.drawn()
    assert got.mode == "L" and np.array_equal(np.asarray(got), drawn)
    assert line.regions() == 1 and has_boxes(SimpleNamespace(review_file=str(review)))
    # nine regions (eight boxes and the mask) are refused, naming the line
    boxes = [[0.1 * i, 0.0, 0.1 * i + 0.1, 0.5] for i in range(8)]
    review.write_text(json.dumps({"round": 2, "boxes": boxes, "mask": "m.png"}) + "\n")
    with pytest.raises(ValueError, match="line 1: at most 8 regions, boxes and mask"):
        read_review(review)
    # a mask that is not there, or of three channels: refused before the run, naming it
    review.write_text(json.dumps({"round": 2, "mask": "gone.png"}) + "\n")
    with pytest.raises(ValueError, match=r"round 2: cannot read the mask .*gone\.png"):
        read_review(review)
    Image.fromarray(np.dstack([drawn] * 3), mode="RGB").save(tmp_path / "rgb.png")
    review.write_text(json.dumps({"round": 2, "mask": "rgb.png"}) + "\n")
    with pytest.raises(ValueError, match="line 1: the mask rgb.png has one channel"):
        read_review(review)


def test_what_a_person_marks_at_the_pause_is_checked_before_the_loop_sees_it():
    """refine.loop.pause.Review.check: what the job refuses while the review waits."""
    from PIL import ImageDraw

    from refine.loop.pause import Review
    from refine.records import Descriptor, ReferenceEdit, ReferencePack

    refs = ReferencePack(activity="a", country="Iran", descriptors={"objects": ["rug"]})
    size = (64, 48)

    def brush(box, mode="L", at=size):
        mask = Image.new(mode, at, 0)
        ImageDraw.Draw(mask).ellipse([box[0] * at[0], box[1] * at[1], box[2] * at[0],
                                      box[3] * at[1]], fill=255)  # fmt: skip
        return mask

    big = brush((0.1, 0.1, 0.9, 0.9))
    eight = [[0.1 * i, 0.0, 0.1 * i + 0.1, 0.5] for i in range(8)]
    gone = ReferenceEdit(removed=[Descriptor(dimension="objects", phrase="x")])
    for given, how, said in (
        ({"mask": brush((0.1, 0.1, 0.9, 0.9), at=(32, 48))}, {}, "is 32x48, the image 64x48"),
        ({"mask": brush((0.1, 0.1, 0.9, 0.9), "RGB")}, {}, r"one channel \(L or 1\), not RGB"),
        ({"mask": brush((0.1, 0.1, 0.15, 0.15))}, {}, r"covers 0\.4% of the image, under 1%"),
        ({"boxes": eight, "mask": big}, {}, "at most 8 regions a round"),
        ({"mask": big}, {"move": "regenerate"}, "a region restricts an edit"),
        ({"mask": big}, {"localizes": None}, "this run's editor can restrict no edit"),
        ({"references": gone}, {}, "'x' is no reference descriptor of objects"),
    ):
        with pytest.raises(ValueError, match=said):
            Review("Put a samovar on the table.", **given).check(size, refs, **how)
    Review("Put a samovar on the table.", mask=big).check(size, refs, "edit", "instruction")
