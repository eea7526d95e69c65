"""AHEaD Tab. 12 from a bench's cells: per country and activity category (AHEaD's groups;
an activity with no category by its phrase, said so), over every generator's images, the
stereotype candidates the most images exaggerate, then the largest mean excess over the
real photos; the first three; a group with none is left out."""

from __future__ import annotations

import pytest

from refine.harness.cells import Cell
from refine.harness.tasks.bench.summary import top_exaggerated


def cell(gen, country, act, images, category="eating"):
    return Cell(key=(gen, act, country, (0,)),
                inputs={"generator": gen, "country": country, "activity": act,
                        "category": category},
                outputs={}, images=images)  # fmt: skip


def test_the_top_three_by_share_then_excess():
    ex = lambda c, x=None: {"candidate": c, **({"excess": x} if x is not None else {})}  # noqa: E731
    cells = [
        cell("a", "Iran", "tea", [{"exaggerated": [ex("rug", 0.2), ex("camel", 0.5)]},
                                  {"exaggerated": [ex("rug", 0.4)]}]),
        # another eating activity of Iran: one group with tea, as AHEaD groups
        cell("b", "Iran", "dinner", [{"exaggerated": [ex("camel", 0.2), ex("desert", 0.3),
                                                      ex("turban", 0.9)]},
                                     {"exaggerated": []}]),
        cell("a", "USA", "tea", [{"exaggerated": []}, {}]),  # none: left out
        cell("a", "Iran", "dance", [{"exaggerated": [ex("flag")]}], None),  # no category
    ]  # fmt: skip
    got = top_exaggerated(cells)
    assert list(got) == ["Iran / dance (by its phrase: no category)", "Iran / eating"]
    tea = got["Iran / eating"]
    # camel and rug in 2 of 4 images each: camel's mean excess 0.35 above rug's 0.3; then
    # turban and desert in one image each, turban's excess 0.9 above desert's 0.3
    assert [r["candidate"] for r in tea] == ["camel", "rug", "turban"]
    assert tea[0]["images"] == 2 and tea[0]["share"] == pytest.approx(0.5)
    assert tea[1]["mean_excess"] == pytest.approx(0.3)
    assert tea[2]["share"] == pytest.approx(0.25) and tea[2]["mean_excess"] == pytest.approx(0.9)
    assert got["Iran / dance (by its phrase: no category)"] == [
        {"candidate": "flag", "images": 1, "share": 1.0, "mean_excess": None}
    ]
