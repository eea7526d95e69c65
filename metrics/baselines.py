"""The baselines the papers set beside FAITH that the profile's judge computes: the AHEaD
paper's MLLM-as-a-judge ALIGN and HAL (Tab. 29-30), asked with the annotators' 1-5 scales and
read at the digit after "score is", each mapped to [0, 1] as (E[r] - 1) / 4 (the map of
``exag:mllm``, Tab. 31, the third of the set); VIEScore's semantic consistency SC (its 0-10
rating over 10) and its overall score O = sqrt(SC x PQ), PQ the quality reading (Ku et al.,
2024); TIFA (Hu et al., 2023), as CulturalFrames Sec. 6 compares it: the share of a
language model's yes/no questions about the prompt that the judge answers yes, and
Soft-TIFA, the mean of its P("Yes") over them; CLIPScore (Hessel et al., 2021),
2.5 x max(cos, 0) of the image and its prompt on a CLIP. VQAScore is
:mod:`metrics.vqascore`."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from metrics.computed import Computed
from metrics.judge import Reading

# Hessel et al.'s CLIPScore weight: w x max(cos, 0)
CLIPSCORE_W = 2.5
# torchmetrics' CLIPScore, and this toolkit's before it took Hessel's: 100 x max(cos, 0)
CLIPSCORE100_W = 100.0


def clipscore(cos: float, w: float = CLIPSCORE_W) -> float:
    """CLIPScore from the cosine of an image's and a text's CLIP embeddings:
    ``w x max(cos, 0)`` (Hessel et al., 2021: w = 2.5)."""
    if not -1.0 - 1e-6 <= cos <= 1.0 + 1e-6:
        raise ValueError(f"a cosine lies in [-1, 1], got {cos!r}")
    return w * max(float(cos), 0.0)


def clipscore_of(image_embeddings: Any, clip_prompt_embeddings: Any) -> list[float]:
    """The catalog's ``clipscore`` of each image: :func:`clipscore` of its L2-normalised
    CLIP embedding and its prompt's (row by row)."""
    import numpy as np

    cos = np.sum(np.asarray(image_embeddings, float) * np.asarray(clip_prompt_embeddings, float), 1)
    return [clipscore(float(c)) for c in cos]


def pickscore(cos: float, logit_scale: float) -> float:
    """PickScore (Kirstain et al., 2023): the model's logit scale times the cosine of the
    image's and the prompt's embeddings."""
    return float(logit_scale) * float(cos)


# CuRe's texts as AHEaD A.4 sets them (without CuRe's parent-category text)
CURE_TEXTS = ("An image of {activity}", "An image from {country}")
# CAIRE's relevance levels (Sec. 5.1, Tab. 12), in order of the 1-5 rating they give
CAIRE_LEVELS = (
    "Not relevant",
    "Minimally relevant",
    "Somewhat relevant",
    "Relevant",
    "Highly relevant",
)


def cure(cosines: Sequence[float]) -> float:
    """CuRe as AHEaD A.4 computes it: the mean image-text similarity of its texts."""
    if not cosines:
        raise ValueError("CuRe needs at least one text")
    return math.fsum(cosines) / len(cosines)


def caire_probe(cosines: Sequence[float]) -> int:
    """CAIRE's Baseline 1: the 1-5 rating of the probe most similar to the image (the
    cosines of its five probes, "Not relevant" first); a tie goes to the lower rating."""
    if len(cosines) != len(CAIRE_LEVELS):
        raise ValueError(f"CAIRE's probe baseline needs {len(CAIRE_LEVELS)} cosines")
    return 1 + max(range(len(cosines)), key=lambda k: (cosines[k], -k))


def imagereward_of(model_readings: Sequence[Mapping[str, Any] | None]) -> list[Computed]:
    """The catalog's ``imagereward`` of each image: ImageReward's standardised reward."""
    return _read("imagereward", model_readings, lambda r: float(r.reward))


def cure_of(model_readings: Sequence[Mapping[str, Any] | None]) -> list[Computed]:
    """The catalog's ``cure`` of each image from its SigLIP 2 reading."""
    return _read("cure", model_readings, lambda r: cure(r.cosines))


def caire_probe_of(model_readings: Sequence[Mapping[str, Any] | None]) -> list[Computed]:
    """The catalog's ``caire_probe`` of each image from its five probes' cosines."""
    return _read("caire_probe", model_readings, lambda r: float(caire_probe(r.cosines)))


