"""A missing value is a dash on every screen (the command line's tables, the pages, the
app), never "n/a" in one place and a made-up 0 in another."""

from __future__ import annotations


def test_a_missing_value_is_a_dash_in_its_column():
    from refine.cli.bench_cmd import _shown

    assert _shown(None, 7, 2) == "      \u2013"
    assert _shown(0.0, 7, 2) == "   0.00" and _shown(1.834, 9, 3) == "    1.834"
    assert len(_shown(None, 9, 3)) == len(_shown(12.5, 9, 3)) == 9


def test_every_screen_says_a_missing_value_the_same_way():
    from refine.events import _fmt
    from refine.numbers import MISSING, shown
    from refine.present.html import interval_text, num
    from refine.present.views import faith_text

    assert MISSING == "\u2013"
    said = {shown(None), _fmt(None), num(None), faith_text(None), interval_text({"mean": None})}
    assert said == {MISSING}
    assert shown(None, "6.3f", 6) == "     \u2013" and shown(0.25, "+.3f") == "+0.250"
