"""How a bench's plan is read: the generators, and the (activity, country) prompts of the
bundled CULTIVate catalog it runs, by country, activity, category and sample."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from refine.evaluate.reference_source import catalog
from refine.evaluate.references import suggest
from refine.harness.generators import parse_generator


@dataclass
class BenchPlan:
    generators: list[str]  # generator names ("gemini:...", "diffusers:...+lora=PATH@0.8")
    prompts: list[tuple[str, str]]  # (activity, country)
    images_per_prompt: int = 2
    seed: int = 42
    tau: float | None = None  # None: the scorer profile's
    profile: str = "gemini"
    backends: dict[str, str] = field(default_factory=dict)  # the scorer's overrides
    # also list each prompt's cultural expectations (the scorer's llm, cached) and check
    # them on every image (the judge)
    expectations: bool = False
    # the baselines scored beside FAITH on every image (the catalog's group "baseline");
    # CLIPScore costs no model call
    baselines: tuple[str, ...] = ("clipscore",)
    # checkpoints in place of the baselines' own, as NAME=WHERE (--baseline-model)
    baseline_models: tuple[str, ...] = ()
    # the observer's prompts: the toolkit's one request for every dimension, or AHEaD's
    # one per dimension (Tab. 22-27), as the AHEaD recipes run it
    observer_prompts: str = "toolkit"
    # a recipe's settings of its generators (by name): steps, guidance, size, negative
    # prompt (refine.harness.generators.SETTINGS)
    generator_settings: dict[str, dict[str, Any]] = field(default_factory=dict)

    def check(self) -> None:
        if not self.generators:
            raise ValueError("name at least one generator")
        if len(set(self.generators)) != len(self.generators):
            raise ValueError("a generator is named twice")
        for spec in self.generators:
            parse_generator(spec)
        if not self.prompts:
            raise ValueError("no prompts: the countries and activities given leave none")
        if self.images_per_prompt < 1:
            raise ValueError("images per prompt must be at least 1")
        if self.observer_prompts not in ("toolkit", "ahead"):
            raise ValueError(f"observer prompts: toolkit or ahead, not {self.observer_prompts!r}")
        from refine.evaluate.baseline_models import parse_baseline_models

        parse_baseline_models(self.baseline_models)

    def checkpoints(self) -> dict[str, str]:
        """The checkpoint of each asked-for baseline that has one, in words: what its cells
        were scored with."""
        from refine.evaluate.baseline_models import CHECKPOINTS, checkpoint, parse_baseline_models

        given = parse_baseline_models(self.baseline_models)
        return {n: checkpoint(n, given).describe() for n in CHECKPOINTS if n in self.baselines}


def activity_category(activity: str, country: str) -> str | None:
    """The CULTIVate category of an activity of a country in the bundled pack."""

    entry = catalog()[0].countries.get(country, {}).get("activities", {}).get(activity) or {}
    return entry.get("category")


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
    out = []
    for key in keys:
        for act, entry in pack.countries[key]["activities"].items():
            if (
                entry.get("descriptors")
                and (not wanted or act.casefold() in wanted)
                and (not cats or str(entry.get("category", "")).casefold() in cats)
            ):
                out.append((act, key))
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
