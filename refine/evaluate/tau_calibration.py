"""tau for an observer from real photos, as the AHEaD paper sets it: a quantile (the 75th)
of the best-match cosine similarities between the reference descriptors and what the
observer lists on real images of the activity (0.52 for InternVL3, 0.67 for Qwen2.5-VL)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from metrics.ahead import best_match_similarities, check_tau
from metrics.descriptors import DIMENSIONS


def calibrate(
    descriptors: Any,
    images: Sequence[Any],
    backends: Any,
    q: float = 0.75,
    on_image: Callable[[int], None] | None = None,
) -> tuple[float, list[float]]:
    """(tau, the similarities): each image observed by the backends' observer, its
    descriptors matched to ``descriptors`` by the text embedder, and the ``q`` quantile of
    the best matches. A ValueError says why these photos give no usable threshold."""
    import numpy as np

    observer = backends.get("observer")
    observed = []
    for k, image in enumerate(images):
        if on_image is not None:
            on_image(k)
        observed.append(observer.describe(image, list(DIMENSIONS), 10))
    try:
        sims = best_match_similarities(descriptors, observed, backends.get("text_embedder"))
    except ValueError as err:
        raise ValueError(f"{err}: try other photos, or check --activity") from err
    tau = float(np.quantile(np.asarray(sims), q))
    try:
        check_tau(tau)
    except ValueError as err:
        raise ValueError(
            f"the calibrated {err}: these photos give no usable threshold; try other photos "
            "or another --q"
        ) from None
    return tau, list(sims)
