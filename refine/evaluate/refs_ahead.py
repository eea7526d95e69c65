"""Reference descriptors the way AHEaD builds them (``refine refs build --prompts ahead``,
the default for CULTIVate activities): each proposer is asked once per dimension with
the paper's system prompt and that dimension's prompt (Tab. 15-20) at temperature 0.2;
their candidates, de-duplicated, go per dimension to the refiner with the paper's refiner
prompt (Tab. 21) at temperature 0.1; every descriptor carries its style tag
(traditional, modern or neutral). The stereotype candidates come from the paper's
exaggerated-elements prompt at the refiner's temperature, as a JSON list where the paper
asks for one line with "|" between the phrases (the same phrases, in a form every
backend validates)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal

from pydantic import BaseModel, Field

from metrics.descriptors import DIMENSIONS
from refine.assets import prompt_template

PROPOSER_TEMPERATURE = 0.2  # AHEaD A.4
REFINER_TEMPERATURE = 0.1
# the paper's names of the dimensions, as its refiner prompt is given them
DIMENSION_NAMES = {
    "setting": "Setting & Background",
    "objects": "Objects",
    "attire": "Attire",
    "interaction": "Interaction & Gesture",
    "spatial": "Spatial Arrangement",
}
PROMPTS = (
    "ahead_propose_system",
    *(f"ahead_propose_{d}" for d in DIMENSIONS),
    "ahead_refine",
    "ahead_stereotypes",
)


class Styled(BaseModel):
    token: str
    style: Literal["traditional", "modern", "neutral"]


class StyledDescriptors(BaseModel):
    descriptors: list[Styled] = Field(default_factory=list)


class Stereotypes(BaseModel):
    stereotypes: list[str] = Field(default_factory=list)


def _clean(items: Sequence[Styled]) -> list[tuple[str, str]]:
    """(phrase, style) once per phrase (case-insensitive), in order."""
    seen, out = set(), []
    for s in items:
        phrase = " ".join(str(s.token).split()).strip(" .;,")
        if phrase and phrase.casefold() not in seen:
            seen.add(phrase.casefold())
            out.append((phrase, s.style))
    return out


def build_ahead(
    activity: str,
    country: str,
    proposers: Sequence[Any],
    refiner: Any,
    cache: Any,
    per_dimension: int = 8,
    stereotypes: int = 10,
    emit: Callable[[dict[str, Any]], None] = lambda event: None,
) -> dict[str, Any]:
    """The proposals, their union, the refined descriptors with their styles and the
    stereotype candidates of ``activity`` in ``country``."""
    concept = f"{activity} in {country}"
    system = prompt_template("ahead_propose_system").strip()
    proposals: dict[str, dict[str, list[str]]] = {}
    styles: dict[str, str] = {}
    for k, model in enumerate(proposers):
        model_id = getattr(model, "id", type(model).__name__)
        emit(
            {
                "type": "stage",
                "stage": "propose",
                "model": model_id,
                "n": k + 1,
                "of": len(proposers),
            }
        )
        proposals[model_id] = {}
        for d in DIMENSIONS:
            asked = (
                prompt_template(f"ahead_propose_{d}")
                .strip()
                .format(max_items=per_dimension, concept=concept)
            )
            answer = cache.ask(
                model, f"{system}\n\n{asked}", StyledDescriptors, PROPOSER_TEMPERATURE
            )
            got = _clean(answer.descriptors)[:per_dimension]
            proposals[model_id][d] = [p for p, _ in got]
            for p, s in got:
                styles.setdefault(p.casefold(), s)
    union = {
        d: list(dict.fromkeys(p for prop in proposals.values() for p in prop.get(d, [])))
        for d in DIMENSIONS
    }
    emit({"type": "stage", "stage": "refine", "model": getattr(refiner, "id", "")})
    descriptors: dict[str, list[str]] = {}
    kept_styles: dict[str, str] = {}
    for d in DIMENSIONS:
        if not union[d]:
            descriptors[d] = []
            continue
        listing = "; ".join(f"{p} ({styles.get(p.casefold(), 'neutral')})" for p in union[d])
        prompt = (
            prompt_template("ahead_refine")
            .strip()
            .format(
                max_items=per_dimension,
                prompt=activity,
                country=country,
                dimension=DIMENSION_NAMES[d],
                candidate_descriptors=listing,
            )
        )
        refined = cache.ask(refiner, prompt, StyledDescriptors, REFINER_TEMPERATURE)
        got = _clean(refined.descriptors)[:per_dimension]
        descriptors[d] = [p for p, _ in got]
        kept_styles.update({p: s for p, s in got})
    emit({"type": "stage", "stage": "stereotypes", "model": getattr(refiner, "id", "")})
    found = cache.ask(
        refiner,
        prompt_template("ahead_stereotypes")
        .strip()
        .format(num_elements=stereotypes, concept=activity, country=country),
        Stereotypes,
        REFINER_TEMPERATURE,
    )
    return {
        "proposals": proposals,
        "union": union,
        "descriptors": descriptors,
        "styles": kept_styles,
        "stereotypes": found.stereotypes,
    }
