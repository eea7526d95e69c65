"""The loop's decisions as pure functions of the records: which candidate to keep, whether
an edit is accepted (and why), and why a run stops. No model and no file is touched here.

* Round 0 keeps the candidate with the highest FAITH (the better-looking one among those
  within ``margin`` of it).
* An editing round keeps, among the candidates whose drift from the parent (1 - cosine of
  image embeddings) is within ``max_drift`` and whose quality is at most
  ``max_quality_drop`` below the best round's, the one with the highest FAITH (the
  better-looking one among those as good within ``margin``); it is accepted when FAITH
  rises by at least ``margin`` (where FAITH was read from sampled answers, when the gain's
  one-sided 90% lower bound does: :data:`CONFIDENCE_Z`; the quality guard alike). When
  every candidate drifted too far, or every one within the drift limit lost too much
  quality, the round is rejected and says so.
* A round after the first edits the parent image or regenerates (new images from a
  prompt rewritten from the feedback) as the run's ``strategy`` says; ``auto`` regenerates
  when the parent's ALIGN is below ``regenerate_below`` (the scene is mostly wrong: no
  edit recovers it), or when the setting or the spatial arrangement has more missing
  descriptors than any other dimension (the composition is wrong), and edits otherwise
  (:func:`move`).
* A run stops on the first of: a stop asked for, the target FAITH reached, the round
  limit, ``patience`` rejected rounds in a row (counted from a branch point afresh), the
  wall-time budget, the model-call budget.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from metrics.judge import ONE_SIDED_90
from refine.records import Candidate, Round, Run, RunSpec

# the dimensions whose missing descriptors an edit rarely recovers: the scene and its
# composition (auto regenerates when one of them misses most)
SCENE_DIMENSIONS = ("setting", "spatial")


# A difference read from sampled answers counts only where its noise cannot explain it: its
# one-sided 90% lower bound must clear the threshold. The bound is the normal one on the
# difference's standard error, from the two readings' own taken as independent. Readings by
# log-probabilities have no error, and for them the rule is the plain comparison it always
# was.
CONFIDENCE_Z = ONE_SIDED_90


def faith_se(c: Candidate) -> float:
    """The standard error of a candidate's FAITH (0: read without sampling)."""
    reading = c.scores.readings.get("faith")
    return 0.0 if reading is None or reading.stderr is None else float(reading.stderr)


def quality_se(c: Candidate) -> float:
    """The standard error of a candidate's quality (0: read without sampling)."""
    q = c.scores.quality_reading
    return 0.0 if q is None or q.stderr is None else float(q.stderr)


def faith_of(c: Candidate) -> float:
    """A candidate's FAITH; a candidate without one ranks below every other."""
    return c.scores.faith if c.scores.faith is not None else float("-inf")


def outside_of(c: Candidate) -> float:
    """A localized edit's drift outside its boxes (0 without one)."""
    return 0.0 if c.drift is None or c.drift.outside is None else c.drift.outside


def drift_of(c: Candidate) -> float:
    """1 - cosine of the image embeddings of a candidate and its parent (0 without one)."""
    return 0.0 if c.drift is None else c.drift.value


@dataclass(frozen=True)
class KeepFixes:
    """``--keep-fixes``: a candidate that undoes more than ``at_most`` earlier fixes is left
    out unless its FAITH gain is at least the margin plus ``gain``; ``undone`` gives each
    candidate's count and words (refine.loop.tracking)."""

    at_most: int
    gain: float
    undone: Sequence[tuple[int, str]]

    def allows(self, j: int, gain: float, margin: float) -> bool:
        # 1e-9: the rounding of margin + gain
        return self.undone[j][0] <= self.at_most or gain >= margin + self.gain - 1e-9


@dataclass(frozen=True)
class Verdict:
    chosen: int  # index into the candidates
    decision: str  # initial, accepted, rejected
    reason: str


