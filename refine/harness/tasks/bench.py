"""Benchmark mode: compare generators the way the AHEaD paper does, on a slice of the
bundled CULTIVate catalog.

Every generator draws ``images_per_prompt`` images (the same seeds) for every (activity,
country) prompt; one fixed scorer (the profile's observer, judge and embedders) observes
and scores them all, so generators are compared on equal terms. Per prompt: ALIGN, HAL,
EXAG and FAITH per image and their means, pooled ALIGN, DDIV and SDIV over the prompt's
images, the Vendi score of their image embeddings and its quality-weighted form (quality =
FAITH). Aggregates per generator and per generator and country come with 95% bootstrap
intervals over prompts; the first generator is compared with each other one on the same
prompts and seeds (mean FAITH difference, its interval, share of prompts improved).

A bench folder holds ``cells.jsonl`` (one line per generator and prompt, appended and
synced as each is done: a bench killed half-way goes on from the next cell with
``--resume``, and adding a generator reuses the cells done), the images, and the outputs
``bench.json``, ``rows.csv`` (one row per image, for pandas or an HF dataset) and
``bench.html`` (a self-contained leaderboard).
"""

from __future__ import annotations

import csv
import json
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from metrics.ahead import score_pooled
from metrics.catalog import (
    BENCH_EXPECTATIONS,
    BENCH_IMAGE,
    BENCH_PROMPT,
    HEADLINE,
    image_extras,
    label,
)
from metrics.stats import mean_interval
from metrics.vendi import quality_weighted, vendi_from_embeddings
from refine.assets import prompt_template
from refine.backends.lora import MARK, split_adapters
from refine.backends.selection import Backends
from refine.evaluate.assess import Assessor
from refine.evaluate.reference_source import ReferenceSource
from refine.evaluate.references import load_pack, suggest
from refine.harness.cells import Cell, CellFormat, CellStore
from refine.harness.engine import LOCAL, EngineOptions, MakerSpec
from refine.harness.task import CellTask, Summary, run_task
from refine.io.files import atomic_write_text
from refine.profiles import load_profile
from refine.records import variant_name


@dataclass(frozen=True)
class GeneratorSpec:
    """A generator as named on the command line: a backend name, optionally followed by
    LoRA adapters, ``diffusers:ID+lora=PATH[@SCALE]`` (repeatable), so a base model and
    the same model with an adapter are two generators of one bench."""

    label: str
    name: str
    loras: tuple[tuple[str, float], ...] = ()
    options: tuple[tuple[str, Any], ...] = ()  # a profile's generator options


def parse_generator(spec: str) -> GeneratorSpec:
    """``NAME`` or ``NAME+lora=PATH[@SCALE]...``, NAME a backend name (``prefix:model``) or
    a profile (its generator with the profile's options); raises ValueError naming the
    problem."""

    label = spec.strip()
    try:
        name, loras = split_adapters(label)
    except ValueError as err:
        raise ValueError(f"generator {err}") from None
    options: tuple[tuple[str, Any], ...] = ()
    if ":" not in name:  # a profile: its generator and that generator's options
        try:
            profile = load_profile(name)
        except (ValueError, OSError) as err:
            raise ValueError(
                f"generator {spec!r}: neither a backend name (prefix:model) nor a profile ({err})"
            ) from None
        options = tuple(sorted(profile.options.get("generator", {}).items()))
        name = profile.backend("generator")
    if "+" in name and not loras:
        raise ValueError(f"generator {spec!r}: adapters are written NAME{MARK}PATH[@SCALE]")
    if loras and not name.startswith("diffusers:"):
        raise ValueError(f"generator {spec!r}: LoRA adapters apply to diffusers: generators only")
    return GeneratorSpec(label, name, tuple(loras), options)


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


def activity_category(activity: str, country: str) -> str | None:
    """The CULTIVate category of an activity of a country in the bundled pack."""

    entry = load_pack().countries.get(country, {}).get("activities", {}).get(activity) or {}
    return entry.get("category")


def plan_prompts(
    countries: Sequence[str] = (),
    activities: Sequence[str] = (),
    sample: int | None = None,
    seed: int = 42,
    categories: Sequence[str] = (),
) -> list[tuple[str, str]]:
    """(activity, country) pairs the bundled pack holds reference descriptors for: of the
    countries named (default: every country with descriptors), the activities named
    (default: all of them) in the CULTIVate categories named (eating, greeting, dancing,
    concert, game, celebration, religious, wedding, funeral; default: all), then
    ``sample`` of each country's drawn with ``seed``."""

    pack = load_pack()
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


BENCH_CELLS = CellFormat(
    "cells.jsonl",
    inputs=(
        "generator",
        "activity",
        "country",
        "category",
        "prompt",
        "seeds",
        "tau",
        "expectations",
        "scorer",
    ),
    key=("generator", "activity", "country", "seeds"),
    data=("embeddings",),
)


