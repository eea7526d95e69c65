"""Every metric the product shows, once: its name in files, its label on screen, its range,
which way is better, its unit, what it needs to be computed, and a line saying what it
means. Bench rows and summaries, ``refine agree``, the reports and the app's tables and
charts read their names, labels and order from here.

``level``: ``image`` (one value per image), ``prompt`` (one per prompt's images), ``run``
(per round of a run). ``group`` gathers what is computed together: ``ahead`` (always),
``quality`` (a judge that reads 0-10 ratings; CLIP-IQA with a CLIP embedder),
``diversity`` (several images per prompt), ``expectations`` (with --expectations),
``baseline`` (the metrics the papers compare against, with --baselines), ``human`` (agree
only), ``earlier`` (read from earlier files only, never computed), ``cube`` (CUBE concepts
runs, whose names are their own).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from metrics.ahead import align_of, exag_of, faith_of, hal_of
from metrics.baselines import (
    caire_probe_of,
    clipscore_of,
    cure_of,
    hpsv2_of,
    imagereward_of,
    judge_align_of,
    judge_hal_of,
    pickscore_of,
    soft_tifa_of,
    tifa_of,
    vie_overall_of,
    vie_sc_of,
)
from metrics.quality import clip_iqa_of, quality_of
from metrics.vqascore import vqascore_of


@dataclass(frozen=True)
class Metric:
    name: str
    label: str
    low: float | None
    high: float | None  # None: no upper bound
    better: str  # "higher" or "lower"
    unit: str
    needs: tuple[str, ...]
    level: str
    group: str
    help: str
    # its colour in every chart, Okabe and Ito's colour-blind-safe palette then Tol's muted
    # colours (None: one of the colours for what is no metric)
    colour: str | None = None
    # how the assessor computes an image metric: ``compute(**readings)`` gives one value
    # per image (a number, None, or metrics.computed.Computed with its variant, how the
    # judge was read, or why there is none) from the readings named in ``reads`` (the
    # images, their embeddings, the descriptors matched to the references, the judge's
    # answers, the values computed before it, ...: refine.evaluate.readings); None: its
    # own code computes it (the prompt-level and run-level figures, CAIRE, SoS, ...)
    compute: Callable[..., Sequence[Any]] | None = field(default=None, compare=False)
    reads: tuple[str, ...] = ()
    # where it is defined (paper, section, equation), and how this toolkit differs from
    # that definition or from the authors' code ("None." when it does not): the docs'
    # metrics page is made from these
    source: str = ""
    differs: str = ""
    # the checkpoint a baseline scored on a model of its own loads (downloaded with
    # ``refine models download --baselines``; refine.evaluate.baseline_models)
    checkpoint: str = ""
    # how a task pools its values over prompts or cells (metrics.stats.POOLS): ``mean``,
    # the mean with its 95% percentile bootstrap interval, drawn with the plan's seed
    pool: str = "mean"

    @property
    def arrow(self) -> str:
        return "↑" if self.better == "higher" else "↓"

    @property
    def heading(self) -> str:
        """The label with its direction, for table headers and chart legends."""
        return f"{self.label} {self.arrow}"

    @property
    def span(self) -> str:
        """Its range in words: ``0 to 1``, ``at least 1 effective images``."""
        unit = f" {self.unit}" if self.unit else ""
        if self.low is None and self.high is None:
            return f"unbounded{unit}"
        if self.high is None:
            return f"at least {self.low:g}{unit}"
        return f"{self.low:g} to {self.high:g}{unit}"

    def explain(self) -> str:
        """One glossary line: ``FAITH ↑ (higher is better; 0 to 1): Cultural ...``."""
        return f"{self.heading} ({self.better} is better; {self.span}): {self.help}"


# how a prompt-level metric is computed from a prompt's readings: ``pooled`` (the pooled
# AHEaD scores of what all its images show together: refine.evaluate.pooled), ``embeddings``
# (its images' embeddings, one row each), ``weights`` (each image's quality: FAITH in a
# bench, the quality model's in a concepts run) and ``values`` (the figures computed before)


def _pooled_align(pooled: Any) -> float:
    return pooled.pooled.align


def _ddiv(pooled: Any) -> float:
    return pooled.ddiv


def _sdiv(pooled: Any) -> float:
    return pooled.sdiv


def _vendi(embeddings: Any) -> float:
    from metrics.vendi import vendi_from_embeddings

    return vendi_from_embeddings(embeddings)


def _qvendi(values: dict[str, Any], weights: Sequence[float]) -> float | None:
    from metrics.vendi import quality_weighted

    vendi = values.get("vendi")
    return None if vendi is None else quality_weighted(vendi, weights)


_SCORER = ("observer", "text_embedder", "references")
_ALL = (
    Metric(
        "faith",
        "FAITH",
        0,
        1,
        "higher",
        "",
        (*_SCORER, "judge"),
        "image",
        "ahead",
        "Cultural faithfulness: the mean of ALIGN, 1 - HAL and 1 - EXAG.",
        colour="#0072B2",
        compute=faith_of,
        reads=("values", "value_readings"),
        source="AHEaD Sec. 3.2, Eq. 5 (g: the mean)",
        differs=(
            "None in the formula. It moves with EXAG: with real photos EXAG is the paper's "
            "(`exag:ita`); without them it is the MLLM variant (`exag:mllm`), and FAITH is then "
            "not comparable with the paper's Tab. 1. Where no EXAG could be measured, "
            "`faith:no-exag` takes the mean of ALIGN and 1 - HAL."
        ),
    ),
    Metric(
        "align",
        "ALIGN",
        0,
        1,
        "higher",
        "",
        _SCORER,
        "image",
        "ahead",
        "Share of the reference descriptors the image shows.",
        colour="#009E73",
        compute=align_of,
        reads=("matching",),
        source="AHEaD Sec. 3.2, Eq. 1",
        differs=(
            "AHEaD's code (`ahead/metrics/kernels.py`) counts a reference aligned at a similarity"
            " `>= tau`, the paper and this toolkit at `> tau`; only a similarity exactly at tau "
            "differs. Similarities: cosine of L2-normalised all-MiniLM-L6-v2 embeddings; tau per "
            "observer (0.52 by default, 0.67 for Qwen2.5-VL; `refine calibrate-tau`)."
        ),
    ),
    Metric(
        "hal",
        "HAL",
        0,
        1,
        "lower",
        "",
        _SCORER,
        "image",
        "ahead",
        "Share of what the image shows that matches no reference (hallucinated).",
        colour="#D55E00",
        compute=hal_of,
        reads=("matching",),
        source="AHEaD Sec. 3.2, Eq. 2",
        differs=(
            "AHEaD's code counts a prediction hallucinated at `< tau` (the paper and this "
            "toolkit: `<= tau`), and de-duplicates exact strings where this toolkit de-duplicates"
            " after case folding and collapsing whitespace."
        ),
    ),
    Metric(
        "exag",
        "EXAG",
        0,
        1,
        "lower",
        "",
        ("judge",),
        "image",
        "ahead",
        "How strongly the image exaggerates the country's stereotypes.",
        colour="#E69F00",
        compute=exag_of,
        reads=("exaggeration_answers",),
        source="AHEaD Sec. 3.2, Eq. 3-4 (`exag:ita`, with real photos); Tab. 31 (`exag:mllm`)",
        differs=(
            "`exag:ita` (the default whenever the activity has real photos): the image-text "
            'score is VQAScore as the paper\'s Tab. 9 uses it, P("Yes") over the full next-token '
            "distribution for VQAScore's question, on the profile's judge; the paper's "
            "CLIP-FlanT5-xxl is the judge `clip-t5:zhiqiulin/clip-flant5-xxl`. `exag:mllm` "
            "(without photos): Tab. 31's prompt and answer format, "
            "its system and user parts sent as one message, the expected rating read at the "
            'digit after "score is" and mapped as (E[r] - 1) / 4; the paper reports it only as '
            "a baseline (Tab. 9), so its values are not comparable with Tab. 1. AHEaD's code "
            "averages each candidate's excess over the images and then the candidates, the "
            "paper (and this toolkit) takes the largest per image: theirs is never above ours. "
            "Records before this layout hold `exag:judge-rubric`, this toolkit's own 1-5 rating "
            "of listed candidates."
        ),
    ),
    Metric(
        "quality",
        "quality",
        0,
        1,
        "higher",
        "",
        ("judge",),
        "image",
        "quality",
        "Perceptual quality: the lower of naturalness and freedom from artifacts, 0-10 / 10.",
        colour="#CC79A7",
        compute=quality_of,
        reads=("quality_ratings",),
        source=(
            "VIEScore's perceptual quality (Ku et al., 2024); CUBE Eq. 2-3 weigh diversity by a "
            "quality"
        ),
        differs=(
            "VIEScore parses a sampled JSON answer from GPT-4o; this toolkit takes the "
            'expectation of the judge\'s 0-10 rating where log-probabilities exist ("10" told from'
            ' "1" by P("0" after "1")). CUBE rates quality with HPS v2.'
        ),
    ),
    Metric(
        "clip_iqa",
        "CLIP-IQA",
        0,
        1,
        "higher",
        "",
        ("image_embedder", "local judge"),
        "image",
        "quality",
        "CLIP's preference for 'Good photo.' over 'Bad photo.'.",
        colour="#56B4E9",
        compute=clip_iqa_of,
        reads=("logit_scale", "antonym_embeddings", "image_embeddings"),
        source="CLIP-IQA (Wang et al., 2023)",
        differs=(
            'The antonym pair "Good photo." / "Bad photo." on the profile\'s CLIP, softmax of its '
            "logit scale times the cosines; no paper of this toolkit uses it, it is a check "
            "beside the judge's quality."
        ),
    ),
    Metric(
        "vqascore",
        "VQAScore",
        0,
        1,
        "higher",
        "probability",
        ("judge",),
        "image",
        "baseline",
        "The judge's probability of answering yes to 'Does this figure show \"prompt\"?'.",
        colour="#332288",
        compute=vqascore_of,
        reads=("vqa_answers",),
        source="VQAScore (Lin et al., 2024); AHEaD Tab. 9 (the image-text score of EXAG)",
        differs=(
            "P(\"Yes\") over the full next-token distribution for VQAScore's question 'Does "
            'this figure show "{text}"? Please answer yes or no.\' and its answer "Yes" as '
            "t2v_metrics asks and reads them, on the profile's judge; CLIP-FlanT5-xxl itself "
            "as the judge `clip-t5:zhiqiulin/clip-flant5-xxl`. A local judge reads it "
            "exactly; an OpenAI-compatible server "
            "from the answer's log-probabilities where it gives them; a judge without them "
            "(the Gemini developer API) samples k answers restricted to yes or no (so its share "
            "is P(Yes) among yes and no), k calls per question, and records the standard error. "
            "Computed with --baselines vqascore, for the generation prompt."
        ),
    ),
    Metric(
        "judge_align",
        "judge ALIGN",
        0,
        1,
        "higher",
        "",
        ("judge",),
        "image",
        "baseline",
        "The judge's 1-5 rating of how well the image shows the activity as the country does it.",
        colour="#117733",
        compute=judge_align_of,
        reads=("judge_ratings",),
        source="AHEaD Tab. 29 (the MLLM-as-a-judge ALIGN baseline, Tab. 2 and 6)",
        differs=(
            "Tab. 29's prompt and its annotators' 1-5 scale, its system and user parts sent as "
            'one message; the expected rating read at the digit after "score is" (see EXAG\'s '
            "MLLM variant for how each judge reads it), mapped as (E[r] - 1) / 4 so that it "
            "lies on ALIGN's scale."
        ),
    ),
    Metric(
        "judge_hal",
        "judge HAL",
        0,
        1,
        "lower",
        "",
        ("judge",),
        "image",
        "baseline",
        "The judge's 1-5 rating of how many elements are wrong for the activity and country.",
        colour="#AA4499",
        compute=judge_hal_of,
        reads=("judge_ratings",),
        source="AHEaD Tab. 30 (the MLLM-as-a-judge HAL baseline, Tab. 2 and 7)",
        differs=(
            "Tab. 30's prompt and its annotators' 1-5 scale, its system and user parts sent as "
            'one message; the expected rating read at the digit after "score is", mapped as '
            "(E[r] - 1) / 4 so that it lies on HAL's scale."
        ),
    ),
    Metric(
        "vie_sc",
        "VIE SC",
        0,
        1,
        "higher",
        "",
        ("judge",),
        "image",
        "baseline",
        "VIEScore's semantic consistency: the judge's 0-10 rating of how well the image "
        "follows its prompt, over 10.",
        colour="#88CCEE",
        compute=vie_sc_of,
        reads=("judge_ratings",),
        source="VIEScore (Ku et al., 2024), text-to-image semantic consistency; CUBE's quality",
        differs=(
            "VIEScore asks GPT-4o for a JSON list of 0-10 scores with its reasoning and parses "
            "the answer; this toolkit asks the profile's judge for the number alone, with "
            "VIEScore's rule in its own words (assets/prompts/vie_sc.txt), and takes the "
            "expectation of its 0-10 rating where log-probabilities exist."
        ),
    ),
    Metric(
        "vie_overall",
        "VIEScore",
        0,
        1,
        "higher",
        "",
        ("judge",),
        "image",
        "baseline",
        "VIEScore's overall score: sqrt(semantic consistency x perceptual quality).",
        colour="#DDCC77",
        compute=vie_overall_of,
        reads=("values",),
        source="VIEScore (Ku et al., 2024), O = sqrt(SC x PQ)",
        differs=(
            "SC is `vie_sc` and PQ the toolkit's quality reading (VIEScore's PQ: the lower of "
            "naturalness and freedom from artifacts), both over 10, so O lies on [0, 1] where "
            "VIEScore's lies on [0, 10]."
        ),
    ),
    Metric(
        "clipscore",
        "CLIPScore",
        0,
        2.5,
        "higher",
        "",
        ("image_embedder",),
        "image",
        "baseline",
        "2.5 x max(cosine of the image and its generation prompt, 0) on the profile's CLIP.",
        colour="#F0E442",
        compute=clipscore_of,
        reads=("clip_prompt_embeddings", "image_embeddings"),  # the first says why not
        source="CLIPScore (Hessel et al., 2021), w = 2.5; AHEaD Tab. 2, CulturalFrames Fig. 6, "
        "SoS Tab. 11-12",
        differs=(
            "Hessel's 2.5 x max(cos, 0) on the profile's image embedder, which must be a CLIP "
            "(`clip:` open_clip or `hfclip:` transformers; Hessel used ViT-B/32), for the "
            'generation prompt as it is, without Hessel\'s prefix "A photo depicts". '
            "torchmetrics scales it 100 x max(cos, 0), which is this x 40; earlier agree.json "
            "files hold that scale, read as `clipscore100`. No model call: the image "
            "embeddings are the ones diversity uses, and one text embedding per prompt."
        ),
    ),
    Metric(
        "pickscore",
        "PickScore",
        None,
        None,
        "higher",
        "",
        ("PickScore checkpoint",),
        "image",
        "baseline",
        "PickScore v1: CLIP-H tuned on people's choices, logit scale x cosine of the image "
        "and its generation prompt.",
        colour="#EE7733",
        compute=pickscore_of,
        reads=("model_readings",),
        source="PickScore (Kirstain et al., 2023); CulturalFrames Sec. 2, AHEaD A.4",
        differs=(
            "As the authors compute it: the logit scale times the cosine of the normalised "
            "image and text embeddings of PickScore v1 (a CLIP-H), its images and texts "
            "prepared by CLIP-H's own processor, for the generation prompt. One image "
            "embedding per image and one text embedding per prompt; no call of the judge."
        ),
        checkpoint="yuvalkirstain/PickScore_v1 (processor laion/CLIP-ViT-H-14-laion2B-s32B-b79K)",
    ),
    Metric(
        "hpsv2",
        "HPS v2",
        -1,
        1,
        "higher",
        "",
        ("HPS v2 checkpoint",),
        "image",
        "baseline",
        "Human Preference Score v2: the cosine of the image and its generation prompt on "
        "the authors' CLIP-H.",
        colour="#0077BB",
        compute=hpsv2_of,
        reads=("model_readings",),
        source="HPS v2 (Wu et al., 2023); CulturalFrames Fig. 6, CUBE's quality (Eq. 3)",
        differs=(
            "As the authors' `hpsv2.score`: open_clip's ViT-H-14 with their weights "
            "(HPS_v2_compressed.pt; v2.1 with --baseline-model hpsv2=v2.1), each image's "
            "longest side resized to 224 and the other padded with black (their "
            "ResizeMaxSize, not a crop), open_clip's tokenizer, the cosine of the normalised "
            "embeddings (no scale)."
        ),
        checkpoint="xswu/HPSv2/HPS_v2_compressed.pt (open_clip ViT-H-14; v2.1: "
        "HPS_v2.1_compressed.pt)",
    ),
    Metric(
        "cure",
        "CuRe",
        -1,
        1,
        "higher",
        "",
        ("CuRe checkpoint",),
        "image",
        "baseline",
        'CuRe as AHEaD runs it: the mean SigLIP 2 similarity of the image and "An image of '
        '{activity}" and "An image from {country}".',
        colour="#33BBEE",
        compute=cure_of,
        reads=("model_readings",),
        source="CuRe (Rege et al., 2025) as AHEaD A.4 runs it (Tab. 2 and 6)",
        differs=(
            "AHEaD's configuration: SigLIP 2, the mean cosine of the image and the two texts, "
            "CuRe's parent-category text left out. AHEaD names no SigLIP 2 size; this "
            "toolkit loads google/siglip2-so400m-patch14-384 (--baseline-model cure=WHERE for "
            "another)."
        ),
        checkpoint="google/siglip2-so400m-patch14-384",
    ),
    Metric(
        "caire_probe",
        "CAIRE probe",
        1,
        5,
        "higher",
        "rating",
        ("CAIRE probe checkpoint",),
        "image",
        "baseline",
        "CAIRE's Baseline 1: the 1-5 relevance level of the probe \"This image is {level} "
        'to {country}" most similar to the image.',
        colour="#EE3377",
        compute=caire_probe_of,
        reads=("model_readings",),
        source="CAIRE Sec. 5.1 (Baseline 1: vision-language encoders), the levels of Tab. 12",
        differs=(
            "As the paper: the cosine of the image and each of the five probes (the levels "
            "written as Sec. 5.1 lists them: Not relevant, Minimally relevant, Somewhat "
            "relevant, Relevant, Highly relevant), the most similar giving the rating, for "
            "the prompt's country only; CLIP ViT-B/32 (mSigLIP with --baseline-model "
            "caire_probe=siglip:google/siglip-so400m-patch16-256-i18n, the mSigLIP of the "
            "paper's footnote 4). A tie goes to "
            "the lower rating."
        ),
        checkpoint="openai/clip-vit-base-patch32 (or mSigLIP: "
        "google/siglip-so400m-patch16-256-i18n)",
    ),
    Metric(
        "imagereward",
        "ImageReward",
        None,
        None,
        "higher",
        "",
        ("ImageReward checkpoint",),
        "image",
        "baseline",
        "ImageReward: a BLIP model trained on people's rankings of generated images, its "
        "standardised reward for the image and its generation prompt.",
        colour="#009988",
        compute=imagereward_of,
        reads=("model_readings",),
        source="ImageReward (Xu et al., 2023); AHEaD Tab. 2, 6 and A.4",
        differs=(
            "The authors' checkpoint and formula (their MLP of the text encoder's first token "
            "given the image, minus 0.1672, over 1.0333), loaded into transformers' BLIP "
            "modules rather than their `image-reward` package (which pins timm 0.6.13 and "
            "fetches BERT's tokenizer at load time); the prompt cut or padded to 35 tokens "
            "and the image resized and centre-cropped as theirs."
        ),
        checkpoint="THUDM/ImageReward/ImageReward.pt with med_config.json (tokenizer "
        "google-bert/bert-base-uncased)",
    ),
    Metric(
        "tifa",
        "TIFA",
        0,
        1,
        "higher",
        "share",
        ("llm", "judge"),
        "image",
        "baseline",
        "The share of yes/no questions about the prompt that the judge answers yes.",
        colour="#CC6677",
        compute=tifa_of,
        reads=("tifa_answers",),
        source="TIFA (Hu et al., 2023), as CulturalFrames Sec. 6 and Fig. 6 compare it",
        differs=(
            "TIFA's language model writes question-answer pairs, many multiple-choice, and its "
            "VQA model picks an answer; here the profile's language model writes up to 10 "
            "yes/no questions whose answer is yes for a faithful image (assets/prompts/"
            "tifa.txt), once per prompt, and a question counts as answered correctly when the "
            'judge\'s P("Yes") of "Yes" and "No" is above 0.5. CulturalFrames used GPT-4o-mini '
            "for the questions and Qwen2.5-VL-32B-Instruct for the answers. The questions and "
            "answers are recorded with each image's scores."
        ),
    ),
    Metric(
        "soft_tifa",
        "Soft-TIFA",
        0,
        1,
        "higher",
        "probability",
        ("llm", "judge"),
        "image",
        "baseline",
        'The mean of the judge\'s P("Yes") over the yes/no questions about the prompt.',
        colour="#661100",
        compute=soft_tifa_of,
        reads=("tifa_answers",),
        source="Soft-TIFA: TIFA with each answer's probability in place of its 0 or 1",
        differs=(
            "TIFA's questions as `tifa` asks them; the mean of the judge's P(\"Yes\") of "
            '"Yes" and "No" (sampled: the share of yes among k answers) rather than the '
            "share of right answers."
        ),
    ),
    Metric(
        "drift",
        "drift",
        0,
        2,
        "lower",
        "",
        ("image_embedder",),
        "run",
        "ahead",
        "1 - cosine between the edited image and its parent: how far an edit moved it.",
        colour="#555555",
        source="this toolkit (the loop's guard against edits that move an image too far)",
        differs="Not from a paper: 1 - cosine of the image embeddings of an edit and its parent.",
    ),
    Metric(
        "pooled_align",
        "pooled ALIGN",
        0,
        1,
        "higher",
        "",
        (*_SCORER, "several images"),
        "prompt",
        "diversity",
        "ALIGN of everything a prompt's images show together.",
        compute=_pooled_align,
        reads=("pooled",),
        source="AHEaD Sec. 3.2, Eq. 7 (ALIGN_N)",
        differs="None.",
    ),
    Metric(
        "ddiv",
        "DDIV",
        0,
        1,
        "higher",
        "",
        (*_SCORER, "several images"),
        "prompt",
        "diversity",
        "Descriptor diversity: entropy of which references a prompt's images show.",
        compute=_ddiv,
        reads=("pooled",),
        source="AHEaD Sec. 3.2, Eq. 6",
        differs=(
            "Eq. 6 read literally is one normalised entropy over the whole reference set "
            "D_ref; this toolkit takes the normalised entropy within each dimension's "
            "references and then the mean over the dimensions that have references, as SDIV "
            "is taken (`metrics.ahead.descriptor_diversity`). The two agree only with one "
            "dimension or where every reference is shown as often; a prompt whose images "
            "show one reference of each of two dimensions scores 0 here and 0.5 by Eq. 6 read "
            "literally over four references."
        ),
    ),
    Metric(
        "sdiv",
        "SDIV",
        -1,
        1,
        "higher",
        "",
        (*_SCORER, "several images"),
        "prompt",
        "diversity",
        "Set diversity: pooled ALIGN less the images' mean ALIGN.",
        compute=_sdiv,
        reads=("pooled",),
        source="AHEaD Sec. 3.2, Eq. 7",
        differs=(
            "None: AHEaD's `diversity.py` takes SDIV per dimension and then the mean, which "
            "equals the difference of the means taken here."
        ),
    ),
    Metric(
        "vendi",
        "Vendi",
        1,
        None,
        "higher",
        "effective images",
        ("image_embedder", "several images"),
        "prompt",
        "diversity",
        "Vendi score: the effective number of different images among a prompt's images.",
        compute=_vendi,
        reads=("embeddings",),
        source="Vendi score (Friedman and Dieng, 2023); CUBE Sec. 5.1.1",
        differs=(
            "None: exp of the entropy of the eigenvalues of K/n, K the cosine kernel of the image"
            " embeddings."
        ),
    ),
    Metric(
        "qvendi",
        "qVendi",
        0,
        None,
        "higher",
        "",
        ("image_embedder", "several images"),
        "prompt",
        "diversity",
        "Vendi score times the images' mean FAITH.",
        compute=_qvendi,
        reads=("values", "weights"),
        source="CUBE Sec. 5.1.2 (quality-weighted Vendi)",
        differs=(
            "The quality is FAITH, where CUBE uses a quality model (HPS v2): a FAITH-weighted "
            "diversity."
        ),
    ),
    Metric(
        "explicit_met",
        "explicit met",
        0,
        1,
        "higher",
        "",
        ("llm", "judge"),
        "image",
        "expectations",
        "Share of the prompt's explicit expectations the image meets.",
        colour="#44AA99",
        source="CulturalFrames Sec. 3 (explicit expectations)",
        differs=(
            "CulturalFrames rates expectations with people; here the judge answers yes or no per "
            "statement (met when its yes-probability is above 0.5), checked against people with "
            "`refine agree`."
        ),
    ),
    Metric(
        "implicit_met",
        "implicit met",
        0,
        1,
        "higher",
        "",
        ("llm", "judge"),
        "image",
        "expectations",
        "Share of the prompt's implicit cultural expectations the image meets.",
        colour="#999933",
        source="CulturalFrames Sec. 3 (implicit expectations)",
        differs=(
            "As explicit expectations: the judge's reading, checked against people with `refine "
            "agree`."
        ),
    ),
    Metric(
        "expectations",
        "expectations met",
        0,
        1,
        "higher",
        "",
        ("llm", "judge"),
        "image",
        "human",
        "Share of all expectations (explicit and implicit) the image meets.",
        source="CulturalFrames Sec. 3 (all expectations)",
        differs="As explicit expectations.",
    ),
    Metric(
        "caire",
        "CAIRE",
        1,
        5,
        "higher",
        "rating",
        ("judge", "knowledge base"),
        "image",
        "human",
        "CAIRE cultural relevance of the image to the country, rated 1-5.",
        colour="#882255",
        source="CAIRE Sec. 3 (retrieval-augmented 1-5 relevance)",
        differs=(
            'The label\'s score is the argmax over the judge\'s P("1".."5"), with the best '
            "re-ranked knowledge-base entity's text (cut to 1,500 characters at a word boundary, "
            "a length the paper does not give) as context. App. B.1's log-likelihood scoring "
            "with affine debiasing is `refine caire score --loglik` "
            "(`metrics.caire.debiased_nll`; the paper gives no lambda or floor, so both are "
            "options); a run's CAIRE reads the rating."
        ),
    ),
    Metric(
        "clipscore100",
        "CLIPScore x100",
        0,
        100,
        "higher",
        "",
        ("image_embedder", "prompt"),
        "image",
        "earlier",
        "100 x max(cosine of the image and its prompt, 0): the CLIPScore of agree.json files "
        "written before `clipscore` took Hessel's scale.",
        source="CLIPScore as torchmetrics scales it (100 x max(cos, 0))",
        differs=(
            "Never computed now: only read from earlier agree.json files, whose `clipscore` "
            "was 100 x max(cos, 0). It is `clipscore` x 40, so every rank correlation is the "
            "same."
        ),
    ),
    Metric(
        "sos",
        "SoS",
        -1,
        1,
        "higher",
        "",
        ("image_embedder", "SoS bank"),
        "image",
        "sos",
        "Surface over semantics: closer to the culture (positive) or to the prompt's "
        "language (negative).",
        colour="#000000",
        source="SoS Sec. 4.1",
        differs=(
            "The SoS repository publishes no centroid code; this toolkit follows Sec. 4.1. "
            "Centroids are pooled over the banks of every generator given, as the paper pools "
            "images across models (`refine sos report`, `--centroids pooled`, the default); "
            "`--centroids per-generator` builds each bank's from its own."
        ),
    ),
)
CATALOG: dict[str, Metric] = {m.name: m for m in _ALL}
CUBE = (
    Metric(
        "cube_diversity",
        "CUBE diversity",
        0,
        1,
        "higher",
        "",
        ("observer", "several images"),
        "prompt",
        "cube",
        "Vendi of the geo-tags per chunk, over its size, averaged.",
        source=(
            "CUBE Sec. 5.1 (Vendi of the geo-tags under a hierarchical similarity, normalised by "
            "the number of images)"
        ),
        differs=(
            "Normalised per chunk of 8 images (the Vendi score over the chunk's size, mean over "
            "chunks), where the authors' notebook divides the last chunk by 8 even when it is "
            "smaller and keeps the first 24 of fewer than 32 images: that form is "
            "cube_diversity_authors. The geo-tags come from the profile's observer."
        ),
    ),
    Metric(
        "cube_diversity_authors",
        "CUBE diversity (authors')",
        0,
        1,
        "higher",
        "",
        ("observer", "several images"),
        "prompt",
        "cube",
        "As CUBE diversity, every chunk divided by the full chunk size.",
        source="CUBE's notebook cultural_diversity.ipynb (google-deepmind/cube at 132a602)",
        differs="None: the authors' arithmetic, reported beside cube_diversity.",
    ),
    Metric(
        "tag_vendi",
        "tag Vendi",
        1,
        None,
        "higher",
        "effective tags",
        ("observer", "several images"),
        "prompt",
        "cube",
        "Vendi score of the geo-tags.",
        source="CUBE Sec. 5.1.1, Eq. 1 (q = 1)",
        differs="None: every image's tag at once, not per chunk.",
    ),
    Metric(
        "cube_cd",
        "CUBE cultural diversity",
        0,
        1,
        "higher",
        "",
        ("observer", "judge", "several images"),
        "prompt",
        "cube",
        "Mean quality times the tags' Vendi over their number, per chunk of 8, averaged.",
        source="CUBE Sec. 5.1.2, Eq. 3 (qVS-bar, 8 images a prompt; Tab. 5 for five kernels)",
        differs=(
            "The quality is HPS v2's where its checkpoint loads, else the judge's probability "
            "that the image shows the concept (the run names which); the chunks are the run's "
            "images in order where CUBE draws 50 repetitions. Computed with the run's kernel "
            "(--cube-weights), and for Tab. 5's five kernels in each cell's cd_kernels."
        ),
    ),
    Metric(
        "tag_qvendi",
        "tag qVendi",
        0,
        None,
        "higher",
        "",
        ("observer", "judge", "several images"),
        "prompt",
        "cube",
        "tag Vendi times the images' mean quality.",
        source="CUBE Sec. 5.1.2, Eq. 2 (quality-weighted Vendi)",
        differs=(
            "The quality is HPS v2's where its checkpoint loads, else the judge's probability "
            "that the image shows the concept (the run names which). CUBE's cultural-diversity "
            "score, Eq. 3, which also divides by the "
            "number of images, is cube_cd."
        ),
    ),
    replace(
        CATALOG["vendi"],
        group="cube",
        help="Vendi score of the image embeddings.",
        source="Vendi score (Friedman and Dieng, 2023); CUBE Sec. 5.1.1, Eq. 1",
        differs="None: the cosine kernel of the profile's image embeddings.",
    ),
    replace(
        CATALOG["qvendi"],
        name="concept_qvendi",
        label="concept qVendi",
        needs=("image_embedder", "judge", "several images"),
        group="cube",
        help="Vendi score of the image embeddings times the images' mean concept quality "
        "(bench's qVendi weighs by FAITH).",
        source="CUBE Sec. 5.1.2, Eq. 2 (quality-weighted Vendi of the image embeddings)",
        differs="The quality is HPS v2's where its checkpoint loads, else the judge's "
        "probability that the image shows the concept (the run names which).",
    ),
    Metric(
        "cube_within",
        "CUBE within-culture diversity",
        0,
        1,
        "higher",
        "",
        ("observer", "judge", "several images"),
        "prompt",
        "cube",
        "Within one culture: the artifacts' Vendi per chunk of 8, over its size, averaged, "
        "over the images the judge finds faithful to the culture.",
        source="CUBE App. K (VS-bar(0, 0, 1), VQA-filtered, uniform quality; Fig. 6)",
        differs=(
            "The filter asks the profile's judge \"Does the {concept} in the image belong to "
            '{country}?" and keeps yes-probabilities of 0.5 or more; CUBE words the question '
            'per concept ("Does dish in the image belong to Japanese cuisine?").'
        ),
    ),
    Metric(
        "concept_quality",
        "concept quality",
        0,
        1,
        "higher",
        "probability",
        ("judge",),
        "image",
        "cube",
        "HPS v2's score of the image with its prompt (max(cos, 0)), or where HPS v2 is not "
        "available the judge's probability that the image shows the concept; the run names "
        "which.",
        source="CUBE Sec. 5.1.2 (the quality s of Eq. 2: HPS v2)",
        differs=(
            "HPS v2 as CUBE uses it where its checkpoint loads (--cube-quality auto, the "
            "default, or hpsv2); else, or with --cube-quality judge, the judge's yes-probability "
            "that the image shows the concept. Each run and cell names its quality's source."
        ),
    ),
)


@dataclass(frozen=True)
class Variant:
    """One way of computing a metric, by its short fixed name (``exag:ita``), as every
    score that it made names it."""

    name: str
    formula: str  # what it computes, in a line
    source: str  # where it is defined

    @property
    def metric(self) -> str:
        return self.name.split(":", 1)[0]

    def explain(self) -> str:
        return f"{self.name}: {self.formula} ({self.source})"


# the metrics whose values depend on the EXAG variant (FAITH is a mean with EXAG): kept
# under their variant (``exag@exag:ita``), never averaged or correlated across variants
VARIANT_BOUND = ("exag", "faith")

# the metrics a change of the reference descriptors moves: matches of the same observations
# (no model call), and FAITH from them (refine.loop.aims re-matches them)
MATCHED = ("align", "hal", "faith")

VARIANTS: dict[str, Variant] = {
    v.name: v
    for v in (
        Variant(
            "exag:mllm",
            "the judge's expected 1-5 exaggeration rating (read at the digit after "
            '"score is"), (E[rating] - 1) / 4; no stereotype candidates are listed',
            "AHEaD Tab. 31, without real photos; not comparable with the paper's Tab. 1",
        ),
        Variant(
            "exag:ita",
            "per stereotype candidate, VQAScore (P(Yes) over the full next-token "
            "distribution) on the image less its mean over the real photos; the largest excess "
            "above 0. Read from sampled answers (a judge without log-probabilities), an excess "
            "counts only where it is at least 2 standard errors: the largest of several noisy "
            "excesses is otherwise inflated by their noise (the winner's curse)",
            "AHEaD Eq. 3-4, with the profile's judge as the VQAScore model; by sampling, this "
            "toolkit's correction",
        ),
        Variant(
            "exag:judge-rubric",
            "the judge's 1-5 rating of how strongly the image exaggerates the listed "
            "stereotype candidates, (E[rating] - 1) / 4",
            "this toolkit's earlier default without real photos (records before exag:mllm)",
        ),
        Variant("faith:ahead", "mean(ALIGN, 1 - HAL, 1 - EXAG)", "AHEaD Eq. 5"),
        Variant(
            "faith:no-exag",
            "mean(ALIGN, 1 - HAL), where no EXAG could be measured",
            "this toolkit",
        ),
    )
}


def variant(name: str) -> Variant:
    try:
        return VARIANTS[name]
    except KeyError:
        raise KeyError(f"unknown variant {name!r} (known: {', '.join(VARIANTS)})") from None


def made_by(
    name: str | None, note: str | None = None, mode: str | None = None, stderr: float | None = None
) -> str:
    """How a number was made, in words for a page or a terminal: its variant's name and
    formula, and how the judge was read when it sampled (``mode`` ``sampled k=N``, the
    number's standard error); why it is missing when ``name`` is None. A record written
    before the names holds the formula in words, shown as it is."""
    if name is None:
        return f"not computed: {note}" if note else "not computed"
    words = f"{name} ({VARIANTS[name].formula})" if name in VARIANTS else name
    if mode and mode != "logprobs":
        words += f" [judge {mode}" + (f", s.e. {stderr:.3f}]" if stderr is not None else "]")
    return words


def register(m: Metric) -> None:
    """Add a metric to the catalog, after the others: every front that takes its columns
    from the catalog shows it, and the assessor computes it where its readings allow (an
    image metric with ``compute``)."""
    global _ALL
    if m.name in CATALOG:
        raise ValueError(f"the catalog already holds a metric named {m.name!r}")
    if m.level == "image" and m.compute is None:
        raise ValueError(f"{m.name}: a registered image metric needs its compute function")
    from metrics.stats import POOLS

    if m.pool not in POOLS:
        raise ValueError(f"{m.name}: pool {m.pool!r} is not one of {', '.join(POOLS)}")
    _ALL = (*_ALL, m)
    CATALOG[m.name] = m


def unregister(name: str) -> None:
    global _ALL
    CATALOG.pop(name)
    _ALL = tuple(m for m in _ALL if m.name != name)


@contextlib.contextmanager
def registered(m: Metric) -> Iterator[Metric]:
    """The catalog with ``m`` in it for the length of a ``with`` block."""
    register(m)
    try:
        yield m
    finally:
        unregister(m.name)


def computed(level: str = "image") -> tuple[Metric, ...]:
    """The metrics of ``level`` the assessor computes through their ``compute``, in
    catalog order."""
    return tuple(m for m in _ALL if m.level == level and m.compute is not None)


def computing_order(level: str = "image") -> tuple[Metric, ...]:
    """:func:`computed` in the order the assessor computes them: those that read the
    values of others (FAITH) after those that do not, each in catalog order."""
    ms = computed(level)
    return (
        *(m for m in ms if "values" not in m.reads),
        *(m for m in ms if "values" in m.reads),
    )


def prompt_values(
    wanted: Sequence[str], values: dict[str, Any] | None = None, **readings: Any
) -> dict[str, Any]:
    """The prompt-level figures of ``wanted``, each by its catalog ``compute`` from the
    prompt's readings (``pooled``, ``embeddings``, ``weights``), in computing order, those
    that read others' values last; ``values``: figures known already (a rescore's Vendi of
    images it does not embed again). Every task computes its prompt figures here."""
    known = dict(values or {})
    out: dict[str, Any] = {}
    for m in computing_order("prompt"):
        if m.name in wanted:
            given = {r: known if r == "values" else readings[r] for r in m.reads}
            known[m.name] = out[m.name] = m.compute(**given)
    return out


def pooled(name: str, values: Sequence[float | None], seed: int = 42) -> dict[str, Any]:
    """``{"mean", "interval"}`` of a figure's values over prompts or cells (None left out),
    pooled as its catalog entry says (:attr:`Metric.pool`; a figure the catalog does not
    hold, such as calls or seconds, by the mean), the bootstrap drawn with ``seed``. Every
    task's summary pools here."""
    from metrics.stats import POOLS

    m = CATALOG.get(name) or next((c for c in CUBE if c.name == name), None)
    return POOLS[m.pool if m is not None else "mean"](values, seed)


