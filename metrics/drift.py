"""How far an edited image moved from its parent: SSIM and image-embedding cosine.

SSIM follows Wang et al. (2004) on luminance in [0, 1] with a uniform 7x7 window,
K1 = 0.01, K2 = 0.03 and population (co)variances, averaged over the valid windows.
The child is resized to the parent's size first. As the authors recommend for large
images, both are first downsampled by F = max(1, round(min(H, W) / 256)) (means over
F x F blocks), so SSIM compares structure at a viewing scale and a 1024 px image costs
no more than a 256 px one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from PIL import Image

WINDOW = 7
K1, K2 = 0.01, 0.03


def _box_mean(x: np.ndarray, w: int) -> np.ndarray:
    """Mean over every w x w window that fits (valid positions only)."""
    c = np.pad(x, ((1, 0), (1, 0))).cumsum(0).cumsum(1)
    s = c[w:, w:] - c[:-w, w:] - c[w:, :-w] + c[:-w, :-w]
    return s / (w * w)


def ssim_arrays(a: np.ndarray, b: np.ndarray, window: int = WINDOW) -> float:
    """SSIM of two same-shape 2-D arrays with values in [0, 1]."""
    if a.shape != b.shape or a.ndim != 2:
        raise ValueError(f"SSIM needs two 2-D arrays of one shape, got {a.shape} and {b.shape}")
    w = min(window, *a.shape)
    a, b = a.astype(np.float64), b.astype(np.float64)
    mu_a, mu_b = _box_mean(a, w), _box_mean(b, w)
    var_a = _box_mean(a * a, w) - mu_a**2
    var_b = _box_mean(b * b, w) - mu_b**2
    cov = _box_mean(a * b, w) - mu_a * mu_b
    c1, c2 = K1**2, K2**2
    num = (2 * mu_a * mu_b + c1) * (2 * cov + c2)
    den = (mu_a**2 + mu_b**2 + c1) * (var_a + var_b + c2)
    s = num / den
    return float(s.mean())


def downsample_factor(height: int, width: int) -> int:
    return max(1, round(min(height, width) / 256))


def block_mean(x: np.ndarray, f: int) -> np.ndarray:
    """Means over non-overlapping f x f blocks (a trailing partial block is dropped)."""
    if f == 1:
        return x
    h, w = (x.shape[0] // f) * f, (x.shape[1] // f) * f
    return x[:h, :w].reshape(h // f, f, w // f, f).mean(axis=(1, 3))


def ssim(parent: Image.Image, child: Image.Image) -> float:
    """SSIM between the luminance of two images (the child resized to the parent's size,
    both downsampled by F = max(1, round(min(H, W) / 256)))."""
    from PIL import Image as PILImage

    if child.size != parent.size:
        child = child.resize(parent.size, PILImage.Resampling.BICUBIC)
    a = np.asarray(parent.convert("L"), dtype=np.float32) / 255.0
    b = np.asarray(child.convert("L"), dtype=np.float32) / 255.0
    f = downsample_factor(*a.shape)
    return ssim_arrays(block_mean(a, f), block_mean(b, f))


def ssim_outside(parent: Image.Image, child: Image.Image, inside: np.ndarray) -> float | None:
    """SSIM of the luminance over the windows that lie wholly outside a region (``inside``:
    a boolean array of the parent's height and width, True in the region), as
    :func:`ssim` computes it (resized, downsampled, 7x7 windows); None when no window
    lies wholly outside."""
    from PIL import Image as PILImage

    if child.size != parent.size:
        child = child.resize(parent.size, PILImage.Resampling.BICUBIC)
    a = np.asarray(parent.convert("L"), dtype=np.float32) / 255.0
    b = np.asarray(child.convert("L"), dtype=np.float32) / 255.0
    if inside.shape != a.shape:
        raise ValueError(f"the region's mask is {inside.shape}, the image {a.shape}")
    f = downsample_factor(*a.shape)
    a, b = block_mean(a, f).astype(np.float64), block_mean(b, f).astype(np.float64)
    touched = block_mean(inside.astype(np.float64), f)  # > 0: the block meets the region
    w = min(WINDOW, *a.shape)
    mu_a, mu_b = _box_mean(a, w), _box_mean(b, w)
    var_a = _box_mean(a * a, w) - mu_a**2
    var_b = _box_mean(b * b, w) - mu_b**2
    cov = _box_mean(a * b, w) - mu_a * mu_b
    c1, c2 = K1**2, K2**2
    s = ((2 * mu_a * mu_b + c1) * (2 * cov + c2)) / (
        (mu_a**2 + mu_b**2 + c1) * (var_a + var_b + c2)
    )
    outside = _box_mean((touched > 0).astype(np.float64), w) == 0
    return float(s[outside].mean()) if outside.any() else None


def drift_of(cosine_to_parent: float) -> float:
    """The catalog's ``drift``: 1 - the cosine of an image's embedding and its parent's
    (0: the same picture, 2: the opposite)."""
    return 1.0 - cosine_to_parent


def cosine(u: np.ndarray, v: np.ndarray) -> float:
    u, v = np.asarray(u, dtype=np.float64).ravel(), np.asarray(v, dtype=np.float64).ravel()
    nu, nv = np.linalg.norm(u), np.linalg.norm(v)
    if nu == 0 or nv == 0:
        raise ValueError("cosine of a zero vector is undefined")
    return float(u @ v / (nu * nv))
