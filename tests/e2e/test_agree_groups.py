"""refine agree by group, on a stand-in bench of two generators in Iran (Global South) and
the USA (Global North): every figure per region and generator equals the one computed
here from the same images; the raters' kappas against scikit-learn, the human-human
ceiling and the paired difference of two metrics by hand, the matrix by scipy."""

from __future__ import annotations

import csv
import json
import re

import numpy as np
import pytest
from scipy import stats as sp

from refine.harness.tasks.bench.plan import BenchPlan, plan_prompts
from refine.harness.tasks.bench.task import run_bench
from tests.e2e.test_cli_run import cli
from tests.fakes.gemini_world import GREEN, RED

GENS = ["gemini:gemini-3.1-flash-image", "gemini:gemini-3-pro-image"]
ACTS = ["people eating food at home", "wedding celebration"]


@pytest.fixture
def rated(world, siglip_path, options, tmp_path):
    """A bench (2 generators x Iran, USA x 2 activities x 3 seeds: 24 images) and three
    raters' faithfulness ratings of every image, which follow FAITH with noise of their
    own (fixed seed)."""
    world.generate_by_model = {"gemini-3.1-flash-image": RED, "gemini-3-pro-image": GREEN}
    plan = BenchPlan(
        generators=list(GENS),
        prompts=plan_prompts(["Iran", "USA"], ACTS),
        images_per_prompt=3,
        backends={"image_embedder": f"siglip:{siglip_path}"},
        baselines=(),
    )
    out = tmp_path / "bench"
    run_bench(plan, out, backend_options=options)
    cells = [json.loads(x) for x in (out / "cells.jsonl").read_text().splitlines()]
    rng = np.random.default_rng(4)
    rows = []
    for cell in cells:
        for k, im in enumerate(cell["images"]):
            base = 1 + 4 * im["faith"]
            for rater in ("a", "b", "c"):
                score = int(np.clip(round(base + rng.normal(scale=0.8) + 0.3 * k), 1, 5))
                rows.append(
                    {
                        "image": str(out / im["file"]),
                        "rater": rater,
                        "faithfulness": score,
                        "activity": cell["activity"],
                        "country": cell["country"],
                    }  # fmt: skip
                )
    ratings = tmp_path / "ratings.csv"
    with ratings.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, ["image", "rater", "faithfulness", "activity", "country"])
        writer.writeheader()
        writer.writerows(rows)
    return out, ratings, cells, rows


