"""How a bench's plan is read: the generators, and the (activity, country) prompts of the
bundled CULTIVate catalog it runs, by country, activity, category and sample."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import Field, model_validator

from metrics.ahead import TAU_RANGE
from refine.evaluate.reference_source import activity_category, catalog  # noqa: F401 (its users)
from refine.evaluate.references import suggest
from refine.harness.plan import (
    BACKENDS,
    MAX_IMAGES_PER_PROMPT,
    PROFILE,
    PROMPTS,
    Backends,
    Baselines,
    Checkpoints,
    Generators,
    Plan,
    Prompts,
    option,
    profile_generator,
)


class PromptPlan(Plan):
    """A plan over (activity, country) prompts: given as ``prompts``, or chosen by country,
    activity, category and a sample per country (:func:`plan_prompts`, drawn with the
    plan's seed) as the command line gives them."""

    countries: list[str] = option(
        help='Countries, e.g. "Iran,India" (default: all with references).',
        given="list",
        default_factory=list,
    )
    activity: list[str] = option(
        help="An activity (repeatable; default: all with references).",
        given="repeat",
        default_factory=list,
    )
    category: list[str] = option(
        help="An activity category (repeatable): eating, greeting, dancing, concert, game, "
        "celebration, religious, wedding, funeral (default: all).",
        given="repeat",
        default_factory=list,
    )
    sample: int | None = option(None, "Draw this many prompts of each country.", ge=1)
    prompts: Prompts = PROMPTS  # (activity, country)

    @model_validator(mode="before")
    @classmethod
    def _chosen(cls, data: Any) -> Any:
        if not isinstance(data, dict) or "prompts" in data:
            return data
        seed = data.get(
            "seed", cls.model_fields["seed"].default if "seed" in cls.model_fields else 0
        )
        try:
            prompts = plan_prompts(
                data.get("countries") or (),
                data.get("activity") or (),
                data.get("sample"),
                seed if isinstance(seed, int) else 0,
                data.get("category") or (),
            )
        except ValueError as err:
            raise ValueError(f"--countries/--activity/--category: {err}") from err
        return {**data, "prompts": prompts}


class BenchPlan(PromptPlan):
    """Every generator on every prompt, the same seeds, one scorer; a generator named twice
    or no prompt is refused here, for every front."""

    positional = ("generators", "prompts")
    recipe_reader = "refine.harness.tasks.bench.recipe:bench_plan"

    # generator names ("gemini:...", "diffusers:...+lora=PATH@0.8")
    generators: Generators = option(
        help="A generator to compare (once per generator; default: the profile's).",
        flag="--generator",
        given="repeat",
    )
    images_per_prompt: int = option(
        2, "Images per prompt, seeds seed to seed+N-1.", ge=1, le=MAX_IMAGES_PER_PROMPT
    )
    seed: int = option(42, "The first seed.", ge=0, le=2**32 - 1)
    tau: float | None = option(
        None,
        "Match threshold on cosine similarity (default: the profile's, for its observer).",
        ge=TAU_RANGE[0],
        le=TAU_RANGE[1],
    )
    profile: str = PROFILE
    backends: Backends = BACKENDS  # the scorer's overrides
    # also list each prompt's cultural expectations (the scorer's llm, cached) and check
    # them on every image (the judge)
    expectations: bool = option(
        False,
        "Also list each prompt's cultural expectations (the profile's llm, cached) and check "
        "them on every image (explicit_met, implicit_met).",
    )
    # the baselines scored beside FAITH on every image (the catalog's group "baseline");
    # CLIPScore costs no model call
    baselines: Baselines = option(
        ("clipscore",),
        "Baselines to score beside FAITH, comma-separated (clipscore, pickscore, hpsv2, cure, "
        "caire_probe, imagereward, vqascore, judge_align, judge_hal, vie_sc, vie_overall, "
        "tifa, soft_tifa; all; none). clipscore costs no call; pickscore, hpsv2, cure, "
        "caire_probe and imagereward load checkpoints of their own; the judge baselines cost "
        "one judge call an image each (k where the judge samples); tifa one language-model "
        "call a prompt and one judge call a question (a recipe: its own).",
        given="list",
    )
    # checkpoints in place of the baselines' own, as NAME=WHERE
    baseline_models: Checkpoints = option(
        help="NAME=WHERE: a local folder or file, another hub checkpoint or an embedder "
        "(clip:ARCH/PATH, hfclip:ID, siglip:ID) in place of a baseline's own (pickscore, "
        "hpsv2, cure, caire_probe, imagereward; hpsv2=v2.1 for HPS v2.1). Repeatable.",
        flag="--baseline-model",
        given="repeat",
        default_factory=tuple,
    )
    # the observer's prompts: the toolkit's one request for every dimension, or AHEaD's
    # one per dimension (Tab. 22-27), as the AHEaD recipes run it
    observer_prompts: Literal["toolkit", "ahead"] = "toolkit"
    # a recipe's settings of its generators (by name): steps, guidance, size, negative
    # prompt (refine.harness.generators.SETTINGS)
    generator_settings: dict[str, dict[str, Any]] = Field(default_factory=dict)

    _generators_given = model_validator(mode="before")(profile_generator)

    def checkpoints(self) -> dict[str, str]:
        """The checkpoint of each asked-for baseline that has one, in words: what its cells
        were scored with."""
        from refine.evaluate.baseline_models import CHECKPOINTS, checkpoint, parse_baseline_models

        given = parse_baseline_models(self.baseline_models)
        return {n: checkpoint(n, given).describe() for n in CHECKPOINTS if n in self.baselines}


def _named(pack: Any, keys: list[str], wanted: set[str], cats: set[str]) -> list[Any]:
    """(activity, country, has descriptors) of the pack's pairs the selection names."""
    return [
        (act, key, bool(entry.get("descriptors")))
        for key in keys
        for act, entry in pack.countries[key]["activities"].items()
        if (not wanted or act.casefold() in wanted)
        and (not cats or str(entry.get("category", "")).casefold() in cats)
    ]


def shortfall(
    countries: Sequence[str] = (),
    activities: Sequence[str] = (),
    categories: Sequence[str] = (),
    sample: int | None = None,
) -> str | None:
    """What a selection names that has no reference descriptors here (the bundled pack has
    six of CULTIVate's 16 countries), in words with the fetch that completes it; or None."""
    pack = catalog()[0]
    keys = [k for k in (pack.country_key(n) for n in countries) if k] or list(pack.countries)
    wanted = {a.casefold() for a in activities}
    named = _named(pack, keys, wanted, {c.casefold() for c in categories})
    have = [(a, k) for a, k, described in named if described]
    if len(have) == len(named):
        return None
    run = {k for _, k in have}
    none = [k for k in keys if k not in run]

    def prompts(pairs: list[Any]) -> int:  # with ``sample`` of each country's drawn
        counts = [sum(p[1] == k for p in pairs) for k in keys]
        return sum(min(n, sample) if sample is not None else n for n in counts)

    said = f"{len(run)} of the {len(keys)} countries named run ({prompts(have)} of "
    said += f"{prompts(named)} prompts)"
    if none:
        said += f": {', '.join(none)} have no reference descriptors here"
    return (
        f"{said}; `refine data fetch ahead` fetches the paper's descriptors for every "
        "CULTIVate country and activity"
    )


def plan_prompts(
    countries: Sequence[str] = (),
    activities: Sequence[str] = (),
    sample: int | None = None,
    seed: int = 42,
    categories: Sequence[str] = (),
) -> list[tuple[str, str]]:
    """(activity, country) pairs with reference descriptors (the bundled pack's, or those
    of a pack of the data directory: :func:`refine.evaluate.reference_source.catalog`): of the
    countries named (default: every country with descriptors), the activities named
    (default: all of them) in the CULTIVate categories named (eating, greeting, dancing,
    concert, game, celebration, religious, wedding, funeral; default: all), then
    ``sample`` of each country's drawn with ``seed``."""

    pack = catalog()[0]
    known = {
        str(e.get("category", "")).casefold()
        for c in pack.countries.values()
        for e in c["activities"].values()
    }
    cats = {c.casefold() for c in categories}
    unknown = sorted(cats - known)
    if unknown:
        raise ValueError(
            f"no activity category {unknown[0]!r} (categories: {', '.join(sorted(known - {''}))})"
        )
    keys = []
    for name in countries:
        key = pack.country_key(name)
        if key is None:
            raise ValueError(
                f"the pack has no country {name!r}{suggest(name, list(pack.countries))} "
                f"(countries: {', '.join(pack.countries)})"
            )
        keys.append(key)
    if not keys:
        keys = list(pack.countries)
    wanted = {a.casefold() for a in activities}
    out = [(a, k) for a, k, described in _named(pack, keys, wanted, cats) if described]
    if not out and cats:
        raise ValueError(
            f"no activity with reference descriptors in {', '.join(sorted(cats))} "
            f"for {', '.join(keys)}"
        )
    if wanted:
        found = {a.casefold() for a, _ in out}
        missing = sorted(wanted - found)
        if missing:
            raise ValueError(
                f"no reference descriptors for {missing[0]!r} in {', '.join(keys)}; "
                "`refine refs list --country C` lists the activities"
            )
    if sample is not None:  # per country, so that each country is drawn from
        draw = random.Random(seed)
        drawn = []
        for key in keys:
            theirs = [p for p in out if p[1] == key]
            drawn += draw.sample(theirs, sample) if sample < len(theirs) else theirs
        out = sorted(drawn, key=lambda p: (p[1], p[0]))
    return out
