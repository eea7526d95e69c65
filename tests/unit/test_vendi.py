"""Vendi score: invariants and hand-computed values."""

from __future__ import annotations

import math

import numpy as np
import pytest

from metrics import vendi


def test_identical_items_have_vendi_one():
    x = np.tile([[0.3, -1.2, 2.0]], (6, 1))
    for q in (1.0, 2.0, 0.5, math.inf):
        assert vendi.vendi_from_embeddings(x, q) == pytest.approx(1.0, abs=1e-6)
    assert vendi.vendi_from_kernel(np.ones((6, 6))) == pytest.approx(1.0, abs=1e-6)


def test_orthogonal_items_have_vendi_n():
    x = np.eye(5) * 3.0
    for q in (1.0, 2.0, 0.5, math.inf):
        assert vendi.vendi_from_embeddings(x, q) == pytest.approx(5.0, abs=1e-6)
        assert vendi.vendi_from_kernel(np.eye(5), q) == pytest.approx(5.0, abs=1e-6)


def test_two_item_kernel_hand_computed():
    s = 0.5
    k = np.array([[1.0, s], [s, 1.0]])
    lam = np.array([(1 + s) / 2, (1 - s) / 2])  # eigenvalues of K / 2
    shannon = math.exp(-(lam * np.log(lam)).sum())
    assert vendi.vendi_from_kernel(k) == pytest.approx(shannon)  # 1.7548
    assert vendi.vendi_from_kernel(k, q=2) == pytest.approx(1 / (lam**2).sum())  # 1.6
    assert vendi.vendi_from_kernel(k, q=math.inf) == pytest.approx(1 / 0.75)
    q = 3.0
    assert vendi.vendi_from_kernel(k, q=q) == pytest.approx(
        math.exp(math.log((lam**q).sum()) / (1 - q))
    )


def test_dual_form_equals_kernel_form():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(60, 7))  # d < n: the d x d form is used
    xn = x / np.linalg.norm(x, axis=1, keepdims=True)
    k = xn @ xn.T
    for q in (1.0, 2.0, math.inf):
        assert vendi.vendi_from_embeddings(x, q) == pytest.approx(
            vendi.vendi_from_kernel(k, q), rel=1e-9
        )
    wide = rng.normal(size=(5, 30))  # d > n: the n x n form
    wn = wide / np.linalg.norm(wide, axis=1, keepdims=True)
    assert vendi.vendi_from_embeddings(wide) == pytest.approx(vendi.vendi_from_kernel(wn @ wn.T))


def test_tiny_negative_eigenvalues_are_dropped():
    # rank-1 kernel plus round-off: eigvalsh returns values like -1e-17
    k = np.ones((3, 3)) - 1e-16
    np.fill_diagonal(k, 1.0)
    assert vendi.vendi_from_kernel(k) == pytest.approx(1.0, abs=1e-6)


def test_quality_weighted_scales_with_quality():
    vs = vendi.vendi_from_embeddings(np.eye(4))
    q1 = vendi.quality_weighted(vs, [0.5, 0.5, 0.5, 0.5])
    q2 = vendi.quality_weighted(vs, [1.0, 1.0, 1.0, 1.0])
    assert q1 == pytest.approx(2.0)
    assert q2 == pytest.approx(2 * q1)
    assert vendi.quality_weighted(vs, [0.0, 1.0, 0.5, 0.5]) == pytest.approx(2.0)


def test_cube_size_normalisation():
    assert vendi.normalised_by_size(embeddings=np.eye(16), group_size=8) == pytest.approx(1.0)
    same = np.ones((16, 3))
    assert vendi.normalised_by_size(embeddings=same, group_size=8) == pytest.approx(1 / 8)
    # two groups: orthogonal (1.0) and identical (1/8)
    mixed = np.vstack([np.eye(8), np.ones((8, 8))])
    assert vendi.normalised_by_size(embeddings=mixed, group_size=8) == pytest.approx(
        (1.0 + 1 / 8) / 2
    )
    assert vendi.normalised_by_size(kernel=np.eye(8), group_size=4) == pytest.approx(1.0)


def test_bad_inputs():
    with pytest.raises(ValueError, match="square"):
        vendi.vendi_from_kernel(np.ones((2, 3)))
    with pytest.raises(ValueError, match="symmetric"):
        vendi.vendi_from_kernel(np.array([[1.0, 0.2], [0.9, 1.0]]))
    with pytest.raises(ValueError, match="NaN"):
        vendi.vendi_from_embeddings(np.array([[1.0, np.nan]]))
    with pytest.raises(ValueError, match="all-zero"):
        vendi.vendi_from_embeddings(np.zeros((2, 3)))
    with pytest.raises(ValueError, match="quality"):
        vendi.quality_weighted(1.0, [])


