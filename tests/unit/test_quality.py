"""Quality readings: the expected 0-10 rating from log-probabilities, the sampled fallback,
VIEScore's minimum and CLIP-IQA's softmax, against hand-computed values."""

from __future__ import annotations

import math

import numpy as np
import pytest

from metrics import judge, quality


def test_expected_rating_renormalises_over_the_rating_tokens():
    # "7" 0.5, "8" 0.25, "9" 0.125 and two tokens that are no rating (0.125 between them)
    logprobs = {
        "7": math.log(0.5),
        "8": math.log(0.25),
        "9": math.log(0.125),
        "N": math.log(0.1),
        "the": math.log(0.025),
    }
    dist = quality.rating_distribution(logprobs, 0, 10, ten_after_one=0.0)
    # the three ratings keep their ratios and sum to 1: 4/7, 2/7, 1/7
    assert dist[7] == pytest.approx(4 / 7) and dist[8] == pytest.approx(2 / 7)
    assert dist[9] == pytest.approx(1 / 7) and sum(dist) == pytest.approx(1.0)
    assert judge.expected_rating(dist, 0) == pytest.approx((7 * 4 + 8 * 2 + 9) / 7)


def test_ten_from_its_own_token_or_from_one_then_zero():
    own = quality.rating_distribution({"10": math.log(0.6), "9": math.log(0.4)})
    assert own[10] == pytest.approx(0.6) and judge.expected_rating(own, 0) == pytest.approx(9.6)
    # "1" (0.6) began "10" with P("0" | "1") = 0.75: 0.45 on 10, 0.15 on 1
    split = quality.rating_distribution(
        {"1": math.log(0.6), "9": math.log(0.4)}, ten_after_one=0.75
    )
    assert split[10] == pytest.approx(0.45) and split[1] == pytest.approx(0.15)
    assert split[9] == pytest.approx(0.4)
    assert judge.expected_rating(split, 0) == pytest.approx(0.45 * 10 + 0.15 + 0.4 * 9)


def test_one_that_may_begin_ten_is_ambiguous_unless_negligible():
    with pytest.raises(quality.AmbiguousRating, match="1 or 10"):
        quality.rating_distribution({"1": math.log(0.3), "9": math.log(0.7)})
    # below the threshold "1" cannot move the score by 0.001: it stays a 1
    tiny_one = quality.rating_distribution({"1": math.log(1e-5), "8": 0.0})
    assert tiny_one[1] == pytest.approx(1e-5, rel=1e-3)
    with pytest.raises(ValueError, match="no rating token"):
        quality.rating_distribution({"Yes": -0.1})


def test_a_sampled_rating_has_the_posteriors_standard_error():
    """The posterior standard deviation of the expected rating under Perks' prior (one
    answer's weight spread over the scale), as scipy's Dirichlet gives it; answers that
    agree leave an
    error (the sample standard deviation said 0), which more answers shrink; where they
    differ it is above scipy's standard error of the mean, and near it."""
    import numpy as np
    from scipy.stats import dirichlet, sem

    answers = ["7", "8", "8", "9", "6", "8", "7", "8"]
    scale = [str(v) for v in range(11)]
    dist = judge.frequencies(answers, scale)
    assert judge.expected_rating(dist, 0) == pytest.approx(61 / 8)

    def posterior_sd(counts) -> float:
        alpha = np.asarray(counts, float) + judge.PRIOR_MASS / len(counts)
        v = np.arange(len(counts), dtype=float)
        return float(np.sqrt(v @ dirichlet(alpha).cov() @ v))

    counts = [answers.count(s) for s in scale]
    assert judge.rating_stderr(dist, 8) == pytest.approx(posterior_sd(counts), rel=1e-9)
    # more than the sample's error (0.32; the prior's weight of one answer, spread over 0-10,
    # widens it to 0.49), never far from it
    sample = float(sem([int(a) for a in answers]))
    assert sample < judge.rating_stderr(dist, 8) < 1.6 * sample
    two, eight = (judge.rating_stderr([0, 0, 1, 0, 0], k) for k in (2, 8))
    assert two == pytest.approx(posterior_sd([0, 0, 2, 0, 0]), rel=1e-9)
    assert two > eight > 0.1  # agreeing answers: an error, smaller the more they are
    with pytest.raises(ValueError, match="none of"):
        judge.frequencies(["7", "eleven"], scale)


def test_a_sampled_share_has_the_beta_posteriors_standard_error():
    from scipy.stats import beta

    assert judge.sampled_stderr(0.75, 4) == pytest.approx(beta(3.5, 1.5).std(), rel=1e-9)
    assert judge.sampled_stderr(1.0, 2) == pytest.approx(beta(2.5, 0.5).std(), rel=1e-9)
    assert judge.sampled_stderr(0.0, 8) == pytest.approx(beta(0.5, 8.5).std(), rel=1e-9)
    with pytest.raises(ValueError, match="at least one answer"):
        judge.sampled_stderr(0.5, 0)


def test_a_reading_is_logprobs_or_k_samples_with_its_standard_error():
    assert judge.Reading.parse("logprobs") == judge.Reading()
    sampled = judge.Reading.parse("sampled k=8", 0.04)
    assert (sampled.method, sampled.k, sampled.stderr, sampled.mode) == (
        "sampled",
        8,
        0.04,
        "sampled k=8",
    )
    assert judge.Reading.parse(None) is None
    with pytest.raises(ValueError, match="unknown judge reading"):
        judge.Reading.parse("sampled eight")
    with pytest.raises(ValueError, match="k >= 2"):
        judge.Reading("sampled", 1)


def test_renormalised_over_the_answers_found_with_their_casings_pooled():
    lp = judge.merge_case(
        {"yes": math.log(0.3), "Yes": math.log(0.3), "No": math.log(0.2)}, ("Yes", "No")
    )
    assert judge.renormalise(lp, ("Yes", "No")) == pytest.approx([0.75, 0.25])
    with pytest.raises(ValueError, match="none of the answer tokens"):
        judge.renormalise({"Maybe": 0.0}, ("Yes", "No"))


def test_viescore_takes_the_lower_rating():
    assert quality.viescore_quality(8.2, 6.5) == pytest.approx(0.65)
    with pytest.raises(ValueError, match="artifacts rating 11"):
        quality.viescore_quality(5, 11)


def test_clip_iqa_is_the_good_share_of_a_softmax():
    good, bad = np.array([1.0, 0.0]), np.array([0.0, 1.0])
    images = np.array([[0.6, 0.8], [0.8, 0.6]])
    got = quality.clip_iqa(images, good, bad, 100.0)
    e = np.exp(100 * np.array([[0.6, 0.8], [0.8, 0.6]]))
    assert got == pytest.approx((e[:, 0] / e.sum(1)).tolist())
    assert got[1] > 0.5 > got[0]