@pytest.mark.slow
def test_agreement_by_region_and_generator(rated, tmp_path):
    from sklearn.metrics import cohen_kappa_score

    out, ratings, cells, rows = rated
    done = cli("agree", "--ratings", str(ratings), "--source", str(out), "--metrics",
               "faith,align,hal", "--by", "region", "--by", "generator", "--out",
               str(tmp_path / "agree"), "--figures", "png,svg,pdf", "--latex")  # fmt: skip
    assert done.returncode == 0, done.stderr
    doc = json.loads((tmp_path / "agree" / "agree.json").read_text())
    region = {"Iran": "Global South", "USA": "Global North"}
    faith = {str(out / im["file"]): im["faith"] for c in cells for im in c["images"]}
    where = {str(out / im["file"]): c for c in cells for im in c["images"]}
    people: dict[str, list[int]] = {}
    for r in rows:
        people.setdefault(r["image"], []).append(r["faithfulness"])
    for by, key in (
        ("region", lambda c: region[c["country"]]),
        ("generator", lambda c: c["generator"]),
    ):
        groups = doc["by"][by]
        assert set(groups) == {key(c) for c in cells}
        for name, g in groups.items():
            mine = [i for i in faith if key(where[i]) == name]
            assert g["images"] == len(mine) == 12
            x = [faith[i] for i in mine]
            y = [np.mean(people[i]) for i in mine]
            row = g["metrics"]["faith"]["faithfulness"]
            assert row["n"] == 12
            assert row["spearman"] == pytest.approx(sp.spearmanr(x, y)[0], abs=1e-12)
            lo, hi = row["spearman_interval"]
            assert lo <= row["spearman"] <= hi
            # the group's own human-human ceiling, each rater against the others' mean
            mine_given = {w: [score(rows, i, w) for i in mine] for w in ("a", "b", "c")}
            others = [np.mean([mine_given[o][k] for o in "bc"]) for k in range(12)]
            assert g["ceiling"]["faithfulness"]["raters"]["a"]["spearman"] == pytest.approx(
                sp.spearmanr(mine_given["a"], others)[0], abs=1e-12
            )
            # AHEaD Tab. 13: mean (SD) over the group's images of each image's mean answer
            per_image = [np.mean([score(rows, i, w) for w in ("a", "b", "c")]) for i in mine]
            got = g["scores"]["faithfulness"]
            assert got["images"] == 12
            assert got["mean"] == pytest.approx(np.mean(per_image), abs=1e-12)
            assert got["sd"] == pytest.approx(np.std(per_image, ddof=1), abs=1e-12)
            # 12 images: the figures are rough, and the group says so
            assert any("below 30" in n for n in g["notes"])
            import krippendorff

            data = np.array(
                [[score(rows, i, w) for i in mine] for w in ("a", "b", "c")], dtype=float
            )
            want = krippendorff.alpha(reliability_data=data, level_of_measurement="ordinal")
            assert g["alpha_ordinal"]["faithfulness"] == pytest.approx(want, abs=1e-9)
            if by == "region":  # one country a region here: its mean is the pooled alpha
                assert set(g["alpha_countries"]) == {c["country"] for c in cells if key(c) == name}
                assert g["alpha_ordinal_pooled"]["faithfulness"] == pytest.approx(want, abs=1e-9)
    assert "by region:" in done.stdout and "  Global North: 12 images" in done.stdout
    # each group's alpha at the ordinal level (AHEaD's, for its 1-5 answers), the interval's
    # beside it
    north = doc["by"]["region"]["Global North"]
    ordinal, interval = north["alpha_ordinal"]["faithfulness"], north["alpha"]["faithfulness"]
    said = f"ordinal alpha faithfulness {ordinal:.3f} (interval {interval:.3f})"
    assert said in done.stdout, done.stdout
    assert "(mean of its countries'; pooled faithfulness " in done.stdout
    page = (tmp_path / "agree" / "agree.html").read_text()
    assert 'data-by="region" data-group="Global South"' in page and "Human-human ceiling" in page
    # AHEaD A.4's kappa between the two annotator groups: per country, each image's first
    # rater (a, the file's first) against its second (b), scikit-learn's quadratic kappa,
    # then the mean over the two countries
    between = doc["kappa"]["faithfulness"]["between_groups"]
    per_country = {}
    for country in ("Iran", "USA"):
        mine = [i for i in sorted(faith) if where[i]["country"] == country]
        first, second = ([score(rows, i, w) for i in mine] for w in ("a", "b"))
        want = cohen_kappa_score(first, second, weights="quadratic")
        got = between["countries"][country]
        assert got["n"] == len(mine) == 12 and got["kappa"] == pytest.approx(want, abs=1e-12)
        per_country[country] = want
    assert between["mean"] == pytest.approx(np.mean(list(per_country.values())), abs=1e-12)
    said = f"the mean over 2 countries: {between['mean']:.3f}"
    assert "between the two annotator groups" in done.stdout and said in done.stdout
    # each pair of raters' weighted kappa, as scikit-learn computes it
    every = sorted(faith)
    given = {w: [score(rows, i, w) for i in every] for w in ("a", "b", "c")}
    pairs = doc["kappa"]["faithfulness"]["pairs"]
    assert set(pairs) == {"a | b", "a | c", "b | c"}
    for pair, got in pairs.items():
        a, b = pair.split(" | ")
        want = cohen_kappa_score(given[a], given[b], weights="quadratic")
        assert got["n"] == 24 and got["kappa"] == pytest.approx(want, abs=1e-12)
    # the ceiling: each rater against the mean of the other two
    ceiling = doc["ceiling"]["faithfulness"]
    for w in ("a", "b", "c"):
        others = [np.mean([given[o][k] for o in given if o != w]) for k in range(24)]
        want = sp.spearmanr(given[w], others)[0]
        assert ceiling["raters"][w]["spearman"] == pytest.approx(want, abs=1e-12)
    assert ceiling["spearman"] == pytest.approx(
        np.mean([ceiling["raters"][w]["spearman"] for w in "abc"]), abs=1e-12
    )
    # FAITH against ALIGN on the same images, with the paired bootstrap's interval
    (d,) = [
        d
        for d in doc["differences"]
        if d["versus"].startswith("align") and d["metric"].startswith("faith")
    ]
    align = {str(out / im["file"]): im["align"] for c in cells for im in c["images"]}
    y = [np.mean(people[i]) for i in every]
    want = (
        sp.spearmanr([faith[i] for i in every], y)[0]
        - sp.spearmanr([align[i] for i in every], y)[0]
    )
    assert d["n"] == 24 and d["difference"] == pytest.approx(want, abs=1e-12)
    assert d["interval"][0] <= d["difference"] <= d["interval"][1]
    # against HAL, which agrees with people when negative: its agreement is -Spearman
    (h,) = [d for d in doc["differences"] if d["versus"].startswith("hal")]
    hal = {str(out / im["file"]): im["hal"] for c in cells for im in c["images"]}
    want = (
        sp.spearmanr([faith[i] for i in every], y)[0] + sp.spearmanr([hal[i] for i in every], y)[0]
    )
    assert h["difference"] == pytest.approx(want, abs=1e-12)
    # the metric-metric matrix
    names = doc["matrix"]["metrics"]
    fa, al = names.index(d["metric"]), names.index(d["versus"])
    assert doc["matrix"]["spearman"][fa][al] == pytest.approx(
        sp.spearmanr([faith[i] for i in every], [align[i] for i in every])[0], abs=1e-12
    )
    assert doc["matrix"]["spearman"][fa][fa] == pytest.approx(1.0)
    bad = cli("agree", "--ratings", str(ratings), "--source", str(out), "--by", "continent")
    assert bad.returncode == 2 and "'continent' is not one of country, region" in bad.stderr


