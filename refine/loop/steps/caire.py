"""CAIRE per round: how strongly the chosen image reads as the run's country and the
other culture labels (1-5), and a note when it reads more as another culture (the next
edit's first change then asks to fix it)."""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any

from refine.evaluate.assess import judge_calls
from refine.events import StageStarted
from refine.loop.instructions import caire_change

if TYPE_CHECKING:
    from refine.backends.selection import Backends
    from refine.loop.steps.base import StepContext
    from refine.records import Round, Run, RunSpec


class CaireStep:
    name = "caire"

    def __init__(self) -> None:
        self._scorers: dict[tuple[str | None, int], Any] = {}
        self._lock = threading.Lock()

    def scorer(self, spec: RunSpec, backends: Backends) -> Any:
        """The CAIRE scorer of a run's settings (its KB and embedder loaded once)."""
        key = (spec.caire_kb, spec.caire_top_k)
        with self._lock:
            if key not in self._scorers:
                from refine.evaluate.caire.scorer import CaireScorer

                kb = embedder = None
                if spec.caire_kb:
                    from refine.evaluate.caire.kb import KnowledgeBase

                    kb = KnowledgeBase.load(spec.caire_kb)
                    embedder = backends.embedder_for(kb.embedder)
                self._scorers[key] = CaireScorer(None, kb, embedder, top_k=spec.caire_top_k)
            return self._scorers[key]

    def check(self, spec: RunSpec, country: str, backends: Backends) -> None:
        """The KB opens and its embedder can be made (labels are checked by settings)."""
        if spec.caire_labels:
            self.scorer(spec, backends)

    def after_round(self, run: Run, r: Round, ctx: StepContext) -> None:
        spec = run.spec
        if not spec.caire_labels:
            return
        country = run.references.country
        labels = [country] + [x for x in spec.caire_labels if x.casefold() != country.casefold()]
        ctx.emit(StageStarted(round=r.index, stage="caire"))
        t = time.perf_counter()
        scorer = self.scorer(spec, ctx.backends)
        image = ctx.store.load_image(r.best.image)
        linked = None
        if scorer.kb is not None:
            with ctx.backends.model_lock:
                linked = scorer.link([image])
        with ctx.backends.using("judge") as judge:
            scorer.judge = judge
            result = scorer.score([image], labels, names=[r.best.image], linked=linked)[0]
            ctx.calls.add(judge_calls(judge, len(labels)))
        r.timings["caire"] = time.perf_counter() - t
        r.caire = result
        r.caire_note, _ = caire_change(r.caire, country)
