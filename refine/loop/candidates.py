"""A round's candidates: made (generated or edited), saved and assessed, as fast as the
models allow and with the same record whatever the timing.

* A maker that calls an API once per image (``thread_safe``) runs each candidate's chain
  (make, save, observe, judge, drift) on its own: up to the backend's ``concurrency``
  chains at once when ``parallel`` is on, so a round takes about as long as its slowest
  chain. The chains run under the caller's API usage collection and deadline.
* A local maker makes all images in one call (one batch on the device); then every model
  is called once for the batch (:meth:`refine.evaluate.assess.Assessor.assess_many`, ``drifts``).
* The candidates come back in seed order, so the record does not depend on which call
  finished first. A candidate whose calls fail is left out and its failure returned (the
  round decides among the others); when every candidate fails, the first failure is raised,
  or :class:`EveryCandidateRefused` when the model that makes them refused each (a safety
  block; a refusal of a later step, an observation, is raised as itself).
* ``timings`` gets each stage's model time summed over the candidates, and ``wall``, the
  time the candidates took together.
* A stop asked for (:func:`refine.usage.stop_on`) ends the round between candidates and
  model calls: :class:`refine.usage.StopRequested` carries the candidates finished by then
  (``made``), so the round is kept as stopped rather than lost.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from refine import usage
from refine.backends.loading import Refused, describe_error
from refine.events import Event, StageStarted, StepDone
from refine.records import Candidate

if TYPE_CHECKING:
    from PIL import Image

    from refine.backends.selection import Backends
    from refine.evaluate.assess import Assessor, CallCounter
    from refine.io.store import RunStore
    from refine.records import Run

Make = Callable[..., list["Image.Image"]]  # make(backend, seeds, **progress) -> images


class EveryCandidateRefused(Refused):
    """Every candidate of a round refused by the model that makes them: ``failures`` says
    each in words ("candidate 0 (seed 1042): ..."). The round is recorded as refused and
    the run goes on (:class:`refine.records.RefusedRound`)."""

    def __init__(self, failures: list[str]) -> None:
        super().__init__(f"every candidate was refused: {'; '.join(failures)}")
        self.failures = failures

    def __reduce__(self) -> Any:  # whole across processes
        return (type(self), (self.failures,))


@dataclass
class Made:
    candidates: list[Candidate]
    failures: list[str] = field(default_factory=list)  # "candidate 1 (seed 43): ..."
    notes: list[str] = field(default_factory=list)  # e.g. a batch halved for lack of memory


class CandidateMaker:
    """Makes and assesses the candidates of one round with a run's models."""

    def __init__(
        self,
        backends: Backends,
        assessor: Callable[[], Assessor],
        calls: CallCounter,
        emit: Callable[[Event], None],
        parallel: bool = True,
    ) -> None:
        self.backends = backends
        self.assessor = assessor
        self.calls = calls
        self.emit = emit
        self.parallel = parallel

    def make(
        self,
        run: Run,
        store: RunStore,
        k: int,
        seeds: list[int],
        parent: Image.Image | None,
        make: Make | None,
        timings: dict[str, float],
        given: list[Image.Image] | None = None,
        role: str | None = None,
    ) -> Made:
        """One candidate per seed of round ``k``, made by ``make`` (or ``given``): edits of
        ``parent`` when there is one, unless ``role`` is the generator (a regenerating
        round: new images, their drift from ``parent`` measured)."""
        if role is None:
            role = "generator" if parent is None else "editor"
        stage = "generate" if role == "generator" else "edit"
        started = time.perf_counter()
        maker = None if make is None else self.backends.get(role)
        per_call = maker is not None and getattr(maker, "thread_safe", False)
        images: list[Any] = list(given) if given is not None else [None] * len(seeds)
        notes: list[str] = []
        if maker is not None:
            self.emit(StageStarted(round=k, stage=stage, n=len(seeds)))
        if maker is not None and not per_call:  # one batched call on the local device
            t = time.perf_counter()
            with self.backends.using(role) as backend:
                images = list(make(backend, seeds, **self.steps_shown(backend, k, stage)))
                take = getattr(backend, "take_notes", None)
                notes = list(take()) if callable(take) else []
            self.calls.add(len(seeds))
            timings[stage] = timings.get(stage, 0.0) + time.perf_counter() - t
        if not per_call and len(seeds) > 1:  # a local batch: each model called once
            made = Made(self._batch(run, store, k, seeds, images, parent, timings), [], notes)
        else:
            workers = 1
            if per_call and self.parallel:
                workers = max(1, min(len(seeds), int(getattr(maker, "concurrency", 1))))
            chains = self._chains(run, store, k, seeds, images, parent, make, role, workers)
            _add(timings, chains.timings)
            made = Made(chains.candidates, chains.failures, notes)
        timings["wall"] = time.perf_counter() - started
        return made

    def _chains(
        self,
        run: Run,
        store: RunStore,
        k: int,
        seeds: list[int],
        images: list[Any],
        parent: Image.Image | None,
        make: Make | None,
        role: str,
        workers: int,
    ) -> _Chains:

        stage = "generate" if role == "generator" else "edit"
        ctx = usage.context()

        def chain(j: int) -> tuple[Candidate | None, dict[str, float], BaseException | None]:
            own: dict[str, float] = {}
            with usage.inherited(ctx):
                try:
                    usage.check_stop()  # between candidates
                    image = images[j]
                    if image is None:
                        t = time.perf_counter()
                        with self.backends.using(role) as backend:
                            try:
                                image = make(backend, [seeds[j]])[0]
                            except Refused as err:  # the maker's own refusal, not a
                                err.by_maker = role  # later step's (an observation's)
                                raise
                        self.calls.add(1)
                        own[stage] = time.perf_counter() - t
                    one = self._one(run, store, k, j, seeds[j], image, parent, own)
                    return one, own, None
                except (usage.BudgetExhausted, usage.StopRequested, usage.QuotaSpent):
                    raise
                except Exception as err:  # this candidate only; the others go on
                    return None, own, err

        outcomes: list[Any] = []
        stopped: usage.StopRequested | None = None
        if workers > 1:
            from concurrent.futures import CancelledError, ThreadPoolExecutor

            pool = ThreadPoolExecutor(workers, thread_name_prefix=f"round-{k}")
            wait = True
            try:
                futures = [pool.submit(chain, j) for j in range(len(seeds))]
                for future in futures:
                    try:
                        outcomes.append(future.result())
                    except (usage.StopRequested, CancelledError) as stop:
                        if isinstance(stop, usage.StopRequested):
                            stopped = stopped or stop
                        outcomes.append(None)
                        pool.shutdown(wait=False, cancel_futures=True)
            except KeyboardInterrupt:  # Ctrl-C: the run ends now, the calls in flight
                wait = False  # are left (the command line exits without them)
                raise
            finally:
                pool.shutdown(wait=wait, cancel_futures=True)
        else:
            for j in range(len(seeds)):
                try:
                    outcomes.append(chain(j))
                except usage.StopRequested as stop:
                    stopped = stop
                    break
        out = _Chains([], [], {})
        first: BaseException | None = None
        for j, outcome in enumerate(outcomes):
            if outcome is None:  # not finished: a stop came first
                continue
            one, own, err = outcome
            _add(out.timings, own)
            if one is not None:
                out.candidates.append(one)
            else:
                first = first or err
                out.failures.append(f"candidate {j} (seed {seeds[j]}): {describe_error(err)}")
        if stopped is not None:
            stopped.made = Made(out.candidates, out.failures)
            raise stopped
        if not out.candidates and first is not None:
            errors = [outcome[2] for outcome in outcomes if outcome is not None]
            if all(getattr(err, "by_maker", None) for err in errors):
                raise EveryCandidateRefused(out.failures) from first
            raise first
        return out

    def _batch(
        self,
        run: Run,
        store: RunStore,
        k: int,
        seeds: list[int],
        images: list[Any],
        parent: Image.Image | None,
        timings: dict[str, float],
    ) -> list[Candidate]:
        """Save and assess a local batch's images: one observe, one rating, one embedding
        call for all of them where the models take batches."""
        names = [
            store.save_image(f"round_{k:02d}_c{j}.png", image) for j, image in enumerate(images)
        ]
        self.emit(StageStarted(round=k, stage="observe", n=len(images)))
        assessor = self.assessor(run.spec)
        done = assessor.assess_many(
            images, run.references, run.spec.tau, run.spec.max_per_dimension
        )
        for a in done:
            _add(timings, a.timings)
        drifts: list[Any] = [None] * len(images)
        if parent is not None:
            t0 = time.perf_counter()
            drifts = assessor.drifts(parent, images)
            _add(timings, {"drift": time.perf_counter() - t0})
        return [
            _candidate(seed, name, a, drift)
            for seed, name, a, drift in zip(seeds, names, done, drifts, strict=True)
        ]

    def _one(
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
        """Save one image, assess it, and measure its drift from the parent."""
        name = store.save_image(f"round_{k:02d}_c{j}.png", image)
        self.emit(StageStarted(round=k, stage="observe", candidate=j))
        assessor = self.assessor(run.spec)
        a = assessor.assess(image, run.references, run.spec.tau, run.spec.max_per_dimension)
        _add(timings, a.timings)
        drift = None
        if parent is not None:
            t0 = time.perf_counter()
            drift = assessor.drift(parent, image)
            _add(timings, {"drift": time.perf_counter() - t0})
        return _candidate(seed, name, a, drift)

    def steps_shown(self, backend: Any, k: int, stage: str = "generate") -> dict[str, Any]:
        """``progress=`` for a backend whose generate/edit reports denoising steps (the
        diffusers backends): each step becomes a :class:`StepDone` event."""
        import inspect

        method = getattr(backend, "edit" if stage == "edit" else "generate", None)
        try:
            takes = method is not None and "progress" in inspect.signature(method).parameters
        except (TypeError, ValueError):
            takes = False
        if not takes:
            return {}

        def progress(step: int, total: int) -> None:
            self.emit(StepDone(round=k, stage=stage, step=step, total=total))

        return {"progress": progress}


@dataclass
class _Chains:
    candidates: list[Candidate]
    failures: list[str]
    timings: dict[str, float]


def _add(timings: dict[str, float], more: dict[str, float]) -> None:
    for name, seconds in more.items():
        timings[name] = timings.get(name, 0.0) + seconds


def _candidate(seed: int, name: str, a: Any, drift: Any) -> Candidate:
    return Candidate(
        seed=seed,
        image=name,
        observed=a.observed,
        scores=a.scores,
        feedback=a.feedback,
        drift=drift,
    )
