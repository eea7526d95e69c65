"""Observing and scoring one image with stand-in backends: every number by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest
from PIL import Image

from metrics.vqascore import VqaAnswer
from refine.backends.rating import Rating
from refine.backends.selection import Backends
from refine.evaluate.assess import Assessor
from refine.profiles import load_profile
from refine.records import ReferencePack

SEEN = {"objects": ["tea glasses", "hamburgers"]}
VECTORS = {
    "tea glasses": [1, 0, 0],
    "rice platter": [0, 1, 0],
    "hamburgers": [0, 0, 1],
    "oversized hookahs": [0, 0.6, 0.8],  # cosine 0.8 with hamburgers
}


class Observer:
    id = "test:observer"

    def describe(self, image, dimensions, max_per_dimension):
        return {d: list(SEEN.get(d, []))[:max_per_dimension] for d in dimensions}


class Judge:
    id = "test:judge"

    def __init__(self):
        self.asked = 0

        self.prompts: list[tuple[str, str]] = []

    def rate_prefixed(self, images, prompts, prefix):
        self.asked += len(images)
        self.prompts += [(p, prefix) for p in prompts]
        return [Rating((0.0, 0.25, 0.5, 0.25, 0.0)) for _ in images]  # E = 3

    def vqa_score(self, images, texts):
        self.asked += len(images)
        # real photos (white) show the stereotype with p 0.2, the generated image with 0.5
        return [
            VqaAnswer(t, 0.2 if im.getpixel((0, 0)) == (255, 255, 255) else 0.5)
            for im, t in zip(images, texts, strict=True)
        ]


class ImageEmbedder:
    id = "test:image"

    def encode_images(self, images):
        import torch

        rows = [[1.0, 0.0] if im.getpixel((0, 0))[0] > 100 else [0.6, 0.8] for im in images]
        return torch.tensor(rows)


def assessor(fixed_embedder, judge=None, image_embedder=None):
    judge = judge or Judge()
    backends = Backends(
        load_profile("gemini"),
        instances={
            "observer": Observer(),
            "judge": judge,
            "text_embedder": fixed_embedder(VECTORS),
            "image_embedder": image_embedder or ImageEmbedder(),
        },
    )
    return Assessor(backends), judge


def refs(**extra):
    return ReferencePack(
        activity="people eating food at home",
        country="Iran",
        descriptors={"objects": ["tea glasses", "rice platter"]},
        **extra,
    )


def test_judge_rating_variant(fixed_embedder):
    a, judge = assessor(fixed_embedder)
    image = Image.new("RGB", (8, 8), (200, 0, 0))
    observed, scores, feedback, timings = a.assess(
        image, refs(stereotypes=["oversized hookahs"]), tau=0.52
    )
    assert observed["objects"] == ["tea glasses", "hamburgers"]
    assert (scores.align, scores.hal) == (0.5, 0.5)
    assert scores.exag == pytest.approx(0.5)  # (E[rating] - 1) / 4 with E = 3
    assert scores.faith == pytest.approx((0.5 + 0.5 + 0.5) / 3)
    assert scores.variants["exag"] == "exag:mllm" and scores.photos is None
    # AHEaD Tab. 31: the generation prompt and the country, no candidates, "score is" begun
    ((prompt, prefix),) = judge.prompts
    assert prefix == "score is "
    assert "PROMPT: A photorealistic photo of people eating food at home in Iran.\n" in prompt
    assert "COUNTRY: Iran\n" in prompt and "hookah" not in prompt
    assert "score is <num>" in prompt
    assert [m.phrase for m in feedback.missing] == ["rice platter"]
    assert [m.phrase for m in feedback.hallucinated] == ["hamburgers"]
    (seen,) = feedback.exaggerated
    assert (seen.candidate, seen.observed) == ("oversized hookahs", "hamburgers")
    assert seen.similarity == pytest.approx(0.8)
    # the reference closest to the stereotype, in any dimension: what may replace it
    assert (seen.replacement, seen.replacement_dimension) == ("rice platter", "objects")
    assert seen.replacement_similarity == pytest.approx(0.6)
    from refine.loop.instructions import planned_changes

    assert planned_changes(feedback, 5, tau=0.52)[0] == (
        "Replace the oversized hookahs with a rice platter"
    )
    assert planned_changes(feedback, 5, tau=0.52, replace_floor=0.7)[0] == (
        "Tone down the oversized hookahs"
    )
    assert a.calls.n == 2 and judge.asked == 1  # one observation, one rating
    assert set(timings) == {"observe", "score", "judge", "quality", "metrics"}
    # above tau 0.8 the candidate is no longer seen
    assert (
        a.assess(image, refs(stereotypes=["oversized hookahs"]), tau=0.85).feedback.exaggerated
        == []
    )


def test_without_candidates_the_mllm_variant_still_measures_exag(fixed_embedder, tmp_path):
    """Tab. 31 lists no candidates: EXAG needs none, even with real photos (which only
    the ITA variant measures candidates against)."""
    a, judge = assessor(fixed_embedder)
    _, scores, feedback, _ = a.assess(Image.new("RGB", (8, 8)), refs())
    assert scores.exag == pytest.approx(0.5) and scores.faith == pytest.approx(0.5)
    assert scores.variants == {"exag": "exag:mllm", "faith": "faith:ahead"}
    assert feedback.exaggerated == [] and judge.asked == 1 and a.calls.n == 2
    photo = tmp_path / "real.png"
    Image.new("RGB", (8, 8), (255, 255, 255)).save(photo)
    _, scores, _, _ = a.assess(Image.new("RGB", (8, 8)), refs(reference_images=[str(photo)]))
    assert scores.variants["exag"] == "exag:mllm" and scores.photos is None


def photo_pack(tmp_path) -> ReferencePack:
    """References with one stereotype candidate and two real (white) photos."""
    paths = []
    for k in range(2):
        paths.append(str(tmp_path / f"real{k}.png"))
        Image.new("RGB", (8, 8), (255, 255, 255)).save(paths[-1])
    return refs(stereotypes=["oversized hookahs"], reference_images=paths)


def test_reference_yes_variant_judges_the_references_once(fixed_embedder, tmp_path):
    a, judge = assessor(fixed_embedder)
    pack = photo_pack(tmp_path)
    image = Image.new("RGB", (8, 8), (200, 0, 0))
    _, scores, feedback, _ = a.assess(image, pack)
    assert scores.exag == pytest.approx(0.3)  # 0.5 on the image - 0.2 on the references
    assert scores.variants["exag"] == "exag:ita" and scores.photos == 2
    assert feedback.exaggerated[0].excess == pytest.approx(0.3)
    assert a.calls.n == 1 + 2 + 1  # observation, two reference images, the image
    a.assess(image, pack)
    assert a.calls.n == 4 + 1 + 1  # the baseline is not asked again


def test_drift_is_the_embedding_cosine_and_ssim(fixed_embedder):
    a, _ = assessor(fixed_embedder)
    red, dark = Image.new("RGB", (16, 16), (200, 0, 0)), Image.new("RGB", (16, 16), (10, 0, 0))
    d = a.drift(red, dark)
    assert d.embedding_cosine == pytest.approx(0.6) and d.embedder == "test:image"
    assert a.drift(red, red).ssim == pytest.approx(1.0)
    assert 0.0 <= d.ssim < 1.0 and np.isfinite(d.ssim)


@pytest.mark.parametrize("with_images", [False, True], ids=["rating", "reference-yes"])
def test_a_batch_is_assessed_as_each_image_alone(fixed_embedder, tmp_path, with_images):
    """assess_many: the same scores and feedback as assess per image, with one rating
    call for the batch (the judge-rating variant) and the batch's timings once."""
    extra: dict = {"stereotypes": ["oversized hookahs"]}
    if with_images:
        path = tmp_path / "real.png"
        Image.new("RGB", (8, 8), (255, 255, 255)).save(path)
        extra["reference_images"] = [str(path)]
    images = [Image.new("RGB", (8, 8), c) for c in ((200, 0, 0), (10, 0, 0), (0, 90, 0))]
    a, judge = assessor(fixed_embedder)
    alone = [a.assess(im, refs(**extra)) for im in images]
    b, judge_b = assessor(fixed_embedder)
    many = b.assess_many(images, refs(**extra))
    for x, y in zip(alone, many, strict=True):
        assert (x.observed, x.scores, x.feedback) == (y.observed, y.scores, y.feedback)
    assert set(many[0].timings) == {"observe", "score", "judge", "quality", "metrics"}
    assert many[1].timings == {}
    assert b.calls.n == a.calls.n  # the same model calls counted
    assert judge_b.asked == judge.asked
    # drift of several children against one parent, one embedding call
    parent = images[0]
    assert b.drifts(parent, images[1:]) == [b.drift(parent, c) for c in images[1:]]


