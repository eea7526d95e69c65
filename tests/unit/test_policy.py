"""The loop's decisions, from records alone (no model)."""

from __future__ import annotations

import pytest

from refine.loop import policy
from refine.records import (
    Candidate,
    Drift,
    Feedback,
    ReferencePack,
    RefusedRound,
    Round,
    Run,
    RunSpec,
    Scores,
)


def cand(faith: float | None, cosine: float | None = None) -> Candidate:
    drift = None if cosine is None else Drift(embedding_cosine=cosine, ssim=0.5, embedder="e")
    scores = Scores(values={"align": 0.5, "hal": 0.5, "exag": None, "faith": faith})
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


def refused(k: int) -> RefusedRound:
    return RefusedRound(round=k, parent=k - 1, text="t", failures=["candidate 0: blocked"])


def test_a_refused_round_counts_against_the_rounds_and_the_patience():
    """A round the model refused was asked for: it counts toward --rounds (an editor that
    refuses every time ends the run) and toward the patience after the last accepted
    round, not before it."""
    run = a_run(["initial", "accepted"], rounds=3, patience=9)
    assert policy.stop_reason(run) is None
    run.refused = [refused(2), refused(2)]
    assert policy.stop_reason(run) == "max rounds: 3 editing round(s) done, 2 of them refused"
    run = a_run(["initial", "accepted", "rejected"], rounds=9, patience=3)
    run.refused = [refused(1), refused(3)]  # round 1 refused once, then made and accepted
    assert policy.rejected_streak(run) == 2 and policy.stop_reason(run) is None
    run.refused.append(refused(3))
    assert policy.rejected_streak(run) == 3
    assert policy.stop_reason(run).startswith("patience: 3 round(s) in a row")


def test_refused_rounds_are_written_at_layout_3_and_only_when_there_are_some():
    """A run without refused rounds is written as before (layout 2, no field); with one,
    at layout 3, which reads back whole; a layout-2 record reads with none."""
    from refine.records import REFUSED_SCHEMA, WRITTEN_SCHEMA

    run = a_run(["initial", "rejected"])
    plain = run.model_dump(mode="json")
    assert "refused" not in plain and plain["schema_version"] == WRITTEN_SCHEMA == 2
    assert Run.read(plain).refused == []
    run.refused = [refused(1)]
    doc = run.model_dump(mode="json")
    assert doc["schema_version"] == REFUSED_SCHEMA == 3
    again = Run.read(doc)
    assert again.refused == run.refused and again.schema_version == 3
    assert again.refused[0].describe() == (
        "round 1 refused: every candidate (1) was refused by the editor: candidate 0: blocked"
    )
    with pytest.raises(ValueError, match="failures"):
        RefusedRound(round=1, parent=0, text="t", failures=[])
    # a hostile record: round 0 is never refused (the run ends there), no negative parent
    for bad in ({"round": 0}, {"parent": -1}, {"failures": ["x"] * 65}):
        with pytest.raises(ValueError):
            Run.read({**doc, "refused": [{**doc["refused"][0], **bad}]})


@pytest.mark.parametrize(("edit_from", "expected"), [("best", 1), ("original", 0), ("last", 2)])
def test_the_next_edit_starts_from_the_best_the_original_or_the_last(edit_from, expected):
    run = a_run(["initial", "accepted", "rejected"], edit_from=edit_from)
    assert policy.parent_of_next(run) == expected


def looking(faith: float, quality: float | None, cosine: float = 0.9) -> Candidate:
    c = cand(faith, cosine)
    values = {**c.scores.values, "quality": quality}
    return c.model_copy(update={"scores": c.scores.model_copy(update={"values": values})})


def test_a_candidate_that_lost_too_much_quality_is_rejected_with_the_reason():
    parent = looking(0.5, 0.8)
    # the only candidate gains FAITH but falls from 0.8 to 0.5 (a drop of 0.3 > 0.2)
    v = policy.decide_edit([looking(0.7, 0.5)], parent, 0, 0.01, 0.5, 0.8, 0.2)
    assert v.decision == "rejected" and v.chosen == 0
    assert v.reason == "quality fell from 0.800 to 0.500 (more than 0.2; FAITH 0.700)"
    # a drop of exactly the limit is allowed; the guard at 1 never rejects
    assert policy.decide_edit([looking(0.7, 0.6)], parent, 0, 0.01, 0.5, 0.8, 0.2).decision == (
        "accepted"
    )
    assert policy.decide_edit([looking(0.7, 0.0)], parent, 0, 0.01, 0.5, 0.8, 1.0).decision == (
        "accepted"
    )
    # without a reading (a judge that gives none) the guard does not apply
    assert policy.decide_edit([looking(0.7, None)], parent, 0, 0.01, 0.5, 0.8).decision == (
        "accepted"
    )
    # a candidate that kept its quality wins over a more faithful broken one
    v = policy.decide_edit([looking(0.9, 0.1), looking(0.6, 0.75)], parent, 0, 0.01, 0.5, 0.8, 0.2)
    assert (v.decision, v.chosen) == ("accepted", 1)
    assert v.reason.endswith("1 candidate(s) left out: quality fell too far")


