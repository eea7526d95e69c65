"""Structured answers from language and vision-language models: parse, validate, repair.

Models are asked for JSON; the answer is parsed and validated against a pydantic schema.
An invalid answer is sent back with the error and a repair prompt a bounded number of
times; after that :class:`InvalidModelOutput` is raised with the last raw answer.
"""

from __future__ import annotations

import functools
import json
import logging
import re
from collections.abc import Callable, Sequence
from typing import Literal, TypeVar

from pydantic import BaseModel, Field, ValidationError, create_model

from metrics.descriptors import normalise_phrases
from refine.assets import prompt_template

log = logging.getLogger(__name__)
T = TypeVar("T", bound=BaseModel)

_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)


class InvalidModelOutput(ValueError):
    """A model kept answering in a shape that could not be used."""

    def __init__(self, model: str, error: str, raw: str, attempts: int) -> None:
        shown = raw if len(raw) <= 2000 else raw[:2000] + " ..."
        super().__init__(
            f"{model} gave no valid answer in {attempts} attempt(s): {error}\nraw output:\n{shown}"
        )
        self.model, self.error, self.raw, self.attempts = model, error, raw, attempts


def extract_json(raw: str) -> str:
    """The JSON text inside an answer (strips code fences and text around one object)."""
    fenced = _FENCE.search(raw)
    text = fenced.group(1) if fenced else raw
    start = min((i for i in (text.find("{"), text.find("[")) if i >= 0), default=-1)
    if start < 0:
        return text.strip()
    closer = "}" if text[start] == "{" else "]"
    end = text.rfind(closer)
    return text[start : end + 1] if end > start else text[start:]


def parse_answer(raw: str, schema: type[T]) -> T:
    """Parse and validate ``raw``; raises ``ValueError`` with a short reason."""
    try:
        data = json.loads(extract_json(raw))
    except json.JSONDecodeError as err:
        raise ValueError(
            f"not valid JSON ({err.msg} at line {err.lineno} column {err.colno})"
        ) from err
    try:
        return schema.model_validate(data)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "answer"
        raise ValueError(f"{where}: {first['msg']}") from err


def ask_with_repair(
    ask: Callable[[str], str],
    prompt: str,
    schema: type[T],
    model: str,
    max_repairs: int = 2,
) -> T:
    """Ask ``prompt``; on an invalid answer ask again with the repair prompt, at most
    ``max_repairs`` times."""
    raw = ask(prompt)
    for attempt in range(max_repairs + 1):
        try:
            return parse_answer(raw, schema)
        except ValueError as err:
            if attempt == max_repairs:
                raise InvalidModelOutput(model, str(err), raw, attempt + 1) from None
            log.info("%s: invalid answer (%s); asking again", model, err)
            repair = prompt_template("repair").format(error=err, raw=raw)
            raw = ask(f"{prompt}\n\n{repair}")
    raise AssertionError("unreachable")


def descriptor_schema(dimensions: Sequence[str], max_per_dimension: int) -> type[BaseModel]:
    """A schema with one list of phrases per dimension (made once per shape)."""
    return _descriptor_schema(tuple(dimensions), int(max_per_dimension))


@functools.lru_cache(maxsize=64)
def _descriptor_schema(dimensions: tuple[str, ...], max_per_dimension: int) -> type[BaseModel]:
    fields = {
        d: (list[str], Field(default_factory=list, max_length=max_per_dimension * 3))
        for d in dimensions
    }
    return create_model("ObservedDescriptors", **fields)


def dimension_help(dimensions: Sequence[str]) -> str:
    """One bullet per dimension with its meaning (``assets/prompts/dimensions.txt``)."""
    help_lines = {
        line.split(":", 1)[0].strip(): line.strip()
        for line in prompt_template("dimensions").splitlines()
        if ":" in line
    }
    return "\n".join(f"- {help_lines.get(d, d)}" for d in dimensions)


def observation_prompt(dimensions: Sequence[str], max_per_dimension: int) -> str:
    return prompt_template("observe").format(
        dimension_help=dimension_help(dimensions),
        max_per_dimension=max_per_dimension,
        dimension_keys=", ".join(dimensions),
    )


