"""How an SoS bank's plan is read: its grid of cultures and languages, checked, and each
cell's prompts (see :mod:`refine.harness.tasks.sos.bank`)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from refine.assets import prompt_template
from refine.evaluate.refs_build import LLMCache
from refine.evaluate.sos import (  # noqa: F401 (person_prompts: its users)
    LANGUAGES,
    BankError,
    Translation,
    person_cultures,
    person_prompts,
)


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", text).strip("_") or "x"


def _suggest(name: str, known: Sequence[str]) -> str:
    import difflib

    close = difflib.get_close_matches(name, list(known), n=3, cutoff=0.6)
    return f" (did you mean {', '.join(close)}?)" if close else ""


def check_grid(concept: str, cultures: Sequence[str], languages: Sequence[str]) -> None:
    """Every culture and language known for the concept; all problems together."""
    problems = []
    if not cultures:
        problems.append("no cultures given")
    if not languages:
        problems.append("no languages given")
    for lang in languages:
        if lang not in LANGUAGES:
            problems.append(
                f"unknown language {lang!r}; known: {', '.join(sorted(LANGUAGES))}"
                + _suggest(lang, list(LANGUAGES))
            )
    if concept == "person":
        known = set(person_cultures())
        for c in cultures:
            if c not in known:
                problems.append(
                    f"culture {c!r} has no person prompts (identities such as 'Japanese')"
                    + _suggest(c, sorted(known))
                )
        have = {lang for _, lang in person_prompts()}
        for lang in languages:
            if lang in LANGUAGES and lang not in have:
                problems.append(
                    f"language {lang!r} has no native-speaker person prompts; "
                    f"use one of {', '.join(sorted(have))}"
                )
        # every cell of the grid has its prompts: a missing one is said now, not hours in
        pairs = person_prompts()
        missing = [
            f"{c} x {lang}"
            for c in cultures
            for lang in languages
            if c in known and lang in have and (c, lang) not in pairs
        ]
        if missing:
            more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
            problems.append(
                f"no person prompts for {', '.join(missing[:5])}{more}: leave that culture or "
                "language out"
            )
    for name, items in (("culture", cultures), ("language", languages)):
        dup = sorted({x for x in items if list(items).count(x) > 1})
        if dup:
            problems.append(f"{name}s given twice: {', '.join(dup)}")
    if problems:
        raise BankError("; ".join(problems))


def cell_prompts(
    concept: str, culture: str, language: str, llm: Any = None, cache_: Any = None
) -> list[str]:
    """The prompts of one cell: the person prompts, or the activity prompt translated."""
    if concept == "person":
        return list(person_prompts()[(culture, language)])
    english = prompt_template("generate").strip().format(activity=concept, country=culture)
    if language == "en":
        return [english]
    if llm is None:
        raise BankError(
            f"translating {concept!r} prompts needs a language model (the profile's llm role)"
        )

    ask = (cache_ or LLMCache()).ask
    request = prompt_template("translate").format(language=LANGUAGES[language], text=english)
    text = ask(llm, request, Translation).translation.strip()
    if not text:
        raise BankError(f"the language model gave an empty {LANGUAGES[language]} translation")
    return [text]
