"""``refine caire score``: its options as a plan whose fields carry their flag, help and
bounds, checked by its own validators, and :func:`score_plan`, the images rated 1-5 per
culture label with a knowledge base or without."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, field_validator, model_validator

from refine.records import DEFAULT_PROFILE, option


class CaireScoreError(ValueError):
    """What keeps the images from being scored; the message names the option."""


class CaireScorePlan(BaseModel):
    model_config = ConfigDict(extra="forbid")

    images: list[Path] = option(
        help="Image files to score.", flag="IMAGES", given="arguments", min_length=1
    )
    labels: str = option(help='Culture labels, e.g. "Iran,Turkey,India".')
    kb: Path | None = option(None, "A KB folder; without it, kb-free mode.", given="path")
    embedder: str | None = option(None, "Image embedder (default: the one the KB was built with).")
    profile: str = option(DEFAULT_PROFILE, "Backend profile for the judge.")
    backends: list[str] = option(
        help="Override a role: ROLE=NAME.", flag="--backend", given="repeat", default_factory=list
    )
    top_k: int = option(20, "KB images retrieved per image.", ge=1)
    ranking: Literal["similarity", "frequency"] = option(
        "similarity", "Rank entities by 'similarity' or 'frequency'."
    )
    text_chars: int = option(1500, "Cut the entity text to this many characters.", ge=0)
    device: str | None = option(None, "Device of the image embedder.")
    loglik: bool = option(
        False,
        "Also score each label by CAIRE's debiased log-likelihood (App. B.1): a local judge "
        "(hf:) or vLLM (openai:), not the Gemini API.",
    )
    caire_lambda: float | None = option(
        None, "With --loglik: lambda of the debiasing (the paper gives none)."
    )
    caire_floor: float | None = option(
        None, "With --loglik: the base rate's floor (the paper gives none)."
    )
    out: Path | None = option(None, "Write the scores (SCORES.json) here.", given="path")

    @field_validator("labels")
    @classmethod
    def _labels(cls, text: str) -> str:
        from refine.evaluate.caire.scorer import parse_labels

        parse_labels(text)  # a ValueError says what is wrong with them
        return text

    @model_validator(mode="after")
    def _loglik(self) -> CaireScorePlan:
        given = self.caire_lambda is not None, self.caire_floor is not None
        if self.loglik and not all(given):
            raise ValueError(
                "--loglik: give --caire-lambda and --caire-floor (CAIRE App. B.1 gives no "
                "values; lambda 0 leaves the likelihoods undebiased)"
            )
        if not self.loglik and any(given):
            raise ValueError("--caire-lambda and --caire-floor go with --loglik")
        return self


def image_embedder(name: str | None, profile: str, device: str | None) -> Any:
    """The image embedder ``name`` (default: the profile's) on ``device``."""
    from refine.backends.selection import Backends
    from refine.profiles import load_profile

    try:
        backends = Backends(
            load_profile(profile),
            options={"image_embedder": {"device": device}} if device else None,
        )
        return backends.embedder_for(name or backends.names["image_embedder"])
    except (ValueError, KeyError) as err:
        raise CaireScoreError(f"--embedder/--profile: {err}") from err


def score_plan(
    plan: CaireScorePlan, emit: Callable[[str], None] | None = None
) -> tuple[list[Any], dict[str, Any], str]:
    """(each image's scores, the scores document with the spread over the images, the
    scorer's mode); the document is written to ``plan.out`` where given."""
    from metrics.caire import diversity
    from refine.backends.registry import parse_overrides
    from refine.backends.selection import Backends
    from refine.evaluate.caire.kb import KBError, KnowledgeBase
    from refine.evaluate.caire.scorer import CaireScorer, parse_labels, scores_document
    from refine.io.inputs import load_images
    from refine.profiles import load_profile

    labels = parse_labels(plan.labels)
    loaded = load_images(plan.images)
    kb = embedder = None
    settings = (plan.caire_lambda, plan.caire_floor) if plan.loglik else None
    try:
        if plan.kb is not None:
            kb = KnowledgeBase.load(plan.kb)
            embedder = image_embedder(plan.embedder or kb.embedder, plan.profile, plan.device)
        try:
            backends = Backends(load_profile(plan.profile), parse_overrides(plan.backends))
            judge = backends.get("judge")
        except ValueError as err:
            raise CaireScoreError(f"--profile/--backend: {err}") from err
        scorer = CaireScorer(
            judge, kb, embedder, plan.top_k, plan.ranking, plan.text_chars, loglik=settings
        )
    except KBError as err:
        raise CaireScoreError(f"--kb: {err}") from err
    except CaireScoreError:
        raise
    except ValueError as err:
        where = "--loglik" if "log-likelihood" in str(err) else "--profile/--backend"
        raise CaireScoreError(f"{where}: {err}") from err
    if emit is not None:
        mode = f"knowledge base {plan.kb}" if kb else "kb-free (no knowledge base)"
        emit(f"scoring {len(loaded)} image(s), {mode}")
    results = scorer.score(loaded, labels, names=[str(p) for p in plan.images])
    doc = scores_document(results, labels)
    doc["diversity"] = diversity(labels, doc["scores"])
    if plan.out is not None:
        from refine.io.files import atomic_write_text

        plan.out.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(plan.out, json.dumps(doc, indent=2))
    return results, doc, scorer.mode
