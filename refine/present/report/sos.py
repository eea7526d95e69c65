"""The SoS page of a bank: the heatmap, the distribution per language, and the images of
the most surface-led pairs (the analysis is :func:`refine.evaluate.sos.analyse`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from refine.evaluate.sos import analyse
from refine.io.files import atomic_write_text
from refine.present.charts import heatmap, strip_plot
from refine.present.html import document, escape, image_tag


def render(result: dict[str, Any], top: int = 5) -> str:
    bank = Path(result["bank"])
    several = len(result.get("generators") or []) > 1
    rows = "".join(
        f'<tr class="pair-row" data-culture="{escape(p["culture"])}" '
        f'data-language="{escape(p["language"])}">'
        + (f"<td>{escape(p['generator'])}</td>" if several else "")
        + f"<td>{escape(p['culture'])}</td>"
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
        f"{escape(p['language'])}{_by(p, several)}: median SoS {p['median']:+.4f}</h3>"
        '<div class="imgs">'
        + "".join(
            f"<figure>{image_tag(bank / img, img)}<figcaption>SoS {v:+.3f}</figcaption></figure>"
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
        f"<p>bank <code>{escape(result['bank'])}</code>; {result['images']} images; generator "
        f"<code>{escape(result['generator'])}</code>; embedder "
        f"<code>{escape(result['embedder'])}</code></p>{partial}"
        "<p>SoS = cos(culture centroid, image) - cos(language centroid, image): positive when "
        "an image looks like its culture whatever the prompt's language, negative when it "
        "looks like its language's images whatever the culture.</p>"
        f"<p>Centroids: {_centroids(result)}.</p>"
        f'<p class="share">Strongly surface-led model-language pairs (median SoS at or '
        f"below the 25th percentile of the medians of all model-language pairs, "
        f"{result['percentile_25']:+.4f}; SoS Sec. 5.2): "
        f"<b>{result['share_strongly_surface_led']:.1%}</b>{_strong(result)}</p>"
        f"<h2>Cultures by languages</h2><p>Languages ordered by mean SoS, the most "
        f"surface-led first; the cells of a strongly surface-led model-language pair are "
        f"outlined.</p>{_heatmaps(result)}"
        f"<h2>Distribution per language</h2>{strip_plot(result)}"
        "<table><tr><th>language</th><th>pairs</th><th>mean</th><th>median</th><th>min</th>"
        f"<th>max</th><th>strongly surface-led</th></tr>{lang_rows}</table>"
        f"{_classifiers(result)}<h2>The most surface-led pairs</h2>{galleries}"
        "<h2>Every pair</h2><table><tr>"
        + ("<th>generator</th>" if several else "")
        + "<th>culture</th><th>language</th><th>images</th>"
        f"<th>mean SoS</th><th>median</th><th>strongly surface-led</th></tr>{rows}</table>"
    )
    return document("SoS report", body, f"Surface over Semantics: {result['concept']}")


def _by(pair: dict[str, Any], several: bool) -> str:
    return f" by {escape(pair['generator'])}" if several else ""


def _centroids(result: dict[str, Any]) -> str:
    if result.get("centroids") == "per-generator":
        return "each generator's own images"
    n = len(result.get("generators") or [])
    return f"pooled over the images of {n} generator{'s' if n != 1 else ''} (SoS Sec. 4.1)"


def _strong(result: dict[str, Any]) -> str:
    led = [m for m in result.get("model_languages", []) if m["strongly_surface_led"]]
    if not led:
        return ""
    return ": " + ", ".join(
        escape(f"{m['generator']} in {m['language']} ({m['median']:+.4f})") for m in led
    )


def _heatmaps(result: dict[str, Any]) -> str:
    """One heatmap per generator (cultures by languages), a single one for one bank."""
    names = result.get("generators") or []
    if len(names) <= 1:
        return heatmap(result)
    out = []
    for k, g in enumerate(names):
        mine = {**result, "pairs": [p for p in result["pairs"] if p["generator"] == g]}
        out.append(f"<h3>{escape(g)}</h3>{heatmap(mine, key=f'g{k}-')}")
    return "".join(out)


def _classifiers(result: dict[str, Any]) -> str:
    """The caption classifiers' agreement with SoS's labels (SoS Tab. 2's columns), overall
    and per language."""
    got = result.get("caption_classifiers")
    if not got:
        return ""

    def pct(v: Any) -> str:
        return "\u2013" if v is None else f"{100 * v:.1f}%"

    rows = []
    for name, c in got["classifiers"].items():
        cells = (
            c["n"],
            pct(c["accuracy"]),
            pct(c["precision_surface"]),
            pct(c["precision_semantic"]),
        )
        rows.append(
            f'<tr class="classifier" data-classifier="{escape(name)}" data-language="all" '
            f'data-accuracy="{c["accuracy"]}"><td>{escape(name)} (<code>{escape(c["model"])}'
            f"</code>)</td><td>all</td>" + "".join(f"<td>{x}</td>" for x in cells) + "</tr>"
        )
        for lang, a in c["by_language"].items():
            cells = (
                a["n"],
                pct(a["accuracy"]),
                pct(a["precision_surface"]),
                pct(a["precision_semantic"]),
            )
            rows.append(
                f'<tr data-classifier="{escape(name)}" data-language="{escape(lang)}"><td></td>'
                f"<td>{escape(lang)}</td>" + "".join(f"<td>{x}</td>" for x in cells) + "</tr>"
            )
    surface = ", ".join(
        f"{escape(lang)}: {escape(v['identity'])} / {escape(v['country'])}"
        for lang, v in got["surface_cultures"].items()
    )
    unmapped = (
        f"<p>Languages with no culture on record (their images get no label): "
        f"{escape(', '.join(got['unmapped_languages']))}.</p>"
        if got["unmapped_languages"]
        else ""
    )
    return (
        "<h2>Caption classifiers against SoS</h2><p>Each image's captions "
        f"<code>{escape(got['template'])}</code> for the culture its prompt asked for and for "
        "the culture of its prompt's language; the one with the higher CLIPScore (2.5 x "
        "max(cos, 0)) names the tendency, compared with SoS's (positive: semantic, negative: "
        f"surface). Images whose culture is their language's get none. Language cultures: "
        f"{surface}.</p>{unmapped}<table><tr><th>classifier</th><th>language</th>"
        "<th>images</th><th>agreement</th><th>precision (surface)</th>"
        f"<th>precision (semantic)</th></tr>{''.join(rows)}</table>"
    )


def write_sos_page(folder: str | Path, results: Any, top: int = 5) -> Path:
    """The page of an SoS recipe's results (its banks analysed together): ``sos.html``."""
    path = Path(folder) / "sos.html"
    atomic_write_text(path, render(results.summary, top))
    return path


def write_sos_report(
    bank_dir: str | Path | list[str | Path],
    out: str | Path | None = None,
    top: int = 5,
    classifiers: tuple[str, ...] = (),
    caption_models: dict[str, str] | None = None,
    surface: str | Path | None = None,
    centroids: str = "pooled",
):
    """Analyse the bank (or the banks, one per generator) and write the page (default
    ``BANK_DIR/report.html``, the first bank's); returns the page's path and the
    analysis."""

    result = analyse(bank_dir, classifiers, caption_models, surface, centroids=centroids)
    first = bank_dir[0] if isinstance(bank_dir, list) else bank_dir
    path = Path(out) if out else Path(first) / "report.html"
    atomic_write_text(path, render(result, top))
    return path, result
