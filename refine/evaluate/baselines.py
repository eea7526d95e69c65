"""The metrics the papers compare against that the profile's models compute beside FAITH,
when asked for (the catalog's group ``baseline``; ``--baselines`` on score and bench):
``clipscore`` (Hessel's CLIPScore on the profile's CLIP: no model call), ``vqascore``
(VQAScore's question about the generation prompt), the MLLM-as-a-judge ``judge_align``
and ``judge_hal`` (AHEaD Tab. 29-30, answered as "score is N"), VIEScore's
``vie_sc`` (0-10) and ``vie_overall`` (sqrt(SC x PQ), from ``vie_sc`` and the quality
reading: no call of its own). Each costs one judge call an image, k where the judge
samples. ``tifa`` and ``soft_tifa`` (CulturalFrames Sec. 6) share one language-model call
per prompt (its questions, kept on disk with the language model's other answers) and one
judge call per question and image. Also the judge readings EXAG shares with them
(:func:`vqa`, :func:`prefixed`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from metrics.baselines import (  # noqa: F401 (BASELINES, parse_baselines: their home)
    BASELINES,
    JUDGE_RATED,
    JUDGE_SCALED,
    JudgeRating,
    TifaAnswer,
    parse_baselines,
)
from metrics.judge import reading_calls
from metrics.vqascore import VqaAnswer
from refine.assets import prompt_template
from refine.records import ReferencePack

if TYPE_CHECKING:
    from PIL import Image

    from refine.backends.selection import Backends
    from refine.records import Scores

# AHEaD Tab. 29-31's answer format: "score is <num>"
MLLM_PREFIX = "score is "
# the baselines that read TIFA's questions and answers
TIFA = ("tifa", "soft_tifa")
# the most questions the language model writes about one prompt
TIFA_QUESTIONS = 10


class TifaQuestion(BaseModel):
    element: str = ""
    category: str = ""
    question: str


class TifaQuestions(BaseModel):
    questions: list[TifaQuestion] = Field(default_factory=list)


def needs_llm(compare: Sequence[str]) -> bool:
    """Whether the baselines ``compare`` need the profile's language model."""
    return any(b in TIFA for b in compare)


def baseline_readings(
    backends: Backends, calls: Any, compare: Sequence[str], images: Sequence[Image.Image],
    refs: ReferencePack, cache: Any = None, models: Any = None,
) -> dict[str, list[Any]]:  # fmt: skip
    """The readings the asked-for baselines compute from (``vqa_answers``,
    ``judge_ratings``, ``tifa_answers``, ``clip_prompts``), one per image (None each where
    not asked); ``cache``: where the language model's answers are kept (an
    :class:`refine.evaluate.refs_build.LLMCache`; its default folder when None);
    ``models``: checkpoints in place of the baselines' own (by name,
    :func:`refine.evaluate.baseline_models.parse_baseline_models`), and ``model_readings``
    from them, on the image embedder's device."""
    from refine.evaluate.baseline_models import model_readings

    device = backends.options.get("image_embedder", {}).get("device")
    prompt = generation_prompt(refs)
    return {
        "vqa_answers": prompt_vqa(backends, calls, compare, images, refs),
        "judge_ratings": judge_ratings(backends, calls, compare, images, refs),
        "tifa_answers": tifa_answers(backends, calls, compare, images, refs, cache),
        "clip_prompts": [prompt if "clipscore" in compare else None] * len(images),
        "model_readings": model_readings(
            compare, images, prompt, models, device, refs.activity, refs.country
        ),
    }


class PromptedPack(ReferencePack):
    """References of an image drawn from a prompt of its own (a dataset's: CulturalFrames'),
    not from the toolkit's generation prompt of an activity and country: the baselines
    that read the prompt read this one."""

    prompt: str


def generation_prompt(refs: ReferencePack) -> str:
    """The prompt the images of ``refs``' activity and country are generated from (a
    :class:`PromptedPack`'s own prompt)."""
    if isinstance(refs, PromptedPack):
        return refs.prompt
    return prompt_template("generate").format(activity=refs.activity, country=refs.country).strip()


