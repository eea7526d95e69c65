"""refine.human.rating: a set's images, each rater's own order, validated answers appended and
synced, a line cut by a kill skipped (the image is rated again)."""

from __future__ import annotations

import json

import pytest
from PIL import Image

from refine.human.rating import RatingSet


@pytest.fixture
def folder(tmp_path):
    for k in range(5):
        Image.new("RGB", (8, 8), (k * 40, 0, 0)).save(tmp_path / f"im{k}.png")
    (tmp_path / "notes.txt").write_text("not an image")
    return tmp_path


def test_order_answers_and_a_cut_line(folder):
    s = RatingSet.open(folder)
    assert [i.image for i in s.items] == [f"im{k}.png" for k in range(5)]
    assert s.order("ana") == s.order("ana") and s.order("ana") != s.order("ben")
    first, done, total = s.next_for("ana")
    assert (done, total) == (0, 5) and first == s.order("ana")[0]
    s.record("ana", first.image, "4", 2, [], " good  light ")
    for bad, match in (
        (("ana", first.image, None, 2), "give the alignment"),
        (("ana", first.image, 6, 2), "must be 1-5, got 6"),
        (("ana", "../x.png", 3, 2), "not an image of this set"),
        (("ana", first.image, 3, 2, ["a statement"]), "not an expectation"),
    ):
        with pytest.raises(ValueError, match=match):
            s.record(*bad)
    row = json.loads(s.ratings_path.read_text())
    assert row["alignment"] == 4 and row["faithfulness"] == 2 and row["comment"] == "good light"
    nxt, done, _ = s.next_for("ana")
    assert done == 1 and nxt == s.order("ana")[1]
    # a kill mid-write: the cut line is skipped, the next rating starts a line of its own
    with open(s.ratings_path, "a") as f:
        f.write('{"image": "' + nxt.image + '", "rater": "ana", "align')
    assert s.next_for("ana")[1] == 1
    s.record("ana", nxt.image, 1, 1)
    lines = s.ratings_path.read_text().splitlines()
    assert len(lines) == 3 and json.loads(lines[2])["image"] == nxt.image
    assert s.next_for("ana")[1] == 2 and s.next_for("ben")[1] == 0


def test_a_set_is_read_again_only_when_what_it_reads_changed(folder):
    import os

    first = RatingSet.cached(folder)
    assert RatingSet.cached(folder) is first and len(first.items) == 5
    # a rating is not part of the set: still the same object
    first.record("ana", "im0.png", 3, 3)
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