def clean_descriptors(
    answer: BaseModel, dimensions: Sequence[str], max_per_dimension: int
) -> dict[str, list[str]]:
    """Stripped, de-duplicated phrases, at most ``max_per_dimension`` per dimension."""

    data = answer.model_dump()
    return {d: normalise_phrases(data.get(d, []))[:max_per_dimension] for d in dimensions}


# the observer's prompts: this toolkit's one request for every dimension, or AHEaD's one
# request per dimension (Tab. 22-27)
OBSERVER_PROMPTS = ("toolkit", "ahead")


def check_observer_prompts(prompts: str) -> str:
    if prompts not in OBSERVER_PROMPTS:
        raise ValueError(f"prompts is one of {', '.join(OBSERVER_PROMPTS)}, not {prompts!r}")
    return prompts


class Styled(BaseModel):
    token: str
    style: Literal["traditional", "modern", "neutral"] = "neutral"


class StyledDescriptors(BaseModel):
    """AHEaD's answer format (Tab. 15 and 22): descriptors with a style tag each."""

    descriptors: list[Styled] = Field(default_factory=list)


def ahead_observation_prompt(dimension: str) -> str:
    """AHEaD's observer prompt for one dimension as the paper gives it: its system prompt
    (Tab. 22), then the dimension's (Tab. 23-27), nothing added (the image goes with it;
    the taus the paper calibrated belong to these words)."""
    system = prompt_template("ahead_observe_system").strip()
    block = prompt_template(f"ahead_observe_{dimension}").strip()
    return f"{system}\n\n{block}"


def ahead_descriptors(
    ask_one: Callable[[str], BaseModel],
    dimensions: Sequence[str],
    max_per_dimension: int,
    workers: int = 1,
) -> dict[str, list[str]]:
    """The descriptors of every dimension, one AHEaD request each (``ask_one(prompt)``
    answers a :class:`StyledDescriptors`), up to ``workers`` at once; each answer's first
    ``max_per_dimension`` distinct phrases are kept (the paper sets no bound; the prompt
    does not ask for one, so a long answer is cut here)."""
    from refine.usage import at_once

    answers = at_once(lambda d: ask_one(ahead_observation_prompt(d)), dimensions, workers)
    out = {}
    for d, answer in zip(dimensions, answers, strict=True):
        phrases = [s.token for s in answer.descriptors]
        out[d] = normalise_phrases(phrases)[:max_per_dimension]
    return out


class ApiObserver:
    """What an API observer does with a transport's ``_ask_about(image, schema, purpose)``
    (a function of the prompt that returns the model's raw answer): list descriptors, for
    one image or several at once (``_each``), and answer a schema about an image."""

    id: str
    max_repairs: int
    _each: Callable
    _ask_about: Callable

    def describe(self, image, dimensions: Sequence[str], max_per_dimension: int = 10):
        if getattr(self, "prompts", "toolkit") == "ahead":
            ask_ahead = self._ask_about(image, StyledDescriptors, "observe")
            return ahead_descriptors(
                lambda p: ask_with_repair(
                    ask_ahead, p, StyledDescriptors, self.id, self.max_repairs
                ),
                dimensions,
                max_per_dimension,
                # a batch job's requests go together (a live observer asks in turn)
                len(dimensions) if getattr(self, "batched", False) else 1,
            )
        schema = descriptor_schema(dimensions, max_per_dimension)
        ask = self._ask_about(image, schema, "observe")
        prompt = observation_prompt(dimensions, max_per_dimension)
        answer = ask_with_repair(ask, prompt, schema, self.id, self.max_repairs)
        return clean_descriptors(answer, dimensions, max_per_dimension)

    def describe_many(self, images: Sequence, dimensions: Sequence[str], max_per_dimension=10):
        """:meth:`describe` for several images, up to ``concurrency`` requests at once."""
        return self._each(
            range(len(images)), lambda k: self.describe(images[k], dimensions, max_per_dimension)
        )

    def ask_json(self, image, prompt: str, schema: type[T]) -> T:
        """An answer about ``image`` validated against ``schema`` (a geo-tag, say)."""
        ask = self._ask_about(image, schema, "ask")
        return ask_with_repair(ask, prompt, schema, self.id, self.max_repairs)
