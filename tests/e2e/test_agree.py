"""refine agree: ratings built in the test joined by image content to a bench's stored
metrics; every correlation equals scipy's on the raters' means, alpha the hand value,
intervals reproducible with the seed; the HTML holds the same values; bad files get one
clear line each."""

from __future__ import annotations

import csv
import json
import re
import shutil

import numpy as np
import pytest
from PIL import Image
from scipy import stats

from metrics.stats import krippendorff_alpha
from tests.e2e.test_cli_run import cli

FAITH = [0.2, 0.35, 0.5, 0.55, 0.7, 0.9]
HAL = [0.6, 0.5, 0.4, 0.45, 0.2, 0.1]
ANA = {"faithfulness": [1, 2, 3, 3, 4, 5], "alignment": [2, 2, 3, 4, 4, 5]}
BEN = {"faithfulness": [2, 1, 3, 4, 4, 5], "alignment": [1, 3, 3, 3, 5, 4]}


@pytest.fixture
def rated(tmp_path):
    """A bench folder with six distinct images and their metrics; the images copied and
    renamed elsewhere, and rated there by two raters."""
    bench = tmp_path / "bench"
    (bench / "images").mkdir(parents=True)
    rng = np.random.default_rng(0)
    images = []
    for k in range(6):
        name = f"images/im{k}.png"
        Image.fromarray(rng.integers(0, 255, (16, 16, 3), dtype=np.uint8)).save(bench / name)
        images.append(
            {
                "file": name,
                "seed": k,
                "faith": FAITH[k],
                "align": FAITH[k] / 2,
                "hal": HAL[k],
                "exag": 0.1,
                "observed": {},
            }
        )
    cell = {
        "generator": "g",
        "activity": "a",
        "country": "Iran",
        "seeds": list(range(6)),
        "images": images,
    }
    (bench / "cells.jsonl").write_text(json.dumps(cell) + "\n")
    # the bench's record names the models its metrics were made with
    made = {"gemini:gemini-3.8-flash": "gemini-3.8-flash-001", "siglip:google/x": "a" * 40}
    (bench / "results.json").write_text(json.dumps({"task": "bench", "schema": 2,
                                                    "models": made}))  # fmt: skip
    rate_dir = tmp_path / "rating"
    rate_dir.mkdir()
    rows = []
    for k in range(6):
        shutil.copy(bench / f"images/im{k}.png", rate_dir / f"copy-{k}.png")
        for rater, answers in (("ana", ANA), ("ben", BEN)):
            rows.append(
                {"image": f"copy-{k}.png", "rater": rater, **{q: answers[q][k] for q in answers}}
            )
    with open(rate_dir / "ratings.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["image", "rater", "faithfulness", "alignment"])
        w.writeheader()
        w.writerows(rows)
    return bench, rate_dir / "ratings.csv"


@pytest.mark.slow
def test_correlations_alpha_and_page(rated, tmp_path):
    bench, ratings = rated
    args = [
        "agree",
        "--ratings",
        str(ratings),
        "--source",
        str(bench),
        "--metrics",
        "faith,align,hal,exag",
        "--seed",
        "7",
        "--json",
    ]
    done = cli(*args)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["images"] == 6 and doc["raters"] == ["ana", "ben"]
    from refine import __version__
    from refine.usage import package_versions

    assert doc["schema"] == 2 and doc["toolkit"] == __version__
    assert doc["packages"] == package_versions() and "torch" in doc["packages"]
    assert doc["models"] == {"gemini:gemini-3.8-flash": "gemini-3.8-flash-001",
                             "siglip:google/x": "a" * 40}  # fmt: skip
    for q in ("faithfulness", "alignment"):
        mean = [(a + b) / 2 for a, b in zip(ANA[q], BEN[q], strict=True)]
        for metric, values in (("faith", FAITH), ("hal", HAL)):
            row = doc["metrics"][metric][q]
            assert row["n"] == 6
            assert row["spearman"] == pytest.approx(stats.spearmanr(values, mean)[0], abs=1e-9)
            assert row["kendall"] == pytest.approx(stats.kendalltau(values, mean)[0], abs=1e-9)
            assert row["pearson"] == pytest.approx(stats.pearsonr(values, mean)[0], abs=1e-9)
        units = [[ANA[q][k], BEN[q][k]] for k in range(6)]
        assert doc["alpha"][q] == pytest.approx(krippendorff_alpha(units), abs=1e-12)
    # people's answers against each other (CulturalFrames Sec. 3.3, AHEaD Fig. 5a), by
    # scipy: over the 12 ratings that answer both, and over the 6 images' mean answers
    asked = doc["matrix"]["answers"]
    assert asked["questions"] == ["alignment", "faithfulness"]
    over_ratings = stats.spearmanr(ANA["alignment"] + BEN["alignment"],
                                   ANA["faithfulness"] + BEN["faithfulness"])[0]  # fmt: skip
    means = {q: [(a + b) / 2 for a, b in zip(ANA[q], BEN[q], strict=True)] for q in ANA}
    over_images = stats.spearmanr(means["alignment"], means["faithfulness"])[0]
    got = asked["over_ratings"][0][1], asked["over_images"][1][0]
    assert got[0] == {"spearman": pytest.approx(over_ratings, abs=1e-12), "n": 12}
    assert got[1] == {"spearman": pytest.approx(over_images, abs=1e-12), "n": 6}
    said = f"alignment against faithfulness (people's answers, Spearman): {over_ratings:+.3f}"
    assert said in cli(*args[:-1]).stdout
    assert doc["metrics"]["faith"]["faithfulness"]["spearman"] > 0.9
    assert doc["metrics"]["hal"]["faithfulness"]["spearman"] < -0.9
    # a constant metric has no correlation: said as a dash, not as a number
    assert doc["metrics"]["exag"]["faithfulness"]["spearman"] is None
    # intervals reproducible with the seed
    again = json.loads(cli(*args).stdout)
    assert again["metrics"] == doc["metrics"]
    other = json.loads(cli(*args[:-3], "--seed", "8", "--json").stdout)
    assert other["metrics"] != doc["metrics"]  # another seed draws other resamples
    html = (ratings.parent / "agree.html").read_text()
    found = re.search(
        r'data-metric="faith" data-question="faithfulness" data-stat="spearman" '
        r'data-value="([-0-9.]+)"',
        html,
    )
    assert float(found.group(1)) == pytest.approx(
        doc["metrics"]["faith"]["faithfulness"]["spearman"]
    )
    assert html.count('class="chart-figure agree-scatter"') == 4 and "<script" not in html


def test_bad_ratings_files_get_one_line_each(rated, tmp_path):
    bench, ratings = rated
    bad = tmp_path / "rating" / "bad.csv"
    bad.write_text(
        "image,rater,faithfulness\ncopy-0.png,ana,7\nnowhere.png,ana,3\ncopy-1.png,,2\n"
        "copy-2.png,ben,2.5\n"
    )
    done = cli("agree", "--ratings", str(bad), "--source", str(bench))
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 4, lines
    assert "bad.csv:2: faithfulness '7' is out of range (a whole number 1-5)" in lines[0]
    assert "bad.csv:3: unknown image 'nowhere.png' (no such file)" in lines[1]
    assert "bad.csv:4: no rater" in lines[2] and "bad.csv:5: faithfulness '2.5'" in lines[3]
    nocol = tmp_path / "rating" / "nocol.csv"
    nocol.write_text("picture,rater,faithfulness\ncopy-0.png,ana,3\n")
    done = cli("agree", "--ratings", str(nocol), "--source", str(bench))
    assert done.returncode == 2 and "missing column 'image'" in done.stderr
    done = cli("agree", "--ratings", str(ratings), "--source", str(tmp_path / "rating"))
    assert done.returncode == 2 and "no bench (cells.jsonl) or run (run.json)" in done.stderr
    done = cli("agree", "--ratings", str(ratings), "--source", str(bench), "--metrics", "vibes")
    assert done.returncode == 2 and "unknown metric 'vibes'" in done.stderr


@pytest.mark.slow
def test_run_folders_expectations_and_computed_scores(world, siglip_path, tmp_path):
    """Metrics stored in a run (every candidate's scores, the chosen image's expectations
    met share) and, with --compute, an image no folder holds, scored by the profile."""
    from refine.io.store import RunStore
    from tests.e2e.test_cli_run import run_args
    from tests.e2e.test_expectations import PROMPT
    from tests.fakes.gemini_world import GREY

    exp = tmp_path / "exp.json"
    assert (
        cli("expectations", "build", PROMPT, "--country", "Iran", "--out", str(exp)).returncode == 0
    )
    ran = cli(*run_args(tmp_path / "runs", 1, siglip_path), "--expectations", str(exp))
    assert ran.returncode == 0, ran.stderr
    run_dir = next((tmp_path / "runs").iterdir())
    run = RunStore(run_dir).load()
    shown = [e.statement for e in run.spec.expectations]
    Image.new("RGB", (64, 48), GREY).save(tmp_path / "grey.png")
    rows = []
    names = [c.image for r in run.rounds for c in r.candidates]
    for k, name in enumerate(names):
        for rater, score in (("ana", 1 + k), ("ben", min(5, 2 + k))):
            rows.append(
                {
                    "image": str(run_dir / name),
                    "rater": rater,
                    "faithfulness": score,
                    "expectations": shown,
                    "unmet": shown[: 4 - k],
                }
            )
    rows.append(
        {
            "image": "grey.png",
            "rater": "ana",
            "faithfulness": 1,
            "activity": "people eating food at home",
            "country": "Iran",
        }
    )
    ratings = tmp_path / "ratings.jsonl"
    ratings.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    args = [
        "agree",
        "--ratings",
        str(ratings),
        "--source",
        str(tmp_path / "runs"),
        "--metrics",
        "faith,expectations",
        "--json",
    ]
    without = cli(*args)
    assert without.returncode == 0, without.stderr
    doc = json.loads(without.stdout)
    assert doc["missing"]["faith"] == 1 and doc["images"] == len(names) + 1
    faiths = [c.scores.faith for r in run.rounds for c in r.candidates]
    means = [(1 + k + min(5, 2 + k)) / 2 for k in range(len(names))]
    assert doc["metrics"]["faith"]["faithfulness"]["n"] == len(names)
    assert doc["metrics"]["faith"]["faithfulness"]["pearson"] == pytest.approx(
        stats.pearsonr(faiths, means)[0], abs=1e-9
    )
    # the expectations question: the share the raters did not mark as unmet
    met = doc["metrics"]["expectations"]["expectations_met"]
    assert met["n"] == len(run.rounds)  # the chosen images carry the judge's share
    computed = json.loads(cli(*args[:-1], "--compute", "--json").stdout)
    assert computed["missing"]["faith"] == 0 and computed["computed"] == 1
    assert computed["metrics"]["faith"]["faithfulness"]["n"] == len(names) + 1
    # the image was scored by the score task, into a folder of its own beside the ratings
    scored = tmp_path / "scored" / "people-eating-food-at-home-iran"
    kept = json.loads((scored / "results.json").read_text())
    assert kept["task"] == "score" and kept["cells"][0]["images"][0]["file"].endswith("grey.png")
    # a baseline asked for is scored with the image scored (the runs stored none)
    with_vqa = [a if a != "faith,expectations" else "faith,vqascore" for a in args[:-1]]
    computed = json.loads(cli(*with_vqa, "--compute", "--json").stdout)
    assert computed["computed"] == 1 and computed["missing"]["vqascore"] == len(names)


@pytest.mark.slow
def test_each_rater_once_per_image_and_identical_images_apart(rated, tmp_path):
    """A rater who answers an image twice counts once, with the later answer; two rated
    files with the same bytes are two images; a file matching stored images of different
    metrics is left out unless its activity and country say which it is."""
    bench, ratings = rated
    folder = ratings.parent
    # the bench gets a second image with im0's bytes, stored for another prompt
    shutil.copy(bench / "images/im0.png", bench / "images/twin.png")
    cell = json.loads((bench / "cells.jsonl").read_text())
    twin = {**cell["images"][0], "file": "images/twin.png", "faith": 0.95}
    other = {**cell, "activity": "wedding celebration", "images": [twin], "seeds": [0]}
    (bench / "cells.jsonl").write_text(json.dumps(cell) + "\n" + json.dumps(other) + "\n")
    shutil.copy(folder / "copy-1.png", folder / "again-1.png")  # same bytes as copy-1
    with open(ratings, "a", newline="") as f:
        w = csv.writer(f)
        w.writerow(["copy-2.png", "ana", 5, 5])  # ana changes her mind about image 2
        w.writerow(["again-1.png", "ana", 4, 4])
        w.writerow(["again-1.png", "ben", 4, 2])
    args = ["agree", "--ratings", ratings, "--source", bench, "--metrics", "faith,hal"]
    done = cli(*args, "--json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["images"] == 7 and doc["replaced"] == 2
    assert doc["identical"] == [["again-1.png", "copy-1.png"]]
    assert doc["ambiguous"] == ["copy-0.png"]  # im0 or twin: different FAITH, no hint
    ana = {**dict(enumerate(ANA["faithfulness"])), 2: 5}
    mean = [(ana[k] + BEN["faithfulness"][k]) / 2 for k in (1, 2, 3, 4, 5)] + [4.0]
    faith = [FAITH[k] for k in (1, 2, 3, 4, 5)] + [FAITH[1]]
    row = doc["metrics"]["faith"]["faithfulness"]
    assert row["n"] == 6
    assert row["pearson"] == pytest.approx(stats.pearsonr(faith, mean)[0], abs=1e-12)
    units = [[ANA["faithfulness"][0], BEN["faithfulness"][0]]]
    units += [[ana[k], BEN["faithfulness"][k]] for k in range(1, 6)] + [[4, 4]]
    assert doc["alpha"]["faithfulness"] == pytest.approx(krippendorff_alpha(units), abs=1e-12)
    assert doc["alpha_ordinal"]["faithfulness"] == pytest.approx(
        krippendorff_alpha(units, "ordinal"), abs=1e-12
    )
    text = cli(*args)
    assert "identical images kept apart: again-1.png, copy-1.png" in text.stdout
    # 7 images: a warning that the figures are rough; how far it is, on stderr
    assert "only 7 images rated: below 30, the correlations and alpha are rough" in text.stdout
    lines = [x.strip() for x in text.stderr.splitlines() if x.strip().startswith("agreement: ")]
    assert lines[0] == "agreement: faith / alignment (1 of 4)"
    assert lines[1].startswith("agreement: faith / faithfulness (2 of 4), about ")
    assert lines[-1].startswith("agreement: hal / faithfulness (4 of 4), about ")
    assert all(x.endswith(" left") for x in lines[1:])
    assert "left out" in text.stdout and "copy-0.png" in text.stdout
    assert "alpha (faithfulness): interval" in text.stdout and "ordinal" in text.stdout
    html = (folder / "agree.html").read_text()
    assert "identical images kept apart" in html and "data-alpha-ordinal=" in html
    # with the activity, copy-0 is im0 (people eating), not the wedding's twin
    rows = list(csv.DictReader(ratings.open()))
    for r in rows:
        r["activity"] = "a" if r["image"] == "copy-0.png" else ""
    with open(ratings, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=[*rows[0].keys()])
        w.writeheader()
        w.writerows(rows)
    told = json.loads(cli(*args, "--json").stdout)
    assert told["ambiguous"] == [] and told["metrics"]["faith"]["faithfulness"]["n"] == 7


@pytest.mark.slow
def test_an_earlier_agree_json_reads_its_clipscore_as_clipscore100(tmp_path):
    """agree.json names its conventions; one written before them held CLIPScore as
    100 x max(cos, 0), read as clipscore100 and never as clipscore; refine report draws
    the page again from either."""
    from refine.human.agree import CONVENTIONS, Agreement, read_agreement
    from refine.present.report import write_report

    row = {"n": 3, "spearman": 0.5, "spearman_interval": [0.1, 0.9]}
    row |= {s: None for s in ("kendall", "pearson")}
    row |= {f"{s}_interval": None for s in ("kendall", "pearson")}
    result = Agreement(
        images=3,
        raters=["a", "b"],
        alpha={"faithfulness": 0.4},
        table={"clipscore": {"faithfulness": row}, "faith": {"faithfulness": row}},
        points={"clipscore": {"faithfulness": [(0.5, 3.0), (0.7, 4.0), (0.1, 1.0)]}},
        missing={"clipscore": 0},
    )
    doc = result.to_dict()
    assert doc["conventions"] == CONVENTIONS
    assert CONVENTIONS["clipscore"].startswith("2.5 x max(cos, 0)")
    new = tmp_path / "new"
    new.mkdir()
    (new / "agree.json").write_text(json.dumps(doc))
    back = read_agreement(new / "agree.json")
    assert back.table == result.table and back.points == result.points
    old = tmp_path / "old"
    old.mkdir()
    earlier = {
        k: v for k, v in doc.items() if k not in ("conventions", "schema", "toolkit", "packages")
    }
    (old / "agree.json").write_text(json.dumps(earlier))
    read = read_agreement(old / "agree.json")
    assert set(read.table) == {"clipscore100", "faith"} and "clipscore" not in read.points
    assert read.missing == {"clipscore100": 0}
    page = write_report(old)
    assert page.name == "agree.html"
    html = page.read_text()
    assert 'data-metric="clipscore100"' in html and 'data-metric="clipscore"' not in html
    assert 'data-metric="clipscore"' in write_report(new).read_text()
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "agree.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match="not an agree.json"):
        read_agreement(tmp_path / "bad" / "agree.json")
    # the layout's version: an earlier file (no schema) is 1, a newer one refused
    assert doc["schema"] == 2 and back.schema == 2 and read.schema == 1
    (tmp_path / "bad" / "agree.json").write_text(json.dumps({**doc, "schema": 7}))
    with pytest.raises(ValueError, match="layout version 7, newer than this toolkit reads"):
        read_agreement(tmp_path / "bad" / "agree.json")


def test_metrics_are_ranked_by_agreement_in_their_direction(tmp_path):
    """HAL counts faults: a correlation of -0.6 with people agrees more than FAITH's +0.4;
    a variant keeps its metric's direction; a metric with no correlation comes last; the
    page and the command show the ranking."""
    from refine.human.agree import Agreement, ranking
    from refine.present.report.agreement import render_agreement

    def row(r, iv):
        out = {"n": 9, "spearman": r, "spearman_interval": iv}
        for s in ("kendall", "pearson"):
            out |= {s: None, f"{s}_interval": None}
        return out

    table = {
        "faith": {"faithfulness": row(0.4, (0.1, 0.7))},
        "hal": {"faithfulness": row(-0.6, (-0.8, -0.2))},
        "clipscore": {"faithfulness": row(None, None)},
        "exag@exag:ita": {"faithfulness": row(-0.1, (-0.5, 0.3))},
    }
    got = ranking(table)["faithfulness"]
    assert [e["metric"] for e in got] == ["hal", "faith", "exag@exag:ita", "clipscore"]
    assert got[0]["agreement"] == pytest.approx(0.6) and got[0]["interval"] == [0.2, 0.8]
    assert got[2]["agreement"] == pytest.approx(0.1) and got[2]["interval"] == [-0.3, 0.5]
    assert got[3]["agreement"] is None and [e["rank"] for e in got] == [1, 2, 3, 4]
    html = render_agreement(Agreement(images=9, raters=["a"], alpha={}, table=table))
    first = html.index("<table>", html.index("Metrics ranked by agreement with people"))
    assert (
        html.index('data-rank="1"', first) < html.index("HAL", first) < html.index("FAITH", first)
    )
    assert "EXAG [exag:ita]" in html