def score(rows, image: str, rater: str) -> int:
    return next(r["faithfulness"] for r in rows if r["image"] == image and r["rater"] == rater)


@pytest.mark.slow
def test_figures_and_latex_tables_load_where_papers_use_them(rated, tmp_path):
    """--figures png,svg,pdf: each chart decodes as an image, the SVG keeps its text, the
    PDF has one page; --latex: booktabs tables with the best of each column in bold, which
    pdflatex compiles."""
    import shutil
    import subprocess
    import xml.etree.ElementTree as ET

    from PIL import Image

    out, ratings, _, _ = rated
    folder = tmp_path / "agree"
    done = cli("agree", "--ratings", str(ratings), "--source", str(out), "--metrics",
               "faith,align,hal", "--by", "region", "--out", str(folder), "--figures",
               "png,svg,pdf", "--latex")  # fmt: skip
    assert done.returncode == 0, done.stderr
    for name in ("agree-correlations", "agree-matrix", "agree-scatter"):
        with Image.open(folder / "figures" / f"{name}.png") as im:
            assert im.width > 300 and im.height > 200
        svg = (folder / "figures" / f"{name}.svg").read_text()
        ET.fromstring(svg[svg.index("<svg") :])  # well-formed
        pdf = (folder / "figures" / f"{name}.pdf").read_bytes()
        assert (
            pdf.startswith(b"%PDF")
            and pdf.count(b"/Type /Page\n")
            + pdf.count(b"/Type /Page ")
            + pdf.count(b"/Type /Page>")
            >= 1
        )
    assert "Spearman with people" in (folder / "figures" / "agree-correlations.svg").read_text()
    assert "Global North" in (folder / "figures" / "agree-correlations.svg").read_text()
    region = (folder / "tables" / "agree-agreement-region.tex").read_text()
    assert r"\toprule" in region and "Global North & Global South" in region
    # the best of each column in bold (FAITH's; ALIGN ties with it in this world), HAL not
    assert r"FAITH & \textbf{" in region and r"HAL & \textbf" not in region, region
    assert "human-human &" in region  # each region's own ceiling
    pooled = (folder / "tables" / "agree-agreement.tex").read_text()
    assert "human-human" in pooled
    answers = (folder / "tables" / "agree-answers-region.tex").read_text()
    assert re.search(r"Global North & \d\.\d\d \(\d\.\d\d\)", answers), answers
    bad = cli("agree", "--ratings", str(ratings), "--source", str(out), "--figures", "gif")
    assert bad.returncode == 2 and "'gif' is not one of png, svg, pdf" in bad.stderr
    if shutil.which("pdflatex") is None:
        pytest.skip("pdflatex is not installed (.ci/run installs texlive-latex-base)")
    build = tmp_path / "tex"
    build.mkdir()
    run = subprocess.run(
        ["pdflatex", "-interaction=nonstopmode", "-halt-on-error", f"-output-directory={build}",
         str(folder / "tables" / "agree.tex")],
        capture_output=True, text=True, timeout=120, cwd=build,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-2000:]
    assert (build / "agree.pdf").read_bytes().startswith(b"%PDF")