def tifa_questions(llm: Any, prompt: str, cache: Any) -> list[TifaQuestion]:
    """TIFA's yes/no questions about ``prompt`` (``assets/prompts/tifa.txt``), asked of
    the language model once per prompt and model (``cache`` keeps the answer): at most
    :data:`TIFA_QUESTIONS`, blank and repeated ones dropped, each ending in "?". A
    ValueError names a model that wrote none."""
    text = prompt_template("tifa").format(prompt=prompt, count=TIFA_QUESTIONS)
    answer = cache.ask(llm, text, TifaQuestions)
    out: list[TifaQuestion] = []
    seen: set[str] = set()
    for q in answer.questions:
        question = " ".join(q.question.split())
        if not question or question.casefold() in seen:
            continue
        seen.add(question.casefold())
        if not question.endswith("?"):
            question += "?"
        out.append(TifaQuestion(element=q.element.strip(), category=q.category.strip(),
                                question=question))  # fmt: skip
        if len(out) == TIFA_QUESTIONS:
            break
    if not out:
        who = getattr(llm, "id", type(llm).__name__)
        raise ValueError(f"the language model {who} wrote no TIFA questions about {prompt!r}")
    return out


def tifa_answers(
    backends: Backends, calls: Any, compare: Sequence[str], images: Sequence[Image.Image],
    refs: ReferencePack, cache: Any = None,
) -> list[list[TifaAnswer] | None]:  # fmt: skip
    """The judge's P("Yes") for each of TIFA's questions about the generation prompt, per
    image (one judge call per question and image, k where the judge samples; the
    questions one language-model call per prompt); None each when neither ``tifa`` nor
    ``soft_tifa`` is asked for."""
    if not needs_llm(compare):
        return [None] * len(images)
    if cache is None:
        from refine.evaluate.refs_build import LLMCache

        cache = LLMCache()
    with backends.using("llm") as llm:
        before = cache.misses
        questions = tifa_questions(llm, generation_prompt(refs), cache)
        calls.add(cache.misses - before)
    n = len(questions)
    with backends.using("judge") as judge:
        pairs = [(im, q) for im in images for q in questions]
        probs = judge.yes_probability([p[0] for p in pairs], [p[1].question for p in pairs])
        mode = getattr(judge, "method", "logprobs")
        sampled = mode != "logprobs"
        calls.add(len(pairs) * (int(getattr(judge, "samples", 1) or 1) if sampled else 1))
    return [
        [
            TifaAnswer(q.question, float(p), q.element, q.category, mode)
            for q, p in zip(questions, probs[k * n : (k + 1) * n], strict=True)
        ]
        for k in range(len(images))
    ]


def prompt_vqa(
    backends: Backends, calls: Any, compare: Sequence[str], images: Sequence[Image.Image],
    refs: ReferencePack,
) -> list[VqaAnswer | None]:  # fmt: skip
    """VQAScore of each image for the generation prompt of ``refs``' activity and
    country, when the assessor is asked for it (None each otherwise)."""
    if "vqascore" not in compare:
        return [None] * len(images)
    prompt = generation_prompt(refs)
    with backends.using("judge") as judge:
        answers = vqa(judge, images, [prompt] * len(images))
        calls.add(vqa_calls(judge, answers))
    return list(answers)


def judge_ratings(
    backends: Backends, calls: Any, compare: Sequence[str], images: Sequence[Image.Image],
    refs: ReferencePack,
) -> list[dict[str, JudgeRating] | None]:  # fmt: skip
    """The MLLM-as-a-judge baselines asked for (``judge_align``, ``judge_hal``: AHEaD
    Tab. 29-30 with the generation prompt and the country, read at the digit after
    "score is"), per image; None each when none is asked for."""
    asked = [b for b in JUDGE_RATED if b in compare]
    # VIEScore's overall score needs its SC
    scaled = [b for b in JUDGE_SCALED if b in compare or "vie_overall" in compare]
    if not asked and not scaled:
        return [None] * len(images)
    generation = generation_prompt(refs)
    out: list[dict[str, JudgeRating]] = [{} for _ in images]
    with backends.using("judge") as judge:
        for name in scaled:
            prompt = prompt_template(name).format(prompt=generation)
            rate_scale = getattr(judge, "rate_scale", None)
            if not callable(rate_scale):
                who = getattr(judge, "id", type(judge).__name__)
                raise ValueError(
                    f"the judge {who} does not rate on a 0-10 scale, which {name} needs"
                )
            ratings = rate_scale(images, [prompt] * len(images), 0, 10)
            calls.add(sum(reading_calls(r.method) for r in ratings))
            for row, r in zip(out, ratings, strict=True):
                row[name] = JudgeRating(r.expectation, r.stderr, r.method)
        for name in asked:
            prompt = prompt_template(name).format(prompt=generation, country=refs.country)
            ratings = prefixed(judge, images, [prompt] * len(images))
            calls.add(sum(reading_calls(r.method) for r in ratings))
            for row, r in zip(out, ratings, strict=True):
                row[name] = JudgeRating(r.expectation, r.stderr, r.method)
    return list(out)


