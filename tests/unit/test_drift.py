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