def test_the_python_api_refuses_nan_and_out_of_range_input():
    """As the command line does: NaN orders, NaN or out-of-range scores are errors."""
    import math

    import numpy as np
    import pytest

    from metrics.ahead import faithfulness
    from metrics.caire import diversity
    from metrics.vendi import vendi_from_embeddings

    x = np.eye(3)
    for q in (math.nan, -1.0, "2"):
        with pytest.raises(ValueError, match="the order q must be a number >= 0"):
            vendi_from_embeddings(x, q=q)
    assert vendi_from_embeddings(x, q=np.float32(2.0)) == pytest.approx(3.0)
    with pytest.raises(ValueError, match="NaN or infinite"):
        diversity(["Iran", "Turkey"], [[1.0, math.nan], [2.0, 3.0]])
    for bad in (math.nan, 1.5, -0.1):
        with pytest.raises(ValueError, match="must be a number in \\[0, 1\\]"):
            faithfulness(0.5, bad, 0.2)
    assert faithfulness(np.float32(0.5), 0.5, 0.5) == pytest.approx(0.5)


def test_cube_tag_kernel_and_the_authors_normalisation():
    tags = [("Asia", "Iran", "Tahdig"), ("asia ", "Japan", "Sushi"), ("Africa", "Nigeria", "Suya")]
    k = vendi.tag_kernel(tags)  # continents alike, case folded
    assert k.tolist() == [[1, 1, 0], [1, 1, 0], [0, 0, 1]]
    k = vendi.tag_kernel(tags, (0.5, 0.25, 0.25))
    assert k[0, 1] == pytest.approx(0.5) and k[0, 0] == pytest.approx(1.0)
    assert vendi.tag_kernel(tags[:2] * 2, None).tolist() == [
        [1, 0, 1, 0],
        [0, 1, 0, 1],
        [1, 0, 1, 0],
        [0, 1, 0, 1],
    ]
    with pytest.raises(ValueError, match="sum to 1"):
        vendi.tag_kernel(tags, (1, 1, 0))
    with pytest.raises(ValueError, match="non-negative"):
        vendi.tag_kernel(tags, (1.5, -0.5, 0))
    # 10 distinct items: chunks of 8 and 2; ours divides the last by 2, the authors' by 8
    eye = np.eye(10)
    assert vendi.normalised_by_size(kernel=eye) == pytest.approx(1.0)
    assert vendi.normalised_by_size(kernel=eye, authors=True) == pytest.approx((1 + 2 / 8) / 2)
    # fewer than 32 items: the authors' code keeps the first 24
    assert vendi.normalised_by_size(kernel=np.eye(30), authors=True) == pytest.approx(1.0)
    assert vendi.normalised_by_size(kernel=np.eye(30)) == pytest.approx(1.0)


def test_cube_cultural_diversity_eq3_for_each_kernel_by_hand():
    """CUBE Eq. 3, (1/N sum s) (VS/N) per chunk of 8: four images of a French and four of a
    Japanese artifact, every artifact distinct, then two more Japanese images (a chunk of
    2). The Vendi scores follow from the kernels' eigenvalues, worked out by hand."""
    import math

    from metrics.vendi import CUBE_KERNELS, cultural_diversity, tag_kernel

    tags = [("Europe", "France", f"dish {k}") for k in range(4)]
    tags += [("Asia", "Japan", f"dish {k + 4}") for k in range(4)]
    tags += [("Asia", "Japan", "dish 8"), ("Asia", "Japan", "dish 8")]
    quality = [0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.5, 0.7]
    q8, q2 = sum(quality[:8]) / 8, sum(quality[8:]) / 2

    def entropy_vs(eigen):
        total = sum(eigen)
        return math.exp(-sum(e / total * math.log(e / total) for e in eigen if e > 0))

    # the first 8: two groups of 4 under continent, country and both; every one apart
    # under artifacts; under the uniform kernel a group of 4 has 1 on its diagonal and
    # 2/3 off it (eigenvalues 3 once and 1/3 three times)
    first = {
        "continent (1, 0, 0)": 2.0,
        "country (0, 1, 0)": 2.0,
        "artifact (0, 0, 1)": 8.0,
        "hierarchical (1/2, 1/2, 0)": 2.0,
        "uniform (1/3, 1/3, 1/3)": entropy_vs([3, 3] + [1 / 3] * 6),
    }
    # the last 2: the same tag, one item under every kernel
    for name, w in CUBE_KERNELS.items():
        want = (q8 * first[name] / 8 + q2 * 1.0 / 2) / 2
        got = cultural_diversity(tag_kernel(tags, w), quality, 8)
        assert got == pytest.approx(want, abs=1e-9), name
    with pytest.raises(ValueError, match="one quality per item"):
        cultural_diversity(tag_kernel(tags, (1, 0, 0)), quality[:3])