def test_equal_faith_within_the_margin_goes_to_the_better_looking():
    parent = looking(0.5, 0.8)
    pair = [looking(0.705, 0.6), looking(0.700, 0.9)]
    assert policy.decide_edit(pair, parent, 0, 0.01, 0.5, 0.8, 1.0).chosen == 1
    # beyond the margin FAITH decides
    apart = [looking(0.75, 0.6), looking(0.70, 0.9)]
    assert policy.decide_edit(apart, parent, 0, 0.01, 0.5, 0.8, 1.0).chosen == 0
    # the tie-break never trades an accepted edit for a rejected one
    edge = [looking(0.512, 0.6), looking(0.505, 0.9)]
    v = policy.decide_edit(edge, parent, 0, 0.01, 0.5, 0.8, 1.0)
    assert (v.decision, v.chosen) == ("accepted", 0)
    # round 0 too
    assert policy.choose_initial(pair, 0.01).chosen == 1
    assert policy.choose_initial(pair).chosen == 0


def parent_with(align: float | None, missing: dict[str, int]) -> Round:
    from refine.records import Match

    fb = Feedback(
        missing=[
            Match(dimension=d, phrase=f"{d} {i}") for d, n in missing.items() for i in range(n)
        ]
    )
    scores = Scores(values={"align": align, "hal": 0.5, "exag": None, "faith": 0.4})
    c = Candidate(seed=0, image="x.png", observed={}, scores=scores, feedback=fb)
    return Round(index=0, parent=None, kind="generate", text="t", candidates=[c], chosen=0,
                 decision="initial", reason="")  # fmt: skip


@pytest.mark.parametrize(
    ("align", "missing", "want", "says"),
    [
        (0.29, {"objects": 3}, "regenerate", "ALIGN 0.290 < 0.3"),
        (0.2999, {}, "regenerate", "ALIGN 0.300 < 0.3"),  # below, though it prints as 0.300
        (0.3, {"objects": 3}, "edit", "ALIGN 0.300 >= 0.3; most missing in objects (3)"),
        (0.31, {"objects": 1}, "edit", "most missing in objects (1)"),
        (
            0.5,
            {"setting": 3, "objects": 2},
            "regenerate",
            "setting misses most (3 missing; next 2)",
        ),
        (0.5, {"spatial": 2, "attire": 1}, "regenerate", "spatial misses most (2 missing; next 1)"),
        (0.5, {"setting": 2, "objects": 2}, "edit", "most missing in objects and setting (2)"),
        (0.5, {"setting": 2, "spatial": 2}, "edit", "most missing in setting and spatial (2)"),
        (0.5, {"attire": 4, "setting": 1}, "edit", "most missing in attire (4)"),
        (0.5, {}, "edit", "nothing missing"),
        (None, {"setting": 1}, "regenerate", "no ALIGN, but setting misses most"),
    ],
)
def test_auto_moves_by_its_rule(align, missing, want, says):
    spec = RunSpec(activity="a", country="b", strategy="auto")
    how, why = policy.move(spec, parent_with(align, missing))
    assert how == want and says in why
    # the fixed strategies never look
    for fixed in ("edit", "regenerate"):
        spec = RunSpec(activity="a", country="b", strategy=fixed)
        assert policy.move(spec, parent_with(align, missing)) == (fixed, f"strategy {fixed}")
    # the threshold is the spec's
    high = RunSpec(activity="a", country="b", strategy="auto", regenerate_below=0.95)
    assert policy.move(high, parent_with(0.9, {"objects": 1}))[0] == "regenerate"


def test_a_chain_of_edits_must_beat_the_best_round_not_its_last():
    run = a_run(["initial", "accepted", "rejected"], [0.5, 0.7, 0.4], edit_from="last")
    parent = run.rounds[policy.parent_of_next(run)]
    assert parent.index == 2 and policy.compared_with(run, parent).index == 1
    best = a_run(["initial", "accepted", "rejected"], [0.5, 0.7, 0.4])
    assert policy.compared_with(best, best.rounds[1]).index == 1
    original = a_run(["initial", "accepted"], [0.5, 0.7], edit_from="original")
    assert policy.compared_with(original, original.rounds[0]).index == 0


