"""Assessing one image: observe it, score it against the references, measure drift.

An :class:`Assessor` holds the backends and nothing of a run, so ``refine score``, the loop
and its steps use the same code. AHEaD's formulas live in ``metrics/``; here they meet the
models.

EXAG and FAITH variants (their names and formulas are ``metrics.catalog.VARIANTS``; every
score names the ones that made it, and how the judge was read beside them):

* ``exag:ita`` (the paper's, Eq. 3-4), whenever the references carry real photos (the
  activity's photo set, :mod:`refine.evaluate.photo_sets`) and stereotype candidates: each
  candidate's VQAScore on the image against its mean VQAScore on the photos
  (:func:`metrics.ahead.exaggeration`);
* ``exag:mllm`` otherwise: AHEaD Tab. 31's prompt (``assets/prompts/exag_mllm.txt``, no
  candidates listed), the expected 1-5 rating read at the digit after "score is"
  (:func:`metrics.ahead.rubric_exag`). The candidates listed as seen are those matching an
  observed descriptor (similarity > tau).
* ``faith:ahead``, or ``faith:no-exag`` where no EXAG was measured
  (:func:`metrics.ahead.faith`).

Quality (:meth:`Assessor.quality`): the judge rates naturalness and artifacts 0-10
(``assets/prompts/quality_*.txt``), quality = min / 10 (VIEScore).

The assessor makes the model calls (observe, match to the references, ask the judge) and
the catalog computes every image metric from them: each entry's ``compute`` over the
readings it names (``metrics.catalog.computing_order``, :mod:`refine.evaluate.readings`),
for the batch, where the backends give its readings; where they do not, the scores' notes
say why. The quality ratings and the values that depend on the image alone are cached per
image, so an image scored twice (a bench's rescoring, a resumed round) costs nothing more.
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from metrics.ahead import (
    DEFAULT_TAU,
    ExagAnswer,
    ita_baseline,
    ita_baseline_stderr,
    ita_decided,
    score_images,
)
from metrics.baselines import TifaAnswer
from metrics.catalog import CATALOG, computing_order
from metrics.computed import Computed, as_computed
from metrics.descriptors import DIMENSIONS
from metrics.drift import cosine, ssim
from metrics.judge import SAMPLED, Reading, reading_calls, sampled_stderr
from metrics.text_embedding import default_cache
from refine import usage
from refine.assets import prompt_template
from refine.evaluate.baselines import (
    BASELINES,
    baseline_readings,
    prefixed,
    vqa,
    vqa_calls,
)
from refine.evaluate.quality_read import read_quality
from refine.evaluate.readings import PER_IMAGE, NotRead, Readings
from refine.records import (
    Drift,
    Exaggerated,
    Feedback,
    Match,
    QualityReading,
    ReferencePack,
    RunSpec,
    Scores,
)

if TYPE_CHECKING:
    from PIL import Image

    from refine.backends.selection import Backends

DEFAULT_MAX_PER_DIMENSION: int = RunSpec.model_fields["max_per_dimension"].default


# the dimensions whose references can replace an exaggerated stereotype
REPLACING = ("objects", "attire", "setting")


class CallCounter:
    """Model calls made for one run (or one command); safe to add to from several threads."""

    def __init__(self, start: int = 0) -> None:
        self.n = start
        self.fresh = 0  # of n, those a close decision's confirmation spent (refine.loop.confirm)
        self._lock = threading.Lock()

    def add(self, k: int = 1) -> None:
        with self._lock:
            self.n += k


def observer_calls(observer: Any) -> int:
    """Model calls behind one image's observation: one, or one a dimension with AHEaD's
    prompts (Tab. 22-27)."""
    return len(DIMENSIONS) if getattr(observer, "prompts", "toolkit") == "ahead" else 1


def judge_calls(judge: Any, answers: int) -> int:
    """Model calls behind ``answers`` judge answers: k each when the judge samples."""
    sampled = getattr(judge, "method", "logprobs") != "logprobs"
    return answers * (getattr(judge, "samples", 1) if sampled else 1)


def vqa_stderr(answer: Any) -> float:
    """The standard error of one VQAScore answer: the posterior's where it was sampled
    (:func:`metrics.judge.sampled_stderr`), 0 where read by log-probabilities."""
    reading = Reading.parse(answer.mode)
    if reading is None or reading.method != SAMPLED:
        return 0.0
    return sampled_stderr(answer.value, int(reading.k or 0))


class PhotoBaseline(NamedTuple):
    """EXAG(ITA)'s baseline: each stereotype candidate's mean VQAScore over the real
    photos, and its standard error (0 where read by log-probabilities)."""

    mean: list[float]
    stderr: list[float]

    @classmethod
    def of(cls, photos: Sequence[Sequence[Any]]) -> PhotoBaseline:
        """From each photo's VQAScore answers (one per candidate)."""
        return cls(
            ita_baseline([[a.value for a in row] for row in photos]),
            ita_baseline_stderr([[vqa_stderr(a) for a in row] for row in photos]),
        )