def quality_of(c: Candidate) -> float:
    """A candidate's quality; without a reading it ranks below every other."""
    return c.scores.quality if c.scores.quality is not None else float("-inf")


def best_looking(candidates: Sequence[Candidate], pool: Sequence[int], margin: float) -> int:
    """The highest FAITH of ``pool``; among the candidates within ``margin`` of it (equal
    FAITH as far as the loop can tell), the one of highest quality (then FAITH)."""
    top = max(faith_of(candidates[j]) for j in pool)
    tied = [j for j in pool if faith_of(candidates[j]) >= top - margin]
    return max(tied, key=lambda j: (quality_of(candidates[j]), faith_of(candidates[j])))


def choose_initial(candidates: Sequence[Candidate], margin: float = 0.0) -> Verdict:
    """Round 0: the best of the initial images by FAITH (by quality within ``margin``)."""
    chosen = best_looking(candidates, range(len(candidates)), margin)
    return Verdict(chosen, "initial", f"best of {len(candidates)} initial image(s) by FAITH")


def quality_fell(
    c: Candidate, best_quality: float | None, max_drop: float, best_se: float = 0.0
) -> bool:
    """Whether ``c`` lost more than ``max_drop`` of quality against the best round's (never
    without both readings); where either was sampled (``best_se``: the best round's
    error), only a drop whose 90% lower bound is over ``max_drop``."""
    q = c.scores.quality
    if best_quality is None or q is None:
        return False
    noise = CONFIDENCE_Z * math.hypot(quality_se(c), best_se)
    # a drop of exactly max_drop is allowed (1e-9: the rounding of best - max_drop)
    return best_quality - q - noise > max_drop + 1e-9


