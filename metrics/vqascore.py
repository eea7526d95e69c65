"""VQAScore (Lin et al., 2024): the probability that a judge answers "Yes" to 'Does this
figure show "{text}"? Please answer yes or no.', over the full next-token distribution.
The question and the answer are those of the authors' t2v_metrics (its default question
template, the text in double quotes, and its answer template "Yes": only that casing
counts). The AHEaD paper's EXAG scores images against stereotype candidates with it
(Tab. 9); the catalog's ``vqascore`` is it for the generation prompt."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from metrics.computed import Computed
from metrics.judge import LOGPROBS, SAMPLED, Reading, sampled_stderr

# VQAScore's question and answer as t2v_metrics asks and reads them (Lin et al., 2024;
# the AHEaD paper's image-text score, Tab. 9)
VQA_QUESTION = 'Does this figure show "{text}"? Please answer yes or no.'
YES_CASINGS = ("Yes",)  # t2v_metrics' answer template: "yes" and "YES" are other answers


def vqa_question(text: str) -> str:
    """VQAScore's question about ``text``."""
    return VQA_QUESTION.format(text=text)


def yes_mass(logprobs: Mapping[str, float]) -> float:
    """VQAScore from a first answer position's log-probabilities: P("Yes") over the whole
    next-token distribution, not renormalised over "Yes" and "No" (the token "Yes" alone,
    as t2v_metrics reads it; a leading space ignored, as servers name tokens with it). A
    "Yes" outside the tokens listed has less mass than the least likely of them; it counts
    0."""
    return float(
        sum(math.exp(lp) for token, lp in logprobs.items() if token.strip() in YES_CASINGS)
    )


@dataclass(frozen=True)
class VqaAnswer:
    """The judge's VQAScore of one image for one text, and how it was read (``mode``:
    ``logprobs``, or ``sampled k=N`` with the standard error of the share)."""

    text: str
    value: float
    mode: str = LOGPROBS


def vqascore_of(vqa_answers: Sequence[VqaAnswer | None]) -> list:
    """The catalog's ``vqascore`` of each image from the judge's answer to VQAScore's
    question about the generation prompt (None where it was not asked)."""
    out = []
    for a in vqa_answers:
        if a is None:
            out.append(Computed(None, note="not asked for (--baselines)"))
            continue
        reading = Reading.parse(a.mode)
        if reading is not None and reading.method == SAMPLED:
            reading = Reading(SAMPLED, reading.k, sampled_stderr(a.value, reading.k or 0))
        out.append(Computed(a.value, None, reading))
    return out
