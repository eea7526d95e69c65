"""The strategies bench's summary against hand computations: the paired difference with
best-of-N and its bootstrap interval, the FAITH each strategy holds at a number of calls."""

from __future__ import annotations

import numpy as np
import pytest

from refine.harness.cells import Cell
from refine.harness.tasks.strategies.summary import best_by, curve, paired, summarise

PROMPTS = [("a", "Iran"), ("b", "Iran"), ("c", "India"), ("d", "India"), ("e", "India")]
BON = [0.40, 0.55, 0.31, 0.62, 0.47]
EDIT = [0.52, 0.50, 0.45, 0.70, 0.61]


def cell(strategy: str, prompt: tuple[str, str], faith: float | None, steps=()) -> Cell:
    return Cell(
        key=(strategy, *prompt),
        inputs={"strategy": strategy, "activity": prompt[0], "country": prompt[1]},
        outputs={"faith": faith, "quality": 0.7},
        images=list(steps),
        data={"calls": 30, "seconds": 1.5, "reached": bool(faith and faith >= 0.6)},
    )


def cells() -> list[Cell]:
    return [cell("best-of-n", p, f) for p, f in zip(PROMPTS, BON, strict=True)] + [
        cell("edit", p, f) for p, f in zip(PROMPTS, EDIT, strict=True)
    ]


def test_the_paired_difference_and_its_interval_by_hand():
    diffs = np.array(EDIT) - np.array(BON)
    got = paired(cells(), "edit", seed=7)
    assert got["prompts"] == 5 and got["mean_difference"] == pytest.approx(diffs.mean())
    assert got["share_improved"] == pytest.approx(4 / 5)
    # by hand: 1,000 resamples of the five prompts, drawn with numpy's generator from the
    # seed, each resample's mean difference; the 2.5th and 97.5th percentiles
    rng = np.random.default_rng(7)
    means = [diffs[rng.integers(0, 5, size=5)].mean() for _ in range(1000)]
    lo, hi = np.percentile(means, [2.5, 97.5])
    assert got["interval"] == pytest.approx([lo, hi], abs=1e-12)
    # a prompt without a FAITH on one side leaves the pairs
    some = cells()
    some[0].outputs["faith"] = None
    assert paired(some, "edit", seed=7)["prompts"] == 4


def test_the_summary_per_strategy_and_country():
    s = summarise(cells(), ["best-of-n", "edit"], budget=None, seed=7)
    assert s["strategies"]["edit"]["faith"]["mean"] == pytest.approx(np.mean(EDIT))
    assert s["strategies"]["edit"]["reached"]["mean"] == pytest.approx(2 / 5)
    india = s["countries"]["best-of-n"]["India"]
    assert india["prompts"] == 3 and india["faith"]["mean"] == pytest.approx(np.mean(BON[2:]))
    (iran,) = s["paired_countries"]["Iran"]
    assert iran["mean_difference"] == pytest.approx(np.mean([0.12, -0.05]))


def test_the_faith_held_at_a_number_of_calls():
    candidates = [
        {"step": 0, "decision": "candidate", "faith": 0.3, "calls": 5},
        {"step": 1, "decision": "failed", "faith": None, "calls": 8},
        {"step": 2, "decision": "candidate", "faith": 0.6, "calls": 13},
        {"step": 3, "decision": "candidate", "faith": 0.4, "calls": 18},
    ]
    assert best_by(candidates, 4, "best-of-n") is None
    assert best_by(candidates, 12, "best-of-n") == 0.3
    assert best_by(candidates, 20, "best-of-n") == 0.6  # the best so far, not the last
    rounds = [
        {"step": 0, "decision": "initial", "faith": 0.3, "calls": 5},
        {"step": 1, "decision": "accepted", "faith": 0.5, "calls": 16},
        {"step": 2, "decision": "rejected", "faith": 0.7, "calls": 27},
    ]
    assert best_by(rounds, 30, "edit") == 0.5  # a rejected round is not held
    one = [
        cell("best-of-n", ("a", "Iran"), 0.6, candidates),
        cell("edit", ("a", "Iran"), 0.5, rounds),
    ]
    drawn = curve(one, ["best-of-n", "edit"], budget=None)  # up to the most calls a cell used
    assert drawn["calls"][-1] == 30 and drawn["faith"]["edit"][0] is None


def test_best_of_n_picks_a_later_candidate_only_beyond_the_noise_of_both():
    from refine.harness.tasks.strategies.plan import first_best

    def step(j, faith, se=None):
        return {"step": j, "faith": faith} | ({} if se is None else {"faith_se": se})

    # read exactly: the first with the highest FAITH, a missing FAITH never
    exact = [step(0, None), step(1, 0.6), step(2, 0.7), step(3, 0.7)]
    assert first_best(exact) == 2 and first_best([step(0, None)]) is None
    # sampled: 0.7 against 0.6, each with an error of 0.05, is +0.1 at least +0.009 (90%);
    # 0.66 is +0.06 at least -0.031, within the noise: the first stays
    assert first_best([step(0, 0.6, 0.05), step(1, 0.7, 0.05)]) == 1
    assert first_best([step(0, 0.6, 0.05), step(1, 0.66, 0.05)]) == 0
