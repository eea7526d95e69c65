"""The quality of a concepts run's images (CUBE rates it with HPS v2, Sec. 5.1.2) and CUBE
App. K's filter of within-culture images (:mod:`refine.harness.tasks.concepts.task`).

``auto`` (the default) scores with HPS v2 where its checkpoint is at hand (the hub's in
the cache, or ``--baseline-model hpsv2=...``) and loads, and otherwise with the judge's
yes-probability that the image shows its prompt, saying why (a 2 GB download is never
started unasked); ``hpsv2`` requires it;
``judge`` takes the judge's. The score of HPS v2 is the cosine of the image (letterboxed,
as its authors' code does) and its prompt, kept at 0 or more so that it is a quality in
[0, 1] as Eq. 2 wants."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

KINDS = ("auto", "hpsv2", "judge")
FAITHFUL = 0.5  # a within-culture image is kept when the judge's yes-probability reaches it


class QualityUnavailable(ValueError):
    """HPS v2 was required and does not load."""


@dataclass
class Quality:
    by: str  # what rates it, in words: "hpsv2 (xswu/HPSv2/...)", "judge (gemini:...)"
    why: str = ""  # why the judge rates it where HPS v2 was wanted
    given: Any = None  # the baselines' checkpoints given (hpsv2=...)


def choose_quality(kind: str, baseline_models: Sequence[str], scorer: Any) -> Quality:
    """The quality a run's images get; a ValueError where HPS v2 is required and does not
    load."""
    from refine.evaluate.baseline_models import checkpoint, embedder, parse_baseline_models

    if kind not in KINDS:
        raise ValueError(f"the quality is one of {', '.join(KINDS)}, not {kind!r}")
    judge = f"judge ({scorer.names.get('judge', '?')})"
    if kind == "judge":
        return Quality(judge)
    given = parse_baseline_models(baseline_models)
    ck = checkpoint("hpsv2", given)
    if kind == "auto" and not _at_hand(ck):
        return Quality(
            judge,
            f"HPS v2 ({ck.describe()}) is not downloaded: `refine models download --baselines "
            "hpsv2`, or --cube-quality hpsv2 to fetch it",
        )
    try:
        embedder(ck)
    except Exception as err:  # any failure to load: said, never hidden
        if kind == "hpsv2":
            raise QualityUnavailable(
                f"--cube-quality hpsv2: HPS v2 ({ck.describe()}) does not load: {err}"
            ) from err
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        return Quality(judge, f"HPS v2 ({ck.describe()}) did not load: {first}")
    return Quality(f"hpsv2 ({ck.describe()})", given=given)


def _at_hand(ck: Any) -> bool:
    """Whether a checkpoint loads without a download: a local path, or a hub file in the
    cache."""
    from pathlib import Path

    if ck.path:
        return Path(ck.path).exists()
    if ck.kind != "clip":
        return False
    from huggingface_hub import try_to_load_from_cache

    return isinstance(try_to_load_from_cache(ck.repo, ck.file), str)


def read_quality(q: Quality, scorer: Any, images: list[Any], prompt: str) -> list[float]:
    """Each image's quality, as ``q`` says."""
    if q.by.startswith("hpsv2"):
        from refine.evaluate.baseline_models import model_readings

        readings = model_readings(["hpsv2"], images, prompt, q.given)
        return [max(0.0, float(r["hpsv2"].cosine)) for r in readings]
    with scorer.using("judge") as judge:
        return list(
            judge.yes_probability(
                images, [f'Does this image match the prompt "{prompt}"?'] * len(images)
            )
        )


def faithful(scorer: Any, images: list[Any], concept: Any) -> tuple[list[bool], list[float]]:
    """CUBE App. K's filter: whether the judge finds each image's concept to belong to the
    culture (yes-probability of :data:`FAITHFUL` or more), and the probabilities."""
    question = f"Does the {concept.name} in the image belong to {concept.country}?"
    with scorer.using("judge") as judge:
        p = [float(x) for x in judge.yes_probability(images, [question] * len(images))]
    return [x >= FAITHFUL for x in p], p


def image_records(files, seeds, tags, quality, kept=None, kept_p=None) -> list[dict[str, Any]]:
    """A concepts cell's images: file, seed, geo-tag, quality, and within a culture
    whether the judge found it faithful (and its yes-probability)."""
    n = len(files)
    return [
        {
            "file": f,
            "seed": s,
            "tag": list(t),
            "concept_quality": q,
            **({} if ok is None else {"faithful": ok, "faithful_p": p}),
        }
        for f, s, t, q, ok, p in zip(
            files, seeds, tags, quality, kept or [None] * n, kept_p or [None] * n, strict=True
        )
    ]
