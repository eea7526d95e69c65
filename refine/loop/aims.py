"""What a run aims for, changed by a person mid-run: reference descriptors not wanted
here, descriptors of their own, and stereotype candidates likewise.

A change applies from the round it is given at (its instruction is the first written
against the changed references) and is recorded on the run (``Run.reference_changes``,
what and when), the pack's references kept beside (``Run.pack_references``). So that no
gain is counted across a change, every round before it is re-matched against the changed
references before anything is compared: ALIGN and HAL are matches of the same
observations again (the text embedder, no model call), FAITH follows, and the feedback
(what is aligned, missing, hallucinated, and the stereotype candidates seen) is made
again, so that the next instruction neither asks for a removed descriptor nor misses an
added one. Each candidate keeps its figures against the pack beside (``against_pack``),
so that a report shows FAITH both ways. ``Round.references`` counts the changes its scores
are against.

With real photos (``exag:ita``) EXAG is each candidate's VQAScore over the photos' mean:
a changed stereotype candidate would need the photos and every image read again, so it
is refused there, saying so; descriptors may still change.
"""

from __future__ import annotations

import time
from typing import Any

from metrics.ahead import faith, score_images
from metrics.catalog import MATCHED
from refine.evaluate.assess import as_match, ita
from refine.loop import tracking
from refine.records import (
    Candidate,
    Feedback,
    ReferenceChange,
    ReferenceEdit,
    ReferencePack,
    Run,
)


def changed_references(refs: ReferencePack, edit: ReferenceEdit) -> ReferencePack:
    """``refs`` with ``edit`` made; a ValueError names what cannot be (a descriptor to
    remove that is not there, one to add that is, no descriptor left)."""
    descriptors = {d: list(p) for d, p in refs.descriptors.items()}
    for d in edit.removed:
        if d.phrase not in descriptors.get(d.dimension, []):
            raise ValueError(f"{d.phrase!r} is no reference descriptor of {d.dimension}")
        descriptors[d.dimension].remove(d.phrase)
    for d in edit.added:
        if d.phrase in descriptors.get(d.dimension, []):
            raise ValueError(f"{d.phrase!r} is a reference descriptor of {d.dimension} already")
        descriptors.setdefault(d.dimension, []).append(d.phrase)
    if not any(descriptors.values()):
        raise ValueError("no reference descriptor would be left: add one of your own")
    stereotypes = list(refs.stereotypes)
    if (edit.stereotypes_removed or edit.stereotypes_added) and ita(refs):
        raise ValueError(
            "with real photos (exag:ita) each stereotype candidate is measured against the "
            "photos: change the candidates before the run (or the references' photos)"
        )
    for x in edit.stereotypes_removed:
        if x not in stereotypes:
            raise ValueError(f"{x!r} is no stereotype candidate")
        stereotypes.remove(x)
    for x in edit.stereotypes_added:
        if x in stereotypes:
            raise ValueError(f"{x!r} is a stereotype candidate already")
        stereotypes.append(x)
    return refs.model_copy(update={"descriptors": descriptors, "stereotypes": stereotypes})


def change(
    run: Run, k: int, edit: ReferenceEdit, backends: Any, source: str = "review file"
) -> ReferenceChange:
    """Make ``edit`` of the run's references from round ``k`` on: recorded on the run,
    and every round before re-matched against the changed references (see the module);
    a ValueError says what cannot be, with nothing changed."""
    new = changed_references(run.references, edit)
    made = ReferenceChange(
        **edit.model_dump(), round=k, at=time.strftime("%Y-%m-%dT%H:%M:%S"), source=source
    )
    pack, tau = run.pack_references or run.references, run.spec.tau
    with backends.using("text_embedder") as embedder:
        for r in run.rounds:
            for j, c in enumerate(r.candidates):
                if c.against_pack is None:  # scored against the pack: its figures are those
                    c.against_pack = figures(
                        c if r.references == 0 else rematched(c, pack, embedder, tau)
                    )
                r.candidates[j] = rematched(c, new, embedder, tau, backends)
            r.references = len(run.reference_changes) + 1
    run.pack_references = pack
    run.references = new
    run.reference_changes.append(made)
    for r in run.rounds:  # what each round fixed and lost, against the changed references
        r.tracked = tracking.track_round(run, r.index)
    return made


