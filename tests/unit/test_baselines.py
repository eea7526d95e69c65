"""The judge baselines' arithmetic and names, by hand."""

from __future__ import annotations

import pytest

from metrics.baselines import JudgeRating, judge_align_of, judge_hal_of, rating_to_unit
from metrics.judge import Reading
from refine.evaluate.baselines import BASELINES, parse_baselines


def test_a_rating_maps_to_the_unit_scale():
    assert rating_to_unit(1.0) == (0.0, None) and rating_to_unit(5.0) == (1.0, None)
    assert rating_to_unit(3.4, 0.2) == (pytest.approx(0.6), pytest.approx(0.05))
    with pytest.raises(ValueError, match=r"must lie in \[1, 5\], got 0.5"):
        rating_to_unit(0.5)


def test_each_baseline_reads_its_own_rating():
    rows = [
        {"judge_align": JudgeRating(4.2), "judge_hal": JudgeRating(1.8, 0.4, "sampled k=8")},
        None,
    ]
    align, none = judge_align_of(rows)
    hal, _ = judge_hal_of(rows)
    assert align.value == pytest.approx(0.8) and align.reading == Reading()
    assert hal.value == pytest.approx(0.2) and hal.reading == Reading("sampled", 8, 0.1)
    assert none.value is None and none.note == "not asked for (--baselines)"


def test_baselines_are_named_or_refused():
    assert parse_baselines("none") == () and parse_baselines("") == ()
    assert parse_baselines("all") == BASELINES == ("vqascore", "judge_align", "judge_hal")
    assert parse_baselines(" judge_hal, vqascore ,judge_hal") == ("judge_hal", "vqascore")
    with pytest.raises(ValueError, match="no baseline 'tifa'; baselines: vqascore, judge_align"):
        parse_baselines("vqascore,tifa")