def test_keep_fixes_prefers_a_candidate_within_the_limit():
    """The better candidate undoes two fixes; with at most one allowed, the other one is
    chosen, and the note says a candidate was left out."""
    cands = [cand(0.70), cand(0.60)]
    keep = policy.KeepFixes(1, 0.2, [(2, "setting: rug (fixed in round 1)"), (0, "")])
    v = policy.decide_edit(cands, cand(0.5), 0, 0.01, 2.0, keep=keep)
    assert v.chosen == 1 and v.decision == "accepted"
    assert v.reason.endswith("1 candidate(s) left out: they undid earlier fixes")
    # a gain of at least margin + 0.2 outweighs the fixes undone
    v = policy.decide_edit(cands, cand(0.49), 0, 0.01, 2.0, keep=keep)
    assert v.chosen == 0 and v.decision == "accepted"
    # alone over the limit: rejected, saying which fixes and what gain would do
    v = policy.decide_edit(cands[:1], cand(0.5), 0, 0.01, 2.0, keep=keep)
    assert v.decision == "rejected" and v.reason == (
        "undoes 2 earlier fix(es), more than --keep-fixes 1: setting: rug (fixed in round 1); "
        "FAITH 0.500 -> 0.700 (+0.200) is under the +0.21 that would outweigh it"
    )


def test_keep_fixes_weighs_a_sampled_gain_at_its_lower_bound():
    """A gain of 0.25 read with errors of 0.05 each is at least 0.159 (90%): under the
    0.21 that would outweigh two fixes undone, where read exactly it is over it."""
    keep = policy.KeepFixes(1, 0.2, [(2, "setting: rug (fixed in round 1)")])
    exact = policy.decide_edit([cand(0.75)], cand(0.5), 0, 0.01, 2.0, keep=keep)
    assert exact.decision == "accepted"
    v = policy.decide_edit([sampled(0.75, 0.05)], sampled(0.5, 0.05), 0, 0.01, 2.0, keep=keep)
    assert v.decision == "rejected" and v.reason.endswith(
        "FAITH 0.500 -> 0.750 (+0.250; 90% >= +0.159) is under the +0.21 that would outweigh it"
    )


def sampled(faith: float, se: float, quality: float | None = None, quality_se: float = 0.0):
    """A candidate whose FAITH (and quality) were read from eight sampled answers."""
    from metrics.judge import Reading
    from refine.records import QualityReading

    values = {"align": 0.5, "hal": 0.5, "exag": None, "faith": faith, "quality": quality}
    reading = None
    if quality is not None:
        reading = QualityReading(
            naturalness=10 * quality, artifacts=10, judge="j", method="sampled k=8",
            stderr=quality_se,
        )  # fmt: skip
    scores = Scores(
        values=values, readings={"faith": Reading("sampled", 8, se)}, quality_reading=reading
    )
    return Candidate(seed=0, image="x.png", observed={}, scores=scores, feedback=Feedback())


def test_a_sampled_gain_counts_only_beyond_its_noise():
    """FAITH 0.5 against 0.56, each read with an error of 0.03: the gain's 90% lower bound
    is 0.06 - 1.2816 x 0.0424 = +0.006, under the margin, so the parent stays; +0.1 clears
    it (+0.046). The reason gives the gain and its bound."""
    parent = sampled(0.5, 0.03)
    v = policy.decide_edit([sampled(0.56, 0.03)], parent, 0, 0.01, 0.5)
    assert v.decision == "rejected"
    assert v.reason.startswith("FAITH 0.500 -> 0.560 (+0.060; 90% >= +0.006); the gain its")
    assert "must be at least +0.01" in v.reason
    v = policy.decide_edit([sampled(0.6, 0.03)], parent, 0, 0.01, 0.5)
    assert (v.decision, v.reason) == ("accepted", "FAITH 0.500 -> 0.600 (+0.100; 90% >= +0.046)")
    # the same readings without an error (log-probabilities): the plain comparison
    assert policy.decide_edit([cand(0.56)], cand(0.5), 0, 0.01, 0.5).decision == "accepted"


def test_a_sure_gain_is_kept_over_a_larger_noisy_one():
    """0.62 with an error of 0.1 may be no gain at all (bound -0.07); 0.58 read closely
    (0.01) is one (bound +0.04): the round keeps the sure one."""
    v = policy.decide_edit([sampled(0.62, 0.1), sampled(0.58, 0.01)], sampled(0.5, 0.03), 0,
                           0.01, 0.5)  # fmt: skip
    assert (v.chosen, v.decision) == (1, "accepted")


def test_the_quality_guard_drops_only_a_fall_beyond_its_noise():
    """The best round's quality 0.8 and a candidate's 0.65, each read with an error of 0.05:
    the fall of 0.15 has a 90% lower bound of 0.059, within a 0.1 limit; 0.6 falls by 0.109
    at least, beyond it. Read exactly, 0.15 is beyond it."""
    parent = sampled(0.5, 0.01)
    args = (0, 0.01, 0.5, 0.8, 0.1)
    kept = policy.decide_edit([sampled(0.7, 0.01, 0.65, 0.05)], parent, *args, best_quality_se=0.05)
    assert kept.decision == "accepted"
    fell = policy.decide_edit([sampled(0.7, 0.01, 0.6, 0.05)], parent, *args, best_quality_se=0.05)
    assert fell.decision == "rejected" and fell.reason.startswith("quality fell from 0.800")
    exact = policy.decide_edit([sampled(0.7, 0.01, 0.65)], parent, *args)
    assert exact.decision == "rejected" and exact.reason.startswith("quality fell")