# EXAG(ITA) read from sampled answers takes more answers than another reading's k: each
# candidate's VQAScore on an image up to ITA_STAGES x k answers, k at a time, until its
# excess over the photos is beyond doubt either way (metrics.ahead.ita_decided), and on
# each photo PHOTO_STAGES x k (once a run). With k = 8 (64 and 32 answers) a true excess of
# 0.2 is named exaggerated (at a one-sided 95 % bound, metrics.ahead.ITA_NAMED_AT) in 87-89 %
# of images, against 68-72 % (by any positive excess) from the 2-8 answers of another
# reading; up to 48 answers named it in 80-82 %, for a quarter fewer answers (130-220
# against 170-290 an image at zero excess, 3 and 5 candidates; benchmarks/bench_decisions.py,
# 500 images a cell)
ITA_STAGES, PHOTO_STAGES = 8, 4


def ita_answers(
    judge: Any,
    images: Sequence[Image.Image],
    candidates: Sequence[str],
    baseline: PhotoBaseline | None = None,
) -> list[Any]:
    """The judge's VQAScore of each image for its stereotype candidate, for EXAG(ITA):
    where it samples, a photo's (``baseline`` None) from PHOTO_STAGES x k answers, an
    image's from up to ITA_STAGES x k, until its excess over ``baseline`` is beyond doubt;
    by log-probabilities, one reading each."""
    from refine.backends.judging import ProbabilityJudge

    if not isinstance(judge, ProbabilityJudge):
        return vqa(judge, images, candidates)
    if baseline is None:
        return judge.vqa_score(images, candidates, most=PHOTO_STAGES * judge.samples)

    def enough(j: int, answer: Any) -> bool:
        excess = answer.value - baseline.mean[j]
        return ita_decided(excess, math.hypot(vqa_stderr(answer), baseline.stderr[j]))

    return judge.vqa_score(images, candidates, most=ITA_STAGES * judge.samples, enough=enough)


def read_photo_baseline(
    judge: Any, paths: Sequence[str], candidates: Sequence[str]
) -> tuple[PhotoBaseline, int]:
    """EXAG(ITA)'s baseline from the real photos at ``paths`` (:func:`ita_answers`), and
    the model calls it took."""
    from PIL import Image as PILImage

    photos = []
    for path in paths:
        with PILImage.open(path) as im:
            photos.append(ita_answers(judge, [im.convert("RGB")] * len(candidates), candidates))
    return PhotoBaseline.of(photos), sum(vqa_calls(judge, row) for row in photos)


class Judged(NamedTuple):
    """What the judge answered about an image's stereotype candidates (None: it has none),
    and the candidates the feedback lists as exaggerated."""

    answer: ExagAnswer | None
    exaggerated: list[Exaggerated]


class QualityCache:
    """Quality readings per (judge, image), safe for candidates judged at once: an image
    being rated holds its key until its reading is in, so equal images are rated once
    whatever the timing (the record, its model calls included, does not depend on it)."""

    def __init__(self) -> None:
        self.readings: dict[tuple, QualityReading | None] = {}
        # catalog metrics computed from the image alone, per (metric, backends, image)
        self.computed: dict[tuple, Computed] = {}
        self._locks: dict[tuple, threading.Lock] = {}
        self._guard = threading.Lock()

    def hold(self, keys: Sequence[tuple]) -> contextlib.ExitStack:
        """Hold the locks of ``keys`` (in sorted order: no deadlock between batches)."""
        stack = contextlib.ExitStack()
        for key in sorted(set(keys)):
            with self._guard:
                lock = self._locks.setdefault(key, threading.Lock())
            stack.enter_context(lock)
        return stack