class QualityJudge(Judge):
    """Rates naturalness 8 and artifacts 6 of 10 (the rating distributions below), and
    counts the quality questions asked."""

    id = "hf:test-judge"

    def __init__(self):
        super().__init__()
        self.scaled = []

    def rate_scale(self, images, prompts, low, high):
        self.scaled += [(p.split("Rate ")[1][:14], low, high) for p in prompts]
        peak = 8 if "naturalness" in prompts[0] else 6
        dist = [0.0] * (high - low + 1)
        dist[peak - 1], dist[peak], dist[peak + 1] = 0.25, 0.5, 0.25  # E = peak
        return [Rating(tuple(dist), low=low) for _ in images]


class ClipEmbedder(ImageEmbedder):
    """A CLIP: "Good photo." along (0, 1), "Bad photo." along (1, 0), logit scale ln 3."""

    def encode_texts(self, texts):
        import torch

        assert texts == ["Good photo.", "Bad photo."]
        return torch.tensor([[0.0, 1.0], [1.0, 0.0]])

    def logit_scale(self):
        return math.log(3.0)


def test_quality_is_the_lower_rating_over_ten_with_clip_iqa_for_a_local_judge(fixed_embedder):
    a, judge = assessor(fixed_embedder, QualityJudge(), ClipEmbedder())
    red, dark = Image.new("RGB", (8, 8), (200, 0, 0)), Image.new("RGB", (8, 8), (10, 0, 0))
    out = a.assess_many([red, dark, red], refs())
    assert [x.scores.quality for x in out] == [pytest.approx(0.6)] * 3
    # CLIP-IQA from the catalog's compute: red (1, 0) is 1 / (1 + 3) "Good photo.", the
    # dark one (0.6, 0.8) 1 / (1 + 3^-0.2)
    dark_iqa = 1 / (1 + 3**-0.2)
    assert [x.scores.value("clip_iqa") for x in out] == pytest.approx([0.25, dark_iqa, 0.25])
    reading = out[0].scores.quality_reading
    assert (reading.naturalness, reading.artifacts) == (pytest.approx(8), pytest.approx(6))
    assert reading.judge == "hf:test-judge" and reading.method == "logprobs"
    # the two equal images are rated once: 2 images x 2 questions, each on 0..10
    assert judge.scaled == [("its naturalnes", 0, 10)] * 2 + [("how free it is", 0, 10)] * 2
    # cached: the same images again cost no call
    before = a.calls.n
    again = a.assess(red, refs())
    # the observation and the EXAG rating only (quality is not asked again)
    assert again.scores.quality == pytest.approx(0.6) and a.calls.n == before + 2
    assert len(judge.scaled) == 4