def decide_edit(
    candidates: Sequence[Candidate],
    parent: Candidate,
    parent_index: int,
    margin: float,
    max_drift: float,
    best_quality: float | None = None,
    max_quality_drop: float = 1.0,
    max_drift_outside: float = 1.0,
    keep: KeepFixes | None = None,
    best_quality_se: float = 0.0,
) -> Verdict:
    """An editing round: the best candidate within the drift limit (and, for a localized
    edit, within ``max_drift_outside`` outside its boxes) that kept its quality (at most
    ``max_quality_drop`` below ``best_quality``, the best round's, whose error is
    ``best_quality_se``) and, with ``keep``, undid no more earlier fixes than it allows,
    accepted when its FAITH gain over the parent is at least ``margin``: where FAITH was
    read from sampled answers, when the gain's 90% lower bound is (:data:`CONFIDENCE_Z`)."""
    parent_faith = faith_of(parent)
    within = [j for j, c in enumerate(candidates) if drift_of(c) <= max_drift]
    inside = [  # 1 or more: the guard is off (1 - SSIM can exceed 1)
        j
        for j in within
        if max_drift_outside >= 1.0 or outside_of(candidates[j]) <= max_drift_outside + 1e-12
    ]
    if within and not inside:
        chosen = max(within, key=lambda j: faith_of(candidates[j]))
        smallest = min(outside_of(candidates[j]) for j in within)
        return Verdict(
            chosen,
            "rejected",
            f"every candidate changed too much outside its boxes (smallest 1 - SSIM there "
            f"{smallest:.3f} > {max_drift_outside})",
        )
    within = inside
    if not within:
        chosen = max(range(len(candidates)), key=lambda j: faith_of(candidates[j]))
        smallest = min(drift_of(c) for c in candidates)
        return Verdict(
            chosen,
            "rejected",
            f"every candidate drifted too far from round {parent_index} "
            f"(smallest 1 - cosine {smallest:.3f} > {max_drift})",
        )
    kept = [
        j
        for j in within
        if not quality_fell(candidates[j], best_quality, max_quality_drop, best_quality_se)
    ]
    if not kept:
        chosen = max(within, key=lambda j: faith_of(candidates[j]))
        return Verdict(
            chosen,
            "rejected",
            f"quality fell from {best_quality:.3f} to {quality_of(candidates[chosen]):.3f} "
            f"(more than {max_quality_drop:g}; FAITH {faith_of(candidates[chosen]):.3f})",
        )
    dropped = len(within) - len(kept)
    note = f"; {dropped} candidate(s) left out: quality fell too far" if dropped else ""
    if keep is not None:
        # a gain counts as any other: beyond its noise where sampled (lower_gain is the gain
        # itself where read by log-probabilities)
        held = [j for j in kept if keep.allows(j, lower_gain(candidates[j], parent), margin)]
        best_kept = max(kept, key=lambda j: faith_of(candidates[j]))
        f, lower = faith_of(candidates[best_kept]), lower_gain(candidates[best_kept], parent)
        n, words = keep.undone[best_kept]
        if not held and lower >= margin:
            bound = f"; 90% >= {lower:+.3f}" if lower != f - parent_faith else ""
            return Verdict(
                best_kept,
                "rejected",
                f"undoes {n} earlier fix(es), more than --keep-fixes {keep.at_most}: {words}; "
                f"FAITH {parent_faith:.3f} -> {f:.3f} ({f - parent_faith:+.3f}{bound}) is under "
                f"the +{margin + keep.gain:g} that would outweigh it{note}",
            )
        if not held:  # FAITH alone rejects it; the fixes it undoes are said beside
            note += f"; it would also undo {n} earlier fix(es): {words}"
        elif len(held) < len(kept):
            note += f"; {len(kept) - len(held)} candidate(s) left out: they undid earlier fixes"
            kept = held
    if faith_se(parent) or any(faith_se(candidates[j]) for j in kept):
        return _decide_sampled(candidates, kept, parent, margin, note)
    top = max(faith_of(candidates[j]) for j in kept)
    # the better-looking among the equally faithful; when the best one is accepted, only
    # among those that would be accepted too
    floor = parent_faith + margin if top - parent_faith >= margin else float("-inf")
    tied = [j for j in kept if faith_of(candidates[j]) >= floor]
    chosen = best_looking(candidates, tied, margin)
    best = faith_of(candidates[chosen])
    gain = best - parent_faith
    if gain >= margin:
        return Verdict(
            chosen, "accepted", f"FAITH {parent_faith:.3f} -> {best:.3f} (+{gain:.3f}){note}"
        )
    return Verdict(
        chosen,
        "rejected",
        f"FAITH {parent_faith:.3f} -> {best:.3f} ({gain:+.3f}); needs at least +{margin}{note}",
    )


def lower_gain(c: Candidate, parent: Candidate) -> float:
    """The one-sided 90% lower bound of ``c``'s FAITH gain over ``parent``."""
    noise = CONFIDENCE_Z * math.hypot(faith_se(c), faith_se(parent))
    return faith_of(c) - faith_of(parent) - noise


def _decide_sampled(
    candidates: Sequence[Candidate], kept: list[int], parent: Candidate, margin: float, note: str
) -> Verdict:
    """:func:`decide_edit`'s choice where FAITH was read from sampled answers: accepted
    when the gain's 90% lower bound is at least ``margin``; among the candidates whose
    bound clears it (or, when none does, all), the better-looking of the equally faithful."""
    parent_faith = faith_of(parent)
    clear = [j for j in kept if lower_gain(candidates[j], parent) >= margin]
    chosen = best_looking(candidates, clear or kept, margin)
    best, lower = faith_of(candidates[chosen]), lower_gain(candidates[chosen], parent)
    said = (
        f"FAITH {parent_faith:.3f} -> {best:.3f} ({best - parent_faith:+.3f}; 90% >= {lower:+.3f})"
    )
    if clear:
        return Verdict(chosen, "accepted", f"{said}{note}")
    return Verdict(
        chosen,
        "rejected",
        f"{said}; the gain its noise cannot explain must be at least +{margin}{note}",
    )


