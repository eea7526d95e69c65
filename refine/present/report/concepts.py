"""The page of a CUBE-style concepts run: the means per generator, per concept each
generator's figures with a bar of its CUBE diversity, and every image with its geo-tag."""

from __future__ import annotations

from pathlib import Path

from metrics.catalog import CUBE_FIGURES as FIGURES
from refine.harness.results import Results
from refine.present.charts import mean_bars
from refine.present.html import document, escape, image_tag, num, raw, write_page

CUBE_AXIS = "CUBE diversity \u2191 (0 to 1)"


def write_concepts_page(folder: str | Path, results: Results | None = None) -> Path:
    """``concepts.html`` in the folder, from its results record (by default the one in the
    folder); returns its path."""
    results = results or Results.read(folder, "concepts")
    return write_page(Path(folder) / "concepts.html", render_concepts(folder, results))


def render_concepts(folder: str | Path, results: Results) -> str:
    """One self-contained HTML page of a CUBE-style diversity comparison: the means per
    generator, per concept each generator's figures with a bar of its CUBE diversity
    (0..1), and every image with its geo-tag."""
    folder = Path(folder)
    summary, cells = results.summary, results.cells
    names = list(summary["generators"])
    head = "".join(f"<th>{f}</th>" for f in FIGURES)
    rows = []
    for g in names:
        s = summary["generators"][g]
        tds = "".join(
            f'<td data-generator="{escape(g)}" data-figure="{f}" data-value="{raw(s[f])}">'
            f"{num(s[f])}</td>"
            for f in FIGURES
        )
        rows.append(f"<tr><td>{escape(g)}</td><td>{s['concepts']}</td>{tds}</tr>")
    table = (
        f'<table class="leaderboard"><tr><th>generator</th><th>concepts</th>{head}</tr>'
        f"{''.join(rows)}</table>"
    )
    # CUBE Tab. 5: Eq. 3 under each kernel, generators as columns
    kernels = list(
        dict.fromkeys(k for g in names for k in summary["generators"][g].get("cd_kernels", {}))
    )
    if kernels:
        cols = "".join(f"<th>{escape(g)}</th>" for g in names)
        krows = "".join(
            f"<tr><td>{escape(k)}</td>"
            + "".join(
                f'<td data-kernel="{escape(k)}" data-generator="{escape(g)}">'
                f"{num(summary['generators'][g].get('cd_kernels', {}).get(k))}</td>"
                for g in names
            )
            + "</tr>"
            for k in kernels
        )
        table += (
            "<h3>Cultural diversity (CUBE Eq. 3) per kernel, as in CUBE's Tab. 5</h3>"
            f"<table><tr><th>kernel (continent, country, artifact)</th>{cols}</tr>{krows}</table>"
        )
    sections = []
    for concept in summary["concepts"]:
        bars = [
            (g, concept["generators"][g]["cube_diversity"], None)
            for g in names
            if g in concept["generators"]
        ]
        lines = []
        for g, figs in concept["generators"].items():
            spread = ", ".join(f"{escape(k)} {v}" for k, v in figs["countries"].items())
            lines.append(
                f"<tr><td>{escape(g)}</td>"
                + "".join(
                    f'<td data-concept="{escape(concept["prompt"])}" data-generator="{escape(g)}" '
                    f'data-figure="{f}" data-value="{raw(figs[f])}">{num(figs[f])}</td>'
                    for f in FIGURES
                )
                + f"<td>{spread}</td></tr>"
            )
        grids = []
        for c in cells:
            if c["prompt"] != concept["prompt"] or c["country"] != concept["country"]:
                continue
            figs = []
            for im in c["images"]:
                quality = im["concept_quality"]
                caption = f"seed {im['seed']}: {' / '.join(im['tag'])} (quality {quality:.2f})"
                figs.append(
                    f"<figure>{image_tag(folder / im['file'], caption)}"
                    f"<figcaption>{escape(caption)}</figcaption></figure>"
                )
            grids.append(
                f'<h4>{escape(c["generator"])}</h4><div class="imgs">{"".join(figs)}</div>'
            )
        where = concept["country"] or "global"
        chart = mean_bars(bars, x_title=CUBE_AXIS, metric="cube_diversity")
        sections.append(
            f'<h2>{escape(concept["prompt"])} <span class="muted">({escape(concept["concept"])}, '
            f"{escape(where)})</span></h2>{chart}<table><tr><th>generator</th>{head}"
            f"<th>tagged countries</th></tr>{''.join(lines)}</table>{''.join(grids)}"
        )
    weights = results.config.get("weights")
    body = (
        '<p class="muted">CUBE diversity: the Vendi score of the images\' geo-tags '
        f"(continent, country, artifact; similarity weights {escape(str(weights))} for "
        "global concepts, all three parts for a country's own) per chunk of 8 images over the "
        "chunk's size, mean over chunks; the authors' form divides the last chunk by 8 too. "
        "qVendi: mean quality x Vendi (CUBE Eq. 2); CUBE cultural diversity: mean quality x "
        "Vendi over the number of images per chunk of 8 (CUBE Eq. 3); quality the judge's "
        "yes-probability that the image shows the prompt.</p>"
        f"<h2>Generators</h2>{table}{''.join(sections)}"
    )
    return document("Cultural diversity of generators (CUBE)", body)
