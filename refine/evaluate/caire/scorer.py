"""CAIRE relevance: which cultures an image reads as, 1-5 per label, grounded in a KB.

With a knowledge base: the image's embedding retrieves the top-K KB images, their entities
are pooled and ranked (by image-to-name similarity, or by how often they were hit), and the
best entity's text (cut to ``text_chars``) goes with the image and the rubric
(``assets/prompts/caire_rubric.txt``) to the judge. Without one ("kb-free" mode, named
so in every result) the judge sees the image and the rubric only. Each label's score is the
argmax of the judge's probabilities of "1".."5"; the distribution and its expectation are
kept.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from metrics.caire import RANKINGS, EntityHit, pool_entities
from refine.assets import prompt_template
from refine.evaluate.caire.kb import _as_array
from refine.records import CaireScore, LabelScore

# CAIRE App. B.1: the completion whose label's likelihood is read, the label after a space
# (so that a tokenizer that joins a space to the next word keeps the prefix's tokens)
LOGLIK_PREFIX = "This text is relevant to"


def parse_labels(text: str | Sequence[str]) -> list[str]:
    """``"Iran, Turkey,India"`` or a list -> clean labels; empty or repeated ones refused."""
    items = text.split(",") if isinstance(text, str) else list(text)
    labels = [str(x).strip() for x in items if str(x).strip()]
    if not labels:
        raise ValueError("no culture labels given; name them like --labels 'Iran,Turkey,India'")
    folded = [x.casefold() for x in labels]
    dup = sorted({x for x in labels if folded.count(x.casefold()) > 1})
    if dup:
        raise ValueError(f"labels given twice: {', '.join(dup)}")
    return labels


class CaireScorer:
    """Scores images for cultural relevance with a judge, and a KB and image embedder when
    given (the embedder must be the one the KB was built with)."""

    def __init__(
        self,
        judge: Any,
        kb: Any = None,
        embedder: Any = None,
        top_k: int = 20,
        ranking: str = "similarity",
        text_chars: int = 1500,
        shown: int = 5,
        loglik: tuple[float, float] | None = None,
    ) -> None:
        """``loglik``: (lambda, floor) to also score each label by CAIRE App. B.1's
        debiased log-likelihood; the judge must read the prompt's log-probabilities."""
        if ranking not in RANKINGS:
            raise ValueError(f"unknown ranking {ranking!r}; use one of {', '.join(RANKINGS)}")
        if top_k < 1:
            raise ValueError("top_k must be at least 1")
        if kb is not None:
            if embedder is None:
                raise ValueError("a knowledge base needs the image embedder it was built with")
            kb.check_embedder(embedder.id)
        self.judge, self.kb, self.embedder = judge, kb, embedder
        self.top_k, self.ranking, self.text_chars, self.shown = top_k, ranking, text_chars, shown
        self.loglik = loglik
        if loglik is not None and not callable(getattr(judge, "completion_nll", None)):
            name = getattr(judge, "id", type(judge).__name__)
            raise ValueError(
                f"CAIRE's log-likelihood scoring reads the prompt's log-probabilities, which "
                f"the judge {name} does not give; use a local judge (hf:MODEL) or a vLLM "
                "server (openai:MODEL)"
            )

    @property
    def mode(self) -> str:
        return "kb" if self.kb is not None else "kb-free"

    def link(self, images: Sequence[Any]) -> list[list[EntityHit]]:
        """Per image, the KB entities found by visual retrieval, best first."""
        import numpy as np

        if self.kb is None:
            raise ValueError("entity linking needs a knowledge base")
        queries = _as_array(self.embedder.encode_images(list(images)))
        sims, rows = self.kb.search(queries, self.top_k)
        linked = []
        for q, sim_row, row in zip(queries, sims, rows, strict=True):
            keep = row >= 0
            entities = self.kb.image_entities[row[keep]]
            name_sim = None
            if self.ranking == "similarity":
                unique = sorted({int(e) for e in entities})
                cos = np.asarray(self.kb.names[unique]) @ q
                name_sim = {e: float(c) for e, c in zip(unique, cos, strict=True)}
            linked.append(
                pool_entities(entities.tolist(), sim_row[keep].tolist(), name_sim, self.ranking)
            )
        return linked

    def knowledge(self, hit: EntityHit) -> tuple[str, str]:
        """The entity's name and the text the judge sees (cut to ``text_chars``)."""
        e = self.kb.entities[hit.entity]
        text = self.kb.text(hit.entity, self.text_chars) or e.get("gloss") or ""
        if e.get("gloss") and text != e["gloss"] and not text.startswith(e["gloss"]):
            text = f"{e['gloss']}. {text}"
        return e["name"], text

    def prompt(self, label: str, entity: str | None = None, text: str | None = None) -> str:
        block = ""
        if entity is not None:
            block = prompt_template("caire_knowledge").format(entity=entity, text=text or "")
        return prompt_template("caire_rubric").format(label=label, knowledge=block)

    def score(
        self,
        images: Sequence[Any],
        labels: Sequence[str],
        names: Sequence[str] | None = None,
        linked: list[list[EntityHit]] | None = None,
    ) -> list[CaireScore]:
        """One :class:`CaireScore` per image; ``names`` (e.g. file names) are recorded;
        ``linked`` gives :meth:`link`'s answer when it was computed already."""
        labels = parse_labels(labels)
        images = list(images)
        if linked is None:
            linked = self.link(images) if self.kb is not None else [[] for _ in images]
        results = []
        for n, (image, hits) in enumerate(zip(images, linked, strict=True)):
            entity = candidates = knowledge = None
            if hits:
                best = hits[0]
                name, knowledge = self.knowledge(best)
                entity = _entity_dict(self.kb, best)
                candidates = [_entity_dict(self.kb, h) for h in hits[: self.shown]]
                prompts = [self.prompt(label, name, knowledge) for label in labels]
            else:
                prompts = [self.prompt(label) for label in labels]
            ratings = self.judge.rate([image] * len(labels), prompts)
            lls = self._loglik(image, labels, name if hits else None, knowledge)
            results.append(
                CaireScore(
                    mode=self.mode,
                    labels=[
                        LabelScore(
                            label=lab,
                            score=r.argmax,
                            expected=r.expectation,
                            probabilities=list(r.probabilities),
                            stderr=getattr(r, "stderr", None),
                            **(lls[k] if lls else {}),
                        )
                        for k, (lab, r) in enumerate(zip(labels, ratings, strict=True))
                    ],
                    judge=getattr(self.judge, "id", type(self.judge).__name__),
                    judge_mode=getattr(ratings[0], "method", None) if ratings else None,
                    kb=str(self.kb.path) if self.kb is not None else None,
                    embedder=getattr(self.embedder, "id", None) if self.kb is not None else None,
                    ranking=self.ranking if self.kb is not None else None,
                    entity=entity,
                    candidates=candidates or [],
                    knowledge=knowledge,
                    image=names[n] if names else None,
                    loglik=self._loglik_note(labels, lls),
                )
            )
        return results

    def _loglik(
        self, image: Any, labels: Sequence[str], entity: str | None, knowledge: str | None
    ) -> list[dict[str, float]] | None:
        """Each label's negative log-likelihood after the image and its knowledge, after
        the prompt alone, and debiased (CAIRE App. B.1); None when not asked for."""
        if self.loglik is None:
            return None
        from metrics.caire import debiased_nll

        lam, floor = self.loglik
        block = ""
        if entity is not None:
            block = prompt_template("caire_knowledge").format(entity=entity, text=knowledge or "")
        asked = prompt_template("caire_loglik")
        n = len(labels)
        said = [f" {label}" for label in labels]
        full = self.judge.completion_nll(
            [image] * n, [asked.format(knowledge=block)] * n, LOGLIK_PREFIX, said
        )
        base = self.judge.completion_nll(
            [None] * n, [asked.format(knowledge="")] * n, LOGLIK_PREFIX, said
        )
        return [
            {"nll": f, "base_nll": b, "debiased": debiased_nll(f, b, lam, floor)}
            for f, b in zip(full, base, strict=True)
        ]

    def _loglik_note(
        self, labels: Sequence[str], lls: list[dict[str, float]] | None
    ) -> dict[str, Any] | None:
        if lls is None or self.loglik is None:
            return None
        best = min(range(len(labels)), key=lambda k: lls[k]["debiased"])
        return {
            "lambda": self.loglik[0],
            "floor": self.loglik[1],
            "completion": LOGLIK_PREFIX + " {label}",
            "best": labels[best],
        }


def _entity_dict(kb: Any, hit: EntityHit) -> dict[str, Any]:
    e = kb.entities[hit.entity]
    return {
        "id": e["id"],
        "name": e["name"],
        "score": round(hit.score, 6),
        "hits": hit.hits,
        "best_image_similarity": round(hit.best_image_similarity, 6),
    }


def scores_document(results: Sequence[CaireScore], labels: Sequence[str]) -> dict[str, Any]:
    """What ``refine metrics caire-diversity --scores`` reads, with each image's details."""
    labels = parse_labels(labels)
    return {
        "labels": labels,
        "scores": [[r.score_of(lab).score for lab in labels] for r in results],
        "mode": results[0].mode if results else None,
        "images": [r.to_dict() for r in results],
    }
