"""What each round fixed and lost, descriptor by descriptor, and a run's forgetting.

FAITH is a mean (AHEaD Eq. 5), so a round can fix two reference descriptors, lose one that
an earlier round fixed, and still be kept. This module follows every reference descriptor
(AHEaD Eq. 1's ``d_j``: aligned when its best predicted match passes tau) and every
hallucinated phrase and exaggerated stereotype candidate across rounds. Pure functions of
the records: no model and no file.

A round is read against its *lineage*, the rounds whose images came before it:

* ``kept`` (a run's record, ``--keep-fixes``): the kept rounds (initial or accepted) before
  it, in order; the last of them is the image the run ends with if this round is rejected.
  With ``edit_from`` ``best`` (the default) that is the round's parent.
* ``parent`` (the editor bench's chains, ``edit_from`` ``last``): its parent, the parent's
  parent, and so on to round 0: the images each edit started from.

Against the last round of its lineage, a reference descriptor of the round's chosen image
``became aligned``, ``stayed aligned``, was ``lost`` (aligned there, missing now) or is
``still missing``; round 0's are ``aligned`` or ``missing``. A hallucinated or exaggerated
item is ``new`` (in no round of the lineage), ``kept`` (there and still here), ``removed``
(there, gone now) or ``came back`` (gone there, in an earlier round of the lineage). A
descriptor ``lost`` after a round of the lineage made it aligned, or an item that ``came
back`` after one removed it, is a *lost fix*: what ``--keep-fixes`` counts and what the
forgetting figures call forgotten.

Hallucinated phrases are the observer's words: the same thing said otherwise in two rounds
counts as removed and new. They are compared by their words folded (case, spaces, a
leading article); stereotype candidates come from the run's fixed list and keep their
names.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from refine.loop.policy import KeepFixes
from refine.records import DESCRIPTOR_STATES, ITEM_STATES, Candidate, Run, Tracked

KEPT = ("initial", "accepted")
STEREOTYPES = "stereotypes"  # the dimension an exaggerated item is counted under
# the states (refine.records.DESCRIPTOR_STATES and ITEM_STATES)
STATES = (*DESCRIPTOR_STATES, *ITEM_STATES)
_ARTICLE = re.compile(r"^(a|an|the)\s+")


def folded(phrase: str) -> str:
    """An item's words for comparing rounds: lower case, single spaces, no leading
    article."""
    return _ARTICLE.sub("", " ".join(phrase.lower().split()))


def _descriptors(c: Candidate) -> tuple[list[tuple[str, str]], set[tuple[str, str]]]:
    """Every reference descriptor of a candidate's matching (dimension, phrase), and the
    aligned ones."""
    fb = c.feedback
    aligned = {(m.dimension, m.phrase) for m in fb.aligned}
    every = [(m.dimension, m.phrase) for m in [*fb.aligned, *fb.missing]]
    return sorted(set(every)), aligned


def _items(c: Candidate) -> dict[tuple[str, str, str], str]:
    """A candidate's hallucinated and exaggerated items: (kind, dimension, folded words) ->
    the words as said."""
    fb = c.feedback
    items = {("hallucinated", m.dimension, folded(m.phrase)): m.phrase for m in fb.hallucinated}
    for e in fb.exaggerated:
        items[("exaggerated", STEREOTYPES, folded(e.candidate))] = e.candidate
    return items


@dataclass
class History:
    """What the rounds of a lineage had, in order: the last one's aligned descriptors and
    items, every item any of them showed, and which round last fixed each descriptor or
    removed each item (and still held it at the end)."""

    rounds: list[int] = field(default_factory=list)
    aligned: set[tuple[str, str]] = field(default_factory=set)
    items: set[tuple[str, str, str]] = field(default_factory=set)
    ever: set[tuple[str, str, str]] = field(default_factory=set)
    fixed_in: dict[tuple[str, str], int] = field(default_factory=dict)
    removed_in: dict[tuple[str, str, str], int] = field(default_factory=dict)
    words: dict[tuple[str, str, str], str] = field(default_factory=dict)  # as last said

    def add(self, index: int, c: Candidate) -> None:
        """The next round of the lineage, its chosen candidate ``c``."""
        _, aligned = _descriptors(c)
        said = _items(c)
        items = set(said)
        if self.rounds:
            for d in aligned - self.aligned:
                self.fixed_in[d] = index
            for d in self.aligned - aligned:
                self.fixed_in.pop(d, None)
            for i in self.items - items:
                self.removed_in[i] = index
            for i in items:
                self.removed_in.pop(i, None)
        self.rounds.append(index)
        self.aligned, self.items = aligned, items
        self.ever |= items
        self.words.update(said)


def lineage(run: Run, k: int, along: str = "kept") -> list[int]:
    """The rounds before round ``k`` that its image comes after, oldest first (see the
    module's docstring for ``kept`` and ``parent``)."""
    if along == "parent":
        chain, at = [], run.rounds[k].parent if k < len(run.rounds) else None
        while at is not None:
            chain.append(at)
            at = run.rounds[at].parent
        return chain[::-1]
    if along != "kept":
        raise ValueError(f"along is 'kept' or 'parent', not {along!r}")
    return [r.index for r in run.rounds[:k] if kept(run, r.index)]


def kept(run: Run, j: int) -> bool:
    """Whether round ``j``'s image is one the run kept: initial or accepted, or the round
    a rolled-back run goes on from (whatever it was decided in the run it came from)."""
    branch = (run.branched_from or {}).get("round")
    return run.rounds[j].decision in KEPT or j == branch


def history(run: Run, rounds: Iterable[int]) -> History:
    """The history of ``rounds`` (a lineage), each read from its chosen candidate."""
    h = History()
    for j in rounds:
        h.add(j, run.rounds[j].best)
    return h


def states(c: Candidate, h: History) -> list[Tracked]:
    """Each reference descriptor and each hallucinated or exaggerated item of candidate
    ``c`` against the lineage ``h`` (empty: round 0)."""
    first = not h.rounds
    every, aligned = _descriptors(c)
    out: list[Tracked] = []
    for d in every:
        now, was = d in aligned, d in h.aligned
        if first:
            state = "aligned" if now else "missing"
        elif now:
            state = "stayed aligned" if was else "became aligned"
        else:
            state = "lost" if was else "still missing"
        since = h.fixed_in.get(d) if state == "lost" else None
        out.append(Tracked(kind="descriptor", dimension=d[0], item=d[1], state=state,
                           fixed_in=since))  # fmt: skip
    items = _items(c)
    for key, said in items.items():
        if first or key not in h.ever:
            state, since = "new", None
        elif key in h.items:
            state, since = "kept", None
        else:
            state, since = "came back", h.removed_in.get(key)
        out.append(Tracked(kind=key[0], dimension=key[1], item=said, state=state,
                           fixed_in=since))  # fmt: skip
    for key in sorted(h.items - set(items)):
        out.append(Tracked(kind=key[0], dimension=key[1], item=h.words[key], state="removed"))
    return out


def lost_fixes(tracked: Sequence[Tracked]) -> list[Tracked]:
    """The fixes a round undid: descriptors lost after a round of its lineage made them
    aligned, items back after one removed them."""
    return [t for t in tracked if t.fixed_in is not None and t.state in ("lost", "came back")]


def fix_words(lost: Sequence[Tracked], at_most: int = 3) -> str:
    """``setting: Persian rug on floor (fixed in round 1); ...`` for a reason."""
    said = [
        f"{t.dimension}: {t.item} ({'fixed' if t.kind == 'descriptor' else 'removed'} in round "
        f"{t.fixed_in})"
        for t in lost[:at_most]
    ]
    more = f"; and {len(lost) - at_most} more" if len(lost) > at_most else ""
    return "; ".join(said) + more


def track_round(run: Run, k: int, c: Candidate | None = None, along: str = "kept") -> list[Tracked]:
    """The states of round ``k``'s chosen candidate (or ``c``, a candidate of the round
    being decided) against its lineage."""
    chosen = c if c is not None else run.rounds[k].best
    return states(chosen, history(run, lineage(run, k, along)))


def keep_rule(run: Run, k: int, candidates: Sequence[Candidate]) -> KeepFixes | None:
    """``--keep-fixes`` for round ``k``'s candidates: how many earlier fixes each undoes,
    and which (None: the setting is off)."""
    spec = run.spec
    if spec.keep_fixes is None:
        return None
    h = history(run, lineage(run, k))
    undone = []
    for c in candidates:
        lost = lost_fixes(states(c, h))
        undone.append((len(lost), fix_words(lost)))
    return KeepFixes(spec.keep_fixes, spec.keep_fixes_gain, undone)


def tracked_rounds(run: Run, along: str = "kept") -> list[list[Tracked]]:
    """Every round's states: the record's where it has them (``kept``), else read anew
    (a record made before rounds kept them, or a chain along its parents)."""
    return [
        r.tracked if along == "kept" and r.tracked else track_round(run, r.index, along=along)
        for r in run.rounds
    ]


@dataclass(frozen=True)
class Forgetting:
    """A dimension's figures over a run's lineage: descriptors that became aligned
    (``fixed``), how many of those a later round lost (``forgotten``), every loss of an
    aligned descriptor (``lost``: a round-0 one included), items removed and how many came
    back."""

    fixed: int = 0
    forgotten: int = 0
    lost: int = 0
    removed: int = 0
    came_back: int = 0

    def as_dict(self) -> dict[str, int]:
        return {k: getattr(self, k) for k in ("fixed", "forgotten", "lost", "removed", "came_back")}


def forgetting(run: Run, along: str = "kept") -> dict[str, Forgetting]:
    """Per dimension (the stereotypes' as ``stereotypes``), what the run's lineage of
    images fixed and lost: the kept rounds (``kept``), or the chain of the last round's
    parents and the last round itself (``parent``)."""
    if not run.rounds:
        return {}
    if along == "kept":
        path = [r.index for r in run.rounds if kept(run, r.index)]
    else:  # the chain up to its last round a stop did not cut short
        done = [r.index for r in run.rounds if r.decision != "stopped"]
        path = [*lineage(run, done[-1], "parent"), done[-1]] if done else []
    counts: dict[str, dict[str, int]] = {}
    h = History()
    for j in path:
        for t in states(run.rounds[j].best, h):
            key = {"became aligned": "fixed", "lost": "lost", "removed": "removed",
                   "came back": "came_back"}.get(t.state)  # fmt: skip
            if key is None:
                continue
            row = counts.setdefault(t.dimension, {})
            row[key] = row.get(key, 0) + 1
            if t.state == "lost" and t.fixed_in is not None:
                row["forgotten"] = row.get("forgotten", 0) + 1
        h.add(j, run.rounds[j].best)
    return {d: Forgetting(**row) for d, row in sorted(counts.items())}


def totals(by_dimension: dict[str, Forgetting]) -> Forgetting:
    """The figures of every dimension added up."""
    keys = ("fixed", "forgotten", "lost", "removed", "came_back")
    return Forgetting(**{k: sum(getattr(f, k) for f in by_dimension.values()) for k in keys})
