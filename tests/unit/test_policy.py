"""The loop's decisions, from records alone (no model)."""

from __future__ import annotations

import pytest

from refine import policy
from refine.records import (
    Candidate,
    Drift,
    Feedback,
    ReferencePack,
    Round,
    Run,
    RunSpec,
    Scores,
)


def cand(faith: float | None, cosine: float | None = None) -> Candidate:
    drift = None if cosine is None else Drift(embedding_cosine=cosine, ssim=0.5, embedder="e")
    scores = Scores(align=0.5, hal=0.5, exag=None, faith=faith, exag_variant="v")
    return Candidate(
        seed=0, image="x.png", observed={}, scores=scores, feedback=Feedback(), drift=drift
    )


def a_round(k: int, decision: str, faith: float = 0.5) -> Round:
    return Round(
        index=k,
        parent=None if k == 0 else k - 1,
        kind="generate" if k == 0 else "edit",
        text="t",
        candidates=[cand(faith)],
        chosen=0,
        decision=decision,
        reason="",
    )


def a_run(decisions: list[str], faiths: list[float] | None = None, **spec) -> Run:
    faiths = faiths or [0.5] * len(decisions)
    rounds = [a_round(k, d, f) for k, (d, f) in enumerate(zip(decisions, faiths, strict=True))]
    best = max(i for i, d in enumerate(decisions) if d in ("initial", "accepted"))
    refs = ReferencePack(activity="a", country="b", descriptors={"setting": ["kitchen"]})
    return Run(
        id="r",
        spec=RunSpec(activity="a", country="b", **spec),
        references=refs,
        rounds=rounds,
        best_round=best,
    )


def test_round_zero_keeps_the_highest_faith_and_a_missing_faith_ranks_last():
    v = policy.choose_initial([cand(0.4), cand(None), cand(0.61), cand(0.6)])
    assert (v.chosen, v.decision) == (2, "initial")
    assert v.reason == "best of 4 initial image(s) by FAITH"


def test_an_edit_is_accepted_only_with_enough_gain_within_the_drift_limit():
    parent = cand(0.5)
    # candidate 1 has the highest FAITH but drifted past the limit: candidate 2 is chosen
    v = policy.decide_edit([cand(0.55, 0.9), cand(0.9, 0.2), cand(0.6, 0.8)], parent, 0, 0.01, 0.5)
    assert (v.chosen, v.decision) == (2, "accepted")
    assert v.reason == "FAITH 0.500 -> 0.600 (+0.100)"
    v = policy.decide_edit([cand(0.505, 1.0)], parent, 3, 0.01, 0.5)
    assert v.decision == "rejected"
    assert v.reason == "FAITH 0.500 -> 0.505 (+0.005); needs at least +0.01"
    # a gain exactly at the margin counts
    assert policy.decide_edit([cand(0.75, 1.0)], parent, 0, 0.25, 0.5).decision == "accepted"


def test_when_every_candidate_drifted_the_round_is_rejected_with_the_smallest_drift():
    v = policy.decide_edit([cand(0.9, 0.3), cand(0.7, 0.1)], cand(0.5), 2, 0.01, 0.5)
    assert (v.chosen, v.decision) == (0, "rejected")
    assert v.reason == (
        "every candidate drifted too far from round 2 (smallest 1 - cosine 0.700 > 0.5)"
    )


def test_stop_reasons_in_order():
    run = a_run(["initial", "accepted"], [0.5, 0.8], target=0.8)
    assert policy.stop_reason(run, stop_requested=True) == "stopped by the user"
    assert policy.stop_reason(run) == "target: FAITH 0.800 >= 0.8"
    run = a_run(["initial", "accepted"], rounds=1)
    assert policy.stop_reason(run) == "max rounds: 1 editing round(s) done"
    run = a_run(["initial", "accepted", "rejected", "rejected"], patience=2)
    assert policy.rejected_streak(run) == 2
    assert (
        policy.stop_reason(run) == "patience: 2 round(s) in a row without an accepted improvement"
    )
    run = a_run(["initial", "rejected"], budget_seconds=10, budget_calls=5)
    assert policy.stop_reason(run, elapsed_s=9.9, calls=4) is None
    assert policy.stop_reason(run, elapsed_s=10.0) == "budget: 10 s of wall time used"
    assert policy.stop_reason(run, calls=5) == "budget: 5 model calls used (limit 5)"


def test_a_branch_counts_patience_from_its_branch_point():
    run = a_run(["initial", "rejected", "rejected", "rejected"], patience=2)
    assert policy.rejected_streak(run) == 3
    run.branched_from = {"run": "x", "round": 2}
    assert policy.rejected_streak(run) == 1 and policy.stop_reason(run) is None


@pytest.mark.parametrize(("edit_from", "expected"), [("best", 1), ("original", 0)])
def test_the_next_edit_starts_from_the_best_or_the_original(edit_from, expected):
    run = a_run(["initial", "accepted", "rejected"], edit_from=edit_from)
    assert policy.parent_of_next(run) == expected
