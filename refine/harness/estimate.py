"""What a bench will cost before it runs (``refine bench --dry-run``): the images it
makes and the model calls each role gets, counted from the plan and the references
alone (no model is loaded or called), and the profile's price of them where its
``[costs]`` gives one.

Per image: one generation, one observation (five with AHEaD's observer prompts, one a
dimension), two quality answers from the judge
(naturalness and artifacts), EXAG's answers (``exag:ita``: one VQAScore per stereotype
candidate, and once per prompt one per candidate and real photo for the photos'
baseline; ``exag:mllm``: one rating) and one answer per judge-read baseline
(``vqascore``, ``judge_align``, ``judge_hal``, ``vie_sc``; ``vie_overall`` reads
``vie_sc``). A judge that samples makes up to k calls an answer (the profile's
``[options.judge]`` ``samples``), ``agree`` where its first answers agree (EXAG(ITA)'s
readings take more: a candidate's on an image k to ITA_STAGES x k, a photo's
PHOTO_STAGES x k, as :func:`refine.evaluate.assess.ita_answers` reads them): with
``judge_mode = "auto"`` the count is given both ways, as the run finds out which. TIFA's
and the expectations' answers depend on how many questions the language model writes:
they are named, not counted."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from metrics.baselines import JUDGE_RATED, JUDGE_SCALED
from metrics.descriptors import DIMENSIONS
from refine.backends.registry import is_remote
from refine.harness.generators import parse_generator

# the baselines the judge answers one question an image for
ONE_READING = ("vqascore", *JUDGE_RATED, *JUDGE_SCALED)


@dataclass
class Estimate:
    images: int
    prompts: int
    generators: int
    calls: dict[str, int]  # role -> calls, each judge answer read in one call
    sampled: dict[str, int]  # role -> calls where the judge samples k answers
    judge_mode: str
    samples: int
    local: list[str] = field(default_factory=list)  # models run here: no API call
    uncounted: list[str] = field(default_factory=list)  # calls the plan cannot count
    costs: dict[str, float] = field(default_factory=dict)  # USD per call per role
    costs_source: str = ""
    notes: list[str] = field(default_factory=list)  # what the counts include, in words
    agree: int = 0  # a sampled answer's first answers, which end it when they agree
    batch_share: float | None = None  # the share of the prices a batch job pays (--batch)
    # EXAG(ITA)'s sampled answers among the judge's (``sampled``), which take more than k
    # (refine.evaluate.assess.ita_answers), and their fewest: a candidate's first k on an
    # image, a photo's all
    ita_most: int = 0
    ita_least: int = 0

    def least(self, role: str) -> int:
        """The calls of ``role`` where the judge samples and every answer's first ``agree``
        answers agree (``sampled`` counts k each, EXAG(ITA)'s up to their most)."""
        n = self.sampled[role]
        if not self.agree or role != "judge" or self.samples < 2:
            return n
        if role == "judge" and self.ita_most:
            return (n - self.ita_most) // self.samples * self.agree + self.ita_least
        return n // self.samples * self.agree

    def sampled_words(self, role: str) -> str:
        most = self.sampled[role]
        least = self.least(role)
        if least == most:
            return f"{most} if the judge samples {self.samples} answers each"
        return (
            f"{least} to {most} if the judge samples: {self.agree} answers each where they "
            f"agree, else {self.samples}"
        )

    def total(self, sampled: bool = False) -> int:
        return sum((self.sampled if sampled else self.calls).values())

    def price(self, sampled: bool = False) -> float | None:
        """The calls' price in USD by the profile's [costs] (None: it gives none); a role
        without a price counts nothing and is named by :meth:`unpriced`."""
        if not self.costs:
            return None
        calls = self.sampled if sampled else self.calls
        return sum(n * self.costs.get(role, 0.0) for role, n in calls.items())

    def unpriced(self) -> list[str]:
        return [r for r, n in self.calls.items() if n and r not in self.costs]

    def lines(self) -> list[str]:
        """The estimate in words, a line each."""
        out = [
            f"{self.images} images: {self.generators} generator(s) x {self.prompts} prompts x "
            f"{self.images // max(1, self.generators * self.prompts)} images per prompt"
        ]
        differs = self.sampled != self.calls
        for role, n in self.calls.items():
            if not n:
                continue
            also = ""
            if differs and self.sampled[role] != n:
                also = f" ({self.sampled_words(role)})"
            elif self.least(role) != self.sampled[role]:  # the judge samples
                also = (
                    f" (as few as {self.least(role)}: {self.agree} answers each where they agree)"
                )
            out.append(f"  {role}: {n} calls{also}")
        total = f"{self.total()} model calls"
        if differs:
            total += f", {self.total(True)} if the judge samples (judge_mode {self.judge_mode!r})"
        out.append(total)
        for what in self.uncounted:
            out.append(f"  not counted: {what}")
        for what in self.notes:
            out.append(f"  {what}")
        if self.local:
            out.append(f"  run here, no API call: {', '.join(self.local)}")
        price = self.price()
        if price is None:
            out.append(
                "cost: the profile gives no prices; add [costs] (USD per call by role) and "
                "costs_source to a copy of it for an estimate"
            )
        else:
            upper = self.price(True)
            span = f"${price:,.2f}" + (f" to ${upper:,.2f}" if upper != price else "")
            out.append(f"cost: about {span} ({self.costs_source or 'the profile [costs]'})")
            if self.unpriced():
                out.append(f"  no price for: {', '.join(self.unpriced())}")
            if self.batch_share is not None:
                ita_words = ""
                if self.ita_most:
                    from refine.evaluate.assess import ITA_STAGES

                    ita_words = f", an EXAG(ITA) candidate's up to {ITA_STAGES * self.samples}"
                # a batch job's judge samples, k answers a reading
                batch = self.price(True) * self.batch_share
                out.append(
                    f"  as batch jobs (--batch): about ${batch:,.2f}, answered within a day "
                    f"(each judge reading sends all its answers at once: {self.samples}"
                    f"{ita_words})"
                )
        return out


def bench_estimate(plan: Any, profile: Any) -> Estimate:
    """The calls of a :class:`~refine.harness.tasks.bench.plan.BenchPlan` on ``profile``
    (a :class:`~refine.backends.profile.Profile`)."""
    from refine.evaluate.reference_source import ReferenceSource

    judge = profile.options.get("judge", {})
    mode = str(judge.get("judge_mode", "auto"))
    k = int(judge.get("samples", 8)) if mode != "logprobs" else 1
    n_img = plan.images_per_prompt
    gens = len(plan.generators)
    answers = 0  # judge answers over the bench
    ita_images = ita_photos = 0  # EXAG(ITA)'s answers: on images, on the photos
    per_image = 2 + sum(b in plan.baselines for b in ONE_READING)
    if "vie_overall" in plan.baselines and "vie_sc" not in plan.baselines:
        per_image += 1
    source = ReferenceSource.default()
    for act, country in plan.prompts:
        refs = source.find(act, country).pack
        photos, cands = len(refs.reference_images), len(refs.stereotypes)
        if photos and cands:
            answers += gens * n_img * cands + photos * cands  # the baseline once a prompt
            ita_images += gens * n_img * cands
            ita_photos += photos * cands
        else:
            answers += gens * n_img
        answers += gens * n_img * per_image
    images = gens * len(plan.prompts) * n_img
    # AHEaD's observer prompts ask once per dimension (Tab. 22-27)
    looks = images * (len(DIMENSIONS) if getattr(plan, "observer_prompts", "") == "ahead" else 1)
    drawn, local, costs, notes = split_generators(
        plan.generators, len(plan.prompts) * n_img, profile
    )
    calls = {"generator": drawn, "observer": looks, "judge": answers, "llm": 0}
    uncounted = []
    tifa = any(b in plan.baselines for b in ("tifa", "soft_tifa"))
    if tifa or plan.expectations:
        calls["llm"] = len(plan.prompts) * (int(tifa) + int(plan.expectations))
    if tifa:
        uncounted.append("one judge answer per TIFA question and image")
    if plan.expectations:
        uncounted.append("one judge answer per expectation and image")
    sampled = dict(calls)
    # sampled, EXAG(ITA)'s readings take more answers than k: a candidate's on an image up
    # to ITA_STAGES x k (k where its first stage is below the photos beyond doubt), a
    # photo's PHOTO_STAGES x k
    from refine.evaluate.assess import ITA_STAGES, PHOTO_STAGES

    ita_most = (ita_images * ITA_STAGES + ita_photos * PHOTO_STAGES) * k
    ita_least = (ita_images + ita_photos * PHOTO_STAGES) * k
    sampled["judge"] = (answers - ita_images - ita_photos) * k + ita_most
    local += [
        b for b in plan.baselines if b not in (*ONE_READING, "vie_overall", "tifa", "soft_tifa")
    ]
    local += [
        f"{r} ({profile.roles[r]})"
        for r in ("text_embedder", "image_embedder")
        if r in profile.roles
    ]
    return Estimate(
        images,
        len(plan.prompts),
        gens,
        calls if mode != "sampled" else sampled,
        sampled,
        mode,
        k,
        local,
        uncounted,
        costs,
        profile.costs_source,
        notes,
        agree=agree_of(judge, mode),
        batch_share=getattr(profile, "costs_batch", None),
        ita_most=ita_most if mode != "logprobs" else 0,
        ita_least=ita_least if mode != "logprobs" else 0,
    )


def _remote_generator(spec: str) -> bool:
    """Whether a generator named on the command line (a backend, a profile, with adapters)
    is called through an API."""
    try:
        return is_remote("generator", parse_generator(spec).name)
    except ValueError:
        return False


def split_generators(
    names: Sequence[str], images_each: int, profile: Any
) -> tuple[int, list[str], dict[str, float], list[str]]:
    """The generator calls an API answers (``images_each`` for each of ``names`` that is an
    API model), the generators that run here, the profile's prices (without the
    generator's where a generator other than the profile's own calls an API: that price is
    the profile's model's) and a note saying so."""
    api = [g for g in names if _remote_generator(g)]
    here = [f"generator {g}" for g in names if g not in api]
    costs, notes = dict(profile.costs), []
    own = profile.roles.get("generator")
    others = sorted({g for g in api if g != own})
    if "generator" in costs and others:
        del costs["generator"]
        notes.append(f"the profile prices its own generator ({own}) only, not {', '.join(others)}")
    return len(api) * images_each, here, costs, notes


def task_estimate(
    profile: Any,
    images: int,
    prompts: int,
    generators: int,
    observer: int = 0,
    judge_answers: int = 0,
    local: Sequence[str] = (),
    uncounted: Sequence[str] = (),
    generator_names: Sequence[str] = (),
) -> Estimate:
    """An estimate for the tasks other than the bench (CUBE concepts, SoS banks, CAIRE's
    universal set): one generation an image (only those of ``generator_names`` that call
    an API are calls, where named), the observer's and the judge's answers as given, the
    judge's counted both ways as for the bench."""
    judge = profile.options.get("judge", {})
    mode = str(judge.get("judge_mode", "auto"))
    k = int(judge.get("samples", 8)) if mode != "logprobs" else 1
    drawn, here, costs, notes = images, [], dict(profile.costs), []
    if generator_names:
        each = images // max(1, len(generator_names))
        drawn, here, costs, notes = split_generators(generator_names, each, profile)
    calls = {"generator": drawn, "observer": observer, "judge": judge_answers, "llm": 0}
    sampled = {**calls, "judge": judge_answers * k}
    return Estimate(
        images,
        prompts,
        generators,
        calls if mode != "sampled" else sampled,
        sampled,
        mode,
        k,
        [*here, *local],
        list(uncounted),
        costs,
        profile.costs_source,
        notes,
        agree=agree_of(judge, mode),
        batch_share=getattr(profile, "costs_batch", None),
    )


def agree_of(judge: dict[str, Any], mode: str) -> int:
    """The judge options' ``agree`` (0 where the judge reads log-probabilities only)."""
    return 0 if mode == "logprobs" else int(judge.get("agree", 0) or 0)
