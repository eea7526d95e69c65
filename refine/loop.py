"""The closed refinement loop: generate, observe, score, instruct, edit, accept or reject.

Round 0 generates (best of ``initial_candidates`` seeds) or takes the user's image. Every
later round builds an instruction from the parent's feedback (or takes the user's),
edits ``candidates`` times with different seeds, scores each candidate and accepts the best
one only if FAITH rises by at least ``margin`` and its drift from the parent (1 - cosine of
image embeddings) stays within ``max_drift``. The run record is saved after every round.

EXAG variants (named in every score):
* ``judge-rating``: the judge rates exaggeration of the stereotype candidates 1-5 with the
  rubric in ``assets/prompts/exaggeration.txt``; EXAG = (expected rating - 1) / 4. The
  candidates listed as seen are those matching an observed descriptor (similarity > tau).
* ``reference-yes``: with reference images, the judge's yes-probability per candidate
  against its mean over the reference images (AHEaD's EXAG).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from metrics.ahead import exaggeration, faithfulness, score_images
from metrics.descriptors import DIMENSIONS
from metrics.drift import cosine, ssim
from refine.assets import prompt_template
from refine.instructions import build_instruction, caire_change
from refine.records import (
    Candidate,
    Drift,
    Feedback,
    ReferencePack,
    Round,
    Run,
    RunSpec,
    Scores,
)
from refine.store import RunStore, new_run_id

if TYPE_CHECKING:
    from PIL import Image

log = logging.getLogger(__name__)

Event = dict[str, Any]
MODEL_ROLES = ("generator", "editor", "observer", "judge", "text_embedder", "image_embedder")
TEMPLATES = ("generate", "edit_instruction", "exaggeration", "observe", "repair")


class _Stop(Exception):
    pass


class Backends:
    """The model backends of a run, created lazily from a profile and overrides.

    Several threads may share one ``Backends`` (batch workers): creation is locked, and
    calls to a backend that does not declare ``thread_safe = True`` (local models on one
    device) are serialised by one lock, so only API backends run concurrently.
    """

    def __init__(
        self,
        profile: str = "gemini",
        overrides: dict[str, str] | None = None,
        options: dict[str, dict[str, Any]] | None = None,
        instances: dict[str, Any] | None = None,
    ) -> None:
        from refine.profiles import load_profile

        overrides = dict(overrides or {})
        self.profile = load_profile(profile)
        self.names = {**self.profile.roles, **overrides}
        # a profile's options belong to the profile's backend, not to an override
        self.options = {
            role: dict(opts)
            for role, opts in self.profile.options.items()
            if overrides.get(role, self.profile.roles.get(role)) == self.profile.roles.get(role)
        }
        for role, opts in (options or {}).items():
            self.options.setdefault(role, {}).update(opts)
        self._made: dict[str, Any] = dict(instances or {})
        for role, backend in self._made.items():
            self.names[role] = getattr(backend, "id", type(backend).__name__)
        self._create_lock = threading.Lock()
        self.model_lock = threading.RLock()

    def get(self, role: str) -> Any:
        with self._create_lock:
            if role not in self._made:
                from refine.backends.registry import create

                if role not in self.names:
                    raise ValueError(f"profile {self.profile.name!r} names no {role} backend")
                self._made[role] = create(role, self.names[role], **self.options.get(role, {}))
            return self._made[role]

    @contextlib.contextmanager
    def using(self, role: str) -> Iterator[Any]:
        """The backend of ``role``, held under the model lock unless it is thread-safe."""
        backend = self.get(role)
        if getattr(backend, "thread_safe", False):
            yield backend
        else:
            with self.model_lock:
                yield backend

    def ids(self) -> dict[str, str]:
        return {role: getattr(self.get(role), "id", self.names[role]) for role in self._made}


class Refiner:
    """Runs and resumes refinement runs; one instance reuses its models across runs."""

    def __init__(
        self,
        profile: str = "gemini",
        backends: dict[str, str] | None = None,
        backend_options: dict[str, dict[str, Any]] | None = None,
        on_event: Callable[[Event], None] | None = None,
        instances: dict[str, Any] | None = None,
        shared: Backends | None = None,
        review: Callable[[int, str, Run], str | None] | None = None,
    ) -> None:
        """``backends`` overrides the profile's backend names per role, ``backend_options``
        their options; ``instances`` gives ready backend objects (any object following the
        role's protocol); ``shared`` reuses another refiner's loaded backends.

        ``review(round, instruction, run)`` is called before every edit with the
        instruction about to be applied; it returns the instruction to apply (a changed
        text is recorded as the user's) or None to stop the run there. ``request_stop()``
        stops a run at the next round boundary; completed rounds are kept."""
        self.backends = shared or Backends(profile, backends, backend_options, instances)
        self.profile_name = profile
        self.overrides = dict(backends or {})
        self.backend_options = dict(backend_options or {})
        self.on_event = on_event or (lambda event: None)
        self.review = review
        self.calls = 0
        self._baselines: dict[tuple, list[float]] = {}
        self._stop = threading.Event()
        self._caire_scorers: dict[tuple[str | None, int], Any] = {}
        self._sos_banks: dict[str, Any] = {}

    def request_stop(self) -> None:
        """Stop the current run after the round in progress (it is saved as finished)."""
        self._stop.set()

    def sibling(self, on_event: Callable[[Event], None] | None = None) -> Refiner:
        """A refiner sharing this one's models (and nothing else): one per batch worker."""
        other = Refiner(
            self.profile_name,
            self.overrides,
            self.backend_options,
            on_event=on_event or self.on_event,
            shared=self.backends,
        )
        other._baselines = self._baselines
        return other

    # -- public API --------------------------------------------------------------------

    def run(
        self,
        activity: str,
        country: str,
        out: str | Path = "runs",
        references: ReferencePack | None = None,
        **settings: Any,
    ) -> Run:
        """A new run to completion; returns the run record (also in ``out/<id>/run.json``)."""
        from refine.references import find_references

        spec = RunSpec(
            activity=activity,
            country=country,
            profile=self.profile_name,
            backends=self.backends.names,
            backend_options=self.backends.options,
            **settings,
        )
        refs = references or find_references(activity, country)
        self._check_caire(spec)
        self._check_languages(spec, refs.country)
        store = RunStore.create(out, new_run_id(activity, refs.country))
        run = Run(
            id=store.dir.name,
            spec=spec,
            references=refs,
            templates={t: prompt_template(t) for t in TEMPLATES},
            created=time.strftime("%Y-%m-%dT%H:%M:%S"),
        )
        store.save(run)
        return self._drive(run, store)

    def resume(self, run_dir: str | Path) -> Run:
        """Finish a run that stopped part-way (its completed rounds are kept)."""
        store = RunStore(run_dir)
        run = store.load()
        if run.status == "finished":
            return run
        run.status, run.error = "running", None
        return self._drive(run, store)

    def branch(
        self, run_dir: str | Path, round_index: int, out: str | Path | None = None, **settings: Any
    ) -> Run:
        """Roll back: a new run holding rounds 0..``round_index`` of an earlier run (images
        copied; the original is left as it is), continued from that round's chosen image.
        ``settings`` change the spec; ``rounds`` counts the further editing rounds."""
        source = RunStore(run_dir)
        old = source.load()
        if not 0 <= round_index < len(old.rounds):
            last = len(old.rounds) - 1
            raise ValueError(f"round {round_index} does not exist in {source.dir} (0..{last})")
        further = settings.pop("rounds", old.spec.rounds)
        spec = old.spec.model_copy(update={**settings, "rounds": round_index + further})
        spec = RunSpec.model_validate(spec.model_dump())
        store = RunStore.create(out or source.dir.parent, f"{old.id}-from-r{round_index}")
        kept = [r.model_copy(deep=True) for r in old.rounds[: round_index + 1]]
        for r in kept:
            for c in r.candidates:
                store.save_image(c.image, source.load_image(c.image))
        run = old.model_copy(
            update={
                "id": store.dir.name,
                "spec": spec,
                "rounds": kept,
                "best_round": round_index,
                "status": "running",
                "stop_reason": None,
                "error": None,
                "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
                "branched_from": {"run": str(source.dir), "round": round_index},
            }
        )
        store.save(run)
        return self._drive(run, store)

    @staticmethod
    def choose(run_dir: str | Path, round_index: int, candidate: int, accept: bool = True) -> Run:
        """Decide the last round of a stopped run by hand: accept candidate ``candidate``
        (it becomes the best image) or reject the round."""
        store = RunStore(run_dir)
        run = store.load()
        if run.status == "running":
            raise ValueError(f"{store.dir}: the run is still running; stop it first")
        if round_index != len(run.rounds) - 1 or round_index == 0:
            raise ValueError(
                f"only the last editing round can be decided by hand (round {len(run.rounds) - 1})"
            )
        r = run.rounds[round_index]
        if not 0 <= candidate < len(r.candidates):
            raise ValueError(f"round {round_index} has candidates 0..{len(r.candidates) - 1}")
        r.chosen, r.by_hand = candidate, True
        if accept:
            r.decision, r.reason = "accepted", f"accepted by hand (candidate {candidate})"
            run.best_round = round_index
        else:
            r.decision, r.reason = "rejected", "rejected by hand"
            if run.best_round == round_index:
                run.best_round = max(
                    i for i, x in enumerate(run.rounds[:round_index]) if x.decision != "rejected"
                )
        store.save(run)
        return run

    # -- the loop ----------------------------------------------------------------------

    def _drive(self, run: Run, store: RunStore) -> Run:
        started = time.monotonic() - run.elapsed_s
        self.calls = run.model_calls
        self._stop.clear()
        self._emit({"type": "run", "run": run.id, "dir": str(store.dir)})
        try:
            if not run.rounds:
                self._round_zero(run, store)
                self._save(run, store, started)
            while run.stop_reason is None:
                reason = self._stop_reason(run, started)
                if reason:
                    run.stop_reason = reason
                    break
                self._edit_round(run, store)
                self._save(run, store, started)
            run.status = "finished"
        except BaseException as err:
            run.status = "failed"
            run.error = f"{type(err).__name__}: {err}"
            try:
                self._save(run, store, started)
            except Exception:  # keep the original error; the last good record stays
                log.exception("could not save the failed run %s", run.id)
            with contextlib.suppress(Exception):
                store.close()
            raise
        self._save(run, store, started)
        store.close()
        self._emit({"type": "done", "run": run.id, "stop_reason": run.stop_reason})
        return run

    def _save(self, run: Run, store: RunStore, started: float) -> None:
        run.elapsed_s = time.monotonic() - started
        run.model_calls = self.calls
        ids = dict(run.backend_ids)
        ids.update(self.backends.ids())
        run.backend_ids = ids
        store.save(run)

    def _stop_reason(self, run: Run, started: float) -> str | None:
        if self._stop.is_set():
            return "stopped by the user"
        spec = run.spec
        best = run.best()
        edits = len(run.rounds) - 1
        if best is not None and best.best.scores.faith is not None:
            if best.best.scores.faith >= spec.target:
                return f"target: FAITH {best.best.scores.faith:.3f} >= {spec.target}"
        if edits >= spec.rounds:
            return f"max rounds: {spec.rounds} editing round(s) done"
        streak = 0
        start = 1 + (run.branched_from or {}).get("round", 0)  # a branch starts afresh
        for r in reversed(run.rounds[start:]):
            if r.decision == "accepted":
                break
            streak += 1
        if streak >= spec.patience:
            return f"patience: {streak} round(s) in a row without an accepted improvement"
        if spec.budget_seconds is not None and time.monotonic() - started >= spec.budget_seconds:
            return f"budget: {spec.budget_seconds:g} s of wall time used"
        if spec.budget_calls is not None and self.calls >= spec.budget_calls:
            return f"budget: {self.calls} model calls used (limit {spec.budget_calls})"
        return None

    def _round_zero(self, run: Run, store: RunStore) -> None:
        spec = run.spec
        timings: dict[str, float] = {}
        if spec.input_image:
            from PIL import Image as PILImage

            with PILImage.open(spec.input_image) as im:
                images = [im.convert("RGB")]
            seeds = [spec.seed]
            prompt = f"input image {Path(spec.input_image).name}"
        else:
            prompt = spec.prompt or prompt_template("generate").strip().format(
                activity=spec.activity, country=run.references.country
            )
            seeds = [spec.seed + j for j in range(spec.initial_candidates)]
            self._emit({"type": "stage", "round": 0, "stage": "generate", "n": len(seeds)})
            t = time.perf_counter()
            with self.backends.using("generator") as generator:
                images = generator.generate(prompt, seeds)
            self.calls += len(seeds)
            timings["generate"] = time.perf_counter() - t
        candidates = [
            self._candidate(run, store, 0, j, seed, image, None, timings)
            for j, (seed, image) in enumerate(zip(seeds, images, strict=True))
        ]
        chosen = max(range(len(candidates)), key=lambda j: _faith(candidates[j]))
        run.rounds.append(
            Round(
                index=0,
                parent=None,
                kind="generate",
                text=prompt,
                instruction_source="prompt",
                candidates=candidates,
                chosen=chosen,
                decision="initial",
                reason=f"best of {len(candidates)} initial image(s) by FAITH",
                timings=timings,
            )
        )
        run.best_round = 0
        self._caire_round(run, store, run.rounds[-1])
        self._languages_round(run, store, run.rounds[-1])
        self._emit({"type": "round", "round": 0, "decision": "initial"})

    def _edit_round(self, run: Run, store: RunStore) -> None:
        spec = run.spec
        k = len(run.rounds)
        parent_index = run.best_round if spec.edit_from == "best" else 0
        parent = run.rounds[parent_index]
        timings: dict[str, float] = {}
        user = spec.instructions.get(k)
        if user:
            instruction, source = user, "user"
        else:
            _, extra = caire_change(parent.caire, run.references.country)
            instruction = build_instruction(
                parent.best.feedback,
                spec.activity,
                run.references.country,
                spec.max_changes,
                extra=[extra] if extra else None,
            )
            source = "template"
            if instruction is None:
                run.stop_reason = "nothing to change: no missing, hallucinated or exaggerated items"
                return
        if self.review is not None:
            self._emit({"type": "review", "round": k, "instruction": instruction})
            reviewed = self.review(k, instruction, run)
            if reviewed is None or self._stop.is_set():
                run.stop_reason = "stopped by the user"
                return
            reviewed = reviewed.strip()
            if not reviewed:
                raise ValueError(f"round {k}: the reviewed instruction is empty")
            if reviewed != instruction:
                instruction, source = reviewed, "user"
        parent_image = store.load_image(parent.best.image)
        seeds = [spec.seed + 1000 * k + j for j in range(spec.candidates)]
        self._emit({"type": "stage", "round": k, "stage": "edit", "n": len(seeds)})
        t = time.perf_counter()
        with self.backends.using("editor") as editor:
            edited = editor.edit(parent_image, instruction, seeds)
        self.calls += len(seeds)
        timings["edit"] = time.perf_counter() - t
        candidates = [
            self._candidate(run, store, k, j, seed, image, parent_image, timings)
            for j, (seed, image) in enumerate(zip(seeds, edited, strict=True))
        ]
        parent_faith = _faith(parent.best)
        within = [j for j, c in enumerate(candidates) if _drift(c) <= spec.max_drift]
        pool = within or list(range(len(candidates)))
        chosen = max(pool, key=lambda j: _faith(candidates[j]))
        best = candidates[chosen]
        gain = _faith(best) - parent_faith
        if not within:
            decision = "rejected"
            reason = (
                f"every candidate drifted too far from round {parent_index} "
                f"(smallest 1 - cosine {min(_drift(c) for c in candidates):.3f} > "
                f"{spec.max_drift})"
            )
        elif gain >= spec.margin:
            decision = "accepted"
            reason = f"FAITH {parent_faith:.3f} -> {_faith(best):.3f} (+{gain:.3f})"
        else:
            decision = "rejected"
            reason = (
                f"FAITH {parent_faith:.3f} -> {_faith(best):.3f} ({gain:+.3f}); "
                f"needs at least +{spec.margin}"
            )
        run.rounds.append(
            Round(
                index=k,
                parent=parent_index,
                kind="edit",
                text=instruction,
                instruction_source=source,
                candidates=candidates,
                chosen=chosen,
                decision=decision,
                reason=reason,
                timings=timings,
            )
        )
        if decision == "accepted":
            run.best_round = k
        self._caire_round(run, store, run.rounds[-1])
        self._languages_round(run, store, run.rounds[-1])
        self._emit({"type": "round", "round": k, "decision": decision, "reason": reason})

    # -- CAIRE ---------------------------------------------------------------------------

    def caire_scorer(self, spec: RunSpec) -> Any:
        """The CAIRE scorer of a run's settings (its KB loaded once per Refiner)."""
        key = (spec.caire_kb, spec.caire_top_k)
        if key not in self._caire_scorers:
            from refine.caire.scorer import CaireScorer

            kb = embedder = None
            if spec.caire_kb:
                from refine.backends.registry import create
                from refine.caire.kb import KnowledgeBase

                kb = KnowledgeBase.load(spec.caire_kb)
                own = self.backends.names.get("image_embedder")
                if own == kb.embedder:
                    embedder = self.backends.get("image_embedder")
                else:
                    options = self.backends.options.get("image_embedder", {})
                    device = {"device": options["device"]} if "device" in options else {}
                    embedder = create("image_embedder", kb.embedder, **device)
            self._caire_scorers[key] = CaireScorer(None, kb, embedder, top_k=spec.caire_top_k)
        return self._caire_scorers[key]

    def _check_caire(self, spec: RunSpec) -> None:
        """Fail before any model call when the CAIRE settings are wrong (bad labels, a
        folder that is not a KB, a KB built with another embedder than can be made)."""
        if not spec.caire_labels:
            if spec.caire_kb:
                raise ValueError("a CAIRE knowledge base was given but no culture labels")
            return
        from refine.caire.scorer import parse_labels

        parse_labels(spec.caire_labels)
        self.caire_scorer(spec)

    def _caire_round(self, run: Run, store: RunStore, r: Round) -> None:
        """CAIRE relevance of a round's chosen image, when the run names culture labels."""
        spec = run.spec
        if not spec.caire_labels:
            return
        country = run.references.country
        labels = [country] + [x for x in spec.caire_labels if x.casefold() != country.casefold()]
        self._emit({"type": "stage", "round": r.index, "stage": "caire"})
        t = time.perf_counter()
        scorer = self.caire_scorer(spec)
        image = store.load_image(r.best.image)
        linked = None
        if scorer.kb is not None:
            with self.backends.model_lock:
                linked = scorer.link([image])
        with self.backends.using("judge") as judge:
            scorer.judge = judge
            result = scorer.score([image], labels, names=[r.best.image], linked=linked)[0]
        self.calls += len(labels)
        r.timings["caire"] = time.perf_counter() - t
        r.caire = result.to_dict()
        r.caire_note, _ = caire_change(r.caire, country)

    # -- prompt languages and SoS ------------------------------------------------------

    def sos_bank(self, path: str) -> tuple[Any, Any, Any]:
        """(bank, centroids, image embedder) of an SoS bank folder, loaded once."""
        if path not in self._sos_banks:
            from refine.backends.registry import create
            from refine.sos.bank import Bank

            bank = Bank(path)
            name = bank.manifest["settings"]["embedder"]
            if self.backends.names.get("image_embedder") == name:
                embedder = self.backends.get("image_embedder")
            else:
                options = self.backends.options.get("image_embedder", {})
                device = {"device": options["device"]} if "device" in options else {}
                embedder = create("image_embedder", name, **device)
            self._sos_banks[path] = (bank, bank.centroids(), embedder)
        return self._sos_banks[path]

    def _check_languages(self, spec: RunSpec, country: str) -> None:
        """Fail before any model call when prompt languages or the SoS bank cannot work."""
        from refine.sos.bank import LANGUAGES

        langs = spec.prompt_languages
        problems = [f"unknown language {x!r}" for x in langs if x not in LANGUAGES]
        if len(set(langs)) != len(langs):
            problems.append("a prompt language is given twice")
        if "en" in langs:
            problems.append("'en' is the run's own prompt language; name only the others")
        if spec.language_scores and not langs:
            problems.append("language scores need prompt languages to score")
        if langs and spec.input_image:
            problems.append("prompt languages need a generated round 0, not an input image")
        if spec.sos_bank:
            _, centroids, _ = self.sos_bank(spec.sos_bank)
            if _bank_culture(centroids, country) is None:
                problems.append(
                    f"the SoS bank {spec.sos_bank} has no culture {country!r} "
                    f"(it has {', '.join(centroids.cultures)})"
                )
            missing = [x for x in ["en", *langs] if x not in centroids.languages]
            if missing:
                problems.append(
                    f"the SoS bank {spec.sos_bank} has no images prompted in "
                    f"{', '.join(missing)} (it has {', '.join(centroids.languages)})"
                )
        if problems:
            raise ValueError("; ".join(problems) + f" (known: {', '.join(sorted(LANGUAGES))})")

    def _sos(self, spec: RunSpec, country: str, images: list[Any], langs: list[str]) -> list:
        if not spec.sos_bank:
            return [None] * len(images)
        _, centroids, embedder = self.sos_bank(spec.sos_bank)
        with self.backends.model_lock:
            e = embedder.encode_images(images)
        if hasattr(e, "detach"):
            e = e.detach().float().cpu().numpy()
        culture = _bank_culture(centroids, country)
        return [float(v) for v in centroids.score(e, [culture] * len(images), langs)]

    def _languages_round(self, run: Run, store: RunStore, r: Round) -> None:
        """The round in every extra prompt language, and the SoS of each image."""
        spec = run.spec
        if not spec.prompt_languages and not spec.sos_bank:
            return
        country = run.references.country
        t = time.perf_counter()
        langs = list(spec.prompt_languages)
        seed = spec.seed + 1000 * r.index
        images, entries = [], {}
        if langs:
            self._emit({"type": "stage", "round": r.index, "stage": "languages", "n": len(langs)})
        for lang in langs:
            if r.kind == "generate":
                prompt = self._translate(r.text, lang)
                with self.backends.using("generator") as generator:
                    (image,) = generator.generate(prompt, [seed])
                entry: dict[str, Any] = {"prompt": prompt}
            else:
                parent = run.rounds[r.parent].languages.get(lang)
                if parent is None:
                    raise ValueError(
                        f"round {r.parent} has no {lang} image to edit: prompt languages are "
                        "chosen when a run starts (start a new run to add one)"
                    )
                with self.backends.using("editor") as editor:
                    (image,) = editor.edit(store.load_image(parent["image"]), r.text, [seed])
                entry = {"parent_image": parent["image"]}
            self.calls += 1
            entry["image"] = store.save_image(f"round_{r.index:02d}_{lang}.png", image)
            if spec.language_scores:  # the same observation and scores as the main image
                _, scores, feedback, _ = self.assess(image, run.references, spec)
                entry["scores"] = scores.model_dump(mode="json")
                entry["missing"] = [m["phrase"] for m in feedback.missing]
                entry["hallucinated"] = [h["phrase"] for h in feedback.hallucinated]
            images.append(image)
            entries[lang] = entry
        scores = self._sos(spec, country, [store.load_image(r.best.image), *images], ["en", *langs])
        r.sos = scores[0]
        for lang, value in zip(langs, scores[1:], strict=True):
            entries[lang]["sos"] = value
        r.languages = entries
        r.timings["languages"] = time.perf_counter() - t

    def _translate(self, text: str, lang: str) -> str:
        from refine.assets import prompt_template
        from refine.refs_build import LLMCache
        from refine.sos.bank import LANGUAGES, Translation

        request = prompt_template("translate").format(language=LANGUAGES[lang], text=text)
        cache = LLMCache()
        with self.backends.using("llm") as llm:
            answer = cache.ask(llm, request, Translation).translation.strip()
        self.calls += cache.misses
        if not answer:
            raise ValueError(f"the language model gave an empty {LANGUAGES[lang]} translation")
        return answer

    # -- one image ---------------------------------------------------------------------

    def _candidate(
        self,
        run: Run,
        store: RunStore,
        k: int,
        j: int,
        seed: int,
        image: Image.Image,
        parent: Image.Image | None,
        timings: dict[str, float],
    ) -> Candidate:
        name = store.save_image(f"round_{k:02d}_c{j}.png", image)
        self._emit({"type": "stage", "round": k, "stage": "observe", "candidate": j})
        observed, scores, feedback, t = self.assess(image, run.references, run.spec)
        for stage, seconds in t.items():
            timings[stage] = timings.get(stage, 0.0) + seconds
        drift = None
        if parent is not None:
            t0 = time.perf_counter()
            drift = self.drift(parent, image)
            timings["drift"] = timings.get("drift", 0.0) + time.perf_counter() - t0
        return Candidate(
            seed=seed,
            image=name,
            observed=observed,
            scores=scores,
            feedback=feedback,
            drift=drift,
        )

    def assess(
        self, image: Image.Image, refs: ReferencePack, spec: RunSpec
    ) -> tuple[dict[str, list[str]], Scores, Feedback, dict[str, float]]:
        """Observe and score one image against the references."""
        timings: dict[str, float] = {}
        t = time.perf_counter()
        with self.backends.using("observer") as observer:
            observed = observer.describe(image, list(DIMENSIONS), spec.max_per_dimension)
        self.calls += 1
        timings["observe"] = time.perf_counter() - t
        t = time.perf_counter()
        with self.backends.using("text_embedder") as embedder:
            ahead = score_images(refs.descriptors, [observed], embedder, tau=spec.tau)[0]
        timings["score"] = time.perf_counter() - t
        t = time.perf_counter()
        exag, variant, exaggerated = self._exaggeration(image, observed, refs, spec)
        timings["judge"] = time.perf_counter() - t
        faith = faithfulness(ahead.align, ahead.hal, exag) if exag is not None else None
        if faith is None:
            faith = (ahead.align + 1.0 - ahead.hal) / 2.0
            variant += "; FAITH = mean(ALIGN, 1 - HAL) without EXAG"
        per_dim = {
            d: {"align": s.align, "hal": s.hal}
            for d, s in ahead.per_dimension.items()
            if s.align is not None or s.hal is not None
        }
        scores = Scores(
            align=ahead.align,
            hal=ahead.hal,
            exag=exag,
            faith=faith,
            exag_variant=variant,
            per_dimension=per_dim,
        )
        feedback = Feedback(
            aligned=[_match(m) for m in ahead.aligned],
            missing=[_match(m) for m in ahead.missing],
            hallucinated=[_match(m) for m in ahead.hallucinated],
            exaggerated=exaggerated,
        )
        return observed, scores, feedback, timings

    def _exaggeration(
        self,
        image: Image.Image,
        observed: dict[str, list[str]],
        refs: ReferencePack,
        spec: RunSpec,
    ) -> tuple[float | None, str, list[dict[str, Any]]]:
        candidates = refs.stereotypes
        if not candidates:
            return None, "not computed: no stereotype candidates", []
        if refs.reference_images:
            return self._exaggeration_from_references(image, refs)
        prompt = prompt_template("exaggeration").format(
            activity=refs.activity, country=refs.country, candidates="; ".join(candidates)
        )
        with self.backends.using("judge") as judge:
            rating = judge.rate([image], [prompt])[0]
        self.calls += 1
        value = (rating.expectation - 1.0) / 4.0
        seen = self._candidates_seen(observed, candidates, spec.tau)
        return value, "judge-rating (1-5 rubric, (E[rating] - 1) / 4)", seen

    def _exaggeration_from_references(
        self, image: Image.Image, refs: ReferencePack
    ) -> tuple[float, str, list[dict[str, Any]]]:
        with self.backends.using("judge") as judge:
            return self._reference_yes(image, refs, judge)

    def _reference_yes(
        self, image: Image.Image, refs: ReferencePack, judge: Any
    ) -> tuple[float, str, list[dict[str, Any]]]:
        from PIL import Image as PILImage

        questions = [f"Does this image show {c}?" for c in refs.stereotypes]
        # the baseline depends only on the references: judged once per run, not per image
        key = (getattr(judge, "id", ""), tuple(refs.reference_images), tuple(questions))
        baseline = self._baselines.get(key)
        if baseline is None:
            ref_rows = []
            for path in refs.reference_images:
                with PILImage.open(path) as im:
                    ref = im.convert("RGB")
                ref_rows.append(judge.yes_probability([ref] * len(questions), questions))
                self.calls += len(questions)
            baseline = [sum(col) / len(col) for col in zip(*ref_rows, strict=True)]
            self._baselines[key] = baseline
        row = judge.yes_probability([image] * len(questions), questions)
        self.calls += len(questions)
        score = exaggeration([row], baseline, refs.stereotypes)
        listed = [
            {"candidate": c, "excess": e, "source": "judge yes-probability"}
            for c, e in score.exaggerated(0)
        ]
        return score.value, "reference-yes (judge yes-probability vs reference images)", listed

    def _candidates_seen(
        self, observed: dict[str, list[str]], candidates: Sequence[str], tau: float
    ) -> list[dict[str, Any]]:
        phrases = [p for d in DIMENSIONS for p in observed.get(d, [])]
        if not phrases:
            return []
        from metrics.text_embedding import default_cache

        cache = default_cache()
        with self.backends.using("text_embedder") as embedder:
            cand = cache.embed(embedder, list(candidates))
            obs = cache.embed(embedder, phrases)
        sims = (cand @ obs.T).cpu().numpy()
        seen = []
        for i, c in enumerate(candidates):
            j = int(sims[i].argmax())
            if sims[i, j] > tau:
                seen.append(
                    {"candidate": c, "observed": phrases[j], "similarity": float(sims[i, j])}
                )
        return sorted(seen, key=lambda s: -s["similarity"])

    def drift(self, parent: Image.Image, child: Image.Image) -> Drift:
        with self.backends.using("image_embedder") as embedder:
            e = embedder.encode_images([parent, child]).cpu().numpy()
        return Drift(
            embedding_cosine=cosine(e[0], e[1]), ssim=ssim(parent, child), embedder=embedder.id
        )

    def _emit(self, event: Event) -> None:
        try:
            self.on_event(event)
        except Exception:  # a broken progress display must not stop a run
            log.exception("progress callback failed")


def _bank_culture(centroids: Any, country: str) -> str | None:
    """The bank's name for ``country`` (case-insensitive), or None."""
    for c in centroids.cultures:
        if c.casefold() == country.casefold():
            return c
    return None


def _faith(c: Candidate) -> float:
    return c.scores.faith if c.scores.faith is not None else float("-inf")


def _drift(c: Candidate) -> float:
    return 0.0 if c.drift is None else 1.0 - c.drift.embedding_cosine


def _match(m: Any) -> dict[str, Any]:
    return {
        "dimension": m.dimension,
        "phrase": m.phrase,
        "best_match": m.best_match,
        "similarity": m.similarity,
    }