class Assessment(NamedTuple):
    observed: dict[str, list[str]]
    scores: Scores
    feedback: Feedback
    timings: dict[str, float]


_BASELINES = threading.RLock()


def checkpoints_of(given: Any) -> dict[str, Any]:
    """Checkpoints in place of the baselines' own: as parsed, or NAME=WHERE items as a
    plan holds them (:func:`refine.evaluate.baseline_models.parse_baseline_models`)."""
    if isinstance(given, list | tuple):
        from refine.evaluate.baseline_models import parse_baseline_models

        return parse_baseline_models(given)
    return dict(given or {})


class Assessor:
    """Observes and scores images with a set of backends.

    ``calls`` counts the model calls made; ``baselines`` caches the judge's reference-image
    baselines (they depend only on the references), and may be shared between assessors.
    """

    def __init__(
        self,
        backends: Backends,
        calls: CallCounter | None = None,
        baselines: dict[tuple, PhotoBaseline] | None = None,
        qualities: QualityCache | None = None,
        compare: Sequence[str] = (),
        llm_cache: Any = None,
        baseline_models: Any = None,
    ) -> None:
        """``compare``: the baselines (catalog group ``baseline``) to compute beside FAITH
        for every image: ``vqascore`` (VQAScore's question about the generation prompt),
        ``judge_align`` and ``judge_hal`` (AHEaD Tab. 29-30), ...; one more judge call an
        image each, k where the judge samples (TIFA: one a question, and the language
        model's questions once per prompt, kept in ``llm_cache``)."""
        unknown = sorted(set(compare) - set(BASELINES))
        if unknown:
            raise ValueError(f"no baseline {unknown} (baselines: {', '.join(BASELINES)})")
        self.backends = backends
        self.calls = calls if calls is not None else CallCounter()
        self.baselines = baselines if baselines is not None else {}
        self.qualities = qualities if qualities is not None else QualityCache()
        self.compare = tuple(compare)
        # the language model's answers TIFA's questions come from (None: the default folder)
        self.llm_cache = llm_cache
        # checkpoints in place of the baselines' own (refine.evaluate.baseline_models)
        self.baseline_models = checkpoints_of(baseline_models)
        # API models: an image's observation and the judge's readings of it at once
        self.parallel = True

    def assess(
        self,
        image: Image.Image,
        refs: ReferencePack,
        tau: float = DEFAULT_TAU,
        max_per_dimension: int = DEFAULT_MAX_PER_DIMENSION,
    ) -> Assessment:
        """Observe ``image`` and score it against ``refs`` (AHEaD with the EXAG variant the
        references allow)."""
        return self.assess_many([image], refs, tau, max_per_dimension)[0]

    def assess_many(
        self,
        images: Sequence[Image.Image],
        refs: ReferencePack,
        tau: float = DEFAULT_TAU,
        max_per_dimension: int = DEFAULT_MAX_PER_DIMENSION,
    ) -> list[Assessment]:
        """:meth:`assess` for several images with one batched call per model where the
        model can take a batch (an observer with ``describe_many``; the judge's rating; the
        text embedder). The batch's timings are the first assessment's."""
        timings: dict[str, float] = {}
        images = list(images)
        mllm = not ita(refs)

        def observe() -> list[dict[str, list[str]]]:
            t = time.perf_counter()
            with self.backends.using("observer") as observer:
                many = getattr(observer, "describe_many", None)
                if callable(many) and len(images) > 1:
                    observed = many(images, list(DIMENSIONS), max_per_dimension)
                else:
                    observed = [
                        observer.describe(im, list(DIMENSIONS), max_per_dimension) for im in images
                    ]
                self.calls.add(len(images) * observer_calls(observer))
            timings["observe"] = time.perf_counter() - t
            return observed

        def exag() -> list[Any] | None:
            t = time.perf_counter()
            ratings = self._mllm_ratings(images, refs) if mllm else None
            timings["judge"] = time.perf_counter() - t
            return ratings

        def quality() -> list[QualityReading | None]:
            t = time.perf_counter()
            qualities = self.quality(images)
            timings["quality"] = time.perf_counter() - t
            return qualities

        if self.parallel and self._api("observer") and self._api("judge"):
            # API models: what the judge reads from the images alone (exag:mllm's ratings,
            # the quality) waits on the API beside the observation, not after it (one
            # answer's wait a round, not three). An image opened from a file decodes on
            # first use, which two threads must not do at once: decoded here first
            for image in images:
                image.load()
            observed, ratings, qualities = usage.together(observe, exag, quality)
        else:  # local models share the device: one after the other, as before
            observed = observe()
            ratings, qualities = None, None
        t = time.perf_counter()
        with self.backends.using("text_embedder") as embedder:
            aheads = score_images(refs.descriptors, observed, embedder, tau=tau)
        timings["score"] = time.perf_counter() - t
        t = time.perf_counter()
        if mllm:
            if ratings is None:
                ratings = self._mllm_ratings(images, refs)
            judged = self._mllm(ratings, observed, refs, tau)
        else:
            judged = [
                self.exaggeration(im, o, refs, tau) for im, o in zip(images, observed, strict=True)
            ]
        judged = [self.with_replacements(j, refs) for j in judged]
        timings["judge"] = timings.get("judge", 0.0) + time.perf_counter() - t
        if qualities is None:
            t = time.perf_counter()
            qualities = self.quality(images)
            timings["quality"] = time.perf_counter() - t
        return self._assessments(images, observed, aheads, judged, qualities, timings, refs)

    def _api(self, role: str) -> bool:
        """Whether ``role``'s backend is an API model (thread-safe: calls may overlap)."""
        return bool(getattr(self.backends.get(role), "thread_safe", False))

    def _assessments(
        self,
        images: Sequence[Image.Image],
        observed: Sequence[dict[str, list[str]]],
        aheads: Sequence[Any],
        judged: Sequence[Judged],
        qualities: Sequence[QualityReading | None],
        timings: dict[str, float],
        refs: ReferencePack,
    ) -> list[Assessment]:
        """Each image's scores, the catalog's metrics computed from the model calls made
        (the batch's timings, the computation's included, in the first one's), and its
        feedback."""
        t = time.perf_counter()
        given = {
            "matching": aheads,
            "exaggeration_answers": [j.answer for j in judged],
            "quality_ratings": qualities,
            **baseline_readings(
                self.backends,
                self.calls,
                self.compare,
                images,
                refs,
                self.llm_cache,
                self.baseline_models,
            ),
        }
        failed = {}
        if all(q is None for q in qualities):
            judge = self.backends.names.get("judge", "")
            failed["quality_ratings"] = f"the judge {judge} does not rate on a 0-10 scale"
        got, notes = self.computed(images, given, failed)
        timings["metrics"] = time.perf_counter() - t
        out = []
        for i, (o, ahead, j, q, row) in enumerate(
            zip(observed, aheads, judged, qualities, got, strict=True)
        ):
            scores = _scores(row, notes, ahead, q, j.answer, given["tifa_answers"][i])
            feedback = Feedback(
                aligned=[as_match(m) for m in ahead.aligned],
                missing=[as_match(m) for m in ahead.missing],
                hallucinated=[as_match(m) for m in ahead.hallucinated],
                exaggerated=j.exaggerated,
            )
            out.append(Assessment(o, scores, feedback, timings if i == 0 else {}))
        return out

    # -- quality -----------------------------------------------------------------------

    def quality(self, images: Sequence[Image.Image]) -> list[QualityReading | None]:
        """Each image's quality ratings: the judge's expected 0-10 naturalness and
        artifacts (None when the judge cannot rate on a 0-10 scale), from which the catalog
        computes VIEScore's quality. One rating call for the images not cached."""

        judge_name = self.backends.names.get("judge", "")
        keys = [(judge_name, _digest(im)) for im in images]
        cache = self.qualities
        with cache.hold(keys):
            todo: dict[tuple, Image.Image] = {}
            for key, im in zip(keys, images, strict=True):
                if key not in cache.readings:
                    todo.setdefault(key, im)
            if todo:
                got = read_quality(self.backends, self.calls, list(todo.values()), self.parallel)
                for key, quality in zip(todo, got, strict=True):
                    cache.readings[key] = quality
            return [cache.readings[key] for key in keys]

    # -- the catalog's own computations ------------------------------------------------

    def computed(
        self,
        images: Sequence[Image.Image],
        given: dict[str, Sequence[Any]] | None = None,
        failed: dict[str, str] | None = None,
        only: Sequence[str] | None = None,
        known: Sequence[dict[str, Any]] | None = None,
    ) -> tuple[list[dict[str, Computed]], dict[str, str]]:
        """Every image metric the catalog computes, for each image (its value None where it
        was not computed), and why any was not for the batch. ``given``: the readings the
        assessor took (:data:`refine.evaluate.readings.GIVEN`), ``failed``: those it could
        not take, and why; ``only``: these metrics alone, ``known``: each image's values
        computed before, which they may read. A metric that reads only what depends on the
        image alone is cached per image and the run's models."""
        out: list[dict[str, Computed]] = [{} for _ in images]
        values: list[dict[str, float | None]] = [dict(k) for k in known or [{} for _ in images]]
        notes: dict[str, str] = {}
        judged: list[dict[str, Any]] = [{} for _ in images]
        readings = Readings(self.backends, images, values, given, failed, judged)
        # every model the run has: a reading may come from any of them
        models = tuple(sorted(self.backends.names.items()))
        cache = self.qualities.computed
        for m in computing_order("image"):
            if only is not None and m.name not in only:
                continue
            keys = None
            if set(m.reads) <= PER_IMAGE:
                keys = [(m.name, models, _digest(im)) for im in images]
            if keys is not None and all(k in cache for k in keys):
                got = [cache[k] for k in keys]
            else:
                try:
                    readings.check(m.needs)
                    got = list(m.compute(**{name: readings.get(name) for name in m.reads}))
                except NotRead as err:
                    notes[m.name] = str(err)
                    got = [None] * len(images)
                if len(got) != len(images):
                    raise ValueError(f"{m.name}: {len(got)} values for {len(images)} images")
                got = [as_computed(v) for v in got]
                if keys is not None and m.name not in notes:
                    cache.update(zip(keys, got, strict=True))
            for row, vals, how, c in zip(out, values, judged, got, strict=True):
                row[m.name] = c
                vals[m.name] = c.value
                how[m.name] = c.reading
        return out, notes

    def _mllm_ratings(self, images: Sequence[Image.Image], refs: ReferencePack) -> list[Any]:
        return mllm_ratings(self, images, refs)

    def _mllm(self, ratings, observed, refs, tau) -> list[Judged]:
        """``exag:mllm`` of each image from its rating; the candidates seen are the
        feedback's."""
        out = []
        for r, o in zip(ratings, observed, strict=True):
            seen = self.candidates_seen(o, refs.stereotypes, tau) if refs.stereotypes else []
            answer = ExagAnswer(
                "exag:mllm", mode=r.method, rating=r.expectation, rating_stderr=r.stderr
            )
            out.append(Judged(answer, seen))
        return out

    # -- EXAG --------------------------------------------------------------------------

    def with_replacements(self, judged: Judged, refs: ReferencePack) -> Judged:
        """An EXAG judgement whose exaggerated candidates each name the reference
        descriptor closest to them among the objects, attire and setting (text-embedding
        cosine): what an edit may put in the stereotype's place."""
        listed = judged.exaggerated
        # what can stand in an object's place: things, clothes, places (an interaction or
        # an arrangement cannot replace a hookah)
        phrases = [(d, p) for d in REPLACING for p in refs.descriptors.get(d, [])]
        if not listed or not phrases:
            return judged

        cache = default_cache()
        with self.backends.using("text_embedder") as embedder:
            cand = cache.embed(embedder, [e.candidate for e in listed])
            ref = cache.embed(embedder, [p for _, p in phrases])
        sims = (cand @ ref.T).cpu().numpy()
        named = []
        for i, e in enumerate(listed):
            j = int(sims[i].argmax())
            named.append(
                e.model_copy(
                    update={
                        "replacement": phrases[j][1],
                        "replacement_dimension": phrases[j][0],
                        "replacement_similarity": float(sims[i, j]),
                    }
                )
            )
        return judged._replace(exaggerated=named)

    def exaggeration(
        self,
        image: Image.Image,
        observed: dict[str, list[str]],
        refs: ReferencePack,
        tau: float = DEFAULT_TAU,
    ) -> Judged:
        """The judge's answers about the image for the EXAG variant the references allow
        (``exag:ita`` with real photos and stereotype candidates, else ``exag:mllm``), and
        the candidates seen as exaggerated."""
        if not ita(refs):
            return self._mllm(self._mllm_ratings([image], refs), [observed], refs, tau)[0]
        with self.backends.using("judge") as judge:
            return self._ita(image, refs, judge)

    def _ita(self, image: Image.Image, refs: ReferencePack, judge: Any) -> Judged:
        """``exag:ita`` (AHEaD Eq. 3-4): each candidate's VQAScore on the image against its
        mean VQAScore on the real photos."""
        candidates = list(refs.stereotypes)
        # the baseline depends only on the references: judged once, not per image
        key = (getattr(judge, "id", ""), tuple(refs.reference_images), tuple(candidates))
        with _BASELINES:  # a round's candidates in parallel judge the baseline once
            baseline = self._baseline(key, refs, candidates, judge)
        answers = ita_answers(judge, [image] * len(candidates), candidates, baseline)
        self.calls.add(vqa_calls(judge, answers))
        # "sampled k=N" where any answer was sampled, N the most answers a candidate took
        modes = sorted({a.mode for a in answers}, key=lambda m: Reading.parse(m).calls)
        answer = ExagAnswer(
            "exag:ita",
            mode=modes[-1],
            yes=tuple(a.value for a in answers),
            baseline=tuple(baseline.mean),
            candidates=tuple(candidates),
            photos=len(refs.reference_images),
            yes_stderr=tuple(vqa_stderr(a) for a in answers),
            baseline_stderr=tuple(baseline.stderr),
        )
        listed = [
            Exaggerated(candidate=c, excess=e, source="VQAScore over the real photos' mean")
            for c, e in answer.exaggerated()
        ]
        return Judged(answer, listed)

    def _baseline(
        self, key: tuple, refs: ReferencePack, candidates: list[str], judge: Any
    ) -> PhotoBaseline:
        baseline = self.baselines.get(key)
        if baseline is None:
            baseline, calls = read_photo_baseline(judge, refs.reference_images, candidates)
            self.calls.add(calls)
            self.baselines[key] = baseline
        return baseline

    def candidates_seen(
        self, observed: dict[str, list[str]], candidates: Sequence[str], tau: float
    ) -> list[Exaggerated]:
        """Stereotype candidates matching an observed phrase (similarity > tau), closest
        first."""
        phrases = [p for d in DIMENSIONS for p in observed.get(d, [])]
        if not phrases:
            return []

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
                    Exaggerated(candidate=c, observed=phrases[j], similarity=float(sims[i, j]))
                )
        return sorted(seen, key=lambda s: -(s.similarity or 0.0))

    # -- drift -------------------------------------------------------------------------

    def drifts(self, parent: Image.Image, children: Sequence[Image.Image]) -> list[Drift]:
        """:meth:`drift` of several children in one image-embedding call."""
        with self.backends.using("image_embedder") as embedder:
            e = embedder.encode_images([parent, *children]).cpu().numpy()
        return [
            Drift(
                embedding_cosine=cosine(e[0], e[i + 1]), ssim=ssim(parent, c), embedder=embedder.id
            )
            for i, c in enumerate(children)
        ]

    def drift(self, parent: Image.Image, child: Image.Image) -> Drift:
        """How far an edit moved from its parent: cosine of image embeddings and SSIM."""
        return self.drifts(parent, [child])[0]


