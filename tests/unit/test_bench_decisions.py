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
    """Three images with one candidate 0.2 above the photos: both ways read through the
    project's code, the new one with its more answers (at least one stage of k per
    candidate), the old one with 2 to 8."""
    value_then, value_now, _, _, then, now = bench.ita(False, 3, 0, 3, 0.2)
    assert 0 <= value_now <= 1 and 0 <= value_then <= 1
    assert 3 * 2 <= then <= 3 * 8 and 3 * 8 <= now <= 3 * 48
