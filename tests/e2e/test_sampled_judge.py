"""A judge model without log-probabilities: the fake server answers 400 "Logprobs is not
enabled", the judge falls back to sampled answers, and every score names the method."""

from __future__ import annotations

import math

import pytest

import refine.backends.gemini as gemini
import refine.backends.judging as judging
from refine.loop.refiner import Refiner
from tests.fakes.gemini_world import CULTURE, GREEN, RATING, RED, sampled_rating
from tests.runs import begin

ACT, COUNTRY = "people eating food at home", "Iran"
K = 8


@pytest.fixture
def no_logprobs(world):
    world.no_logprobs = True
    judging._NO_LOGPROBS.clear()
    yield world
    judging._NO_LOGPROBS.clear()  # other tests' judges read log-probabilities again


def frequencies(peak: int) -> list[float]:
    answers = [sampled_rating(peak, seed) for seed in range(K)]
    return [answers.count(r) / K for r in range(1, 6)]


def test_a_run_finishes_with_the_sampled_judge(no_logprobs, backends, options, tmp_path):
    world = no_logprobs
    run = begin(
        Refiner("gemini", backends, options),
        ACT,
        COUNTRY,
        out=tmp_path,
        rounds=1,
        target=1.0,
        max_drift=2.0,
        caire_labels=["Turkey"],
    )
    assert run.status == "finished" and [r.decision for r in run.rounds] == ["initial", "accepted"]
    # one refused log-probability request, remembered: every later judgement samples
    assert world.log.count("judge") == 1
    # EXAG of round 0's image and of round 1's two candidates, CAIRE of 2 labels per round,
    # the quality of the 3 images (2 questions each): 13 judgements of k samples each
    assert world.log.count("sampled") == (7 + 2 * 3) * K
    for r, colour in zip(run.rounds, (RED, GREEN), strict=True):
        s = r.best.scores
        dist = frequencies(RATING[colour])
        expected = sum((i + 1) * p for i, p in enumerate(dist))
        assert s.exag == pytest.approx((expected - 1) / 4)
        # the reading is a field beside the variant's name, not words inside it
        reading = s.readings["exag"]
        assert (reading.method, reading.k) == ("sampled", K)
        assert s.variants["exag"] == "exag:mllm"
        var = sum(p * (i + 1 - expected) ** 2 for i, p in enumerate(dist))
        assert reading.stderr == pytest.approx(math.sqrt(var / (K - 1)) / 4)
        assert r.caire.judge_mode == f"sampled k={K}"
        for label in r.caire.labels:
            assert label.probabilities == pytest.approx(frequencies(CULTURE[colour][label.label]))
            assert label.stderr is not None and label.stderr > 0
    # every sample counts as a model call; the refused request is no answer
    assert run.model_calls == len(world.log) - 1


def test_logprobs_mode_does_not_fall_back(no_logprobs, backends, options, tmp_path):
    options = {**options, "judge": {**options["judge"], "judge_mode": "logprobs"}}
    with pytest.raises(gemini.GeminiError, match="Logprobs is not enabled"):
        begin(Refiner("gemini", backends, options), ACT, COUNTRY, out=tmp_path, rounds=0)
    assert not judging._NO_LOGPROBS


def test_sampled_yes_probabilities_are_answer_frequencies(world, backends, options):
    from PIL import Image

    judging._NO_LOGPROBS.clear()
    judge = gemini.GeminiJudge("gemini-2.5-flash", judge_mode="sampled", samples=10, max_retries=0)
    red = Image.new("RGB", (8, 8), RED)
    assert judge.yes_probability([red], ["Does this image show hookahs?"]) == [0.9]
    (rating,) = judge.rate([Image.new("RGB", (8, 8), GREEN)], ["How exaggerated? 1-5"])
    assert rating.method == "sampled k=10" and rating.probabilities[0] == pytest.approx(0.8)
    assert world.log.count("sampled") == 20 and world.log.count("judge") == 0
    with pytest.raises(ValueError, match="judge_mode 'maybe'"):
        gemini.GeminiJudge("m", judge_mode="maybe")