def test_a_judge_that_cannot_rate_0_to_10_reads_no_quality(fixed_embedder):
    a, _ = assessor(fixed_embedder)
    scores = a.assess(Image.new("RGB", (8, 8), (200, 0, 0)), refs()).scores
    assert (
        scores.quality is None
        and scores.quality_reading is None
        and scores.value("clip_iqa") is None
    )
    judge = a.backends.names["judge"]
    assert scores.notes["quality"] == f"the judge {judge} does not rate on a 0-10 scale"


def test_a_registered_metric_reads_what_the_assessor_took(fixed_embedder, tmp_path):
    """A metric registered with the catalog reads the readings AHEaD's own read (the
    descriptors matched to the references, the judge's answers) and the values computed
    before it, with nothing else changed; one whose reading is missing says why."""
    from metrics.catalog import Metric, registered
    from metrics.computed import Computed

    def missing_share(matching):
        return [len(s.missing) / max(len(s.references), 1) for s in matching]

    def rating_or_none(exaggeration_answers, values):
        return [
            Computed(None, note="no rating")
            if a is None or a.rating is None
            else a.rating / 5 * v["align"]
            for a, v in zip(exaggeration_answers, values, strict=True)
        ]

    def entry(name, compute, reads):
        return Metric(
            name, name, 0, 1, "lower", "", ("judge",), "image", "toy", name + ".",
            compute=compute, reads=reads,
        )  # fmt: skip

    with (
        registered(entry("toy_missing", missing_share, ("matching",))),
        registered(entry("toy_rated", rating_or_none, ("exaggeration_answers", "values"))),
    ):
        a, _ = assessor(fixed_embedder)
        red = Image.new("RGB", (8, 8), (200, 0, 0))
        with_candidates = a.assess(red, refs(stereotypes=["oversized hookahs"])).scores
        photo = tmp_path / "real.png"
        Image.new("RGB", (8, 8), (255, 255, 255)).save(photo)
        # with real photos EXAG is the ITA variant: VQAScores, no rating
        without = a.assess(
            red, refs(stereotypes=["oversized hookahs"], reference_images=[str(photo)])
        ).scores
    # one of the two references (rice platter) missing; the rating 3 of 5 times ALIGN 0.5
    assert with_candidates.value("toy_missing") == pytest.approx(0.5)
    assert with_candidates.value("toy_rated") == pytest.approx(0.3)
    assert without.value("toy_rated") is None and without.notes["toy_rated"] == "no rating"