def as_match(m: Any) -> Match:
    """A matcher's descriptor match as the record's."""
    return Match(
        dimension=m.dimension, phrase=m.phrase, best_match=m.best_match, similarity=m.similarity
    )


def mllm_ratings(
    assessor: Assessor,
    images: Sequence[Image.Image],
    refs: ReferencePack,
    first_seed: int | None = None,
    every: bool = False,
) -> list[Any]:
    """``exag:mllm``'s ratings of several images in one rating call: AHEaD Tab. 31's
    prompt (``assets/prompts/exag_mllm.txt``, no stereotype candidates listed), the
    expected rating read at the digit after "score is" (a local judge begins its answer
    with it; an API judge samples where the model gives no log-probabilities; with
    ``first_seed``, a fresh reading whose seeds begin there, of all k answers with
    ``every``)."""
    from refine.evaluate.baselines import generation_prompt

    # the image's own prompt where it has one (a dataset's: PromptedPack)
    prompt = prompt_template("exag_mllm").format(
        prompt=generation_prompt(refs), country=refs.country
    )
    with assessor.backends.using("judge") as judge:
        ratings = prefixed(judge, images, [prompt] * len(images), first_seed, every)
        assessor.calls.add(sum(reading_calls(r.method) for r in ratings))
    return ratings


