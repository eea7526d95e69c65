"""Reference descriptors for activities and countries the bundled pack lacks.

Proposer-refiner: several language models each propose descriptors per dimension
(``assets/prompts/refs_propose.txt``); their union, de-duplicated, goes to one refiner
model that keeps the accurate, typical ones (``refs_refine.txt``); the refiner then lists
stereotype candidates (``stereotypes.txt``). Every model answer is cached on disk, keyed by
model id, prompt and answer schema, so the same request never costs twice. Built packs
are kept in the cache folder too, where ``refine run`` finds them again.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from metrics.descriptors import DIMENSIONS
from refine import usage
from refine.assets import prompt_template
from refine.backends.selection import Backends
from refine.backends.structured import dimension_help
from refine.io.files import atomic_write_text, cache_dir, slug
from refine.profiles import load_profile
from refine.records import DEFAULT_PROFILE, ReferencePack, option

log = logging.getLogger(__name__)
T = TypeVar("T", bound=BaseModel)
PROMPTS = ("refs_propose", "refs_refine", "stereotypes")


class Descriptors(BaseModel):
    setting: list[str] = Field(default_factory=list)
    objects: list[str] = Field(default_factory=list)
    attire: list[str] = Field(default_factory=list)
    interaction: list[str] = Field(default_factory=list)
    spatial: list[str] = Field(default_factory=list)


class Stereotypes(BaseModel):
    stereotypes: list[str] = Field(default_factory=list)


class LLMCache:
    """Language-model answers on disk, one JSON file per (model id, prompt, schema)."""

    def __init__(self, directory: str | Path | None = None) -> None:
        self.dir = Path(directory) if directory else cache_dir() / "llm"
        self.hits = 0
        self.misses = 0

    def key(
        self, model_id: str, prompt: str, schema: type[BaseModel], temperature: float | None = None
    ) -> str:
        parts: list[Any] = [model_id, prompt, schema.__name__, schema.model_json_schema()]
        if temperature is not None:  # (the model's own temperature: the keys kept before)
            parts.append(temperature)
        blob = json.dumps(parts, sort_keys=True)
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()

    def ask(self, model: Any, prompt: str, schema: type[T], temperature: float | None = None) -> T:
        """The model's answer (``temperature``: this request's, else the model's own),
        from the cache where it was asked before."""
        model_id = getattr(model, "id", type(model).__name__)
        key = self.key(model_id, prompt, schema, temperature)
        path = self.dir / key[:2] / f"{key}.json"
        if path.is_file():
            try:
                answer = schema.model_validate(json.loads(path.read_text("utf-8"))["answer"])
                usage.kept(model_id)  # under a bench's call budget, a call all the same
                self.hits += 1
                return answer
            except (ValueError, KeyError) as err:  # a damaged entry is asked again
                log.warning("ignoring unreadable cache entry %s (%s)", path, err)
        if temperature is None:
            answer = model.complete_json(prompt, schema)
        else:
            answer = model.complete_json(prompt, schema, temperature=temperature)
        self.misses += 1
        path.parent.mkdir(parents=True, exist_ok=True)
        record = {"model": model_id, "schema": schema.__name__, "prompt": prompt}
        if temperature is not None:
            record["temperature"] = temperature
            if not getattr(model, "sets_temperature", True):
                record["temperature_applied"] = False  # the model fixes its sampling
        record["answer"] = answer.model_dump(mode="json")
        atomic_write_text(path, json.dumps(record, indent=1, ensure_ascii=False))
        return answer


@dataclass
class BuildResult:
    pack: ReferencePack
    proposals: dict[str, dict[str, list[str]]]
    union: dict[str, list[str]]
    cached: int = 0
    asked: int = 0
    files: list[str] = field(default_factory=list)


def _dedupe(phrases: Sequence[str]) -> list[str]:
    seen, out = set(), []
    for p in phrases:
        p = " ".join(str(p).split()).strip(" .;,")
        if p and p.casefold() not in seen:
            seen.add(p.casefold())
            out.append(p)
    return out


def union_of(proposals: Sequence[dict[str, list[str]]]) -> dict[str, list[str]]:
    """Every proposed phrase once per dimension (case-insensitive), in proposal order."""
    return {d: _dedupe([p for prop in proposals for p in prop.get(d, [])]) for d in DIMENSIONS}


def build_references(
    activity: str,
    country: str,
    proposers: Sequence[Any],
    refiner: Any,
    cache: LLMCache | None = None,
    per_dimension: int | None = None,
    stereotypes: int | None = None,
    on_event: Callable[[dict[str, Any]], None] | None = None,
    prompts: str = "toolkit",
) -> BuildResult:
    """Reference descriptors and stereotype candidates from language models, with AHEaD's
    prompts (``ahead``: :mod:`refine.evaluate.refs_ahead`) or this toolkit's own
    (``toolkit``); :func:`refine.evaluate.reference_source.prompt_set` picks AHEaD's for
    the CULTIVate catalog's activities. ``per_dimension`` and ``stereotypes``: at most
    that many descriptors a dimension and stereotype candidates (None: the prompt set's
    own, :data:`COUNTS`)."""

    if not proposers:
        raise ValueError("at least one proposer model is needed")
    activity, country = " ".join(activity.split()), " ".join(country.split())
    if not activity or not country:
        raise ValueError("give an activity and a country")
    cache = cache or LLMCache()
    hits0, misses0 = cache.hits, cache.misses
    emit = on_event or (lambda event: None)
    if prompts not in PROMPT_SETS:
        raise ValueError(f"the prompts are one of {', '.join(PROMPT_SETS)}, not {prompts!r}")
    per_dimension = per_dimension or COUNTS[prompts][0]
    stereotypes = stereotypes or COUNTS[prompts][1]
    if prompts == "ahead":
        return _ahead(
            activity, country, proposers, refiner, cache, per_dimension, stereotypes, emit
        )
    common = {
        "activity": activity,
        "country": country,
        "dimension_help": dimension_help(DIMENSIONS),
        "dimension_keys": ", ".join(DIMENSIONS),
        "per_dimension": per_dimension,
    }
    proposals: dict[str, dict[str, list[str]]] = {}
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
        answer = cache.ask(model, prompt_template("refs_propose").format(**common), Descriptors)
        proposals[model_id] = {
            d: _dedupe(getattr(answer, d))[: per_dimension * 2] for d in DIMENSIONS
        }
    union = union_of(list(proposals.values()))
    if not any(union.values()):
        raise ValueError(f"the proposers ({', '.join(proposals)}) proposed no descriptors")
    listing = "\n".join(f"- {d}: {'; '.join(union[d]) or '(none)'}" for d in DIMENSIONS)
    emit({"type": "stage", "stage": "refine", "model": getattr(refiner, "id", "")})
    refined = cache.ask(
        refiner, prompt_template("refs_refine").format(**common, proposals=listing), Descriptors
    )
    descriptors = {d: _dedupe(getattr(refined, d))[:per_dimension] for d in DIMENSIONS}
    if not any(descriptors.values()):
        raise ValueError(f"the refiner {getattr(refiner, 'id', '')} kept no descriptors")
    emit({"type": "stage", "stage": "stereotypes", "model": getattr(refiner, "id", "")})
    found = cache.ask(
        refiner,
        prompt_template("stereotypes").format(
            activity=activity, country=country, count=stereotypes
        ),
        Stereotypes,
    )
    refiner_id = getattr(refiner, "id", type(refiner).__name__)
    source = (
        f"proposer-refiner: proposers {', '.join(proposals)}; refiner {refiner_id}; "
        f"prompts assets/prompts/{{{','.join(PROMPTS)}}}.txt"
    )
    pack = ReferencePack(
        activity=activity,
        country=country,
        descriptors=descriptors,
        stereotypes=_dedupe(found.stereotypes)[:stereotypes],
        source=source,
    )
    return BuildResult(
        pack, proposals, union, cached=cache.hits - hits0, asked=cache.misses - misses0
    )


PROMPT_SETS = ("ahead", "toolkit")
# (descriptors a dimension at most, stereotype candidates) of each prompt set: AHEaD asks
# its proposers and refiner for up to 10 (Tab. 15-21's "at most {max_items}") and its data
# lists 15 candidates a country (country_stereotype_candidates.json); the toolkit's own
# prompts keep shorter lists for a run's checklist
COUNTS = {"ahead": (10, 15), "toolkit": (8, 10)}


def _ahead(activity, country, proposers, refiner, cache, per_dimension, stereotypes, emit):
    from refine.evaluate.refs_ahead import PROMPTS as AHEAD
    from refine.evaluate.refs_ahead import build_ahead

    hits0, misses0 = cache.hits, cache.misses
    got = build_ahead(
        activity, country, proposers, refiner, cache, per_dimension, stereotypes, emit
    )
    if not any(got["union"].values()):
        raise ValueError(f"the proposers ({', '.join(got['proposals'])}) proposed no descriptors")
    if not any(got["descriptors"].values()):
        raise ValueError(f"the refiner {getattr(refiner, 'id', '')} kept no descriptors")
    refiner_id = getattr(refiner, "id", type(refiner).__name__)
    unset = [
        getattr(m, "id", type(m).__name__)
        for m in dict.fromkeys([*proposers, refiner])
        if not getattr(m, "sets_temperature", True)
    ]
    ignored = (
        f"; not applied on {', '.join(unset)}, which "
        f"{'fixes its' if len(unset) == 1 else 'fix their'} own sampling"
        if unset
        else ""
    )
    pack = ReferencePack(
        activity=activity,
        country=country,
        descriptors=got["descriptors"],
        stereotypes=_dedupe(got["stereotypes"])[:stereotypes],
        styles=got["styles"],
        source=(
            f"proposer-refiner, AHEaD's prompts (Tab. 15-21; temperatures 0.2 and 0.1"
            f"{ignored}): "
            f"proposers {', '.join(got['proposals'])}; refiner {refiner_id}; prompts "
            f"assets/prompts/{{{','.join(AHEAD)}}}.txt"
        ),
    )
    return BuildResult(
        pack,
        got["proposals"],
        got["union"],
        cached=cache.hits - hits0,
        asked=cache.misses - misses0,
    )


# -- built packs, found again ----------------------------------------------------------


def built_path(activity: str, country: str, directory: str | Path | None = None) -> Path:
    base = Path(directory) if directory else cache_dir() / "refs"
    return base / f"{slug(country, 30)}--{slug(activity, 80)}.json"


def save_built(result: BuildResult, directory: str | Path | None = None) -> Path:
    path = built_path(result.pack.activity, result.pack.country, directory)
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = result.pack.model_dump(mode="json")
    doc["proposals"] = result.proposals
    atomic_write_text(path, json.dumps(doc, indent=1, ensure_ascii=False))
    return path


def load_built(activity: str, country: str, directory: str | Path | None = None):
    """A pack built earlier for this activity and country, or None."""
    path = built_path(activity, country, directory)
    if not path.is_file():
        return None
    doc = json.loads(path.read_text("utf-8"))
    doc.pop("proposals", None)
    return ReferencePack.model_validate(doc)


def models_for(
    profile: str, proposers: Sequence[str] = (), refiner: str | None = None, backends: Any = None
):
    """The proposer and refiner language models: named ones, else the profile's ``[refs]``
    table, else the profile's ``llm`` backend; from ``backends`` (a
    :class:`refine.backends.selection.Backends`, its overrides and options) when given."""

    backends = backends or Backends(load_profile(profile))
    p = backends.profile
    llm = backends.names.get("llm") or p.backend("llm")
    names = list(proposers) or list(p.refs.get("proposers", [])) or [llm]
    refiner_name = refiner or p.refs.get("refiner") or llm
    return [backends.named("llm", n) for n in names], backends.named("llm", refiner_name)


class RefsBuild(BaseModel):
    """``refine refs build``'s options; :meth:`build` builds, caches and saves."""

    model_config = ConfigDict(extra="forbid")

    activity: str = option(
        help='An activity, e.g. "people repairing a bicycle".', flag="ACTIVITY", given="text"
    )
    country: str = option(help="A country, e.g. Peru.")
    profile: str = option(DEFAULT_PROFILE, "Profile whose [refs] models to use.")
    proposers: list[str] = option(
        help="A proposer llm (repeatable).", flag="--proposer", given="repeat",
        default_factory=list,
    )  # fmt: skip
    refiner: str | None = option(None, "The refiner llm.")
    per_dimension: int | None = option(
        None,
        "Descriptors a dimension at most (default: 10 with the ahead prompts, as the paper "
        "asks; 8 with the toolkit's).",
        ge=1,
        le=30,
    )
    stereotypes: int | None = option(
        None,
        "Stereotype candidates (default: 15 with the ahead prompts, as the authors' data "
        "lists; 10 with the toolkit's).",
        ge=1,
        le=50,
    )
    prompts: str = option(
        "auto",
        "ahead: the AHEaD paper's proposer and refiner prompts (Tab. 15-21, temperatures 0.2 "
        "and 0.1, style tags); toolkit: this toolkit's; auto: ahead for a CULTIVate activity, "
        "toolkit for any other.",
    )
    out: Path | None = option(None, "Also write the references JSON here.", given="path")

    def build(
        self, prompts: str, on_event: Callable[[dict], None] | None = None
    ) -> tuple[BuildResult, Path]:
        """The references built with ``prompts`` (``ahead`` or ``toolkit``: what
        :func:`refine.evaluate.reference_source.prompt_set` makes of ``self.prompts``), from
        the cache where asked before, and where they are saved (``out`` written too); a
        ValueError names the option to change."""
        try:
            proposers, refiner = models_for(self.profile, self.proposers, self.refiner)
        except ValueError as err:
            raise ValueError(f"--profile/--proposer/--refiner: {err}") from err
        result = build_references(
            self.activity, self.country, proposers, refiner, LLMCache(), self.per_dimension,
            self.stereotypes, on_event=on_event, prompts=prompts,
        )  # fmt: skip
        if self.out is not None:
            self.out.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(self.out, result.pack.model_dump_json(indent=2))
        return result, save_built(result)
