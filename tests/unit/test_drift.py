"""SSIM and cosine drift against hand-computed values."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from metrics.drift import cosine, ssim, ssim_arrays


def test_ssim_identical_is_one_and_hand_computed_case():
    rng = np.random.default_rng(0)
    a = rng.random((9, 9))
    assert ssim_arrays(a, a) == pytest.approx(1.0)
    # one 7x7 window over constant images 0.2 and 0.6: variances and covariance are 0
    x, y = np.full((7, 7), 0.2), np.full((7, 7), 0.6)
    c1 = 0.01**2
    assert ssim_arrays(x, y) == pytest.approx((2 * 0.2 * 0.6 + c1) / (0.2**2 + 0.6**2 + c1))
    with pytest.raises(ValueError, match="one shape"):
        ssim_arrays(a, a[:5])


def test_ssim_images_resize_and_order():
    grey = Image.new("RGB", (32, 32), (128, 128, 128))
    noisy = Image.fromarray((np.random.default_rng(1).random((32, 32, 3)) * 255).astype(np.uint8))
    assert ssim(grey, grey.resize((16, 16))) == pytest.approx(1.0)
    assert ssim(grey, noisy) < 0.1


def test_cosine():
    assert cosine([1, 0], [1, 1]) == pytest.approx(1 / np.sqrt(2))
    with pytest.raises(ValueError, match="zero vector"):
        cosine([0, 0], [1, 1])


def test_ssim_downsamples_large_images_by_block_means():
    from metrics.drift import block_mean, downsample_factor

    assert [downsample_factor(h, h) for h in (64, 383, 384, 640, 1024)] == [1, 1, 2, 2, 4]
    x = np.arange(16, dtype=np.float64).reshape(4, 4)
    assert block_mean(x, 2).tolist() == [[2.5, 4.5], [10.5, 12.5]]
    rng = np.random.default_rng(0)
    big_a = (rng.random((1024, 1024)) * 255).astype(np.uint8)
    big_b = np.clip(big_a.astype(int) + rng.integers(-40, 40, big_a.shape), 0, 255).astype(np.uint8)
    a, b = Image.fromarray(big_a).convert("RGB"), Image.fromarray(big_b).convert("RGB")
    la = np.asarray(a.convert("L"), dtype=np.float64) / 255
    lb = np.asarray(b.convert("L"), dtype=np.float64) / 255
    expected = ssim_arrays(block_mean(la, 4), block_mean(lb, 4))
    assert ssim(a, b) == pytest.approx(expected, abs=1e-5)
    # at the full resolution the noise weighs more than at the viewing scale
    assert ssim_arrays(la, lb) < expected