def fresh_exag(
    assessor: Assessor,
    images: Sequence[Image.Image],
    refs: ReferencePack,
    first_seed: int,
    every: bool = False,
) -> list[Computed] | None:
    """EXAG of ``images`` read again from fresh answers (all k with ``every``), their
    seeds from ``first_seed`` (the same for every image, so that their errors cancel where
    the model follows seeds). None where there is nothing fresh to read: the judge reads
    log-probabilities (the same reading again), or EXAG is the paper's (``exag:ita``,
    whose readings take up to 8k answers already)."""
    from metrics.ahead import exag_of
    from refine.backends.judging import ProbabilityJudge

    with assessor.backends.using("judge") as judge:
        sampling = isinstance(judge, ProbabilityJudge) and judge.sampling
    if not sampling or ita(refs):
        return None
    ratings = mllm_ratings(assessor, images, refs, first_seed, every)
    answers = [ExagAnswer("exag:mllm", r.method, r.expectation, r.stderr) for r in ratings]
    return exag_of(answers)


def ita(refs: ReferencePack) -> bool:
    """Whether the references allow the paper's EXAG (``exag:ita``): real photos of the
    activity and stereotype candidates to measure against them."""
    return bool(refs.reference_images and refs.stereotypes)


def _digest(image: Image.Image) -> str:
    """The image's pixels, hashed: equal pictures share their quality reading."""
    import hashlib

    h = hashlib.sha256(f"{image.mode}{image.size}".encode())
    h.update(image.tobytes())
    return h.hexdigest()