def metric(name: str) -> Metric:
    try:
        return CATALOG[name]
    except KeyError:
        raise KeyError(f"unknown metric {name!r} (known: {', '.join(CATALOG)})") from None


def known(name: str) -> bool:
    """Whether the catalog holds a metric of this name (bench's or CUBE's)."""
    return name in CATALOG or any(m.name == name for m in CUBE)


def names(*groups: str, level: str | None = None) -> tuple[str, ...]:
    """The names of the metrics of these groups (all when none), in catalog order."""
    return tuple(
        m.name
        for m in _ALL
        if (not groups or m.group in groups) and (level is None or m.level == level)
    )


def of_series(name: str) -> Metric | None:
    """The metric a chart series or a table column shows: one named by its label, alone,
    after ``best`` (``best FAITH``) or before a qualifier (``SoS fr``, ``FAITH fr``,
    ``CAIRE Iran (0-1)``, ``CAIRE 1-5``); None for anything else."""
    name = name.removeprefix("best ")
    for m in sorted(_ALL, key=lambda m: -len(m.label)):
        if name == m.label or name.startswith(m.label + " "):
            return m
    return None


def heading_of(name: str) -> str:
    """A series' or a column's name with its metric's direction arrow (as it is when it
    names no metric)."""
    m = of_series(name)
    return f"{name} {m.arrow}" if m else name


