"""benchmarks/bench_decisions.py's pieces: moving a ratings' distribution down moves its
mean by as much where nothing falls below 1; a judge that follows seeds reads an unchanged
picture as its parent, so no rule accepts it; a real gain is read through the project's
reading and decision code."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_decisions.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_decisions", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_shift_moves_the_mean_by_itself(bench):
    p = bench.JUDGES["peaked"]
    for down in (0.6, 1.2, 2.0):
        moved = bench.shifted(p, down)
        assert sum(moved) == pytest.approx(1.0)
        assert bench.mean_rating(p) - bench.mean_rating(moved) == pytest.approx(down)
    assert bench.shifted((0.5, 0.5, 0, 0, 0), 1.0) == pytest.approx((1.0, 0, 0, 0, 0))


def test_decisions_of_a_seed_following_judge(bench):
    p = bench.JUDGES["peaked"]
    assert bench.decisions(p, True, 10, 0)[:2] == (0.0, 0.0)  # the same readings: no gain
    today, new, answers = bench.decisions(bench.JUDGES["sure"], False, 10, 0, exag_down=1.2)
    assert today == new == 1.0 and 4 <= answers <= 32  # two candidates, 2 to 8 answers each


def test_exag_ita_as_read_before_and_now(bench):
    """Three images with one candidate 0.6 above the photos (P(Yes) 0.9 against 0.3): both
    ways read through the project's code, and both find it, the new one from its more
    answers (all 8k for a candidate above the photos, 8 to 8k for the others), the old one
    from 2 to 8; the value is the excess within its error (about 0.07 from 64 and 32
    answers)."""
    from refine.evaluate.assess import ITA_STAGES

    value_then, value_now, named_then, named_now, then, now = bench.ita(False, 3, 0, 3, 0.6)
    assert named_then == named_now == 1.0
    assert value_now == pytest.approx(0.6, abs=0.15)
    most = ITA_STAGES * 8
    assert 3 * 2 <= then <= 3 * 8 and most + 2 * 8 <= now <= 3 * most


def test_close_rejections_read_again_turn_some_into_accepts(bench):
    """A flat judge's gain of +0.077 is often close: reading its close rejections again
    (all k fresh answers on each of the two images, 16 a decision read again) keeps some of
    them, on the fresh answers alone and pooled with the first."""
    rule, alone, pooled, fresh = bench.close_rejections(bench.JUDGES["flat"], 30, 0, 1.2)
    assert alone > rule and pooled > rule
    assert fresh > 0 and round(fresh * 30) % 16 == 0