def _read(name: str, model_readings: Sequence[Mapping[str, Any] | None], score: Any) -> list:
    out = []
    for got in model_readings:
        r = (got or {}).get(name)
        out.append(
            Computed(None, note="not asked for (--baselines)") if r is None else Computed(score(r))
        )
    return out


def pickscore_of(model_readings: Sequence[Mapping[str, Any] | None]) -> list[Computed]:
    """The catalog's ``pickscore`` of each image from its PickScore model reading (the
    cosine and the model's logit scale)."""
    return _read("pickscore", model_readings, lambda r: pickscore(r.cosine, r.logit_scale))


def hpsv2_of(model_readings: Sequence[Mapping[str, Any] | None]) -> list[Computed]:
    """The catalog's ``hpsv2`` of each image: the cosine of its and its prompt's
    normalised embeddings on HPS v2's CLIP-H (the authors' score, no scale)."""
    return _read("hpsv2", model_readings, lambda r: float(r.cosine))


# the judge's prompt of each baseline (assets/prompts/<name>.txt): rated 1-5 as "score is N"
JUDGE_RATED = ("judge_align", "judge_hal")
# rated 0-10 (the number alone, as the quality readings are)
JUDGE_SCALED = ("vie_sc",)
# the baselines the judge reads (a rescore under a new judge reads them again)
JUDGE_READ = ("vqascore", *JUDGE_RATED, *JUDGE_SCALED, "vie_overall", "tifa", "soft_tifa")


# the baselines the assessor computes when asked (the catalog's group "baseline")
BASELINES = (
    "clipscore",
    "pickscore",
    "hpsv2",
    "cure",
    "caire_probe",
    "imagereward",
    "vqascore",
    *JUDGE_RATED,
    *JUDGE_SCALED,
    "vie_overall",
    "tifa",
    "soft_tifa",
)


def parse_baselines(text: str | Sequence[str] | None) -> tuple[str, ...]:
    """Baseline names from ``a,b`` (``all``: every one; ``none`` or nothing: none); a
    ValueError names one that is not a baseline."""
    return parse_names(text, BASELINES, "baseline")


def parse_names(
    text: str | Sequence[str] | None, known: Sequence[str], kind: str
) -> tuple[str, ...]:
    """Names of ``known`` from ``a,b`` (``all``: every one; ``none`` or nothing: none), in
    the order given, once each; a ValueError names one that is not a ``kind``."""
    names = text.split(",") if isinstance(text, str) else list(text or ())
    names = [n.strip() for n in names if n.strip()]
    if names in (["none"], []):
        return ()
    if names == ["all"]:
        return tuple(known)
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(
            f"no {kind} {', '.join(map(repr, unknown))}; {kind}s: {', '.join(known)} (or all, none)"
        )
    return tuple(dict.fromkeys(names))


@dataclass(frozen=True)
class JudgeRating:
    """The judge's expected 1-5 rating for one image and one baseline, and how it was read
    (``logprobs``, or ``sampled k=N`` with the rating's standard error)."""

    rating: float
    stderr: float | None = None
    mode: str = "logprobs"


def rating_to_unit(rating: float, stderr: float | None = None) -> tuple[float, float | None]:
    """A 1-5 expected rating on [0, 1]: (E[r] - 1) / 4, the standard error through the same
    map."""
    if not 1.0 - 1e-9 <= rating <= 5.0 + 1e-9:
        raise ValueError(f"an expected 1-5 rating must lie in [1, 5], got {rating!r}")
    return (rating - 1.0) / 4.0, None if stderr is None else stderr / 4.0


def _of(name: str, judge_ratings: Sequence[Mapping[str, JudgeRating] | None]) -> list[Computed]:
    out = []
    for got in judge_ratings:
        r = (got or {}).get(name)
        if r is None:
            out.append(Computed(None, note="not asked for (--baselines)"))
            continue
        value, stderr = rating_to_unit(r.rating, r.stderr)
        out.append(Computed(value, None, Reading.parse(r.mode, stderr)))
    return out


def judge_align_of(judge_ratings: Sequence[Mapping[str, JudgeRating] | None]) -> list[Computed]:
    """The catalog's ``judge_align``: Tab. 29's rating, (E[r] - 1) / 4."""
    return _of("judge_align", judge_ratings)