def label(name: str) -> str:
    """The metric's label, or the name itself for a figure the catalog does not hold."""
    return CATALOG[name].label if name in CATALOG else name


def image_extras() -> tuple[str, ...]:
    """The per-image metrics recorded beside AHEaD's: the quality readings and every other
    image metric the catalog computes (one registered since included), in catalog order.
    Bench rows, the results record, the leaderboard and ``refine agree`` take these columns when
    they run, so a registered metric reaches them with no other change."""
    return tuple(m.name for m in computed("image") if m.group != "ahead")


def agree_metrics() -> tuple[str, ...]:
    """What ``refine agree`` can compare with human ratings, in catalog order of groups."""
    extras = tuple(m for m in image_extras() if m not in BENCH_IMAGE)
    return (*BENCH_IMAGE, *extras, *BENCH_EXPECTATIONS, *names("human"))


# the metric a bench ranks generators by, pairs them on and draws per country and
# against diversity: the product's measure of cultural faithfulness
HEADLINE = "faith"
# what bench stores per image, and per prompt, in the order of rows.csv
BENCH_IMAGE = names("ahead", level="image")
BENCH_QUALITY = names("quality")  # the quality readings (image_extras() adds the rest)
BENCH_PROMPT = names("diversity")
BENCH_EXPECTATIONS = names("expectations")
# what an editor bench reads off each loop (refine.harness.tasks.editor_loops.task): the headline,
# quality and drift from the image before; it adds drift outside the boxes and from the source
EDITOR_LOOP = (HEADLINE, "quality", "drift")
# CUBE concepts runs' figures
CUBE_FIGURES = tuple(m.name for m in CUBE)
