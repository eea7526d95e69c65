"""refine.human.rating: a set's images, each rater's own order; the quick protocol's answers
validated, appended and synced, a line cut by a kill skipped (the image is rated again)."""

from __future__ import annotations

import json

import pytest
from PIL import Image

from refine.human.rating import RatingSet
from refine.human.study import Study


@pytest.fixture
def folder(tmp_path):
    for k in range(5):
        Image.new("RGB", (8, 8), (k * 40, 0, 0)).save(tmp_path / f"im{k}.png")
    (tmp_path / "notes.txt").write_text("not an image")
    return tmp_path


PROFILE = {
    "born": "Iran",
    "raised": "Iran",
    "residence": "Iran",
    "nationality": "Iran",
    "languages": ["Persian"],
    "age_band": "35-44",
    "consent": True,
}


def test_order_answers_and_a_cut_line(folder):
    s = RatingSet.open(folder)
    assert [i.image for i in s.items] == [f"im{k}.png" for k in range(5)]
    assert s.order("ana") == s.order("ana") and s.order("ana") != s.order("ben")
    study = Study.open(folder)  # a new set: the quick questions
    assert study.protocol.name == "quick"
    study.give_profile("ana", PROFILE)
    first, done, total = study.next_for("ana")
    assert (done, total) == (0, 5) and first.item == s.order("ana")[0] and first.kind == "rate"
    for answers, match in (
        ({"faithfulness": "2"}, "answer: How well does the image match"),
        ({"alignment": "6", "faithfulness": "2"}, "'6' is not one of 1, 2, 3, 4, 5"),
    ):
        with pytest.raises(ValueError, match=match):
            study.record("ana", first.item.image, "rate", answers)
    # the images have no expectations: the question about them is not asked, and a
    # client's answer to it is dropped; where an image has some, a stranger is refused
    given = {"alignment": "3", "faithfulness": "2", "unmet": ["a statement"]}
    assert "unmet" not in study.protocol.check(given, options={"unmet": []})[0]
    with pytest.raises(ValueError, match="'a statement' is not among the choices"):
        study.protocol.check(given, options={"unmet": ["tea in glasses"]})
    with pytest.raises(ValueError, match="not the image you are shown now"):
        study.record("ana", "../x.png", "rate", {"alignment": "3", "faithfulness": "2"})
    study.record(
        "ana", first.item.image, "rate", {"alignment": "4", "faithfulness": "2"},
        {"faithfulness": " good  light "},
    )  # fmt: skip
    row = json.loads(s.ratings_path.read_text())
    assert row["answers"] == {"alignment": "4", "faithfulness": "2"}
    assert row["reasons"] == {"faithfulness": "good light"} and row["kind"] == "rate"
    nxt, done, _ = study.next_for("ana")
    assert done == 1 and nxt.item == s.order("ana")[1]
    # a kill mid-write: the cut line is skipped, the next rating starts a line of its own
    with open(s.ratings_path, "a") as f:
        f.write('{"image": "' + nxt.item.image + '", "rater": "ana", "align')
    assert study.next_for("ana")[1] == 1
    study.record("ana", nxt.item.image, "rate", {"alignment": "1", "faithfulness": "1"})
    lines = s.ratings_path.read_text().splitlines()
    assert len(lines) == 3 and json.loads(lines[2])["image"] == nxt.item.image
    study.give_profile("ben", PROFILE)
    assert study.next_for("ana")[1] == 2 and study.next_for("ben")[1] == 0
    # a rating written before protocols is one of the quick questions' answers
    with open(s.ratings_path, "a") as f:
        f.write(json.dumps({"image": "im3.png", "rater": "ben", "alignment": 2, "faithfulness": 5}))
        f.write("\n")
    assert study.next_for("ben")[1] == 1


def test_a_set_is_read_again_only_when_what_it_reads_changed(folder):
    import os

    first = RatingSet.cached(folder)
    assert RatingSet.cached(folder) is first and len(first.items) == 5
    # a rating, and a study's own files, are not part of the set: still the same object
    study = Study.open(folder)
    study.give_profile("ana", PROFILE)
    slot, _, _ = study.next_for("ana")
    study.record("ana", slot.item.image, "rate", {"alignment": "3", "faithfulness": "3"})
    assert RatingSet.cached(folder) is first
    Image.new("RGB", (8, 8)).save(folder / "im9.png")
    os.utime(folder, ns=(1, 1))  # a folder whose clock did not move still differs
    grown = RatingSet.cached(folder)
    assert grown is not first and [i.image for i in grown.items][-1] == "im9.png"
    # a bench's cells file grows in a subfolder: the set follows it
    bench = folder / "bench"
    bench.mkdir()
    Image.new("RGB", (8, 8)).save(bench / "a.png")
    Image.new("RGB", (8, 8)).save(bench / "b.png")
    cells = bench / "cells.jsonl"
    cells.write_text(json.dumps({"prompt": "p", "images": [{"file": "a.png"}]}) + "\n")
    assert [i.image for i in RatingSet.cached(bench).items] == ["a.png"]
    with cells.open("a") as fh:
        fh.write(json.dumps({"prompt": "q", "images": [{"file": "b.png"}]}) + "\n")
    assert [i.image for i in RatingSet.cached(bench).items] == ["a.png", "b.png"]