class SampledJudge(Judge):
    """A judge read from eight sampled answers: ``yes`` of them "Yes" on the image (6 of 8
    unless said), 2 of 8 on the (white) photos."""

    def __init__(self, yes: float = 0.75):
        super().__init__()
        self.yes = yes

    def vqa_score(self, images, texts):
        self.asked += len(images)
        return [
            VqaAnswer(
                t, 0.25 if im.getpixel((0, 0)) == (255, 255, 255) else self.yes, "sampled k=8"
            )
            for im, t in zip(images, texts, strict=True)
        ]


def test_sampled_exag_and_faith_carry_their_errors(fixed_embedder, tmp_path):
    """EXAG(ITA) read from sampled answers carries the error its readings give it: the
    image's and the photos' mean's, combined (an excess of 0.5, far above 0, is spread as
    their sum of squares); FAITH carries EXAG's over 3. By log-probabilities neither has
    one, and the values are the same formulas'."""
    from metrics.ahead import ita_stderr
    from metrics.judge import sampled_stderr

    pack = photo_pack(tmp_path)
    image = Image.new("RGB", (8, 8), (200, 0, 0))
    a, _ = assessor(fixed_embedder, judge=SampledJudge())
    _, scores, feedback, _ = a.assess(image, pack)
    assert scores.exag == pytest.approx(0.5)
    # its excess of 0.5 is beyond what the readings' noise explains (0.22): named
    assert [e.candidate for e in feedback.exaggerated] == ["oversized hookahs"]
    exag, faith = scores.readings["exag"], scores.readings["faith"]
    image_se, photo_se = sampled_stderr(0.75, 8), sampled_stderr(0.25, 8)
    mean_se = math.sqrt(2 * photo_se**2) / 2
    assert exag.mode == "sampled k=8"
    assert exag.stderr == pytest.approx(ita_stderr([0.75], [image_se], [0.25], [mean_se]))
    # 0.5 is 2.9 errors of 0.17: a draw below two errors counts 0, so EXAG's spread is
    # wider than the excess's own
    assert exag.stderr > 1.2 * math.hypot(image_se, mean_se)
    assert faith.mode == "sampled k=8" and faith.stderr == pytest.approx(exag.stderr / 3)
    exact, _ = assessor(fixed_embedder)
    _, scores, _, _ = exact.assess(image, pack)
    assert scores.exag == pytest.approx(0.3) and "faith" not in scores.readings
    assert scores.readings["exag"].mode == "logprobs" and scores.readings["exag"].stderr == 0.0


def test_an_excess_within_its_noise_is_not_named_exaggerated(fixed_embedder, tmp_path):
    """3 "Yes" of 8 on the image against 2 of 8 on each photo: the excess, 0.125, is within
    two errors, so EXAG(ITA) does not count it (0, where the paper's value of the readings is
    0.125), and its 95% lower bound is below 0 (the noise of three readings of eight is
    0.31), so the feedback names no exaggerated candidate, and no edit is asked to remove
    it; by log-probabilities the same excess is named (test_reference_yes_variant...)."""
    from metrics.ahead import ITA_NAMED_AT
    from metrics.judge import sampled_stderr

    pack = photo_pack(tmp_path)
    a, _ = assessor(fixed_embedder, judge=SampledJudge(yes=0.375))
    _, scores, feedback, _ = a.assess(Image.new("RGB", (8, 8), (200, 0, 0)), pack)
    assert scores.exag == 0.0 and feedback.exaggerated == []
    noise = ITA_NAMED_AT * math.hypot(sampled_stderr(0.375, 8), sampled_stderr(0.25, 8) / 2**0.5)
    assert noise == pytest.approx(0.31, abs=0.01)
