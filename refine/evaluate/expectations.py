"""Cultural expectations of a prompt (CulturalFrames): what it states (explicit) and what
people of the culture take for granted in such a scene (implicit), checked image by image.

Building: the profile's language model lists both kinds as short checkable statements with
a reason (``assets/prompts/expectations.txt``); the answer is cached on disk like the
reference builders' (same request, no second cost) and saved as an editable JSON file.

Checking: the judge gives each statement's yes-probability on the image ("Does this image
show the following: <statement>?"); a statement is **met** iff that probability is above
0.5. Per kind, the met share = met / statements (None when the kind has none).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from refine.assets import prompt_template
from refine.evaluate.refs_build import LLMCache
from refine.records import Expectation, ExpectationCheck, ExpectationScore, ExpectationSet

MET = 0.5  # a statement is met iff the judge's yes-probability is above this
MAX_PER_KIND = 8


class _Item(BaseModel):
    statement: str = Field(max_length=300)
    reason: str = Field("", max_length=500)


class _Answer(BaseModel):
    explicit: list[_Item] = Field(default_factory=list)
    implicit: list[_Item] = Field(default_factory=list)


def build_expectations(
    prompt: str,
    country: str,
    model: Any,
    cache: Any = None,
    count: int = MAX_PER_KIND,
) -> ExpectationSet:
    """Ask ``model`` (a language model) for the prompt's explicit and implicit
    expectations; ``cache`` (an :class:`refine.evaluate.refs_build.LLMCache`) keeps the answer."""

    cache = cache or LLMCache()
    text = prompt_template("expectations").format(prompt=prompt, country=country, count=count)
    answer = cache.ask(model, text, _Answer)
    items: list[Expectation] = []
    seen: set[str] = set()
    for kind in ("explicit", "implicit"):
        for item in getattr(answer, kind)[:count]:
            statement = " ".join(item.statement.split()).rstrip(".")
            if statement and statement.casefold() not in seen:
                seen.add(statement.casefold())
                items.append(Expectation(statement=statement, kind=kind, reason=item.reason))
    if not items:
        raise ValueError(f"{getattr(model, 'id', 'the model')} listed no expectations")
    return ExpectationSet(
        prompt=prompt,
        country=country,
        expectations=items,
        source=f"built by {getattr(model, 'id', '?')} (assets/prompts/expectations.txt)",
    )


def load_expectations(path: str | Path) -> ExpectationSet:
    """An expectations file (what ``refine expectations build --out`` writes, edited or
    not); ValueError names the file and the problem."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise ValueError(f"{path}: cannot read it ({err.strerror})") from None
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}: not JSON ({err.msg}, line {err.lineno})") from None
    from pydantic import ValidationError

    try:
        found = ExpectationSet.model_validate(data)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(x) for x in first["loc"]) or "the file"
        raise ValueError(f"{path}: {where}: {first['msg']}") from None
    if not found.expectations:
        raise ValueError(f"{path}: no expectations")
    return found


def question(statement: str) -> str:
    return f"Does this image show the following: {statement}?"


def met_share(checks: Sequence[ExpectationCheck], kind: str) -> float | None:
    """The share of the ``kind`` expectations met (:func:`metrics.expectations.met_share`)."""
    from metrics.expectations import met_share as share

    return share(c.met for c in checks if c.kind == kind)


def check_images(
    images: Sequence[Any], expectations: Sequence[Expectation], judge: Any
) -> list[ExpectationScore]:
    """Each image's yes-probability for every statement (one judge call per pair, sent
    at once where the judge allows), the met flags and the met shares per kind."""
    pairs = [(im, e) for im in images for e in expectations]
    probs = judge.yes_probability([p[0] for p in pairs], [question(p[1].statement) for p in pairs])
    out = []
    n = len(expectations)
    for k in range(len(images)):
        checks = [
            ExpectationCheck(statement=e.statement, kind=e.kind, p_yes=float(p), met=bool(p > MET))
            for e, p in zip(expectations, probs[k * n : (k + 1) * n], strict=True)
        ]
        out.append(
            ExpectationScore(
                checks=checks,
                explicit_met=met_share(checks, "explicit"),
                implicit_met=met_share(checks, "implicit"),
                judge=getattr(judge, "id", "?"),
                judge_mode=getattr(judge, "method", "logprobs"),
            )
        )
    return out


def missed_changes(score: ExpectationScore | None, limit: int) -> list[str]:
    """The editing changes for missed expectations, least likely first (implicit and
    explicit alike), at most ``limit``."""
    if not score or limit < 1:
        return []
    missed = sorted((c for c in score.checks if not c.met), key=lambda c: c.p_yes)
    return [f"Show that {c.statement[0].lower()}{c.statement[1:]}" for c in missed][:limit]
