"""The page of a tau calibration: the histogram of best-match similarities."""

from __future__ import annotations

from refine.present.html import document, escape


def render_tau(similarities: list[float], tau: float, q: float, source: str) -> str:
    """The best-match similarities of a tau calibration as a histogram (20 bins over 0..1)
    with the calibrated tau and the AHEaD paper's values (0.52, 0.67) marked."""
    bins = 20
    counts = [0] * bins
    for s in similarities:
        counts[min(bins - 1, max(0, int(s * bins)))] += 1
    width, height, pad = 680, 260, 36
    top = max(counts) or 1
    bar_w = (width - 2 * pad) / bins
    parts = [
        f'<svg class="histogram" width="100%" viewBox="0 0 {width} {height}" role="img" '
        'aria-label="best-match similarities">'
    ]
    for k, n in enumerate(counts):
        h = (height - 2 * pad) * n / top
        x = pad + k * bar_w
        parts.append(
            f'<rect x="{x + 1:.1f}" y="{height - pad - h:.1f}" width="{bar_w - 2:.1f}" '
            f'height="{h:.1f}" fill="#0969da" data-bin="{k / bins:.2f}" data-count="{n}"/>'
        )
    for value, label, colour in (
        (tau, f"tau {tau:.3f}", "#cf222e"),
        (0.52, "0.52 (InternVL3)", "#8c959f"),
        (0.67, "0.67 (Qwen2.5-VL)", "#8c959f"),
    ):
        x = pad + value * (width - 2 * pad)
        parts.append(
            f'<line x1="{x:.1f}" y1="12" x2="{x:.1f}" y2="{height - pad}" stroke="{colour}" '
            f'stroke-dasharray="{"none" if colour == "#cf222e" else "4 3"}"/>'
            f'<text x="{x + 3:.1f}" y="{22 if colour == "#cf222e" else 36}" font-size="11" '
            f'fill="{colour}">{escape(label)}</text>'
        )
    parts.append(
        f'<line x1="{pad}" y1="{height - pad}" x2="{width - pad}" y2="{height - pad}" '
        'stroke="#8c959f"/>'
        f'<text x="{pad}" y="{height - pad + 16}" font-size="10">0</text>'
        f'<text x="{width - pad}" y="{height - pad + 16}" font-size="10" text-anchor="end">1</text>'
        f'<text x="{width / 2}" y="{height - 6}" font-size="12" text-anchor="middle">'
        "best-match cosine similarity of a reference descriptor</text></svg>"
    )
    body = (
        f'<p>tau = <strong data-tau="{tau:.6f}">{tau:.4f}</strong>, the {q:g} quantile of '
        f'{len(similarities)} similarities.</p><p class="muted">{escape(source)}</p>'
        + "".join(parts)
    )
    return document("Calibrating tau", body)
