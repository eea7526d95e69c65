"""The Vendi score: the effective number of distinct items in a sample.

For a positive semi-definite similarity kernel ``K`` (n x n, ``K_ii = 1``) with
eigenvalues ``lambda_i`` of ``K / n``:

* order q = 1 (Shannon): ``VS = exp(-sum lambda_i log lambda_i)``;
* other q (Renyi): ``VS_q = exp(log(sum lambda_i^q) / (1 - q))``;
* q = inf: ``VS_inf = 1 / max lambda_i``.

From embeddings ``X`` (n x d, rows L2-normalised, cosine kernel ``K = X X^T``) the
non-zero eigenvalues of ``K / n`` equal those of ``X^T X / n`` (d x d), which is used
when d < n. Eigenvalues below zero from round-off are dropped.

Quality-weighted Vendi (qVS) = mean quality x VS. CUBE ("Beyond Aesthetics", Sec. 5.1)
normalises by sample size: items are split into consecutive groups of ``group_size``
(8 in CUBE), each group's VS is divided by its size, and the results are averaged.
"""

from __future__ import annotations

import math
import numbers
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import torch


def _as_tensor(x, name: str) -> torch.Tensor:
    import torch

    t = x if isinstance(x, torch.Tensor) else torch.as_tensor(np.asarray(x))
    t = t.to(torch.float64)
    if not torch.isfinite(t).all():
        raise ValueError(f"{name} contains NaN or infinite values")
    return t


def _entropy_order(eigenvalues: torch.Tensor, q: float) -> float:
    """Vendi of order q from the eigenvalues of K/n (which sum to 1)."""
    import torch

    if not isinstance(q, numbers.Real) or math.isnan(q) or q < 0:
        raise ValueError(f"the order q must be a number >= 0, got {q!r}")
    lam = eigenvalues[eigenvalues > 1e-12]
    lam = lam / lam.sum()
    if math.isinf(q):
        return float(1.0 / lam.max())
    if q == 1:
        return float(torch.exp(-(lam * torch.log(lam)).sum()))
    return float(torch.exp(torch.log((lam**q).sum()) / (1.0 - q)))


def vendi_from_kernel(kernel, q: float = 1.0) -> float:
    """Vendi score of order ``q`` from an n x n similarity kernel with unit diagonal."""
    import torch

    k = _as_tensor(kernel, "kernel")
    if k.ndim != 2 or k.shape[0] != k.shape[1]:
        raise ValueError(f"kernel must be a square matrix, got shape {tuple(k.shape)}")
    n = k.shape[0]
    if n == 0:
        raise ValueError("kernel is empty")
    if not torch.allclose(k, k.T, atol=1e-6):
        raise ValueError("kernel must be symmetric")
    if not torch.allclose(torch.diagonal(k), torch.ones(n, dtype=k.dtype), atol=1e-4):
        raise ValueError("kernel must have ones on its diagonal (k(x, x) = 1)")
    eig = torch.linalg.eigvalsh(k / n)
    return _entropy_order(eig, q)


def vendi_from_embeddings(embeddings, q: float = 1.0, normalize: bool = True) -> float:
    """Vendi score of order ``q`` with the cosine kernel of the rows of ``embeddings``.

    Uses the d x d dual form ``X^T X / n`` when there are fewer dimensions than items.
    """
    import torch

    x = _as_tensor(embeddings, "embeddings")
    if x.ndim != 2 or x.shape[0] == 0:
        raise ValueError(f"embeddings must be an [items x dims] matrix, got {tuple(x.shape)}")
    if torch.cuda.is_available():
        x = x.cuda()
    if normalize:
        norms = x.norm(dim=1, keepdim=True)
        if (norms == 0).any():
            raise ValueError("embeddings contain an all-zero row (no direction to compare)")
        x = x / norms
    n, d = x.shape
    gram = (x.T @ x) / n if d < n else (x @ x.T) / n
    eig = torch.linalg.eigvalsh(gram)
    return _entropy_order(eig, q)


def quality_weighted(vendi: float, quality) -> float:
    """qVS = mean(quality) x VS."""
    qual = np.asarray(quality, dtype=float)
    if qual.ndim != 1 or qual.size == 0:
        raise ValueError("quality must be a non-empty vector with one score per item")
    if not np.isfinite(qual).all():
        raise ValueError("quality contains NaN or infinite values")
    return float(qual.mean() * vendi)


