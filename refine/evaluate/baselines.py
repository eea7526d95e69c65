"""The metrics the papers compare against that the profile's judge computes beside FAITH,
when asked for (the catalog's group ``baseline``; ``--baselines`` on score and bench):
``vqascore`` (VQAScore's question about the generation prompt), the MLLM-as-a-judge
``judge_align`` and ``judge_hal`` (AHEaD Tab. 29-30, answered as "score is N"), VIEScore's
``vie_sc`` (0-10) and ``vie_overall`` (sqrt(SC x PQ), from ``vie_sc`` and the quality
reading: no call of its own). Each costs one judge call an image, k where the judge
samples. Also the judge readings EXAG shares
with them (:func:`vqa`, :func:`prefixed`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from metrics.baselines import JUDGE_RATED, JUDGE_SCALED, JudgeRating
from metrics.vqascore import VqaAnswer
from refine.assets import prompt_template

if TYPE_CHECKING:
    from PIL import Image

    from refine.backends.selection import Backends
    from refine.records import ReferencePack

# AHEaD Tab. 29-31's answer format: "score is <num>"
MLLM_PREFIX = "score is "
# the baselines the assessor computes when asked (the catalog's group "baseline")
BASELINES = ("vqascore", *JUDGE_RATED, *JUDGE_SCALED, "vie_overall")


def parse_baselines(text: str | Sequence[str] | None) -> tuple[str, ...]:
    """Baseline names from ``a,b`` (``all``: every one; ``none`` or nothing: none); a
    ValueError names one that is not a baseline."""
    names = text.split(",") if isinstance(text, str) else list(text or ())
    names = [n.strip() for n in names if n.strip()]
    if names in (["none"], []):
        return ()
    if names == ["all"]:
        return BASELINES
    unknown = [n for n in names if n not in BASELINES]
    if unknown:
        raise ValueError(
            f"no baseline {', '.join(map(repr, unknown))}; baselines: {', '.join(BASELINES)} "
            "(or all, none)"
        )
    return tuple(dict.fromkeys(names))


def baseline_readings(
    backends: Backends, calls: Any, compare: Sequence[str], images: Sequence[Image.Image],
    refs: ReferencePack,
) -> dict[str, list[Any]]:  # fmt: skip
    """The readings the asked-for baselines compute from (``vqa_answers``,
    ``judge_ratings``), one per image (None each where not asked)."""
    return {
        "vqa_answers": prompt_vqa(backends, calls, compare, images, refs),
        "judge_ratings": judge_ratings(backends, calls, compare, images, refs),
    }


def prompt_vqa(
    backends: Backends, calls: Any, compare: Sequence[str], images: Sequence[Image.Image],
    refs: ReferencePack,
) -> list[VqaAnswer | None]:  # fmt: skip
    """VQAScore of each image for the generation prompt of ``refs``' activity and
    country, when the assessor is asked for it (None each otherwise)."""
    if "vqascore" not in compare:
        return [None] * len(images)
    prompt = prompt_template("generate").format(activity=refs.activity, country=refs.country)
    with backends.using("judge") as judge:
        answers = vqa(judge, images, [prompt.strip()] * len(images))
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
    generation = prompt_template("generate").format(activity=refs.activity, country=refs.country)
    out: list[dict[str, JudgeRating]] = [{} for _ in images]
    with backends.using("judge") as judge:
        for name in scaled:
            prompt = prompt_template(name).format(prompt=generation.strip())
            rate_scale = getattr(judge, "rate_scale", None)
            if not callable(rate_scale):
                who = getattr(judge, "id", type(judge).__name__)
                raise ValueError(
                    f"the judge {who} does not rate on a 0-10 scale, which {name} needs"
                )
            ratings = rate_scale(images, [prompt] * len(images), 0, 10)
            samples = int(getattr(judge, "samples", 1) or 1)
            calls.add(sum(1 if r.method == "logprobs" else samples for r in ratings))
            for row, r in zip(out, ratings, strict=True):
                row[name] = JudgeRating(r.expectation, r.stderr, r.method)
        for name in asked:
            prompt = prompt_template(name).format(prompt=generation.strip(), country=refs.country)
            ratings = prefixed(judge, images, [prompt] * len(images))
            samples = int(getattr(judge, "samples", 1) or 1)
            calls.add(sum(1 if r.method == "logprobs" else samples for r in ratings))
            for row, r in zip(out, ratings, strict=True):
                row[name] = JudgeRating(r.expectation, r.stderr, r.method)
    return list(out)


def prefixed(judge: Any, images: Sequence[Image.Image], prompts: Sequence[str]) -> list[Any]:
    """The judge's 1-5 ratings answered as "score is N" (AHEaD Tab. 29-31); a judge
    without ``rate_prefixed`` is named."""
    rate = getattr(judge, "rate_prefixed", None)
    if not callable(rate):
        name = getattr(judge, "id", type(judge).__name__)
        raise ValueError(
            f"the judge {name} cannot answer in the format 'score is N' (no rate_prefixed), "
            "which EXAG without photos and the judge baselines need"
        )
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
    samples = int(getattr(judge, "samples", 1) or 1)
    return sum(1 if a.mode == "logprobs" else samples for a in answers)
