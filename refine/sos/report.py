"""The SoS analysis of a bank: per (culture, language) SoS, the distribution per language,
the share of strongly surface-led pairs, a heatmap, and an HTML report with the images of
the most surface-led pairs.

Conventions: SoS(image) = cos(semantic centroid of its culture, e) - cos(surface centroid
of its prompt language, e), centroids from the bank itself (``metrics.sos``). A pair's SoS
is the mean over its images; its median is kept too. A pair is *strongly surface-led* when
its median SoS is at or below the 25th percentile of the SoS of every image in the bank
(numpy's linear interpolation).
"""

from __future__ import annotations

from html import escape
from pathlib import Path
from typing import Any

import numpy as np

from refine.sos.bank import Bank


def analyse(bank_dir: str | Path) -> dict[str, Any]:
    """The analysis as plain data (what ``--json`` prints and the HTML shows)."""
    from metrics.sos import SosBank

    bank = Bank(bank_dir)
    e, cultures, languages, images = bank.data()
    centroids = SosBank.build(
        e, cultures, languages, embedder=bank.manifest["settings"]["embedder"]
    )
    per_image = centroids.score(e, cultures, languages)
    q25 = float(np.percentile(per_image, 25))
    pairs = []
    for c in centroids.cultures:
        for lang in centroids.languages:
            idx = [i for i in range(len(per_image)) if cultures[i] == c and languages[i] == lang]
            if not idx:
                continue
            values = per_image[idx]
            median = float(np.median(values))
            pairs.append(
                {
                    "culture": c,
                    "language": lang,
                    "n": len(idx),
                    "sos": float(values.mean()),
                    "median": median,
                    "strongly_surface_led": median <= q25,
                    "images": [images[i] for i in idx],
                    "image_sos": [float(v) for v in values],
                }
            )
    by_language = {}
    for lang in centroids.languages:
        means = np.array([p["sos"] for p in pairs if p["language"] == lang])
        by_language[lang] = {
            "pairs": len(means),
            "mean": float(means.mean()),
            "median": float(np.median(means)),
            "min": float(means.min()),
            "max": float(means.max()),
            "strongly_surface_led": sum(
                1 for p in pairs if p["language"] == lang and p["strongly_surface_led"]
            ),
        }
    led = [p for p in pairs if p["strongly_surface_led"]]
    return {
        "bank": str(bank.path),
        "concept": bank.manifest["settings"]["concept"],
        "embedder": bank.manifest["settings"]["embedder"],
        "generator": bank.manifest["settings"]["generator"],
        "images": len(per_image),
        "cells_done": len(bank.done()),
        "cells": len(bank.cells),
        "percentile_25": q25,
        "share_strongly_surface_led": len(led) / len(pairs),
        "pairs": pairs,
        "by_language": by_language,
        "cultures": centroids.cultures,
        "languages": centroids.languages,
    }


def _colour(v: float, scale: float) -> str:
    """Diverging: red for surface-led (negative), blue for semantics-led (positive)."""
    t = max(-1.0, min(1.0, v / scale)) if scale > 0 else 0.0
    if t < 0:
        a = -t
        rgb = (255, round(255 * (1 - a * 0.75)), round(255 * (1 - a * 0.75)))
    else:
        rgb = (round(255 * (1 - t * 0.75)), round(255 * (1 - t * 0.55)), 255)
    return "#" + "".join(f"{v:02x}" for v in rgb)


def heatmap(result: dict[str, Any]) -> str:
    """Cultures (rows) by languages (columns), the pair's mean SoS in each cell."""
    cultures, languages = result["cultures"], result["languages"]
    cell = {(p["culture"], p["language"]): p for p in result["pairs"]}
    scale = max((abs(p["sos"]) for p in result["pairs"]), default=1.0) or 1.0
    cw, ch, left, top = 64, 26, 150, 28
    width, height = left + cw * len(languages) + 10, top + ch * len(cultures) + 10
    parts = [
        f'<svg class="heatmap" xmlns="http://www.w3.org/2000/svg" width="{width}" '
        f'height="{height}" role="img" aria-label="SoS by culture and language">'
    ]
    for j, lang in enumerate(languages):
        x = left + j * cw + cw / 2
        parts.append(f'<text x="{x}" y="18" text-anchor="middle">{escape(lang)}</text>')
    for i, c in enumerate(cultures):
        y = top + i * ch
        parts.append(
            f'<text x="{left - 6}" y="{y + ch / 2 + 4}" text-anchor="end">{escape(c)}</text>'
        )
        for j, lang in enumerate(languages):
            x = left + j * cw
            p = cell.get((c, lang))
            if p is None:
                parts.append(
                    f'<rect x="{x}" y="{y}" width="{cw - 2}" height="{ch - 2}" fill="#eee"/>'
                )
                continue
            stroke = ' stroke="#000" stroke-width="2"' if p["strongly_surface_led"] else ""
            parts.append(
                f'<rect class="cell" data-culture="{escape(c)}" data-language="{escape(lang)}" '
                f'data-sos="{p["sos"]:.6f}" x="{x}" y="{y}" width="{cw - 2}" height="{ch - 2}" '
                f'fill="{_colour(p["sos"], scale)}"{stroke}/>'
                f'<text x="{x + cw / 2 - 1}" y="{y + ch / 2 + 4}" text-anchor="middle" '
                f'font-size="11">{p["sos"]:+.3f}</text>'
            )
    parts.append("</svg>")
    return "".join(parts)