def _scores(
    computed: dict[str, Computed],
    notes: dict[str, str],
    ahead: Any,
    quality: QualityReading | None,
    exag: ExagAnswer | None = None,
    tifa: Sequence[TifaAnswer] | None = None,
) -> Scores:
    """One image's scores: the catalog's values in its order, the variants and readings
    that made them, why any is missing (the batch's reasons, then the image's own)."""
    values, variants, readings, why = {}, {}, {}, {}
    for name in CATALOG:
        if name not in computed:
            continue
        c = computed[name]
        values[name] = c.value
        if c.value is not None and c.variant is not None:
            variants[name] = c.variant
        if c.value is not None and c.reading is not None:
            readings[name] = c.reading
        if c.value is None and (c.note or name in notes):
            why[name] = notes.get(name) or c.note
    per_dim = {
        d: {"align": s.align, "hal": s.hal}
        for d, s in ahead.per_dimension.items()
        if s.align is not None or s.hal is not None
    }
    return Scores(
        values=values,
        variants=variants,
        readings=readings,
        notes=why,
        per_dimension=per_dim,
        tau=ahead.tau,
        photos=exag.photos if exag is not None and values.get("exag") is not None else None,
        quality_reading=quality,
        tifa=list(tifa) if tifa is not None else None,
    )


def photo_baseline(assessor: Assessor, refs: ReferencePack) -> None:
    """Judge the real photos' ``exag:ita`` baseline of ``refs`` now with ``assessor``'s
    judge (kept, as every image's EXAG reads it), so that what comes next does not pay for
    it; nothing when the references have no photos or no stereotype candidates."""
    if not ita(refs):
        return
    with assessor.backends.using("judge") as judge:
        key = (getattr(judge, "id", ""), tuple(refs.reference_images), tuple(refs.stereotypes))
        with _BASELINES:
            assessor._baseline(key, refs, list(refs.stereotypes), judge)


def scoring_assessor(
    backends: Backends, baselines: Sequence[str] = (), checkpoints: Any = None
) -> Assessor:
    """An assessor that scores images apart from a run (a task's cells, a dataset's
    images): its own call counter and caches, the ``baselines`` computed beside FAITH with
    ``checkpoints`` (``NAME=WHERE`` each) in place of their own. A run's is
    :meth:`refine.loop.refiner.Refiner.assessor`, on the run's counters."""
    return Assessor(backends, compare=baselines, baseline_models=checkpoints)
