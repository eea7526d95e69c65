"""Prompt languages and SoS per round.

Round 0's prompt is also rendered in each extra prompt language (translated by the language
model, answers cached) and generated from; every later round applies the same instruction to
each language's image. With an SoS bank, every image gets its SoS (its culture's centroid
minus its prompt language's, see ``metrics/sos.py``); with ``language_scores`` each
language's image is also observed and scored like the main one.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any

from refine.assets import prompt_template
from refine.evaluate.refs_build import LLMCache
from refine.evaluate.sos import LANGUAGES, Translation
from refine.events import StageStarted
from refine.records import LanguageImage

if TYPE_CHECKING:
    from refine.backends.selection import Backends
    from refine.loop.steps.base import StepContext
    from refine.records import Round, Run, RunSpec


def bank_culture(centroids: Any, country: str) -> str | None:
    """The bank's name for ``country`` (case-insensitive), or None."""
    for c in centroids.cultures:
        if c.casefold() == country.casefold():
            return c
    return None


class LanguagesStep:
    name = "languages"

    def __init__(self) -> None:
        self._banks: dict[str, tuple[Any, Any, Any]] = {}
        self._lock = threading.Lock()

    def bank(self, path: str, backends: Backends) -> tuple[Any, Any, Any]:
        """(bank, centroids, image embedder) of an SoS bank folder, loaded once."""
        with self._lock:
            if path not in self._banks:
                from refine.evaluate.sos import Bank

                bank = Bank(path)
                embedder = backends.embedder_for(bank.manifest["settings"]["embedder"])
                self._banks[path] = (bank, bank.centroids(), embedder)
            return self._banks[path]

    def check(self, spec: RunSpec, country: str, backends: Backends) -> None:
        """The bank holds the run's country and every prompt language (the languages
        themselves are checked by settings)."""
        if not spec.sos_bank:
            return
        _, centroids, _ = self.bank(spec.sos_bank, backends)
        problems = []
        if bank_culture(centroids, country) is None:
            problems.append(
                f"the SoS bank {spec.sos_bank} has no culture {country!r} "
                f"(it has {', '.join(centroids.cultures)})"
            )
        missing = [x for x in ["en", *spec.prompt_languages] if x not in centroids.languages]
        if missing:
            problems.append(
                f"the SoS bank {spec.sos_bank} has no images prompted in "
                f"{', '.join(missing)} (it has {', '.join(centroids.languages)})"
            )
        if problems:
            raise ValueError("; ".join(problems))

    def after_round(self, run: Run, r: Round, ctx: StepContext) -> None:
        spec = run.spec
        if not spec.prompt_languages and not spec.sos_bank:
            return
        t = time.perf_counter()
        langs = list(spec.prompt_languages)
        seed = spec.seed + 1000 * r.index
        images, entries = [], {}
        if langs:
            ctx.emit(StageStarted(round=r.index, stage="languages", n=len(langs)))
        for lang in langs:
            if r.kind == "generate":
                prompt = self.translate(r.text, lang, ctx)
                with ctx.backends.using("generator") as generator:
                    (image,) = generator.generate(prompt, [seed])
                parent_image = None
            else:
                parent = run.rounds[r.parent].languages.get(lang)
                if parent is None:
                    raise ValueError(
                        f"round {r.parent} has no {lang} image to edit: prompt languages are "
                        "chosen when a run starts (start a new run to add one)"
                    )
                with ctx.backends.using("editor") as editor:
                    (image,) = editor.edit(ctx.store.load_image(parent.image), r.text, [seed])
                prompt, parent_image = None, parent.image
            ctx.calls.add()
            entry = LanguageImage(
                image=ctx.store.save_image(f"round_{r.index:02d}_{lang}.png", image),
                prompt=prompt,
                parent_image=parent_image,
            )
            if spec.language_scores:  # the same observation and scores as the main image
                _, scores, feedback, _ = ctx.assessor.assess(
                    image, run.references, spec.tau, spec.max_per_dimension
                )
                entry.scores = scores
                entry.missing = [m.phrase for m in feedback.missing]
                entry.hallucinated = [h.phrase for h in feedback.hallucinated]
            images.append(image)
            entries[lang] = entry
        main = ctx.store.load_image(r.best.image)
        values = self.sos(spec, run.references.country, [main, *images], ["en", *langs], ctx)
        r.sos = values[0]
        for lang, value in zip(langs, values[1:], strict=True):
            entries[lang].sos = value
        r.languages = entries
        r.timings["languages"] = time.perf_counter() - t

    def sos(
        self, spec: RunSpec, country: str, images: list[Any], langs: list[str], ctx: StepContext
    ) -> list[float | None]:
        if not spec.sos_bank:
            return [None] * len(images)
        _, centroids, embedder = self.bank(spec.sos_bank, ctx.backends)
        with ctx.backends.model_lock:
            e = embedder.encode_images(images)
        if hasattr(e, "detach"):
            e = e.detach().float().cpu().numpy()
        culture = bank_culture(centroids, country)
        return [float(v) for v in centroids.score(e, [culture] * len(images), langs)]

    @staticmethod
    def translate(text: str, lang: str, ctx: StepContext) -> str:

        request = prompt_template("translate").format(language=LANGUAGES[lang], text=text)
        cache = LLMCache()
        with ctx.backends.using("llm") as llm:
            answer = cache.ask(llm, request, Translation).translation.strip()
        ctx.calls.add(cache.misses)
        if not answer:
            raise ValueError(f"the language model gave an empty {LANGUAGES[lang]} translation")
        return answer