def strip_plot(result: dict[str, Any]) -> str:
    """Per language, one dot per culture at its pair SoS, and the 25th-percentile line."""
    languages = result["languages"]
    values = [p["sos"] for p in result["pairs"]] + [result["percentile_25"]]
    lo, hi = min(values), max(values)
    span = (hi - lo) or 1.0
    w, rh, left = 520, 24, 60
    height = rh * len(languages) + 30

    def x(v: float) -> float:
        return left + (v - lo) / span * (w - left - 20)

    parts = [
        f'<svg class="distribution" xmlns="http://www.w3.org/2000/svg" width="{w}" '
        f'height="{height}" role="img" aria-label="SoS per language">'
    ]
    q = x(result["percentile_25"])
    parts.append(
        f'<line x1="{q:.1f}" y1="0" x2="{q:.1f}" y2="{height - 20}" stroke="#cf222e" '
        'stroke-dasharray="4 3"/>'
    )
    for i, lang in enumerate(languages):
        y = 12 + i * rh
        parts.append(f'<text x="{left - 8}" y="{y + 4}" text-anchor="end">{escape(lang)}</text>')
        for p in result["pairs"]:
            if p["language"] == lang:
                parts.append(
                    f'<circle class="pair" data-language="{escape(lang)}" '
                    f'data-sos="{p["sos"]:.6f}" cx="{x(p["sos"]):.1f}" cy="{y}" r="4" '
                    f'fill="#0969da" fill-opacity="0.7"><title>{escape(p["culture"])} '
                    f"{p['sos']:+.3f}</title></circle>"
                )
    parts.append(
        f'<text x="{left}" y="{height - 4}">{lo:+.3f}</text>'
        f'<text x="{w - 20}" y="{height - 4}" text-anchor="end">{hi:+.3f}</text>'
        f'<text x="{q:.1f}" y="{height - 4}" text-anchor="middle" fill="#cf222e">25th pct</text>'
        "</svg>"
    )
    return "".join(parts)


def render(result: dict[str, Any], top: int = 5) -> str:
    from refine.report import CSS, _image_tag

    bank = Path(result["bank"])
    rows = "".join(
        f'<tr class="pair-row" data-culture="{escape(p["culture"])}" '
        f'data-language="{escape(p["language"])}"><td>{escape(p["culture"])}</td>'
        f"<td>{escape(p['language'])}</td><td>{p['n']}</td><td>{p['sos']:+.4f}</td>"
        f"<td>{p['median']:+.4f}</td><td>{'yes' if p['strongly_surface_led'] else ''}</td></tr>"
        for p in sorted(result["pairs"], key=lambda p: p["sos"])
    )
    lang_rows = "".join(
        f"<tr><td>{escape(lang)}</td><td>{s['pairs']}</td><td>{s['mean']:+.4f}</td>"
        f"<td>{s['median']:+.4f}</td><td>{s['min']:+.4f}</td><td>{s['max']:+.4f}</td>"
        f"<td>{s['strongly_surface_led']}</td></tr>"
        for lang, s in result["by_language"].items()
    )
    worst = sorted(result["pairs"], key=lambda p: p["median"])[:top]
    galleries = "".join(
        f'<section class="led" data-culture="{escape(p["culture"])}" '
        f'data-language="{escape(p["language"])}"><h3>{escape(p["culture"])} prompted in '
        f'{escape(p["language"])}: median SoS {p["median"]:+.4f}</h3><div class="imgs">'
        + "".join(
            f"<figure>{_image_tag(bank / img, img)}<figcaption>SoS {v:+.3f}</figcaption></figure>"
            for img, v in zip(p["images"], p["image_sos"], strict=True)
        )
        + "</div></section>"
        for p in worst
    )
    partial = (
        f'<p class="partial">{result["cells_done"]} of {result["cells"]} cells are done; '
        "run the bank build again to finish it.</p>"
        if result["cells_done"] < result["cells"]
        else ""
    )
    body = (
        f"<h1>Surface over Semantics: {escape(result['concept'])}</h1>"
        f"<p>bank <code>{escape(result['bank'])}</code>; {result['images']} images; generator "
        f"<code>{escape(result['generator'])}</code>; embedder "
        f"<code>{escape(result['embedder'])}</code></p>{partial}"
        "<p>SoS = cos(culture centroid, image) - cos(language centroid, image): positive when "
        "an image looks like its culture whatever the prompt's language, negative when it "
        "looks like its language's images whatever the culture.</p>"
        f'<p class="share">Strongly surface-led pairs (median SoS at or below the 25th '
        f"percentile of all images, {result['percentile_25']:+.4f}): "
        f"<b>{result['share_strongly_surface_led']:.1%}</b></p>"
        f"<h2>Cultures by languages</h2>{heatmap(result)}"
        f"<h2>Distribution per language</h2>{strip_plot(result)}"
        "<table><tr><th>language</th><th>pairs</th><th>mean</th><th>median</th><th>min</th>"
        f"<th>max</th><th>strongly surface-led</th></tr>{lang_rows}</table>"
        f"<h2>The most surface-led pairs</h2>{galleries}"
        "<h2>Every pair</h2><table><tr><th>culture</th><th>language</th><th>images</th>"
        f"<th>mean SoS</th><th>median</th><th>strongly surface-led</th></tr>{rows}</table>"
    )
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f"<title>SoS report</title><style>{CSS}</style></head><body>{body}</body></html>"
    )


def write_sos_report(bank_dir: str | Path, out: str | Path | None = None, top: int = 5):
    """Analyse the bank and write the HTML report (default ``BANK_DIR/report.html``)."""
    result = analyse(bank_dir)
    path = Path(out) if out else Path(bank_dir) / "report.html"
    path.write_text(render(result, top), encoding="utf-8")
    return path, result