def follow(run: Run, k: int, line: Any, backends: Any) -> bool:
    """Round ``k``'s line of the review file, where it changes the references, made (see
    :func:`change`); True where it cannot be, the run then stopped before the round saying
    why and how to go on."""
    edit = getattr(line, "references", None)
    if edit is None or edit.empty() or made_at(run, k, edit):
        return False
    try:
        change(run, k, edit, backends)
    except ValueError as err:
        run.stop_reason = (
            f"stopped before round {k}: the review file's change of references cannot be "
            f"made ({err}); mend it and go on with refine run --resume"
        )
        return True
    return False


def made_at(run: Run, k: int, edit: ReferenceEdit) -> bool:
    """Whether ``edit`` was made at round ``k`` already: a run resumed in that round, or
    rolled back before it, makes it once."""
    return any(
        c.round == k
        and ReferenceEdit(**c.model_dump(include=set(ReferenceEdit.model_fields))) == edit
        for c in run.reference_changes
    )


def against_pack(run: Run, candidates: list[Candidate], backends: Any) -> None:
    """The figures against the pack of candidates scored against a person's references
    (a round after a change); nothing while the run aims at the pack."""
    todo = [c for c in candidates if c.against_pack is None]
    if run.pack_references is None or not todo:  # called at every save: most find none
        return
    with backends.using("text_embedder") as embedder:
        for c in todo:
            c.against_pack = figures(rematched(c, run.pack_references, embedder, run.spec.tau))


def figures(c: Candidate) -> dict[str, float | None]:
    """The figures a change of references moves: ALIGN, HAL and FAITH."""
    return {m: c.scores.value(m) for m in MATCHED}


def rematched(
    c: Candidate, refs: ReferencePack, embedder: Any, tau: float, backends: Any = None
) -> Candidate:
    """``c`` scored against ``refs`` from the same observations: ALIGN, HAL, FAITH and the
    per-dimension figures matched again, and the feedback made again (with ``backends``,
    the stereotype candidates seen and their replacements too). EXAG, quality and every
    other reading stay as read (a descriptor is no input of theirs)."""
    (ahead,) = score_images(refs.descriptors, [c.observed], embedder, tau=tau)
    s = c.scores
    value, variant = faith(ahead.align, ahead.hal, s.exag)
    values = {**s.values, "align": ahead.align, "hal": ahead.hal, "faith": value}
    per_dimension = {
        d: {"align": x.align, "hal": x.hal}
        for d, x in ahead.per_dimension.items()
        if x.align is not None or x.hal is not None
    }
    variants = {**s.variants, "faith": variant} if "faith" in s.variants else s.variants
    scores = s.model_copy(
        update={"values": values, "per_dimension": per_dimension, "variants": variants,
                "tau": tau}
    )  # fmt: skip
    exaggerated = c.feedback.exaggerated
    if backends is not None:
        exaggerated = _seen(c, refs, tau, backends)
    feedback = Feedback(
        aligned=[as_match(m) for m in ahead.aligned],
        missing=[as_match(m) for m in ahead.missing],
        hallucinated=[as_match(m) for m in ahead.hallucinated],
        exaggerated=exaggerated,
    )
    return c.model_copy(update={"scores": scores, "feedback": feedback})


def _seen(c: Candidate, refs: ReferencePack, tau: float, backends: Any) -> list[Any]:
    """The stereotype candidates ``c``'s observations show (``exag:mllm``: a text match;
    ``exag:ita``'s are the judge's and stay), each naming its replacement among ``refs``."""
    from refine.evaluate.assess import Assessor, Judged

    assessor = Assessor(backends)
    listed = c.feedback.exaggerated
    if not ita(refs):  # exag:mllm's: seen in the words
        stereotypes = refs.stereotypes
        listed = assessor.candidates_seen(c.observed, stereotypes, tau) if stereotypes else []
    return assessor.with_replacements(Judged(None, listed), refs).exaggerated
