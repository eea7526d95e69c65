"""The command line's tables show a missing value as a dash, never as a made-up 0."""

from __future__ import annotations


def test_a_missing_value_is_a_dash_in_its_column():
    from refine.cli.bench_cmd import _shown

    assert _shown(None, 7, 2) == "      -"
    assert _shown(0.0, 7, 2) == "   0.00" and _shown(1.834, 9, 3) == "    1.834"
    assert len(_shown(None, 9, 3)) == len(_shown(12.5, 9, 3)) == 9
