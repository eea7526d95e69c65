"""The closed refinement loop: generate, observe, score, instruct, edit, accept or reject.

:class:`Refiner` only orchestrates; each concern has its own home:

* settings are validated by :mod:`refine.settings` (the spec here is trusted),
* models are chosen by :class:`refine.backends.selection.Backends`,
* an image is observed and scored by :class:`refine.evaluate.assess.Assessor`, and a round's
  candidates are made and assessed by :class:`refine.loop.candidates.CandidateMaker`,
* decisions are the pure functions of :mod:`refine.loop.policy`,
* per-round measurements (CAIRE, prompt languages and SoS) are :mod:`refine.loop.steps`,
* files are kept by :class:`refine.io.store.RunStore` (``run.json`` saved after every round).

Round 0 generates (best of ``initial_candidates`` seeds) or takes the user's image. Every
later round builds an instruction from the parent's feedback (or takes the user's), edits
``candidates`` times with different seeds, scores each candidate and accepts the best one
only if FAITH rises by at least ``margin`` and its drift stays within ``max_drift``.
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from refine import usage
from refine.assets import prompt_template
from refine.backends.selection import Backends
from refine.evaluate.assess import Assessor, CallCounter, QualityCache
from refine.events import (
    Event,
    ModelsLoading,
    RoundDecided,
    RunFinished,
    RunStarted,
)
from refine.io.store import RunStore, new_run_id
from refine.loop import (
    aims,
    confirm,
    localize,
    memory,
    pause,
    policy,
    request,
    review_file,
    tracking,
)
from refine.loop.candidates import CandidateMaker, EveryCandidateRefused, Made
from refine.loop.prompts import round_text
from refine.loop.steps import StepContext, default_steps
from refine.profiles import load_profile
from refine.records import (
    DEFAULT_PROFILE,
    WRITTEN_SCHEMA,
    Candidate,
    ReferencePack,
    RefusedRound,
    Round,
    Run,
    RunSpec,
)

if TYPE_CHECKING:
    from PIL import Image

    from refine.evaluate.assess import PhotoBaseline

log = logging.getLogger(__name__)

TEMPLATES = ("generate", "edit_instruction", "exag_mllm", "observe", "repair")
Review = Callable[[int, str, Run], "str | None"]


def choose_by_hand(
    run_dir: str | Path, round_index: int, candidate: int, accept: bool = True
) -> Run:
    """Decide the last round of a stopped run by hand: accept candidate ``candidate``
    (it becomes the best image) or reject the round."""
    store = RunStore(run_dir)
    run = store.load()
    held = store.holder()
    if run.status == "running" or held:
        who = f" (process {held})" if held else ""
        raise ValueError(f"{store.dir}: the run is still running{who}; stop it first")
    if round_index != len(run.rounds) - 1 or round_index == 0:
        raise ValueError(
            f"only the last editing round can be decided by hand (round {len(run.rounds) - 1})"
        )
    r = run.rounds[round_index]
    if not 0 <= candidate < len(r.candidates):
        raise ValueError(f"round {round_index} has candidates 0..{len(r.candidates) - 1}")
    r.chosen, r.by_hand = candidate, True
    r.tracked = tracking.track_round(run, round_index)  # the candidate chosen now
    if accept:
        r.decision, r.reason = "accepted", f"accepted by hand (candidate {candidate})"
        run.best_round = round_index
        memory.remember(run, r, {})
    else:
        r.decision, r.reason = "rejected", "rejected by hand"
        if run.best_round == round_index:
            run.best_round = max(
                i for i, x in enumerate(run.rounds[:round_index]) if x.decision != "rejected"
            )
    store.save(run)
    return run


# the stop reason of a stop the user asked for (a review nobody answered says so instead)
USER_STOP = "stopped by the user"
# how far a round made again after the model refused it moves its seeds, each time
REFUSED_SEEDS = 100_000


class Refiner:
    """Runs and resumes refinement runs; one instance reuses its models across runs."""

    def __init__(
        self,
        profile: str = DEFAULT_PROFILE,
        backends: dict[str, str] | None = None,
        backend_options: dict[str, dict[str, Any]] | None = None,
        on_event: Callable[[Event], None] | None = None,
        instances: dict[str, Any] | None = None,
        shared: Backends | None = None,
        review: Review | None = None,
        steps: list[Any] | None = None,
        parallel: bool = True,
    ) -> None:
        """``backends`` overrides the profile's backend names per role, ``backend_options``
        their options; ``instances`` gives ready backend objects (any object following the
        role's protocol); ``shared`` reuses another refiner's backends.

        ``review(round, instruction, run)`` is called before every edit with the
        instruction about to be applied; it returns the instruction to apply (a changed
        text is recorded as the user's) or None to stop the run there.

        ``parallel``: a round's candidates, and an image's observation and readings, wait on
        API models together (up to each backend's ``concurrency``); off, one after the
        other. The records are the same either way, only the timings differ."""
        self.backends = shared or Backends(
            load_profile(profile), backends, backend_options, instances
        )
        self.parallel = parallel
        self.profile_name = profile
        self.on_event = on_event or (lambda event: None)
        self.review = review
        self.steps = steps if steps is not None else default_steps()
        self.baselines: dict[tuple, PhotoBaseline] = {}  # EXAG(ITA)'s, shared by assessors
        # quality readings per (judge, image), kept for one run (its calls are its own)
        self.qualities = QualityCache()
        self.calls = CallCounter()
        self._stop = threading.Event()
        self._stop_why = USER_STOP

    def request_stop(self, why: str = "") -> None:
        """Stop the current run within moments (it is saved as finished): between
        candidates, before every model call and between denoising steps; an API call in
        flight is abandoned. Completed rounds are kept; the round in progress is kept as
        ``stopped`` with the candidates finished by then (when there are any). ``why`` is
        the record's stop reason ("stopped by the user" when not given; a review nobody
        answered, a page closed, say so)."""
        self._stop_why = why or USER_STOP
        self._stop.set()

    def sibling(self, on_event: Callable[[Event], None] | None = None) -> Refiner:
        """A refiner sharing this one's models, steps and baselines: one per batch worker."""
        other = Refiner(
            self.profile_name,
            on_event=on_event or self.on_event,
            shared=self.backends,
            steps=self.steps,
            parallel=self.parallel,
        )
        other.baselines = self.baselines
        return other

    def assessor(self, spec: RunSpec | None = None, calls: Any = None, qualities: Any = None):
        """An assessor on this refiner's models and run's calls (or ``calls`` and
        ``qualities`` of a caller's own), with ``spec``'s baselines."""
        compare = tuple(spec.baselines) if spec is not None else ()
        calls, qualities = calls or self.calls, qualities or self.qualities
        made = Assessor(self.backends, calls, self.baselines, qualities, compare)
        made.parallel = self.parallel
        return made

    # -- public API --------------------------------------------------------------------

    def start(self, spec: RunSpec, references: ReferencePack, out: str | Path = "runs") -> Run:
        """A new run of a validated spec with its references to completion (the one way a
        run begins: :func:`refine.settings.load` makes both from raw settings). Every step
        checks its settings against the models before anything is spent."""
        tau, tau_source = self.backends.tau(spec.tau)
        spec = spec.model_copy(
            update={
                "profile": self.profile_name,
                "backends": dict(self.backends.names),
                "backend_options": dict(self.backends.options),
                "tau": tau,
            }
        )
        for step in self.steps:
            step.check(spec, references.country, self.backends)
        request.check_settings(spec, self.backends, references)  # before any model loads
        self._preflight(spec)  # before any directory or paid call
        request.check(spec, self.backends, references)
        store = RunStore.create(out, new_run_id(spec.activity, references.country))
        store.acquire()
        run = Run(
            id=store.dir.name,
            spec=spec,
            references=references,
            templates={t: prompt_template(t) for t in TEMPLATES},
            created=time.strftime("%Y-%m-%dT%H:%M:%S"),
            packages=usage.package_versions(),
            toolkit=usage.toolkit_version(),
            tau_source=tau_source,
        )
        store.save(run)
        return self._drive(run, store)

    def resume(self, run_dir: str | Path) -> Run:
        """Finish a run that stopped part-way (its completed rounds are kept). Refused while
        another process (or another driver here) holds the run."""
        store = RunStore(run_dir)
        store.acquire()
        try:
            run = store.load()
        except BaseException:
            store.release()
            raise
        if run.status == "finished":
            store.release()
            return run
        try:
            self._preflight(run.spec)
        except BaseException:
            store.release()
            raise
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
        self._preflight(spec)
        store = RunStore.create(out or source.dir.parent, f"{old.id}-from-r{round_index}")
        store.acquire()
        kept = [r.model_copy(deep=True) for r in old.rounds[: round_index + 1]]
        for name in old.file_names(upto=round_index):  # the regions' masks too
            store.copy_in(source, name)
        run = _branched(old, store.dir.name, spec, kept, source.dir, further, settings)
        store.save(run)
        return self._drive(run, store)

    choose = staticmethod(choose_by_hand)  # a stopped run's last round, by hand

    # -- the loop ----------------------------------------------------------------------

    def _drive(self, run: Run, store: RunStore) -> Run:
        self._budget = own_call_budget(run)
        with usage.call_budget(self._budget) if self._budget else contextlib.nullcontext():
            return self._drive_within(run, store)  # no request past a call budget is sent

    def _drive_within(self, run: Run, store: RunStore) -> Run:
        started = self._started = time.monotonic() - run.elapsed_s
        self.calls, self.qualities = CallCounter(run.model_calls), QualityCache()
        self._stop.clear()
        self._stop_why = USER_STOP
        self._emit(
            RunStarted(
                run=run.id,
                dir=str(store.dir),
                first=len(run.rounds),
                last=run.spec.rounds - len(run.refused),  # a refused round is one fewer
            )
        )
        try:
            if not run.rounds:
                self._round(run, self._round_zero, store)
                self._save(run, store, started)
            while run.stop_reason is None:
                reason = policy.stop_reason(
                    run,
                    stop_requested=self._stop.is_set(),
                    stopped_as=self._stop_why,
                    elapsed_s=time.monotonic() - started,
                    calls=calls_made(self.calls, self._budget),
                )
                if reason:
                    run.stop_reason = reason
                    break
                self._round(run, self._edit_round, store)
                self._save(run, store, started)
            run.status = "finished"
        except BaseException as err:
            run.status, run.error = ended_by(err)
            try:
                self._save(run, store, started)
            except Exception:  # keep the original error; the last good record stays
                log.exception("could not save the failed run %s", run.id)
            with contextlib.suppress(Exception):
                store.close()
            raise
        self._save(run, store, started)
        store.close()
        self._emit(RunFinished(run=run.id, stop_reason=run.stop_reason))
        return run

    def _round(self, run: Run, recipe: Callable[[Run, RunStore], None], store: RunStore) -> None:
        """One round, its API token usage kept with it and added to the run's."""
        done = len(run.rounds)
        budget = run.spec.budget_seconds
        until = round_deadline(self._started, budget)
        with usage.collecting() as spent, usage.deadline(until), usage.stop_on(self._stop):
            try:
                recipe(run, store)
            except usage.StopRequested:
                # what was finished is kept (see _keep_stopped); the run ends here
                run.stop_reason = f"{self._stop_why} during round {done}"
            except usage.BudgetExhausted as err:
                # the round in progress is dropped; the rounds done are kept
                del run.rounds[done:]
                kept = [r.index for r in run.rounds if r.decision in ("initial", "accepted")]
                run.best_round = max(kept) if kept else None
                run.stop_reason = budget_spent(err, budget, done, self._budget)
            finally:  # what was sent counts, even when the round failed
                usage.add(run.usage, spent)
        if len(run.rounds) > done:
            run.rounds[-1].usage = spent

    def _save(self, run: Run, store: RunStore, started: float) -> None:
        aims.against_pack(run, [c for r in run.rounds for c in r.candidates], self.backends)
        run.elapsed_s = time.monotonic() - started
        run.model_calls = calls_made(self.calls, self._budget)
        run.backend_ids = {**run.backend_ids, **self.backends.ids()}
        run.backend_info = {**run.backend_info, **self.backends.info()}
        store.save(run)

    def _round_zero(self, run: Run, store: RunStore) -> None:
        """Round 0:
        1. the prompt from the template (or the user's prompt), or the user's image;
        2. generate ``initial_candidates`` images, one seed each;
        3. assess each (observe, score);
        4. keep the best by FAITH;
        5. run the steps (CAIRE, languages and SoS).
        """
        spec = run.spec
        timings: dict[str, float] = {}
        # 1-2. the images
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
        # 2-3. make (unless given) and assess each candidate
        try:
            if spec.input_image:
                made = self._candidates(run, store, 0, seeds, None, None, timings, images)
            else:

                def make(generator: Any, some: list[int], **progress: Any) -> list[Image.Image]:
                    return generator.generate(prompt, some, **progress)

                made = self._candidates(run, store, 0, seeds, None, make, timings)
        except usage.StopRequested as stop:
            why = self._stop_why
            _keep_stopped(run, stop, len(seeds), timings, None, "generate", prompt, "prompt", why)
            raise
        # 4. decide
        verdict = policy.choose_initial(made.candidates, spec.margin)
        r = _append_round(
            run, verdict, made.candidates, timings, None, "generate", prompt, "prompt"
        )
        r.failures, r.notes = made.failures, made.notes
        # 5. steps
        self._after_round(run, store, r)
        self._emit(_decided(r))

    def _edit_round(self, run: Run, store: RunStore) -> None:
        """A round after the first:
        1-2. the move (edit or regenerate: the strategy, auto's rule) and its instruction
           or new prompt: the user's, else built from the parent's feedback;
        3. review: a front end may rewrite it, or stop the run;
        4-5. edit the parent (or generate from the new prompt; with the photos when
           reference-guided) ``candidates`` times, assess each (drift from the parent);
        6. decide: the best (an edit within the drift limit), accepted if FAITH rose
           enough and quality held; 7. the steps (CAIRE, languages and SoS)."""
        spec, k = run.spec, len(run.rounds)
        parent_index = policy.parent_of_next(run)
        parent = run.rounds[parent_index]
        timings: dict[str, float] = {}
        # 1-2. the move, and its instruction or prompt
        how, why = policy.move(spec, parent)
        why = why if spec.strategy == "auto" else None  # a chosen move keeps its reason
        line = review_file.entry(spec, k)  # --review FILE: what a person says at this round
        if review_file.stopped(run, k, line) or aims.follow(run, k, line, self.backends):
            return  # a stop, or a change of references that cannot be made
        written, nothing = round_text(run, k, parent_index, how, self.backends, self.calls)
        if written is None:
            run.stop_reason = nothing
            return
        instruction, source = review_file.instruction_of(line, written.text, written.source)
        # 3. review: a person may rewrite it, mark regions, change the references, or stop
        asked = pause.ask(self, run, store, k, instruction, source, written, line, how)
        if asked is None:
            return
        instruction, source, line = asked
        # 4. edit, or generate from the new prompt (with photos, in boxes: the request)
        parent_image = store.load_image(parent.best.image)
        seeds = round_seeds(run, k)
        role = "generator" if how == "regenerate" else "editor"
        extra = request.round_request(run, how, parent, parent_image, written.changes,
                                      self.backends, self.calls, line)  # fmt: skip
        given = extra.given

        def make(backend: Any, some: list[int], **progress: Any) -> list[Image.Image]:
            if how == "regenerate":
                return backend.generate(instruction, some, **given, **progress)
            return backend.edit(parent_image, instruction, some, **given, **progress)

        try:  # 4-5. make and assess each candidate (see refine.loop.candidates)
            made = self._candidates(run, store, k, seeds, parent_image, make, timings, role=role)
        except usage.StopRequested as stop:
            _keep_stopped(
                run, stop, len(seeds), timings, parent_index, how, instruction, source,
                self._stop_why,
            )  # fmt: skip
            if len(run.rounds) > k:  # the round kept as stopped: what its request carried
                request.record(run.rounds[-1], why, written, extra)
            raise
        except EveryCandidateRefused as refused:  # nothing made: recorded, and the run goes on
            kept = _keep_refused(run, refused, seeds, parent_index, how, instruction, source)
            self._emit(RoundDecided(round=k, decision="refused", reason=kept.why()))
            return
        localize.measure(made.candidates, parent_image, extra.regions, store, self.backends)
        # 6. decide: a regenerated image is a new picture, its drift is not limited
        best, compared = run.best(), policy.compared_with(run, parent).best
        verdict = policy.decide_edit(
            made.candidates, compared, parent_index, spec.margin,
            spec.max_drift if how == "edit" else 2.0,
            None if best is None else best.best.scores.quality, spec.max_quality_drop,
            spec.max_drift_outside, tracking.keep_rule(run, k, made.candidates),
            0.0 if best is None else policy.quality_se(best.best),
        )  # fmt: skip
        # a close sampled gain, confirmed on fresh answers (refine.loop.confirm)
        reread = confirm.rereading(self.assessor(spec), store, run.references)
        verdict = confirm.confirmed(verdict, made.candidates, compared, parent_index,
                                    spec.margin, reread, self.calls)  # fmt: skip
        r = _append_round(
            run, verdict, made.candidates, timings, parent_index, how, instruction, source
        )
        r.failures, r.notes, r.instruction_note = made.failures, made.notes, written.note
        r.instruction_model = written.model if source == "language model" else None
        request.record(r, why, written, extra)
        review_file.decide(run, r, line)
        memory.remember(run, r, self.backends.names)  # --memory: an accepted round's fixes
        # 7. steps
        self._after_round(run, store, r)
        self._emit(_decided(r))

    def _after_round(self, run: Run, store: RunStore, r: Round) -> None:
        ctx = StepContext(self.backends, store, self._emit, self.calls, self.assessor(run.spec))
        for step in self.steps:
            step.after_round(run, r, ctx)

    def _candidates(self, *args: Any, **kwargs: Any) -> Made:
        """The round's candidates, made and assessed: :meth:`CandidateMaker.make`'s
        arguments (run, store, k, seeds, parent, make, timings, given, role)."""
        maker = CandidateMaker(self.backends, self.assessor, self.calls, self._emit, self.parallel)
        return maker.make(*args, **kwargs)

    def _preflight(self, spec: RunSpec) -> None:
        roles = roles_needed(spec)
        self._emit(ModelsLoading(roles=tuple(roles)))
        self.backends.preflight(roles)

    def _emit(self, event: Event) -> None:
        try:
            self.on_event(event)
        except Exception:  # a broken progress display must not stop a run
            log.exception("progress callback failed")


def roles_needed(spec: RunSpec) -> list[str]:
    """The model roles a run of ``spec`` calls."""
    roles = ["observer", "judge", "text_embedder"]
    if not spec.input_image or spec.prompt_languages:
        roles.insert(0, "generator")
    if spec.rounds > 0 and spec.strategy != "edit" and "generator" not in roles:
        roles.insert(0, "generator")  # regenerating draws new images
    if spec.rounds > 0:
        roles += (
            ["editor", "image_embedder"] if spec.strategy != "regenerate" else ["image_embedder"]
        )
    if spec.prompt_languages:
        roles.append("llm")
    return roles


def _decided(r: Round) -> RoundDecided:
    s = r.best.scores
    return RoundDecided(
        round=r.index, decision=r.decision, reason=r.reason, faith=s.faith, quality=s.quality
    )


def _branched(
    old: Run,
    name: str,
    spec: RunSpec,
    kept: list[Round],
    source: Path,
    further: int = 0,
    asked: dict[str, Any] | None = None,
) -> Run:
    """The new run of a roll back: ``old``'s record with its rounds up to the branch point
    (``kept``), its new id and spec, naming where it came from and what the roll back
    does: its ``further`` rounds and the settings ``asked`` that changed, each with the
    run's own (a caller's budgets are its limits, no setting of the run's)."""
    now, was = spec.model_dump(mode="json"), old.spec.model_dump(mode="json")
    changes = {
        n: [now[n], was.get(n)]
        for n in asked or {}
        if n in now and not n.startswith("budget_") and now[n] != was.get(n)
    }
    came = {"run": str(source), "round": len(kept) - 1, "further": further, "changes": changes}
    return old.model_copy(
        update={
            "id": name,
            "spec": spec,
            "rounds": kept,
            "best_round": len(kept) - 1,
            "status": "running",
            "stop_reason": None,
            "error": None,
            "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
            "branched_from": came,
            # the parent's refused rounds stay its own: the branch's rounds are its own
            "refused": [],
            "schema_version": WRITTEN_SCHEMA,
        }
    )


def round_seeds(run: Run, k: int) -> list[int]:
    """Round ``k``'s candidates' seeds; a round made again after the model refused it
    takes new ones (REFUSED_SEEDS further each time)."""
    again = sum(1 for x in run.refused if x.round == k)
    first = run.spec.seed + 1000 * k + REFUSED_SEEDS * again
    return [first + j for j in range(run.spec.candidates)]


def _keep_refused(
    run: Run,
    refused: EveryCandidateRefused,
    seeds: list[int],
    parent: int,
    kind: str,
    text: str,
    source: str,
) -> RefusedRound:
    """The round the model refused, kept in the run: the next round edits the same image
    again, and the refused one counts against the rounds (a model that refuses every time
    ends the run, never holds it in a loop)."""
    kept = RefusedRound(
        round=len(run.rounds), parent=parent, kind=kind, text=text,
        instruction_source=source, seeds=seeds, failures=refused.failures,
    )  # fmt: skip
    run.refused.append(kept)
    return kept


def _keep_stopped(
    run: Run,
    stop: usage.StopRequested,
    asked: int,
    timings: dict[str, float],
    parent: int | None,
    kind: str,
    text: str,
    source: str,
    why: str = "stopped by the user",
) -> None:
    """The round a stop cut short, kept as ``stopped`` with the candidates finished by then
    (nothing is kept when none was)."""
    made = getattr(stop, "made", None)
    if made is None or not made.candidates:
        return
    chosen = max(range(len(made.candidates)), key=lambda j: policy.faith_of(made.candidates[j]))
    reason = f"{why}: {len(made.candidates)} of {asked} candidate(s) finished"
    verdict = policy.Verdict(chosen, "stopped", reason)
    r = _append_round(run, verdict, made.candidates, timings, parent, kind, text, source)
    r.failures = list(made.failures)


def _append_round(
    run: Run,
    verdict: policy.Verdict,
    candidates: list[Candidate],
    timings: dict[str, float],
    parent: int | None,
    kind: str,
    text: str,
    source: str,
) -> Round:
    """The decided round, added to the run; an initial or accepted round becomes the best."""
    r = Round(
        index=len(run.rounds),
        parent=parent,
        kind=kind,
        text=text,
        instruction_source=source,
        candidates=candidates,
        chosen=verdict.chosen,
        decision=verdict.decision,
        reason=verdict.reason,
        timings=timings,
        references=len(run.reference_changes),
    )
    run.rounds.append(r)
    # what the round's image fixed and lost against the kept rounds before it
    r.tracked = tracking.track_round(run, r.index)
    if r.decision in ("initial", "accepted"):
        run.best_round = r.index
    return r


def own_call_budget(run: Run) -> usage.CallBudget | None:
    """The hard limit of a run's ``budget_calls`` (``--budget-calls``, the app's
    ``--max-run-calls``): a call budget that has taken the calls of the rounds done (a
    resumed run goes on from them). None without one, or under a caller's own budget (a
    bench's strategies give every strategy theirs)."""
    if run.spec.budget_calls is None or usage.current_budget() is not None:
        return None
    budget = usage.CallBudget(run.spec.budget_calls)
    budget.spent = min(run.model_calls, run.spec.budget_calls)
    return budget


def calls_made(counter: CallCounter, budget: usage.CallBudget | None) -> int:
    """A run's model calls: under its own call budget every request sent (retries and
    failed ones included) and every local forward pass, as the budget took them; else the
    calls counted as the steps made them."""
    return max(counter.n, budget.spent) if budget is not None else counter.n


def round_deadline(started: float, budget: float | None) -> float | None:
    """When a round's API calls must end: the run's wall-time budget, or a caller's
    deadline (a bench's) when that comes first."""
    outer = usage.current_deadline()
    if budget is None:
        return outer
    return min(started + budget, outer if outer is not None else math.inf)


def budget_spent(
    err: BaseException, seconds: float | None, done: int, own: usage.CallBudget | None = None
) -> str:
    """Why a budget ended the run during round ``done``: the calls' (the run's ``own``, or
    a caller's :func:`refine.usage.call_budget`), or the wall time's."""
    if isinstance(err, usage.CallBudgetSpent) and own is not None:
        return f"budget: {own.spent} model calls used (limit {own.limit}) during round {done}"
    if isinstance(err, usage.CallBudgetSpent):
        return f"budget: {err} (during round {done})"
    if seconds is None:
        return f"budget: the caller's wall time is used (during round {done})"
    return f"budget: {seconds:g} s of wall time used (during round {done})"


def ended_by(err: BaseException) -> tuple[str, str | None]:
    """A run's status and error after ``err``: Ctrl-C (KeyboardInterrupt) interrupts it,
    anything else fails it; either way ``--resume`` goes on from the rounds done."""
    if isinstance(err, KeyboardInterrupt):
        return "interrupted", None
    return "failed", f"{type(err).__name__}: {err}"