def compared_with(run: Run, parent: Round) -> Round:
    """The round an edit must beat: its parent, but with ``edit_from`` ``last`` the best
    round so far (a chain's last edit may be worse than an earlier one)."""
    if run.spec.edit_from == "last" and run.best_round is not None:
        return run.rounds[run.best_round]
    return parent


def parent_of_next(run: Run) -> int:
    """The round the next edit starts from: the best so far, round 0, or the last round
    (``edit_from`` ``last``: a chain of edits, each from the one before)."""
    if run.spec.edit_from == "last":
        return len(run.rounds) - 1
    return run.best_round if run.spec.edit_from == "best" else 0


def rejected_streak(run: Run) -> int:
    """Editing rounds in a row, up to the last, without an accepted improvement (a branch
    counts from its branch point); a round the model refused counts as one."""
    start = 1 + (run.branched_from or {}).get("round", 0)
    streak = 0
    for r in reversed(run.rounds[start:]):
        if r.decision == "accepted":
            break
        streak += 1
    since = max([start - 1] + [r.index for r in run.rounds if r.decision == "accepted"])
    return streak + sum(1 for x in run.refused if x.round > since)


def stop_reason(
    run: Run,
    *,
    stop_requested: bool = False,
    elapsed_s: float = 0.0,
    calls: int = 0,
    stopped_as: str = "stopped by the user",
) -> str | None:
    """Why the run stops before another editing round, or None to go on; a requested stop
    is recorded as ``stopped_as`` (who or what asked for it)."""
    if stop_requested:
        return stopped_as
    spec: RunSpec = run.spec
    best = run.best()
    if best is not None and best.best.scores.faith is not None:
        if best.best.scores.faith >= spec.target:
            return f"target: FAITH {best.best.scores.faith:.3f} >= {spec.target}"
    # a round the model refused counts: it was asked for, and a model that refuses every
    # time must not hold the run in a loop
    edits = len(run.rounds) - 1 + len(run.refused)
    if edits >= spec.rounds:
        refused = f", {len(run.refused)} of them refused" if run.refused else ""
        return f"max rounds: {spec.rounds} editing round(s) done{refused}"
    streak = rejected_streak(run)
    if streak >= spec.patience:
        return f"patience: {streak} round(s) in a row without an accepted improvement"
    if spec.budget_seconds is not None and elapsed_s >= spec.budget_seconds:
        return f"budget: {spec.budget_seconds:g} s of wall time used"
    if spec.budget_calls is not None and calls >= spec.budget_calls:
        return f"budget: {calls} model calls used (limit {spec.budget_calls})"
    return None


def move(spec: RunSpec, parent: Round) -> tuple[str, str]:
    """How the next round fixes ``parent``'s chosen image, ``edit`` or ``regenerate``, and
    why: the strategy's own, or auto's rule with its figures."""
    if spec.strategy != "auto":
        return spec.strategy, f"strategy {spec.strategy}"
    scores, below = parent.best.scores, spec.regenerate_below
    if scores.align is not None and scores.align < below:
        return "regenerate", f"ALIGN {scores.align:.3f} < {below:g}: the scene is mostly wrong"
    counts: dict[str, int] = {}
    for m in parent.best.feedback.missing:
        counts[m.dimension] = counts.get(m.dimension, 0) + 1
    align = "no ALIGN" if scores.align is None else f"ALIGN {scores.align:.3f} >= {below:g}"
    if counts:
        top = max(counts.values())
        leaders = sorted(d for d, n in counts.items() if n == top)
        if len(leaders) == 1 and leaders[0] in SCENE_DIMENSIONS:
            rest = max((n for d, n in counts.items() if d != leaders[0]), default=0)
            return (
                "regenerate",
                f"{align}, but {leaders[0]} misses most ({top} missing; next {rest}): "
                "the composition is wrong",
            )
        return "edit", f"{align}; most missing in {' and '.join(leaders)} ({top})"
    return "edit", f"{align}; nothing missing"
