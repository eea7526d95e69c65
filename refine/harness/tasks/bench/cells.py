"""How a bench cell is made: a generator's images of one (activity, country) prompt,
generated, saved and scored by the bench's one scorer (see
:mod:`refine.harness.tasks.bench.task`)."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

from metrics.ahead import score_pooled
from metrics.catalog import BENCH_IMAGE, BENCH_PROMPT, image_extras, prompt_values
from refine.assets import prompt_template
from refine.backends.selection import Backends
from refine.evaluate.assess import scoring_assessor
from refine.evaluate.baselines import needs_llm
from refine.evaluate.reference_source import ReferenceSource, activity_category
from refine.harness.cells import Cell, CellFormat, CellStore
from refine.harness.generators import checked_generators, generate
from refine.harness.tasks.bench.plan import BenchPlan
from refine.harness.tasks.bench.top_up import RESCORE, judged_record, why_missing
from refine.profiles import load_profile

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
        "baselines",
        "baseline_models",
        "photos",
        "scorer",
        "rescored",  # a rescored bench's cell: what was recomputed, and from what
        "generator_settings",  # a recipe's settings it drew with (absent: none)
    ),
    key=("generator", "activity", "country", "seeds"),
    data=("embeddings",),
    bulky=("embeddings",),
)


class BenchStore(CellStore):
    """A bench folder: ``cells.jsonl`` appended cell by cell, images under ``images/``."""

    def __init__(self, folder: str | Path) -> None:
        super().__init__(folder, BENCH_CELLS)


def cell_key(record: dict[str, Any]) -> tuple[Any, ...]:
    """A bench cell's identity: generator, activity, country and seeds."""
    return BENCH_CELLS.key_of(record)


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

        self.plan = plan
        self.store = BenchStore(folder)
        options = with_observer_prompts(backend_options, plan.observer_prompts)
        self.scorer = scorer = Backends(
            load_profile(plan.profile), plan.backends, options, instances
        )
        self.tau, self.tau_source = scorer.tau(plan.tau)
        # every model loads (or is checked with its API) before the first image is paid for
        scorer.preflight(
            ["observer", "judge", "text_embedder", "image_embedder"]
            + (["llm"] if plan.expectations or needs_llm(plan.baselines) else [])
        )
        self.generators = checked_generators(scorer, plan.generators, plan.generator_settings)

        self.assessor = scoring_assessor(scorer, plan.baselines, plan.baseline_models)
        self.seeds = [plan.seed + i for i in range(plan.images_per_prompt)]
        self.scoring = {
            r: n
            for r, n in scorer.ids().items()
            if r in ("observer", "judge", "text_embedder", "image_embedder")
        }
        if plan.observer_prompts != "toolkit":  # cells observed otherwise are others
            self.scoring["observer_prompts"] = plan.observer_prompts

    def describe(self) -> tuple[float, str, dict[str, str]]:
        """(tau, where it comes from, the scoring models' ids): what a cell is scored with."""
        return self.tau, self.tau_source, self.scoring

    def make(self, job: tuple[str, ...], tell: Any = None) -> Cell:
        """Generate, save and score the images of one (generator, activity, country) job;
        a job ending in :data:`RESCORE` scores its kept cell's images for the baselines
        the cell lacks instead."""
        if len(job) == 4 and job[3] == RESCORE:
            from refine.harness.tasks.bench.top_up import rescore

            return rescore(self, (job[0], job[1], job[2]))
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
                "baselines": list(plan.baselines),
                "baseline_models": plan.checkpoints(),
                "photos": len(refs.reference_images),
                "scorer": self.scoring,
                **(
                    {"generator_settings": s}
                    if (s := plan.generator_settings.get(gen_name))
                    else {}
                ),
            },
            outputs=prompt_values(BENCH_PROMPT, pooled=pooled, embeddings=emb, weights=faiths),
            images=[
                _image_record(f, s, a, ex, plan.baselines, self.scoring.get("judge"))
                for f, s, a, ex in zip(files, seeds, assessed, checked, strict=True)
            ],
            data={"embeddings": emb.tolist()},
            timings={
                "generate_s": generated - began,
                "score_s": time.perf_counter() - generated,
            },
        )


def with_observer_prompts(
    options: dict[str, dict[str, Any]] | None, prompts: str
) -> dict[str, dict[str, Any]] | None:
    """The backends' options with the observer's prompts set where they are not the
    toolkit's."""
    if prompts == "toolkit":
        return options
    merged = {k: dict(v) for k, v in (options or {}).items()}
    merged.setdefault("observer", {})["prompts"] = prompts
    return merged


def _image_record(
    file: str, seed: int, assessed: Any, checked: Any, baselines: Any = (), judge: Any = None
) -> dict[str, Any]:
    scores = assessed.scores
    record = {
        "file": file,
        "seed": seed,
        "observed": assessed.observed,
        **{m: scores.value(m) for m in BENCH_IMAGE},
        "exag_variant": scores.variants.get("exag"),
        **{m: scores.value(m) for m in image_extras()},
    }
    # the standard error of each value read from sampled answers (a judge without
    # log-probabilities); none where every value was read by log-probabilities
    errors = {m: e for m in record if m in scores.values and (e := scores.stderr(m)) is not None}
    if errors:
        record["stderr"] = errors
    if judged := judged_record(scores, judge):
        record["judged"] = judged
    if scores.tifa is not None:  # TIFA's questions and the judge's answers
        record["tifa_answers"] = [dataclasses.asdict(a) for a in scores.tifa]
    record["exaggerated"] = exaggerated_record(assessed.feedback.exaggerated)
    if why := why_missing(scores, baselines):  # a baseline asked for and not computed
        record["missing"] = why
    if checked is not None:
        record["explicit_met"] = checked.explicit_met
        record["implicit_met"] = checked.implicit_met
        record["expectations"] = [c.model_dump() for c in checked.checks]
    return record


def exaggerated_record(listed: Any) -> list[dict[str, Any]]:
    """The stereotype candidates an image exaggerates, as its EXAG found them: with
    ``exag:ita`` each one's excess over the real photos' mean VQAScore, with ``exag:mllm``
    the observed phrase it matched and their similarity (AHEaD Tab. 12 reads them)."""
    keep = ("candidate", "excess", "observed", "similarity")
    return [{k: getattr(e, k) for k in keep if getattr(e, k) is not None} for e in listed]
