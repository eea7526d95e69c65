"""Feedback -> a rewritten generation prompt: the regenerate move, for when no edit can
recover the image (its setting or composition is wrong).

The round's planned changes (:func:`refine.loop.instructions.plan`: what is missing, what
is hallucinated or exaggerated and what takes its place) and what to keep go to the
profile's language model with ``assets/prompts/rewrite_prompt.txt`` (structured output,
answers cached), which describes the scene as it should look. Without a language model,
when its call fails or with ``--writer template``, the prompt is the last prompt followed
by what to show and keep, and what to leave out; the round records which wrote it and why.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from refine.assets import prompt_template
from refine.backends.selection import Backends
from refine.evaluate.assess import CallCounter
from refine.loop.instructions import (
    Plan,
    Written,
    change_records,
    left_out,
    noun_phrase,
    plan,
    refused_lines,
    round_instruction,
    worded,
)
from refine.records import Round, Run

PROMPT_MOST_WORDS = 110  # the prompt asks for 70; a longer answer is refused


class RewrittenPrompt(BaseModel):
    prompt: str


def base_prompt(run: Run, parent: int) -> str:
    """The prompt behind round ``parent``'s image: its own when it was generated, else its
    lineage's (an edit's parent, back to a generated round); the generation template's
    where the run began from an image of the user's."""
    r: Round | None = run.rounds[parent]
    while r is not None and r.kind == "edit":
        r = run.rounds[r.parent] if r.parent is not None else None
    if r is None or run.spec.input_image and r.index == 0:
        return (
            prompt_template("generate")
            .strip()
            .format(activity=run.spec.activity, country=run.references.country)
        )
    return r.text


def template_prompt(base: str, show: list[str], keep: list[str], avoid: list[str]) -> str:
    """The last prompt, then what to show and keep, then what to leave out."""
    parts = [base.rstrip(" .") + "."]
    if show:
        parts.append("Show " + _join([noun_phrase(s) for s in show]) + ".")
    if keep:
        parts.append("Keep " + _join([noun_phrase(k) for k in keep]) + ".")
    if avoid:
        parts.append("Leave out " + _join([noun_phrase(a) for a in avoid]) + ".")
    return " ".join(parts)


def _join(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def rewrite_prompt(
    model: Any, activity: str, country: str, prompt: str, missing: list[str],
    wrong: list[str], keep: list[str], cache: Any = None, refused: Any = None,
) -> str:  # fmt: skip
    """The prompt the language model ``model`` (``complete_json``) writes (told of the
    ``refused`` round's prompt, a RefusedRound, when the image model refused it); a
    ValueError when it is empty or too long."""
    text = prompt_template("rewrite_prompt").format(
        activity=activity,
        country=country,
        prompt=prompt,
        missing="; ".join(missing) or "(nothing)",
        wrong="; ".join(wrong) or "(nothing)",
        keep="; ".join(keep) or "(nothing named)",
        refused="\n" + refused_lines(refused, "refused_prompt") if refused is not None else "",
    )
    if cache is not None:
        answer = cache.ask(model, text, RewrittenPrompt)
    else:
        answer = model.complete_json(text, RewrittenPrompt)
    out = " ".join(str(answer.prompt or "").split())
    if not out:
        raise ValueError("the language model wrote an empty prompt")
    if len(out.split()) > PROMPT_MOST_WORDS:
        raise ValueError(
            f"the language model wrote {len(out.split())} words (at most {PROMPT_MOST_WORDS})"
        )
    return out


def round_prompt(
    run: Run, k: int, parent_index: int, backends: Backends, calls: CallCounter
) -> Written | None:
    """Round ``k``'s new prompt from round ``parent_index``'s feedback: the user's round
    text when given, else the language model's, else the template's (None: nothing to
    change)."""
    user = run.spec.instructions.get(k)
    if user:
        return Written(user, "user")
    spec, parent = run.spec, run.rounds[parent_index]
    tau = parent.best.scores.tau if parent.best.scores.tau is not None else spec.tau
    # refused before: the change the refused prompt led with is left out, one more a time
    refused = [x for x in run.refused if x.round == k]
    skip = len(refused)
    planned = plan(
        parent.best.feedback, spec.max_changes + skip, tau, spec.near_margin, spec.replace_floor
    )
    planned = Plan(planned.changes[skip:], planned.near, planned.keep)
    if not planned.changes:
        return None
    show = [c.reference or c.item for c in planned.changes if c.kind in ("add", "replace")]
    avoid = [c.item for c in planned.changes if c.kind != "add"]
    keep = planned.keep[:5]
    base = base_prompt(run, parent_index)
    text = template_prompt(base, show, keep, avoid)
    changes = change_records(planned)
    if spec.writer != "llm":
        note = "the template wrote it" + (
            ": AHEaD's Tab. 32 is an editing template" if spec.writer == "ahead" else ""
        )
        note = "; ".join(x for x in (note, left_out(skip)) if x)
        return Written(text, "template", changes=changes, note=note)
    wrong = [
        f"{c.item} (instead: {c.reference})" if c.reference else c.item
        for c in planned.changes
        if c.kind != "add"
    ]
    missing = [c.item for c in planned.changes if c.kind == "add"]
    country = run.references.country
    written = worded(
        backends,
        calls,
        Written(text, "template", changes=changes),
        lambda model, cache: rewrite_prompt(
            model,
            spec.activity,
            country,
            base,
            missing,
            wrong,
            keep,
            cache,
            refused[-1] if refused else None,
        ),  # fmt: skip
    )
    if skip:
        written.note = "; ".join(x for x in (written.note, left_out(skip)) if x)
    return written


def round_text(
    run: Run, k: int, parent_index: int, how: str, backends: Backends, calls: CallCounter
) -> tuple[Written | None, str]:
    """Round ``k``'s instruction (to edit) or new prompt (to regenerate), and, when there
    is nothing to change, why the run stops."""
    if how == "regenerate":
        written = round_prompt(run, k, parent_index, backends, calls)
    else:
        written = round_instruction(run, k, run.rounds[parent_index], backends, calls)
    nothing = "nothing to change: no missing, hallucinated or exaggerated items"
    if run.spec.writer == "ahead" and how == "edit":
        nothing = (
            "nothing to change: no hallucinated or exaggerated items (AHEaD's Tab. 32 "
            "removes those and adds only where they point)"
        )
    refused = sum(1 for x in run.refused if x.round == k)
    if refused:  # each refusal left out a planned change: none is left to ask for
        nothing = (
            f"nothing left to ask for: the image model refused round {k} {refused} time(s), "
            "and no other planned change is left"
        )
    return written, nothing