def prefixed(
    judge: Any,
    images: Sequence[Image.Image],
    prompts: Sequence[str],
    first_seed: int | None = None,
    every: bool = False,
) -> list[Any]:
    """The judge's 1-5 ratings answered as "score is N" (AHEaD Tab. 29-31); a judge
    without ``rate_prefixed`` is named. ``first_seed``: a fresh sampled reading
    (:meth:`refine.backends.judging.ProbabilityJudge.rate_prefixed`)."""
    rate = getattr(judge, "rate_prefixed", None)
    if not callable(rate):
        name = getattr(judge, "id", type(judge).__name__)
        raise ValueError(
            f"the judge {name} cannot answer in the format 'score is N' (no rate_prefixed), "
            "which EXAG without photos and the judge baselines need"
        )
    if first_seed is not None:
        return list(rate(images, prompts, MLLM_PREFIX, first_seed=first_seed, every=every))
    return list(rate(images, prompts, MLLM_PREFIX))


def vqa(judge: Any, images: Sequence[Image.Image], texts: Sequence[str]) -> list[VqaAnswer]:
    """The judge's VQAScore of each (image, text); a judge without one is named."""
    score = getattr(judge, "vqa_score", None)
    if not callable(score):
        name = getattr(judge, "id", type(judge).__name__)
        raise ValueError(f"the judge {name} gives no VQAScore (vqa_score), which EXAG needs")
    return list(score(images, texts))


def vqa_calls(judge: Any, answers: Sequence[VqaAnswer]) -> int:
    """Model calls behind VQAScore answers: one each read by log-probabilities, k each
    sampled."""
    return sum(reading_calls(a.mode) for a in answers)


def rescored(
    assessor: Any,
    images: Sequence[Image.Image],
    refs: ReferencePack,
    names: Sequence[str],
    known: Sequence[dict[str, Any]],
) -> list[Scores]:
    """The baselines ``names`` of images an :class:`refine.evaluate.assess.Assessor`
    scored before (their other values ``known``, by catalog name), read from the images
    alone: what a bench cell kept without them gains, with no new observation, matching,
    EXAG or quality reading. Each image's :class:`Scores` holds the baselines (and TIFA's
    answers) alone: those asked for, and those their readings give with them (soft_tifa
    beside tifa, vie_sc beside vie_overall)."""
    from refine.records import Scores

    names = parse_baselines(names)
    given = baseline_readings(
        assessor.backends,
        assessor.calls,
        names,
        images,
        refs,
        assessor.llm_cache,
        assessor.baseline_models,
    )
    kept = "not read again: the images' other scores are kept"
    failed = {r: kept for r in ("matching", "exaggeration_answers", "quality_ratings")}
    got, notes = assessor.computed(images, given, failed, only=BASELINES, known=known)
    out = []
    for row, tifa in zip(got, given["tifa_answers"], strict=True):
        row = {n: c for n, c in row.items() if n in names or c.value is not None}
        out.append(
            Scores(
                values={n: c.value for n, c in row.items()},
                variants={
                    n: c.variant for n, c in row.items() if c.value is not None and c.variant
                },
                readings={
                    n: c.reading for n, c in row.items() if c.value is not None and c.reading
                },
                notes={
                    n: notes.get(n) or c.note or ""
                    for n, c in row.items()
                    if c.value is None and (c.note or n in notes)
                },
                tifa=list(tifa) if tifa is not None else None,
            )
        )
    return out
