"""The loop's decisions as pure functions of the records: which candidate to keep, whether
an edit is accepted (and why), and why a run stops. No model and no file is touched here.

* Round 0 keeps the candidate with the highest FAITH.
* An editing round keeps, among the candidates whose drift from the parent (1 - cosine of
  image embeddings) is within ``max_drift``, the one with the highest FAITH; it is
  accepted when FAITH rises by at least ``margin``. When every candidate drifted too far,
  the round is rejected (the highest FAITH of all is shown).
* A run stops on the first of: a stop asked for, the target FAITH reached, the round
  limit, ``patience`` rejected rounds in a row (counted from a branch point afresh), the
  wall-time budget, the model-call budget.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from refine.records import Candidate, Run, RunSpec


def faith_of(c: Candidate) -> float:
    """A candidate's FAITH; a candidate without one ranks below every other."""
    return c.scores.faith if c.scores.faith is not None else float("-inf")


def drift_of(c: Candidate) -> float:
    """1 - cosine of the image embeddings of a candidate and its parent (0 without one)."""
    return 0.0 if c.drift is None else 1.0 - c.drift.embedding_cosine


@dataclass(frozen=True)
class Verdict:
    chosen: int  # index into the candidates
    decision: str  # initial, accepted, rejected
    reason: str


def choose_initial(candidates: Sequence[Candidate]) -> Verdict:
    """Round 0: the best of the initial images by FAITH."""
    chosen = max(range(len(candidates)), key=lambda j: faith_of(candidates[j]))
    return Verdict(chosen, "initial", f"best of {len(candidates)} initial image(s) by FAITH")


def decide_edit(
    candidates: Sequence[Candidate],
    parent: Candidate,
    parent_index: int,
    margin: float,
    max_drift: float,
) -> Verdict:
    """An editing round: the best candidate within the drift limit, accepted when its FAITH
    gain over the parent is at least ``margin``."""
    parent_faith = faith_of(parent)
    within = [j for j, c in enumerate(candidates) if drift_of(c) <= max_drift]
    pool = within or list(range(len(candidates)))
    chosen = max(pool, key=lambda j: faith_of(candidates[j]))
    best = faith_of(candidates[chosen])
    gain = best - parent_faith
    if not within:
        smallest = min(drift_of(c) for c in candidates)
        return Verdict(
            chosen,
            "rejected",
            f"every candidate drifted too far from round {parent_index} "
            f"(smallest 1 - cosine {smallest:.3f} > {max_drift})",
        )
    if gain >= margin:
        return Verdict(chosen, "accepted", f"FAITH {parent_faith:.3f} -> {best:.3f} (+{gain:.3f})")
    return Verdict(
        chosen,
        "rejected",
        f"FAITH {parent_faith:.3f} -> {best:.3f} ({gain:+.3f}); needs at least +{margin}",
    )


def parent_of_next(run: Run) -> int:
    """The round the next edit starts from: the best so far, or round 0."""
    return run.best_round if run.spec.edit_from == "best" else 0


def rejected_streak(run: Run) -> int:
    """Editing rounds in a row, up to the last, without an accepted improvement (a branch
    counts from its branch point)."""
    start = 1 + (run.branched_from or {}).get("round", 0)
    streak = 0
    for r in reversed(run.rounds[start:]):
        if r.decision == "accepted":
            break
        streak += 1
    return streak


def stop_reason(
    run: Run, *, stop_requested: bool = False, elapsed_s: float = 0.0, calls: int = 0
) -> str | None:
    """Why the run stops before another editing round, or None to go on."""
    if stop_requested:
        return "stopped by the user"
    spec: RunSpec = run.spec
    best = run.best()
    if best is not None and best.best.scores.faith is not None:
        if best.best.scores.faith >= spec.target:
            return f"target: FAITH {best.best.scores.faith:.3f} >= {spec.target}"
    edits = len(run.rounds) - 1
    if edits >= spec.rounds:
        return f"max rounds: {spec.rounds} editing round(s) done"
    streak = rejected_streak(run)
    if streak >= spec.patience:
        return f"patience: {streak} round(s) in a row without an accepted improvement"
    if spec.budget_seconds is not None and elapsed_s >= spec.budget_seconds:
        return f"budget: {spec.budget_seconds:g} s of wall time used"
    if spec.budget_calls is not None and calls >= spec.budget_calls:
        return f"budget: {calls} model calls used (limit {spec.budget_calls})"
    return None
