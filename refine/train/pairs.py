"""Which two images of a run make a preference pair: the one choice behind ``refine export``'s
``pairs``, ``dpo`` and ``judge-dpo`` formats.

* ``best-vs-first``: the run's best round against its round 0; the drift is the accepted
  rounds' drifts from round 0 to the best added up.
* ``within-round``: two candidates of one editing round; the drift is the larger of the two
  candidates' drifts from their parent.

A pair is kept when FAITH differs by at least ``min_margin`` and by more than 0 (below
it the two are a tie, left out) and the drift is at most ``max_drift``; the same two
images (by content) make one pair. A run whose activity is in ``held`` goes to the
``test`` split, the others to ``train``. Every pair left out is counted in ``skipped``
with its reason."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from refine.io.files import file_sha256


@dataclass(frozen=True)
class Pair:
    run_dir: Path
    run: Any  # refine.records.Run
    w: Any  # the preferred Candidate (higher FAITH)
    lo: Any  # the other Candidate
    source: str  # "best-vs-first" or "within-round"
    split: str  # "train" or "test"
    sha_w: str  # the images' sha256 (what makes two pairs the same)
    sha_l: str

    @property
    def margin(self) -> float:
        return self.w.scores.faith - self.lo.scores.faith


def select_pairs(
    loaded: list[tuple[Path, Any]],
    min_margin: float,
    max_drift: float,
    held: set[str],
    skipped: Counter,
) -> list[Pair]:
    """The pairs of the runs in ``loaded`` ((run folder, Run) each), in run order."""
    seen: set[tuple[str, str]] = set()
    pairs: list[Pair] = []

    def add(run_dir, run, w, lo, source: str, drift: float) -> None:
        fw, fl = w.scores.faith, lo.scores.faith
        if fw is None or fl is None:
            skipped["no FAITH (EXAG not computed)"] += 1
            return
        if fw - fl <= 0:  # equal FAITH: a tie, never a preference (even at --min-margin 0)
            skipped["a tie (equal FAITH)"] += 1
            return
        if fw - fl < min_margin:
            skipped[f"FAITH margin below {min_margin:g}"] += 1
            return
        if drift > max_drift:
            skipped[f"drift above {max_drift:g}"] += 1
            return
        key = (file_sha256(run_dir / w.image), file_sha256(run_dir / lo.image))
        if key in seen or key[0] == key[1]:
            skipped["the same pair again"] += 1
            return
        seen.add(key)
        split = "test" if run.spec.activity.casefold() in held else "train"
        pairs.append(Pair(run_dir, run, w, lo, source, split, *key))

    for run_dir, run in loaded:
        if not run.rounds:
            skipped["run without rounds"] += 1
            continue
        best = run.best_round
        if best is not None and best > 0:
            chain, k = 0.0, best  # the drifts of the accepted rounds from round 0 to the best
            while k is not None and k > 0:
                r = run.rounds[k]
                d = r.best.drift
                chain += 0.0 if d is None else d.value
                k = r.parent
            add(run_dir, run, run.rounds[best].best, run.rounds[0].best, "best-vs-first", chain)
        for r in run.rounds:
            if r.kind != "edit" or len(r.candidates) < 2:
                continue
            ranked = sorted(
                (c for c in r.candidates if c.scores.faith is not None),
                key=lambda c: -(c.scores.faith or 0.0),
            )
            for i in range(len(ranked)):
                for j in range(i + 1, len(ranked)):
                    w, lo = ranked[i], ranked[j]
                    drift = max(0.0 if c.drift is None else c.drift.value for c in (w, lo))
                    add(run_dir, run, w, lo, "within-round", drift)
    return pairs
