"""AHEaD formulas on hand-computed cases (fixed vectors make every similarity known)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from metrics import ahead
from metrics.text_embedding import PhraseEmbeddingCache

S30 = (math.sqrt(3) / 2, 0.5)  # 30 degrees from (1, 0): cos = 0.866 to r1, 0.5 to r2

VECTORS = {
    "r1": [1.0, 0.0, 0.0],
    "r2": [0.0, 1.0, 0.0],
    "r3": [0.0, 0.0, 1.0],
    "p_near_r1": [S30[0], S30[1], 0.0],
    "p_opposite": [-1.0, 0.0, 0.0],
    "p_r2": [0.0, 1.0, 0.0],
    "p_r3": [0.0, 0.0, 1.0],
    "p_half": [0.5, math.sqrt(0.75), 0.0],  # cos exactly 0.5 to r1
}


@pytest.fixture
def emb(fixed_embedder):
    return fixed_embedder(VECTORS)


def score(emb, refs, preds, tau=0.52):
    return ahead.score_images(refs, preds, emb, tau, cache=PhraseEmbeddingCache())


def test_hand_computed_single_image(emb):
    refs = {"setting": ["r1", "r2"], "objects": ["r3"]}
    preds = [{"setting": ["p_near_r1", "p_opposite"], "attire": ["p_r2"]}]
    s = score(emb, refs, preds)[0]
    # setting: r1 matched by p_near_r1 (0.866), r2 best 0.5 <= 0.52 -> ALIGN 1/2
    # predictions: p_near_r1 supported (0.866), p_opposite best 0.0 -> HAL 1/2
    assert s.per_dimension["setting"].align == 0.5
    assert s.per_dimension["setting"].hal == 0.5
    # objects has a reference and no prediction: ALIGN 0, HAL 0
    assert s.per_dimension["objects"].align == 0.0
    assert s.per_dimension["objects"].hal == 0.0
    # attire has predictions but no references: not scored, not in the means
    assert s.per_dimension["attire"].align is None
    assert s.align == pytest.approx(0.25)
    assert s.hal == pytest.approx(0.25)
    by_phrase = {m.phrase: m for m in s.references}
    assert by_phrase["r1"].status == ahead.ALIGNED
    assert by_phrase["r1"].best_match == "p_near_r1"
    assert by_phrase["r1"].similarity == pytest.approx(math.sqrt(3) / 2, abs=1e-6)
    assert by_phrase["r2"].status == ahead.MISSING
    assert by_phrase["r2"].similarity == pytest.approx(0.5, abs=1e-6)
    assert by_phrase["r3"].best_match is None and by_phrase["r3"].similarity is None
    preds_by = {m.phrase: m for m in s.predictions}
    assert preds_by["p_opposite"].status == ahead.HALLUCINATED
    assert preds_by["p_opposite"].best_match == "r2"  # cos 0 beats cos -1
    assert preds_by["p_r2"].status == ahead.UNSCORED


def test_threshold_is_strict_for_align_and_inclusive_for_hal(emb):
    refs = {"setting": ["r1"]}
    s = score(emb, refs, [{"setting": ["p_half"]}], tau=0.5)[0]
    assert s.align == 0.0  # 0.5 is not > 0.5
    assert s.hal == 1.0  # 0.5 <= 0.5
    s = score(emb, refs, [{"setting": ["p_half"]}], tau=0.49)[0]
    assert (s.align, s.hal) == (1.0, 0.0)


def test_predictions_equal_references(emb):
    refs = {"setting": ["r1", "r2"], "objects": ["r3"]}
    s = score(emb, refs, [refs])[0]
    assert (s.align, s.hal) == (1.0, 0.0)


def test_duplicate_predictions_count_once(emb):
    refs = {"setting": ["r1"]}
    preds = [{"setting": ["p_opposite", "P_OPPOSITE ", "p_opposite", "p_near_r1"]}]
    vectors = dict(VECTORS, P_OPPOSITE=VECTORS["p_opposite"])
    from tests.conftest import FixedEmbedder

    s = score(FixedEmbedder(vectors), refs, preds)[0]
    assert s.per_dimension["setting"].n_predictions == 2
    assert s.hal == 0.5


def test_multi_image_pooling_ddiv_sdiv(emb):
    refs = {"setting": ["r1", "r2"]}
    preds = [{"setting": ["p_near_r1"]}, {"setting": ["p_r2"]}]
    multi = ahead.score_pooled(refs, preds, emb, cache=PhraseEmbeddingCache())
    assert multi.pooled.align == 1.0 and multi.pooled.hal == 0.0
    assert [s.align for s in multi.images] == [0.5, 0.5]
    assert multi.sdiv == pytest.approx(0.5)
    assert multi.ddiv == pytest.approx(1.0)  # each reference covered once: even


def test_ddiv_hand_computed(emb):
    refs = {"setting": ["r1", "r2", "r3"]}
    preds = [{"setting": ["p_near_r1"]}, {"setting": ["p_near_r1", "p_r2"]}]
    multi = ahead.score_pooled(refs, preds, emb, cache=PhraseEmbeddingCache())
    p = np.array([2 / 3, 1 / 3])
    expected = float(-(p * np.log(p)).sum() / math.log(3))
    assert multi.ddiv == pytest.approx(expected)
    assert multi.ddiv_per_dimension == {"setting": pytest.approx(expected)}
    # pooled ALIGN 2/3, singles 1/3 and 2/3
    assert multi.sdiv == pytest.approx(2 / 3 - 0.5)


def test_normalised_entropy_edges():
    assert ahead.normalised_entropy([3, 3, 3]) == pytest.approx(1.0)
    assert ahead.normalised_entropy([0, 0]) == 0.0
    assert ahead.normalised_entropy([5]) == 0.0
    assert ahead.normalised_entropy([4, 0]) == 0.0


def test_single_image_has_no_diversity(emb):
    multi = ahead.score_pooled({"setting": ["r1"]}, [{"setting": ["p_near_r1"]}], emb)
    assert multi.ddiv is None and multi.sdiv is None


def test_per_image_references(emb):
    refs = [{"setting": ["r1"]}, {"setting": ["r2"]}]
    preds = [{"setting": ["p_near_r1"]}, {"setting": ["p_near_r1"]}]
    s = score(emb, refs, preds)
    assert [x.align for x in s] == [1.0, 0.0]


def test_exaggeration_hand_computed():
    e = ahead.exaggeration([[0.9, 0.2], [0.3, 0.1]], [0.5, 0.3], ["giant domes", "hookahs"])
    assert e.per_image == pytest.approx([0.4, 0.0])
    assert e.value == pytest.approx(0.2)
    assert e.excess[0] == pytest.approx([0.4, -0.1])
    assert e.exaggerated(0) == [("giant domes", pytest.approx(0.4))]
    assert e.exaggerated(1) == []
    # mean positive excess: giant domes (0.4 + 0) / 2
    assert e.exaggerated_overall() == [("giant domes", pytest.approx(0.2))]


def test_exaggeration_from_images_and_photos_by_hand():
    """Eq. 3-4 from fixed VQAScores: [images x candidates] and [photos x candidates]."""
    photos = [[0.2, 0.6, 0.1], [0.4, 0.2, 0.3]]  # baseline (Eq. 3): 0.3, 0.4, 0.2
    images = [[0.5, 0.5, 0.1], [0.1, 0.9, 0.6], [0.3, 0.4, 0.2]]
    baseline = ahead.ita_baseline(photos)
    assert baseline == pytest.approx([0.3, 0.4, 0.2])
    e = ahead.exaggeration(images, baseline, ["a", "b", "c"])
    # image 0: max(0.2, 0.1, -0.1) = 0.2; image 1: max(-0.2, 0.5, 0.4) = 0.5; image 2:
    # max(0, 0, 0) = 0 (an image no more stereotyped than the photos)
    assert e.per_image == pytest.approx([0.2, 0.5, 0.0])
    assert e.value == pytest.approx(0.7 / 3)
    # every excess negative: EXAG 0, nothing listed
    low = ahead.exaggeration([[0.1, 0.2, 0.0], [0.2, 0.3, 0.1]], baseline, ["a", "b", "c"])
    assert low.value == 0.0 and low.per_image == [0.0, 0.0]
    assert low.exaggerated(0) == [] and low.exaggerated(1) == []


def test_exaggeration_takes_largest_excess():
    e = ahead.exaggeration([[0.6, 0.9, 0.4]], [0.5, 0.5, 0.5])
    assert e.value == pytest.approx(0.4)
    assert [c for c, _ in e.exaggerated(0)] == ["candidate_1", "candidate_0"]


def test_exaggeration_rejects_bad_shapes():
    with pytest.raises(ValueError, match="baseline"):
        ahead.exaggeration([[0.1, 0.2]], [0.1])
    with pytest.raises(ValueError, match="finite"):
        ahead.exaggeration([[float("nan")]], [0.1])


def test_faithfulness():
    assert ahead.faithfulness(0.6, 0.3, 0.0) == pytest.approx((0.6 + 0.7 + 1.0) / 3)
    assert ahead.faithfulness(1.0, 0.0, 0.0) == 1.0


def test_top_k_helpers(emb):
    refs = {"setting": ["r1", "r2", "r3"]}
    preds = [{"setting": ["p_half", "p_opposite"]}]
    s = score(emb, refs, preds, tau=0.9)[0]
    missing = ahead.top_missing(s)
    # least covered first: r3 (0.0), then r2 (0.866), r1 (0.5)... sorted ascending
    assert [m.phrase for m in missing] == ["r3", "r1", "r2"]
    assert [m.phrase for m in ahead.top_missing(s, k=1)] == ["r3"]
    assert [m.phrase for m in ahead.top_hallucinated(s)] == ["p_opposite", "p_half"]


def test_calibrate_tau(emb):
    refs = {"setting": ["r1", "r2"]}
    observed = [{"setting": ["p_near_r1"]}, {"setting": ["p_r2"]}]
    # best-match similarities: image 0: r1 0.866, r2 0.5; image 1: r1 0.0, r2 1.0
    sims = np.array([math.sqrt(3) / 2, 0.5, 0.0, 1.0])
    tau = ahead.calibrate_tau(refs, observed, emb, q=0.75, cache=PhraseEmbeddingCache())
    assert tau == pytest.approx(float(np.quantile(sims, 0.75)), abs=1e-6)


def test_cache_encodes_each_phrase_once(emb):
    cache = PhraseEmbeddingCache()
    refs = {"setting": ["r1", "r2"]}
    ahead.score_images(refs, [{"setting": ["p_near_r1", "r1"]}], emb, cache=cache)
    assert sorted(emb.calls[0]) == ["p_near_r1", "r1", "r2"]
    ahead.score_images(refs, [{"setting": ["p_near_r1", "p_r3"]}], emb, cache=cache)
    assert emb.calls[1] == ["p_r3"]  # only the new phrase is encoded
    ahead.score_images(refs, [{"setting": ["p_r3"]}], emb, cache=cache)
    assert len(emb.calls) == 2
    assert cache.encoded_phrases == 4


def test_cache_is_keyed_by_embedder(fixed_embedder):
    cache = PhraseEmbeddingCache()
    a = fixed_embedder({"x": [1.0, 0.0], "y": [0.0, 1.0]})
    b = fixed_embedder({"x": [0.0, 1.0], "y": [0.0, 1.0]})
    sa = ahead.score_images({"setting": ["x"]}, [{"setting": ["y"]}], a, cache=cache)[0]
    sb = ahead.score_images({"setting": ["x"]}, [{"setting": ["y"]}], b, cache=cache)[0]
    assert (sa.align, sb.align) == (0.0, 1.0)


def test_bad_inputs(emb):
    with pytest.raises(ValueError, match="unknown dimension 'setings'"):
        score(emb, {"setings": ["r1"]}, [{}])
    with pytest.raises(ValueError, match="empty"):
        score(emb, {"setting": []}, [{}])
    with pytest.raises(ValueError, match="non-string"):
        score(emb, {"setting": ["r1"]}, [{"setting": [3]}])
    with pytest.raises(ValueError, match="tau"):
        score(emb, {"setting": ["r1"]}, [{}], tau=2.0)


def test_best_matches_kernel_against_loops():
    """The batched kernel equals per-group loops on random embeddings and ragged groups."""
    import torch

    from metrics.ahead import best_matches

    rng = np.random.default_rng(0)
    matrix = torch.nn.functional.normalize(torch.tensor(rng.normal(size=(40, 16))), dim=1).float()
    groups_r = [list(rng.choice(40, size=rng.integers(1, 7), replace=False)) for _ in range(25)]
    groups_p = [list(rng.choice(40, size=rng.integers(0, 5), replace=False)) for _ in range(25)]
    rb, ra, pb, pa = best_matches(matrix, groups_r, groups_p, chunk=7)
    m = matrix.numpy()
    for g, (r, p) in enumerate(zip(groups_r, groups_p, strict=True)):
        if not p:
            assert np.all(np.isneginf(rb[g, : len(r)])) and np.all(ra[g, : len(r)] == -1)
            continue
        sim = m[r] @ m[p].T
        np.testing.assert_allclose(rb[g, : len(r)], sim.max(1), atol=1e-6)
        np.testing.assert_array_equal(ra[g, : len(r)], sim.argmax(1))
        np.testing.assert_allclose(pb[g, : len(p)], sim.max(0), atol=1e-6)
        np.testing.assert_array_equal(pa[g, : len(p)], sim.argmax(0))


def test_ita_error_is_the_spread_of_the_counted_excess_drawn_with_its_readings_errors():
    """One candidate: the error of the excess where it counts (at least ITA_COUNTS_AT
    errors), else 0, with the excess drawn normally around its reading (scipy's integral),
    within the draws' own error (4000 draws: 1.1 % on a standard deviation); two equal
    candidates spread the largest less; exact readings have none, unrecorded errors give
    none."""
    from scipy.stats import norm

    def counted_sd(mu, sd):
        z, lb = norm(mu, sd), ahead.ITA_COUNTS_AT * sd
        m1 = z.expect(lambda x: x, lb=lb)
        m2 = z.expect(lambda x: x**2, lb=lb)
        return math.sqrt(m2 - m1**2)

    for yes, base in ((0.55, 0.25), (0.5, 0.25), (0.3, 0.25)):
        se = math.hypot(0.12, 0.05)
        got = ahead.ita_stderr([yes], [0.12], [base], [0.05])
        assert got == pytest.approx(counted_sd(yes - base, se), rel=0.05), (yes, base)
    one = ahead.ita_stderr([0.6], [0.1], [0.2], [0.0])
    two = ahead.ita_stderr([0.6, 0.6], [0.1, 0.1], [0.2, 0.2], [0.0, 0.0])
    assert two < one == pytest.approx(counted_sd(0.4, 0.1), rel=0.05)
    assert ahead.ita_stderr([0.6], [0.0], [0.2], [0.0]) == 0.0
    assert ahead.ita_stderr([0.6], [], [0.2], []) is None
    assert ahead.ita_stderr([0.6], [0.1], [0.2], [0.0]) == one  # fixed draws: repeatable
    # eight "No"s against photos at 0.3: no draw counts, and the error left is how far the
    # truth may rise above 0 (the rectified normal's spread, scipy's integral): small, not 0
    se = math.hypot(0.074, 0.05)
    floor = ahead.ita_stderr([0.0], [0.074], [0.3], [0.05])
    z = norm(-0.3, se)
    m1, m2 = z.expect(lambda x: x, lb=0.0), z.expect(lambda x: x**2, lb=0.0)
    assert 0 < floor == pytest.approx(math.sqrt(m2 - m1**2), rel=1e-3)


def test_ita_value_counts_an_excess_only_beyond_two_errors_and_is_the_papers_without_any():
    yes, base = [0.5, 0.42, 0.1], [0.3, 0.3, 0.3]
    # read by log-probabilities: the paper's largest positive excess (Eq. 3), exactly
    paper = ahead.exaggeration([yes], base).value
    assert ahead.ita_value(yes, [0.0] * 3, base, [0.0] * 3) == paper == pytest.approx(0.2)
    assert ahead.ita_value(yes, [], base, []) == paper  # errors not recorded
    # 0.2 is 2.2 errors of 0.09 and counts; 0.12 is 1.3 and does not: the largest noisy
    # excess is no longer taken as it reads
    assert ahead.ita_value(yes, [0.08] * 3, base, [0.04] * 3) == pytest.approx(0.2)
    assert ahead.ita_value(yes, [0.1] * 3, base, [0.04] * 3) == 0.0  # 0.2 is 1.86 errors
    assert ahead.ita_value([0.42, 0.5], [0.1, 0.05], [0.3, 0.3], [0.0, 0.0]) == pytest.approx(0.2)
    # a reading may stop early only where more answers could not make it count
    assert ahead.ita_decided(-0.25, 0.1) and not ahead.ita_decided(-0.15, 0.1)
    assert not ahead.ita_decided(0.9, 0.1)  # never for an excess above 0


def test_a_candidate_is_named_exaggerated_only_beyond_its_noise_at_95_percent():
    """Named (and so turned into an instruction) where its excess is above 0 by 1.645
    errors: 0.15 over an error of 0.1 (1.5 errors, named at a 90% bound) is not; 0.17 is;
    by log-probabilities any positive excess is, largest first."""
    answer = ahead.ExagAnswer(
        "exag:ita",
        yes=(0.45, 0.47, 0.2),
        baseline=(0.3, 0.3, 0.3),
        candidates=("turban", "camel", "desert"),
        yes_stderr=(0.06, 0.06, 0.06),
        baseline_stderr=(0.08, 0.08, 0.08),
    )
    assert [c for c, _ in answer.exaggerated()] == ["camel"]
    exact = ahead.ExagAnswer("exag:ita", yes=answer.yes, baseline=answer.baseline,
                             candidates=answer.candidates)  # fmt: skip
    assert [c for c, _ in exact.exaggerated()] == ["camel", "turban"]


def test_ita_baseline_error_is_a_means():
    assert ahead.ita_baseline_stderr([[0.1, 0.0], [0.1, 0.2]]) == pytest.approx(
        [math.sqrt(0.02) / 2, 0.1]
    )
