"""A person at the pause marks a region with a brush and changes the references (the run
service the app drives, refine.loop.pause): what cannot be is refused while the review
waits; the editor is told the region, the outside of the new image is the parent's pixels
beyond the feathered band, the round records the region as the person's with its mask, and
the change of references from that round on."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image, ImageDraw

from refine.backends.regions import drawn_box, reach, region_words
from refine.io.store import RunStore
from refine.records import Descriptor, ReferenceEdit, Region
from refine.service import RunService
from tests.runs import prepared

ACT, COUNTRY = "people eating food at home", "Iran"


def brush(size, box, mode="L"):
    """A region drawn as a brush would: an ellipse inside ``box`` (fractions)."""
    w, h = size
    mask = Image.new(mode, size, 0)
    ImageDraw.Draw(mask).ellipse([box[0] * w, box[1] * h, box[2] * w, box[3] * h], fill=255)
    return mask


@pytest.mark.slow
def test_a_region_drawn_and_references_changed_at_the_pause(world, backends, options, tmp_path):
    service = RunService("gemini", out=tmp_path, backends=backends, backend_options=options)
    spec = prepared(ACT, COUNTRY, rounds=1, candidates=1, target=0.99, max_drift=2.0)
    job = service.start(*spec, pause=True)
    said, size = {}, None
    change = ReferenceEdit(added=[Descriptor(dimension="objects", phrase="Brass samovar")])
    for u in job.updates():
        if u.review is None or said:
            continue
        parent = RunStore(job.run_dir).load_image(u.run.rounds[0].best.image)
        size = parent.size
        for wrong in (
            {"mask": brush((size[0] // 2, size[1]), (0.1, 0.1, 0.9, 0.9))},
            {"mask": brush(size, (0.1, 0.1, 0.9, 0.9), "RGB")},
            {"mask": brush(size, (0.1, 0.1, 0.15, 0.15))},
            {
                "boxes": [[0.1 * i, 0.0, 0.1 * i + 0.1, 0.5] for i in range(8)],
                "mask": brush(size, (0.1, 0.1, 0.9, 0.9)),
            },  # fmt: skip
            {"references": ReferenceEdit(removed=[Descriptor(dimension="objects", phrase="x")])},
        ):
            with pytest.raises(ValueError) as err:
                job.submit_instruction("Put a samovar on the table.", **wrong)
            said[len(said)] = str(err.value)
        drawn = brush(size, (0.5, 0.4, 0.9, 0.9))
        # an editor that restricts no edit to a region (a plain instruction editor) refuses
        # it before anything is spent
        job.localizes, took = (lambda: None), job.localizes
        with pytest.raises(ValueError, match="this run's editor can restrict no edit"):
            job.submit_instruction("Put a samovar on the table.", mask=drawn)
        job.localizes = took
        job.submit_instruction("Put a samovar on the table.", mask=drawn, references=change)
    run = u.run
    assert u.done and run.status == "finished" and len(run.rounds) == 2, run.error
    assert said == {
        0: f"a region's mask is {size[0] // 2}x{size[1]}, the image {size[0]}x{size[1]}",
        1: "a region's mask has one channel (L or 1), not RGB",
        2: "the region drawn covers 0.4% of the image, under 1%",
        3: "at most 8 regions a round, boxes and the drawn one",
        4: "'x' is no reference descriptor of objects",
    }
    r1 = run.rounds[1]
    box = drawn_box(drawn, size)
    assert r1.regions == [Region(box=box, source="by hand", mask="round_01_mask.png")]
    store = RunStore(job.run_dir)
    kept = store.load_mask("round_01_mask.png")
    assert kept.mode == "L" and np.array_equal(np.asarray(kept), np.asarray(drawn))
    # the editor was told the region (by its bounding box) after the person's instruction
    assert world.edited[-1].strip().startswith("Put a samovar on the table.")
    assert region_words([box]) in world.edited[-1]
    # beyond the drawn region's feathered band every pixel is the parent's, exactly
    before = np.asarray(store.load_image(run.rounds[0].best.image))
    after = np.asarray(store.load_image(r1.best.image))
    outside = ~reach([], size, drawn)
    assert outside.mean() > 0.4 and np.array_equal(after[outside], before[outside])
    assert not np.array_equal(after[~outside], before[~outside])  # the edit shows inside
    # the change of references, from this round on, said as the app's
    (made,) = run.reference_changes
    assert (made.round, made.source, made.added[0].phrase) == (1, "app", "Brass samovar")
    assert "Brass samovar" in run.references.descriptors["objects"]
    assert [r.references for r in run.rounds] == [1, 1]
    # a roll back keeps the mask beside the record
    again = service.refiner().branch(job.run_dir, 1, rounds=0)
    assert (tmp_path / again.id / "round_01_mask.png").is_file()
    assert again.reference_changes == run.reference_changes