def normalised_by_size(
    embeddings=None,
    kernel=None,
    group_size: int = 8,
    q: float = 1.0,
    authors: bool = False,
) -> float:
    """CUBE's per-size normalisation: mean over consecutive groups of VS(group) / |group|.

    A trailing group smaller than ``group_size`` is scored with its own size. With
    ``authors`` the CUBE authors' notebook is followed instead: every group, the trailing
    one too, is divided by ``group_size``, and of fewer than 32 items only the first 24
    are used.
    """
    if (embeddings is None) == (kernel is None):
        raise ValueError("give exactly one of embeddings or kernel")
    if group_size < 1:
        raise ValueError(f"group_size must be >= 1, got {group_size}")
    n = (kernel if kernel is not None else embeddings).shape[0]
    if authors and n < 32:
        n = min(n, 24)
    values = []
    for start in range(0, n, group_size):
        stop = min(start + group_size, n)
        if kernel is not None:
            vs = vendi_from_kernel(np.asarray(kernel)[start:stop, start:stop], q)
        else:
            vs = vendi_from_embeddings(np.asarray(embeddings)[start:stop], q)
        values.append(vs / (group_size if authors else stop - start))
    return float(np.mean(values))


def tag_kernel(tags, weights=(1.0, 0.0, 0.0)) -> np.ndarray:
    """CUBE's hierarchical similarity of geo-tags (continent, country, artifact):
    ``K_ij = w_1 [continent_i = continent_j] + w_2 [country_i = country_j] + w_3
    [artifact_i = artifact_j]`` (compared after trimming and case folding). ``weights``
    are non-negative and sum to 1 (a unit diagonal); ``None`` makes two tags similar only
    when all three parts are equal (CUBE's within-culture case)."""
    rows = [tuple(str(p).strip().casefold() for p in t) for t in tags]
    if not rows or any(len(r) != 3 for r in rows):
        raise ValueError("tags must be a non-empty list of (continent, country, artifact)")
    n = len(rows)
    if weights is None:
        return np.array([[float(a == b) for b in rows] for a in rows])
    w = np.asarray(weights, dtype=float)
    if w.shape != (3,) or not np.isfinite(w).all() or (w < 0).any():
        raise ValueError(f"weights must be three non-negative numbers, got {weights!r}")
    if abs(w.sum() - 1.0) > 1e-9:
        raise ValueError(f"weights must sum to 1 (a unit diagonal), got {w.sum():g}")
    k = np.zeros((n, n))
    for part in range(3):
        same = np.array([[float(a[part] == b[part]) for b in rows] for a in rows])
        k += w[part] * same
    return k


# CUBE Sec. 5.2 / Tab. 5: the five kernels (continent, country, artifact weights)
CUBE_KERNELS = {
    "continent (1, 0, 0)": (1.0, 0.0, 0.0),
    "country (0, 1, 0)": (0.0, 1.0, 0.0),
    "artifact (0, 0, 1)": (0.0, 0.0, 1.0),
    "hierarchical (1/2, 1/2, 0)": (0.5, 0.5, 0.0),
    "uniform (1/3, 1/3, 1/3)": (1 / 3, 1 / 3, 1 / 3),
}


def cultural_diversity(kernel, quality, group_size: int = 8, q: float = 1.0) -> float:
    """CUBE's cultural-diversity score (Eq. 3) of a collection: per consecutive group of
    ``group_size`` items (CUBE scores 8 images a prompt), the group's mean quality times
    its Vendi score over its size, (1/N sum s) (VS/N), averaged over the groups (a
    trailing smaller group with its own size)."""
    kernel = np.asarray(kernel, dtype=float)
    quality = np.asarray(quality, dtype=float)
    n = kernel.shape[0]
    if n == 0 or quality.shape != (n,):
        raise ValueError(f"one quality per item: {quality.shape} for {n} items")
    if group_size < 1:
        raise ValueError(f"group_size must be >= 1, got {group_size}")
    values = []
    for start in range(0, n, group_size):
        stop = min(start + group_size, n)
        vs = vendi_from_kernel(kernel[start:stop, start:stop], q)
        values.append(float(quality[start:stop].mean()) * vs / (stop - start))
    return float(np.mean(values))
