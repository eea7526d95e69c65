"""A missing value is a dash on every screen (the command line's tables, the pages, the
app), never "n/a" in one place and a made-up 0 in another."""

from __future__ import annotations


def test_a_missing_value_is_a_dash_in_its_column():
    from refine.harness.results import Results
    from refine.harness.tasks.bench.lines import bench_lines
    from refine.numbers import shown

    assert shown(None, "7.2f", 7) == "      \u2013"
    assert shown(0.0, "7.2f", 7) == "   0.00" and shown(1.834, "9.3f", 9) == "    1.834"
    # the bench's leaderboard: a generator with no Vendi has the dash in its column
    row = {"prompts": 3, "faith": {"mean": 0.5, "interval": [0.4, 0.6]}, "vendi": {"mean": None}}
    summary = {"generators": {"g": row}, "paired": []}
    lines = bench_lines(Results("bench", {"baselines": []}, summary))
    assert lines[1].endswith("      \u2013") and len(lines[1]) == len(lines[0])


def test_every_screen_says_a_missing_value_the_same_way():
    from refine.events import _fmt
    from refine.numbers import MISSING, shown
    from refine.present.html import interval_text, num
    from refine.present.views import faith_text

    assert MISSING == "\u2013"
    said = {shown(None), _fmt(None), num(None), faith_text(None), interval_text({"mean": None})}
    assert said == {MISSING}
    assert shown(None, "6.3f", 6) == "     \u2013" and shown(0.25, "+.3f") == "+0.250"