class BenchStore(CellStore):
    """A bench folder: ``cells.jsonl`` appended cell by cell, images under ``images/``."""

    def __init__(self, folder: str | Path) -> None:
        super().__init__(folder, BENCH_CELLS)


def cell_key(record: dict[str, Any]) -> tuple[Any, ...]:
    """A bench cell's identity: generator, activity, country and seeds."""
    return BENCH_CELLS.key_of(record)


def make_generator(scorer: Any, label: str) -> Any:
    """The generator a bench names (see :func:`parse_generator`), on the scorer's device."""
    spec = parse_generator(label)
    extra: dict[str, Any] = dict(spec.options)
    if spec.loras:
        extra["loras"] = spec.loras
    return scorer.named("generator", spec.name, **extra)


def generate(scorer: Any, generator: Any, prompt: str, seeds: list[int]) -> list[Any]:
    """A generator's images of a prompt: API generators at once, a local pipeline one job
    at a time on the device."""
    if getattr(generator, "thread_safe", False):
        return generator.generate(prompt, seeds)
    with scorer.model_lock:
        return generator.generate(prompt, seeds)


def checked_generators(scorer: Any, labels: Sequence[str]) -> dict[str, Any]:
    """The generators a job names, each loaded (or checked with its API) before the first
    image is paid for."""
    generators = {label: make_generator(scorer, label) for label in labels}
    for generator in generators.values():
        check = getattr(generator, "verify", None) or getattr(generator, "load", None)
        if callable(check):
            check()
    return generators


class CellMaker:
    """One set of scoring models and generators that makes and scores bench cells in a
    bench folder (one per process: the local engine's, or each Ray worker's)."""

    def __init__(
        self,
        plan: BenchPlan,
        folder: str,
        backend_options: dict[str, dict[str, Any]] | None = None,
        instances: dict[str, Any] | None = None,
    ) -> None:

        plan.check()
        self.plan = plan
        self.store = BenchStore(folder)
        self.scorer = scorer = Backends(
            load_profile(plan.profile), plan.backends, backend_options, instances
        )
        self.tau, self.tau_source = scorer.tau(plan.tau)
        # every model loads (or is checked with its API) before the first image is paid for
        scorer.preflight(
            ["observer", "judge", "text_embedder", "image_embedder"]
            + (["llm"] if plan.expectations else [])
        )
        self.generators = checked_generators(scorer, plan.generators)
        self.assessor = Assessor(scorer)
        self.seeds = [plan.seed + i for i in range(plan.images_per_prompt)]
        self.scoring = {
            r: n
            for r, n in scorer.ids().items()
            if r in ("observer", "judge", "text_embedder", "image_embedder")
        }

    def describe(self) -> tuple[float, str, dict[str, str]]:
        """(tau, where it comes from, the scoring models' ids): what a cell is scored with."""
        return self.tau, self.tau_source, self.scoring

    def make(self, job: tuple[str, str, str], tell: Any = None) -> Cell:
        """Generate, save and score the images of one (generator, activity, country) job."""

        plan, scorer, seeds, store = self.plan, self.scorer, self.seeds, self.store
        gen_name, act, country = job
        began = time.perf_counter()
        refs = ReferenceSource.default().find(act, country).pack
        prompt = prompt_template("generate").strip().format(activity=act, country=country)
        images = generate(scorer, self.generators[gen_name], prompt, seeds)
        files = []
        for s, image in zip(seeds, images, strict=True):
            path = store.image_path(gen_name, act, country, s)
            path.parent.mkdir(parents=True, exist_ok=True)
            image.save(path)
            files.append(str(path.relative_to(store.dir)))
        generated = time.perf_counter()
        assessed = self.assessor.assess_many(images, refs, self.tau)
        observed = [a.observed for a in assessed]
        with scorer.using("text_embedder") as embedder:
            pooled = score_pooled(refs.descriptors, observed, embedder, self.tau)
        with scorer.using("image_embedder") as embedder:
            emb = embedder.encode_images(images).float().cpu().numpy()
        faiths = [a.scores.faith for a in assessed]
        vendi = vendi_from_embeddings(emb)
        checked: list[Any] = [None] * len(images)
        if plan.expectations:
            from refine.evaluate.expectations import build_expectations, check_images
            from refine.evaluate.refs_build import LLMCache

            with scorer.using("llm") as llm:
                built = build_expectations(prompt, country, llm, LLMCache())
            with scorer.using("judge") as judge:
                checked = check_images(images, built.expectations, judge)
        return Cell(
            key=(gen_name, act, country, tuple(seeds)),
            inputs={
                "generator": gen_name,
                "activity": act,
                "country": country,
                "category": activity_category(act, country),
                "prompt": prompt,
                "seeds": seeds,
                "tau": self.tau,
                "expectations": plan.expectations,
                "scorer": self.scoring,
            },
            outputs={
                "pooled_align": pooled.pooled.align,
                "ddiv": pooled.ddiv,
                "sdiv": pooled.sdiv,
                "vendi": vendi,
                "qvendi": quality_weighted(vendi, faiths),
            },
            images=[
                _image_record(f, s, a, ex)
                for f, s, a, ex in zip(files, seeds, assessed, checked, strict=True)
            ],
            data={"embeddings": emb.tolist()},
            timings={
                "generate_s": generated - began,
                "score_s": time.perf_counter() - generated,
            },
        )