def judge_hal_of(judge_ratings: Sequence[Mapping[str, JudgeRating] | None]) -> list[Computed]:
    """The catalog's ``judge_hal``: Tab. 30's rating, (E[r] - 1) / 4."""
    return _of("judge_hal", judge_ratings)


def vie_sc_of(judge_ratings: Sequence[Mapping[str, JudgeRating] | None]) -> list[Computed]:
    """The catalog's ``vie_sc``: VIEScore's semantic consistency, the judge's expected
    0-10 rating over 10."""
    out = []
    for got in judge_ratings:
        r = (got or {}).get("vie_sc")
        if r is None:
            out.append(Computed(None, note="not asked for (--baselines)"))
            continue
        if not -1e-9 <= r.rating <= 10.0 + 1e-9:
            raise ValueError(f"an expected 0-10 rating must lie in [0, 10], got {r.rating!r}")
        stderr = None if r.stderr is None else r.stderr / 10.0
        out.append(Computed(r.rating / 10.0, None, Reading.parse(r.mode, stderr)))
    return out


@dataclass(frozen=True)
class TifaAnswer:
    """One TIFA question about an image's prompt (its answer is "yes" for a faithful
    image), the element of the prompt it checks and its TIFA category, and the judge's
    P("Yes") (of "Yes" and "No"), read as ``mode``."""

    question: str
    p_yes: float
    element: str = ""
    category: str = ""
    mode: str = "logprobs"

    @property
    def yes(self) -> bool:
        """The judge's answer: yes when P("Yes") is above one half."""
        return self.p_yes > 0.5


def tifa(p_yes: Sequence[float]) -> float:
    """TIFA: the share of the questions answered yes (P("Yes") > 0.5), every question's
    right answer being yes."""
    if not p_yes:
        raise ValueError("TIFA needs at least one question")
    return sum(1 for p in p_yes if p > 0.5) / len(p_yes)


def soft_tifa(p_yes: Sequence[float]) -> float:
    """Soft-TIFA: the mean of P("Yes") over the questions."""
    if not p_yes:
        raise ValueError("Soft-TIFA needs at least one question")
    return math.fsum(p_yes) / len(p_yes)


def _tifa_of(score: Any, tifa_answers: Sequence[Sequence[TifaAnswer] | None]) -> list[Computed]:
    out = []
    for answers in tifa_answers:
        if answers is None:
            out.append(Computed(None, note="not asked for (--baselines)"))
            continue
        mode = answers[0].mode if answers else None
        out.append(Computed(score([a.p_yes for a in answers]), None, Reading.parse(mode)))
    return out


def tifa_of(tifa_answers: Sequence[Sequence[TifaAnswer] | None]) -> list[Computed]:
    """The catalog's ``tifa`` of each image from the judge's answers to its questions."""
    return _tifa_of(tifa, tifa_answers)


def soft_tifa_of(tifa_answers: Sequence[Sequence[TifaAnswer] | None]) -> list[Computed]:
    """The catalog's ``soft_tifa`` of each image from the judge's answers."""
    return _tifa_of(soft_tifa, tifa_answers)


def vie_overall(sc: float, pq: float) -> float:
    """VIEScore's overall score on [0, 1]: sqrt(SC x PQ), both on [0, 1] (the paper's
    0-10 scores over 10: sqrt(SC x PQ) / 10 on its scale)."""
    for name, v in (("SC", sc), ("PQ", pq)):
        if not -1e-9 <= v <= 1.0 + 1e-9:
            raise ValueError(f"VIEScore's {name} must lie in [0, 1], got {v!r}")
    return math.sqrt(max(sc, 0.0) * max(pq, 0.0))


def vie_overall_of(values: Sequence[Mapping[str, float | None]]) -> list[Computed]:
    """The catalog's ``vie_overall``: :func:`vie_overall` of the image's ``vie_sc`` and
    ``quality`` (VIEScore's PQ)."""
    out = []
    for v in values:
        sc, pq = v.get("vie_sc"), v.get("quality")
        if sc is None:
            out.append(Computed(None, note="needs vie_sc (--baselines vie_sc)"))
        elif pq is None:
            out.append(Computed(None, note="needs the quality reading (a judge that rates 0-10)"))
        else:
            out.append(Computed(vie_overall(sc, pq)))
    return out
