"""The page of a tau calibration: the histogram of best-match similarities."""

from __future__ import annotations

from refine.present.charts import histogram
from refine.present.html import document, escape


def render_tau(similarities: list[float], tau: float, q: float, source: str) -> str:
    """The best-match similarities of a tau calibration as a histogram (20 bins over 0..1)
    with the calibrated tau and the AHEaD paper's values (0.52, 0.67) marked."""
    chart = histogram(
        similarities,
        [
            (tau, f"tau {tau:.3f} (this calibration)", True),
            (0.52, "0.52 (AHEaD, InternVL3)", False),
            (0.67, "0.67 (AHEaD, Qwen2.5-VL)", False),
        ],
        "best-match cosine similarity of a reference descriptor",
        "descriptors",
    )
    body = (
        f'<p>tau = <strong data-tau="{tau:.6f}">{tau:.4f}</strong>, the {q:g} quantile of '
        f'{len(similarities)} similarities.</p><p class="muted">{escape(source)}</p>' + chart
    )
    return document("Calibrating tau", body)