def _image_record(file: str, seed: int, assessed: Any, checked: Any) -> dict[str, Any]:
    scores = assessed.scores
    record = {
        "file": file,
        "seed": seed,
        "observed": assessed.observed,
        **{m: scores.value(m) for m in BENCH_IMAGE},
        "exag_variant": scores.variants.get("exag"),
        **{m: scores.value(m) for m in image_extras()},
    }
    if checked is not None:
        record["explicit_met"] = checked.explicit_met
        record["implicit_met"] = checked.implicit_met
        record["expectations"] = [c.model_dump() for c in checked.checks]
    return record


class BenchTask(CellTask):
    """A bench on the harness: one cell per generator and prompt."""

    name = "bench"
    what = "the bench folder (--out)"
    form = BENCH_CELLS

    def __init__(
        self,
        plan: BenchPlan,
        out: str | Path,
        backend_options: dict[str, dict[str, Any]] | None = None,
        emit: Callable[[str], None] | None = None,
    ) -> None:
        plan.check()
        super().__init__(out, emit)
        self.plan = plan
        self.backend_options = backend_options or {}
        self.seeds = [plan.seed + i for i in range(plan.images_per_prompt)]

    def maker(self) -> MakerSpec:
        return MakerSpec(
            CellMaker,
            {"plan": self.plan, "folder": self.folder, "backend_options": self.backend_options},
        )

    def jobs(self) -> list[tuple[str, str, str]]:
        return [(g, a, c) for g in self.plan.generators for a, c in self.plan.prompts]

    def job_key(self, job: tuple[str, str, str]) -> tuple[Any, ...]:
        return (*job, tuple(self.seeds))

    def label(self, job: tuple[str, str, str]) -> str:
        return f"{job[0]}: {job[1]} ({job[2]})"

    def reusable(self, cell: Cell, scoring: Any) -> bool:
        """Made with the same seeds and scored the same way."""
        tau, _, scorer = scoring
        given = cell.inputs
        return (
            given["seeds"] == self.seeds
            and given.get("tau") == tau
            and given.get("scorer") == scorer
            and bool(given.get("expectations")) == self.plan.expectations
        )

    def progress(self, cell: Cell) -> str:
        given = cell.inputs
        return (
            f"{given['generator']}: {given['activity']} ({given['country']}): "
            f"{label(HEADLINE)} {cell.mean(HEADLINE):.3f}, Vendi {cell.outputs['vendi']:.2f}"
        )

    def summarise(self, cells: list[Cell], scoring: Any) -> Summary:
        plan = self.plan
        tau, tau_source, scorer = scoring
        for c in cells:  # cells made before categories were kept
            if c.inputs.get("category") is None:
                c.inputs["category"] = activity_category(c.inputs["activity"], c.inputs["country"])
        summary = summarise(cells, plan.generators, seed=plan.seed)
        summary.update(
            {
                "profile": plan.profile,
                "scorer": scorer,
                "tau": tau,
                "tau_source": tau_source,
                "images_per_prompt": plan.images_per_prompt,
                "seeds": self.seeds,
                "prompts": [list(p) for p in plan.prompts],
            }
        )
        records = [c.record() for c in cells]
        write_outputs(self.store, summary, records)
        self.emit(f"written: {self.store.dir / 'bench.json'}, rows.csv")
        return Summary(summary, records)


def run_bench(
    plan: BenchPlan,
    out: str | Path,
    backend_options: dict[str, dict[str, Any]] | None = None,
    instances: dict[str, Any] | None = None,
    on_event: Callable[[str], None] | None = None,
    engine: EngineOptions = LOCAL,
) -> Summary:
    """Make, score and summarise every cell of ``plan`` not done yet in ``out``; returns
    the summary (also written as bench.json and rows.csv; its page is
    :func:`refine.present.report.bench.write_bench_page`). ``engine.workers`` cells at a time, on
    ``engine`` (see :func:`refine.harness.engine.open_engine`); the summary is the same for
    any engine and number of workers."""
    return run_task(
        BenchTask(plan, out, backend_options, on_event),
        engine=engine,
        instances=instances,
        on_event=on_event,
    )


