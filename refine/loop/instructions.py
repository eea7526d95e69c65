"""Feedback -> editing instruction, from the template ``assets/prompts/edit_instruction.txt``.

:func:`plan` decides the changes, :func:`sentence` words each one as a person would:

* **Near matches are kept.** An observed item whose closest reference is within
  ``near_margin`` below tau is left alone, and that reference is not asked for either (the
  metrics still count the item as hallucinated, as the papers define it; only the edit
  spares what is probably right, worded a little differently).
* **Replace, not remove.** A hallucinated item whose closest reference in its dimension is
  at least ``replace_floor`` similar, and missing from the image, is replaced by it (the
  edit leaves no hole); other hallucinated items are removed.
* An exaggerated stereotype is replaced by the reference closest to it (among objects,
  attire and setting: an action or an arrangement cannot stand in a thing's place) when
  that is at least ``replace_floor`` similar and not in the image yet, else toned down;
  missing references are added.

:func:`write_instruction` has the profile's language model word the planned changes as one
short instruction (prompt ``assets/prompts/write_instruction.txt``, structured output,
answers cached); the loop falls back to the template when there is no model or its call
fails, and records which wrote it and why.

At most ``max_changes`` changes, taken in turn from the exaggerated (largest first),
hallucinated (least supported first) and missing (furthest first) lists. Each change is
phrased by its dimension: objects are added with an article, attire dresses the people,
a place sets the scene, an interaction is shown, an arrangement arranges them.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass, field
from itertools import zip_longest
from typing import Any

from pydantic import BaseModel

from refine import usage
from refine.assets import prompt_template
from refine.backends.selection import Backends
from refine.evaluate.assess import CallCounter
from refine.evaluate.expectations import missed_changes
from refine.evaluate.refs_build import LLMCache
from refine.loop import memory
from refine.records import (
    CaireScore,
    Feedback,
    Match,
    PastFix,
    PlannedChange,
    RefusedRound,
    Round,
    Run,
    RunSpec,
)

# the defaults are the run settings' (written once, in RunSpec)
NEAR_MARGIN = RunSpec.model_fields["near_margin"].default  # below tau, on the cosine scale
# least similarity of a reference that replaces a hallucinated item
REPLACE_FLOOR = RunSpec.model_fields["replace_floor"].default
MAX_CHANGES = RunSpec.model_fields["max_changes"].default


@dataclass(frozen=True)
class Change:
    kind: str  # add, remove, replace, tone down
    dimension: str | None  # None: a stereotype (any dimension)
    item: str  # what to add, remove, replace or tone down
    reference: str | None = None  # replace: what takes its place
    similarity: float | None = None  # of the item to its closest counterpart


@dataclass(frozen=True)
class Plan:
    changes: list[Change]
    near: list[Match]  # observed items kept as near matches of their reference
    keep: list[str]  # aligned items, named in the keep clause


def own_descriptors(run: Any) -> set[tuple[str, str]]:
    """The reference descriptors a person added to the run (refine.loop.aims) and still
    has, as (dimension, phrase)."""
    now = run.references.descriptors
    return {
        (d.dimension, d.phrase)
        for c in run.reference_changes
        for d in c.added
        if d.phrase in now.get(d.dimension, [])
    }


def _not_own(m: Match, own: Collection[tuple[str, str]]) -> bool:
    return (m.dimension, m.phrase) not in own


def plan(
    feedback: Feedback,
    max_changes: int,
    tau: float | None = None,
    near_margin: float = NEAR_MARGIN,
    replace_floor: float = REPLACE_FLOOR,
    own: Collection[tuple[str, str]] = (),
) -> Plan:
    """The changes the feedback asks for (see the module docstring); the missing
    descriptors a person added (``own``: (dimension, phrase)) are asked for first."""
    near = near_matches(feedback, tau, near_margin)
    spared = {(m.dimension, (m.best_match or "").casefold()) for m in near}
    near_items = {(m.dimension, m.phrase.casefold()) for m in near}
    missing = {(m.dimension, m.phrase.casefold()): m for m in feedback.missing}
    used: set[tuple[str, str]] = set()
    exaggerated = []
    for e in feedback.exaggerated:
        ref = (e.replacement_dimension or "", (e.replacement or "").casefold())
        sim = e.replacement_similarity
        usable = ref in missing and ref not in used and ref not in spared
        if sim is not None and sim >= replace_floor and usable:
            used.add(ref)
            swap = missing[ref].phrase
            exaggerated.append(Change("replace", ref[0], e.candidate, swap, sim))
        else:
            exaggerated.append(Change("tone down", None, e.candidate))
    # an observed phrase already named as an exaggerated candidate is not listed twice
    covered = {(e.observed or "").casefold() for e in feedback.exaggerated}
    hallucinated = []
    for h in sorted(feedback.hallucinated, key=lambda h: h.similarity or 0.0):
        key = (h.dimension, h.phrase.casefold())
        if h.phrase.casefold() in covered or key in near_items:
            continue
        ref = (h.dimension, (h.best_match or "").casefold())
        if (
            h.similarity is not None
            and h.similarity >= replace_floor
            and ref in missing
            and ref not in spared
            and ref not in used
        ):
            used.add(ref)
            hallucinated.append(
                Change("replace", h.dimension, h.phrase, missing[ref].phrase, h.similarity)
            )
        else:
            hallucinated.append(Change("remove", h.dimension, h.phrase, similarity=h.similarity))
    adds = [
        Change("add", m.dimension, m.phrase, similarity=m.similarity)
        for m in sorted(feedback.missing, key=lambda m: (_not_own(m, own), m.similarity or 0.0))
        if (m.dimension, m.phrase.casefold()) not in spared | used
    ]
    out: list[Change] = []
    seen: set[str] = set()
    for group in zip_longest(exaggerated, hallucinated, adds):
        for c in group:
            # the same phrase may be both exaggerated and hallucinated: keep the first
            if c is not None and c.item.casefold() not in seen:
                seen.add(c.item.casefold())
                out.append(c)
    return Plan(out[:max_changes], near, [a.phrase for a in feedback.aligned])


def near_matches(feedback: Feedback, tau: float | None, margin: float) -> list[Match]:
    """Hallucinated items within ``margin`` below ``tau`` of their closest reference."""
    if tau is None or margin <= 0:
        return []
    return [
        h
        for h in feedback.hallucinated
        if h.similarity is not None and h.best_match and h.similarity >= tau - margin
    ]


def planned_changes(
    feedback: Feedback,
    max_changes: int,
    tau: float | None = None,
    near_margin: float = NEAR_MARGIN,
    replace_floor: float = REPLACE_FLOOR,
) -> list[str]:
    """The planned changes as the sentences of the instruction."""
    return [
        sentence(c) for c in plan(feedback, max_changes, tau, near_margin, replace_floor).changes
    ]


def build_instruction(
    feedback: Feedback,
    activity: str,
    country: str,
    max_changes: int = MAX_CHANGES,
    keep_max: int = 3,
    extra: list[str] | None = None,
    tau: float | None = None,
    near_margin: float = NEAR_MARGIN,
    replace_floor: float = REPLACE_FLOOR,
) -> str | None:
    """The editing instruction, or ``None`` when the feedback asks for no change.
    ``extra`` changes (such as CAIRE's "reads as another culture" line) come first and
    count within ``max_changes``."""
    extra = list(extra or [])[:max_changes]
    planned = plan(feedback, max_changes - len(extra), tau, near_margin, replace_floor)
    return template_instruction(planned, activity, country, extra, keep_max)


def template_instruction(
    planned: Plan, activity: str, country: str, extra: list[str] | None = None, keep_max: int = 3
) -> str | None:
    """The template's instruction for planned changes (``extra`` lines first); None when
    there is nothing to change."""
    changes = list(extra or []) + [sentence(c) for c in planned.changes]
    if not changes:
        return None
    kept = [noun_phrase(k, article=False) for k in planned.keep[:keep_max]]
    keep = f", in particular {_join(kept)}" if kept else ""
    return (
        prompt_template("edit_instruction")
        .format(
            activity=activity,
            country=country,
            changes="\n".join(f"- {c}." for c in changes),
            keep=keep,
        )
        .strip()
    )


# -- the language model's wording ----------------------------------------------------------

WRITER_MOST_WORDS = 90  # the prompt asks for 60; a longer answer is refused


class WrittenInstruction(BaseModel):
    instruction: str


def change_records(planned: Plan, extra: list[str] | None = None) -> list[PlannedChange]:
    """The changes an instruction is built from, as the round records them."""
    out = [PlannedChange(kind="other", item=e) for e in extra or []]
    out += [
        PlannedChange(
            kind=c.kind,
            dimension=c.dimension,
            item=c.item,
            reference=c.reference,
            similarity=c.similarity,
        )
        for c in planned.changes
    ]
    return out


def refused_lines(refused: RefusedRound, template: str = "refused_instruction") -> str:
    """What the writer is told of the instruction (or, ``refused_prompt``, the prompt) the
    image model refused."""
    reason = refused.failures[0] if refused.failures else "no reason given"
    return prompt_template(template).strip().format(reason=reason[:300], instruction=refused.text)


def write_instruction(
    model: Any,
    activity: str,
    country: str,
    changes: list[PlannedChange],
    keep: list[str],
    cache: Any = None,
    hints: str = "",
    refused: RefusedRound | None = None,
) -> str:
    """The instruction the language model ``model`` (``complete_json``) writes from the
    planned ``changes`` and what to ``keep``; through ``cache`` (a
    :class:`refine.evaluate.refs_build.LLMCache`) when given. A ValueError when the answer is empty
    or too long."""
    lines = []
    for c in changes:
        parts = [c.kind, c.dimension or ("stereotype" if c.kind != "other" else "any"), c.item]
        if c.reference:
            parts.append(f"with {c.reference}")
        if c.similarity is not None:
            parts.append(f"similarity {c.similarity:.2f}")
        lines.append("- " + "; ".join(parts))
    prompt = prompt_template("write_instruction").format(
        activity=activity,
        country=country,
        changes="\n".join(lines),
        keep=", ".join(keep) or "(nothing named)",
        # past fixes (--memory), as lines starting "* "; nothing without them
        past="\n" + prompt_template("past_fixes").strip().format(fixes=hints) if hints else "",
        # the last instruction the image model refused for this round, and why
        refused="\n" + refused_lines(refused) if refused is not None else "",
    )
    if cache is not None:
        answer = cache.ask(model, prompt, WrittenInstruction)
    else:
        answer = model.complete_json(prompt, WrittenInstruction)
    text = " ".join(str(answer.instruction or "").split())
    if not text:
        raise ValueError("the language model wrote an empty instruction")
    words = len(text.split())
    if words > WRITER_MOST_WORDS:
        raise ValueError(f"the language model wrote {words} words (at most {WRITER_MOST_WORDS})")
    return text


# -- wording -----------------------------------------------------------------------------

# words that start a clause rather than name a thing: "Sharing communal dishes"
_PLACES = {
    "home", "house", "room", "kitchen", "courtyard", "garden", "street", "market", "hall",
    "temple", "mosque", "church", "village", "yard", "interior", "apartment", "restaurant",
    "field", "square", "terrace", "rooftop", "veranda", "tent", "backyard", "setting",
}  # fmt: skip
_PREPOSITIONS = ("around ", "on ", "at ", "in ", "under ", "near ", "beside ", "along ")
_DETERMINERS = ("a ", "an ", "the ", "some ", "two ", "three ", "several ", "many ")
# Persian, Japanese, Korean, Turkish, Arabic, Punjabi; words with those endings that are
# not names stay lower case
_PROPER = ("ian", "ese", "ean", "ish", "ic", "i")
_COMMON = {
    "radish", "garnish", "basic", "music", "plastic", "fabric", "ceramic", "mosaic",
    "metallic", "rustic", "electric", "classic", "organic", "relish", "polish", "varnish",
    "civilian", "median", "guardian", "pedestrian", "chili", "chilli", "sari", "safari",
}  # fmt: skip


def sentence(c: Change) -> str:
    """One change as a person would write it (no final full stop)."""
    if c.kind == "tone down":
        return f"Tone down the {_lower_first(c.item)}"
    item = _lower_first(" ".join(c.item.split()))
    if c.kind == "remove":
        if _starts_with_verb(item):  # an action: "fighting aliens"
            return f"Leave out anyone {item}"
        return f"Remove the {item}"
    if c.kind == "replace":
        if c.dimension == "setting":
            return f"Turn the {item} into {noun_phrase(c.reference or '')}"
        # clothes are named without an article: "casual modern attire", "headscarves"
        new = noun_phrase(c.reference or "", article=c.dimension != "attire")
        return f"Replace the {item} with {new}"
    return _add(c.dimension, c.item)


def _add(dimension: str | None, item: str) -> str:
    text = _lower_first(item.strip())
    low = text.casefold()
    clause = _starts_with_verb(text)
    if dimension == "attire":
        if clause or " wearing " in f" {low} ":
            return f"Show {noun_phrase(item)}"
        return f"Dress them in {noun_phrase(item, article=False)}"
    if dimension == "setting":
        if low.startswith(_PREPOSITIONS):
            return f"Set the scene {text}"
        if _head(low) in _PLACES:
            return f"Set the scene in {noun_phrase(item)}"
        return f"Add {noun_phrase(item)} to the setting"
    if dimension == "interaction":
        return f"Show people {text}" if clause else f"Show {noun_phrase(item)}"
    if dimension == "spatial":
        if low.startswith(_PREPOSITIONS):
            return f"Arrange them {text}"
        return f"Show people {text}" if clause else f"Show {noun_phrase(item)}"
    return f"Add {noun_phrase(item)}"


def noun_phrase(phrase: str, article: bool = True) -> str:
    """``Basket of flatbreads`` -> ``a basket of flatbreads``; ``Estekan tea glasses`` ->
    ``estekan tea glasses`` (a plural takes no article); ``Persian rug`` keeps its capital;
    a phrase that starts with a determiner is kept as it is."""
    text = _lower_first(" ".join(phrase.split()))
    low = text.casefold()
    if not article or not text or low.startswith(_DETERMINERS) or _plural(low):
        return text
    return f"{'an' if low[0] in 'aeiou' else 'a'} {text}"


def _lower_first(text: str) -> str:
    """The first word in lower case, unless it is a proper adjective or name (``Persian``)
    or an acronym."""
    if not text:
        return text
    first = text.split(" ", 1)[0]
    word = re.sub(r"[^A-Za-z]", "", first)
    low = word.casefold()
    proper = len(low) >= 5 and low.endswith(_PROPER) and low not in _COMMON
    if not word or (word.isupper() and len(word) > 1) or (proper and word[0].isupper()):
        return text
    return text[0].lower() + text[1:]


_LINKS = ("of", "with", "on", "in", "at", "for", "from", "around", "by", "or", "and")
_PLURALS = {"people", "children", "women", "men", "elders", "guests", "feet", "teeth"}


def _head(low: str) -> str:
    """The head noun: the last word before a link (``of``, ``with``, ``on``, ...) or a
    participle (``seated``, ``wearing``), else the last word."""
    words = re.sub(r"\(.*?\)", "", low).split()
    for k, w in enumerate(words):
        if k and (w in _LINKS or (len(w) > 4 and w.endswith(("ing", "ed")))):
            return words[k - 1]
    return words[-1] if words else ""


def _plural(low: str) -> bool:
    head = _head(low)
    if head in _PLURALS:
        return True
    return head.endswith("s") and not head.endswith(("ss", "us", "is"))


def _starts_with_verb(text: str) -> bool:
    first = text.split(" ", 1)[0].casefold()
    return first.endswith("ing") and len(first) > 4


def _join(items: list[str]) -> str:
    if len(items) < 3:
        return " and ".join(items)
    return ", ".join(items[:-1]) + f" and {items[-1]}"


def caire_change(caire: CaireScore | None, country: str) -> tuple[str | None, str | None]:
    """From a round's CAIRE result: a note when the image reads more as another culture
    than ``country`` (a higher 1-5 score), and the change that asks to fix it."""
    if not caire:
        return None, None
    scores = {s.label: s.score for s in caire.labels}
    own = next((v for k, v in scores.items() if k.casefold() == country.casefold()), None)
    if own is None:
        return None, None
    others = [(v, k) for k, v in scores.items() if k.casefold() != country.casefold()]
    if not others:
        return None, None
    top, other = max(others, key=lambda x: (x[0], -others.index(x)))
    if top <= own:
        return None, None
    note = f"reads more as {other} ({top}/5) than {country} ({own}/5)"
    change = (
        f"Make it read as {country} rather than {other}: replace what points to {other} "
        f"with what is typical of {country}"
    )
    return note, change


# -- a round's instruction ---------------------------------------------------------


@dataclass
class Written:
    """A round's instruction, who wrote it, and what it was built from."""

    text: str
    source: str  # template, language model, user, ahead template
    changes: list[PlannedChange] = field(default_factory=list)
    model: str | None = None
    note: str | None = None  # why the template wrote it when the model was asked
    hints: list[PastFix] = field(default_factory=list)  # past fixes the writer was given


def round_instruction(
    run: Run, k: int, parent: Round, backends: Backends, calls: CallCounter
) -> Written | None:
    """Round ``k``'s instruction: the user's, else the planned changes worded by the
    profile's language model, else by the template (None: nothing to change)."""
    user = run.spec.instructions.get(k)
    if user:
        return Written(user, "user")
    _, extra = caire_change(parent.caire, run.references.country)
    extras = [extra] if extra else []
    # missed expectations take at most half the changes; descriptors keep the rest
    extras += missed_changes(parent.expectations, (run.spec.max_changes + 1) // 2)
    spec = run.spec
    # the image model refused this round before: the refused instruction's first change
    # is left out (one more each time), and the language model is told what was refused
    refused = [x for x in run.refused if x.round == k]
    skip = len(refused)
    if spec.writer == "ahead":  # AHEaD's Tab. 32, filled in: no model call
        from refine.loop.ahead_writer import ahead_instruction

        country = run.references.country
        got = ahead_instruction(
            parent.best.feedback, spec.activity, country, run.references.descriptors, skip
        )
        if got is None:
            return None
        left = f"Tab. 32 has no place for: {'; '.join(extras)}" if extras else None
        note = "; ".join(x for x in (left, left_out(skip, "item(s) of HAL and EXAG")) if x)
        return Written(got[0], "ahead template", changes=got[1], note=note or None)
    tau = parent.best.scores.tau if parent.best.scores.tau is not None else spec.tau
    extras = extras[: spec.max_changes + skip]
    planned = plan(
        parent.best.feedback,
        spec.max_changes + skip - len(extras),
        tau,
        spec.near_margin,
        spec.replace_floor,
        own_descriptors(run),
    )
    dropped = min(skip, len(extras))
    extras = extras[dropped:]
    planned = Plan(planned.changes[skip - dropped :], planned.near, planned.keep)
    text = template_instruction(planned, spec.activity, run.references.country, extras)
    if text is None:
        return None
    changes = change_records(planned, extras)
    if spec.writer != "llm":
        return Written(text, "template", changes=changes, note=left_out(skip))
    keep = planned.keep[:5]
    country = run.references.country
    hints = memory.hints_for(run, changes) if spec.memory else []
    said = memory.hint_lines(hints)
    written = worded(
        backends,
        calls,
        Written(text, "template", changes=changes),
        lambda model, cache: write_instruction(
            model,
            spec.activity,
            country,
            changes,
            keep,
            cache,
            said,
            refused[-1] if refused else None,
        ),  # fmt: skip
    )
    written.hints = hints
    if skip:
        written.note = "; ".join(x for x in (written.note, left_out(skip)) if x)
    return written


def left_out(skip: int, what: str = "planned change(s)") -> str | None:
    """Why an instruction leaves out the planned changes a refused one led with."""
    if not skip:
        return None
    return f"the image model refused this round {skip} time(s): its first {skip} {what} left out"


def worded(backends: Backends, calls: CallCounter, template: Written, ask: Any) -> Written:
    """The profile's language model's wording, ``ask(model, cache)`` (its answers cached,
    its calls counted), else ``template`` with why the template stood in (no language
    model, or its call failed)."""
    if not backends.names.get("llm"):
        note = "the template wrote it: the profile has no language model"
        return Written(template.text, "template", changes=template.changes, note=note)
    cache = LLMCache()
    try:
        with backends.using("llm") as model:
            before = cache.misses
            own = ask(model, cache)
            calls.add(cache.misses - before)
            name = getattr(model, "id", backends.names["llm"])
    except (usage.StopRequested, usage.BudgetExhausted, usage.QuotaSpent):
        raise
    except Exception as err:  # the template stands in, and the round says why
        from refine.backends.loading import describe_error

        note = f"the template wrote it: the language model failed ({describe_error(err)})"
        return Written(template.text, "template", changes=template.changes, note=note[:500])
    return Written(own, "language model", model=name, changes=template.changes)