# -- statistics ----------------------------------------------------------------------


def _mean(values: Sequence[float | None]) -> float | None:
    got = [v for v in values if v is not None]
    return sum(got) / len(got) if got else None


def cell_mean(cell: dict[str, Any], metric: str) -> float | None:
    """A prompt's mean of a per-image metric (or its prompt-level value), from its line."""
    if metric in BENCH_PROMPT:
        return cell.get(metric)
    return _mean([im.get(metric) for im in cell["images"]])


def summarise(cells: list[Cell], generators: Sequence[str], seed: int = 42) -> dict[str, Any]:
    """Per generator and per generator and country: each metric's mean over prompts
    (per-image metrics averaged within a prompt first) and its bootstrap interval; the
    first generator against each other one on their common prompts."""
    out: dict[str, Any] = {"generators": {}, "countries": {}, "categories": {}, "paired": []}
    for g in generators:
        mine = [c for c in cells if c.inputs["generator"] == g]
        out["generators"][g] = _stats(mine, seed)
        by_country: dict[str, Any] = {}
        for country in sorted({c.inputs["country"] for c in mine}):
            by_country[country] = _stats([c for c in mine if c.inputs["country"] == country], seed)
        out["countries"][g] = by_country
        by_category: dict[str, Any] = {}
        for cat in sorted({c.inputs.get("category") or "" for c in mine}):
            if cat:
                same = [c for c in mine if c.inputs.get("category") == cat]
                by_category[cat] = _stats(same, seed)
        out["categories"][g] = by_category
    base = generators[0] if generators else None
    for other in generators[1:]:
        a, b = _headline_by_prompt(cells, base), _headline_by_prompt(cells, other)
        common = sorted(k for k in a if k in b and a[k] is not None and b[k] is not None)
        diffs = [b[k] - a[k] for k in common]
        out["paired"].append(
            {
                "base": base,
                "other": other,
                "metric": HEADLINE,
                "prompts": len(common),
                "mean_difference": _mean(diffs),
                "interval": mean_interval(diffs, seed),
                "share_improved": (sum(d > 0 for d in diffs) / len(diffs)) if diffs else None,
            }
        )
    return out


def _headline_by_prompt(cells: list[Cell], generator: str | None) -> dict[tuple[str, str], Any]:
    return {
        (c.inputs["activity"], c.inputs["country"]): c.mean(HEADLINE)
        for c in cells
        if c.inputs["generator"] == generator
    }


def _stats(cells: list[Cell], seed: int) -> dict[str, Any]:
    row: dict[str, Any] = {"prompts": len(cells), "images": sum(len(c.images) for c in cells)}
    extras = image_extras()
    for metric in (*BENCH_IMAGE, *extras, *BENCH_PROMPT, *BENCH_EXPECTATIONS):
        values = [c.mean(metric) for c in cells]
        optional = (*extras, *BENCH_EXPECTATIONS)
        if metric in optional and all(v is None for v in values):
            continue  # a bench without expectations, a scorer that reads no quality
        row[metric] = {"mean": _mean(values), "interval": mean_interval(values, seed)}
    return row


# -- outputs -------------------------------------------------------------------------


def row_fields() -> tuple[str, ...]:
    """rows.csv's columns: the image's and prompt's, then the metrics in catalog order."""
    return (
        "generator",
        "activity",
        "country",
        "category",
        "seed",
        "file",
        *BENCH_IMAGE,
        "exag_variant",
        *image_extras(),
        *BENCH_PROMPT,
        *BENCH_EXPECTATIONS,
    )


def _blank(value: Any) -> Any:
    return "" if value is None else value


def write_outputs(store: CellStore, summary: dict[str, Any], cells: list[dict[str, Any]]) -> None:
    """bench.json and rows.csv (one row per image) from the summary and the cells' lines."""
    import io

    atomic_write_text(store.dir / "bench.json", json.dumps(summary, indent=1))
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=row_fields(), lineterminator="\n")
    writer.writeheader()
    for c in cells:
        for im in c["images"]:
            writer.writerow(
                {
                    "generator": c["generator"],
                    "activity": c["activity"],
                    "country": c["country"],
                    "category": c.get("category") or "",
                    **{k: im[k] for k in ("seed", "file", *BENCH_IMAGE)},
                    # by name, also for cells written when variants were said in words
                    "exag_variant": _blank(variant_name(im.get("exag_variant"))),
                    **{k: _blank(im.get(k)) for k in image_extras()},
                    **{k: c[k] for k in BENCH_PROMPT},
                    **{k: im.get(k, "") for k in BENCH_EXPECTATIONS},
                }
            )
    atomic_write_text(store.dir / "rows.csv", buf.getvalue())
