"""refine bench --recipe: the bundled AHEaD Tab. 1 recipe cut to 3 prompts on two stand-in
Gemini generators, its table recomputed by hand from the bench's own cells, the paper's
figures beside the generator the paper has; an agreement recipe with and without ratings;
the dry run's counts; wrong input refused in one line."""

from __future__ import annotations

import csv
import json
import re
import shutil
import subprocess

import numpy as np
import pytest
from scipy import stats as sp

from metrics.stats import mean_interval
from refine.harness.recipes import load_recipe, recipes_dir
from refine.harness.results import cell_mean
from refine.harness.tasks.bench.plan import plan_prompts
from refine.human.groups import regions
from refine.records import variant_name
from tests.e2e.test_cli_run import cli
from tests.fakes.gemini_world import GREEN, RED

# the model run in place of a model of the paper's Tab. 1 (Gemini 2.5 Flash Image, shut down)
PAPERS = "gemini:gemini-nano-banana-2.1"
OTHER = "gemini:gemini-3.1-flash-image"


def small_recipe(bundled, name, act, folder):
    """A bundled settings recipe on one activity in Iran, two images, the stand-in's
    generator: its file, named ``name``."""
    text = (recipes_dir() / f"{bundled}.toml").read_text()
    start, end = text.index("[select]"), text.index("[table]")
    small = (
        text[:start]
        + f'[select]\ncountries = ["Iran"]\nactivities = ["{act}"]\nimages_per_prompt = 2\n'
        + f'seed = 42\ngenerators = ["{OTHER}"]\n\n'
        + text[end:]
    )
    recipe = folder / f"{name}.toml"
    recipe.write_text(small.replace(f'name = "{bundled}"', f'name = "{name}"'))
    return recipe


def _recipe_run(tmp_path, text, siglip_path):
    """A recipe file of ``text`` and the command that runs it into ``tmp_path / "b"`` with
    the tiny SigLIP: (the folder, the arguments)."""
    recipe = tmp_path / "recipe.toml"
    recipe.write_text(text)
    out = tmp_path / "b"
    args = ["bench", "--recipe", str(recipe), "--out", str(out),
            "--backend", f"image_embedder=siglip:{siglip_path}"]  # fmt: skip
    return out, args


def _table(folder, name):
    """The bench's rows of a recipe's CSV (the paper's own rows, "paper: ...", apart)."""
    with (folder / f"table-{name}.csv").open() as fh:
        return [r for r in csv.DictReader(fh) if not r["row"].startswith("paper: ")]


@pytest.mark.slow
def test_ahead_table1_with_a_limit(world, siglip_path, tmp_path):
    world.generate_by_model = {"gemini-nano-banana-2.1": RED, "gemini-3.1-flash-image": GREEN}
    out = tmp_path / "t1"
    done = cli(
        "bench", "--recipe", "ahead-table1", "--limit", "3", "--profile", "gemini",
        "--generator", PAPERS, "--generator", OTHER,
        "--backend", f"image_embedder=siglip:{siglip_path}", "--out", str(out),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    # the six countries with descriptors here, of the paper's 16: said as the run begins
    # and in the table's note, with the command that fetches the rest
    said = "6 of the 16 countries named run (220 of 576 prompts): France, Brazil,"
    assert f"recipe ahead-table1: {said}" in done.stdout + done.stderr
    assert f"missing: countries and prompts: {said}" in done.stdout
    assert "`refine data fetch ahead` fetches the paper's descriptors" in done.stdout
    doc = json.loads((out / "results.json").read_text())
    # the first prompt of each of the first 3 countries (Iran, Nigeria, USA): both regions
    every = plan_prompts()
    first = {}
    for act, country in every:
        first.setdefault(country, (act, country))
    assert [tuple(p) for p in doc["config"]["prompts"]] == list(first.values())[:3]
    assert doc["config"]["images_per_prompt"] == 10 and doc["config"]["seeds"][0] == 42
    # the CSV also holds the paper's whole table, its API models included
    with (out / "table-ahead-table1.csv").open() as fh:
        paper = [r for r in csv.DictReader(fh) if r["row"] == "paper: DALL-E 3"]
    assert {(r["group"], r["column"], float(r["paper"])) for r in paper} >= {
        ("Global North", "FAITH ↑", 0.59),
        ("Global South", "ALIGN ↑", 0.32),
    }
    # AHEaD's observer prompts (Tab. 22-27): five requests an image, one a dimension
    assert doc["config"]["scorer"]["observer_prompts"] == "ahead"
    assert len(world.ahead_observed) == 5 * 2 * 3 * 10
    assert sum("Attire Prompt\nGoal:" in t for t in world.ahead_observed) == 60
    rows = _table(out, "ahead-table1")
    region = regions()
    recipe = load_recipe("ahead-table1")
    checked = 0
    for g in (PAPERS, OTHER):
        for group, short in (("Global North", "GN"), ("Global South", "GS")):
            cells = [
                c
                for c in doc["cells"]
                if c["generator"] == g and region[c["country"].casefold()] == group
            ]
            assert cells
            for m in recipe.table.metrics:
                values = [cell_mean(c, m.metric) for c in cells]
                (row,) = [
                    r for r in rows if r["row"] == f"{g} · {short}" and r["column"] == m.shown()
                ]
                variants = {variant_name(im["exag_variant"]) for c in cells for im in c["images"]}
                if m.metric in ("exag", "faith"):
                    # no photos in this world: every prompt's EXAG is the judge's
                    assert variants == {"exag:mllm"} and row["way"] == "exag:mllm"
                got = [v for v in values if v is not None]
                assert float(row["value"]) == pytest.approx(np.mean(got), abs=1e-9)
                iv = mean_interval(got, 0)
                if iv is None:
                    assert row["low"] == ""
                else:
                    assert (float(row["low"]), float(row["high"])) == pytest.approx(iv, abs=1e-9)
                assert int(row["n"]) == len(got)
                (paper,) = [
                    p
                    for p in recipe.table.paper
                    if p.row == "Gemini 2.5 Flash Image" and p.group == group
                ]
                want = paper.values.get(m.metric) if g == PAPERS else None
                assert (float(row["paper"]) if row["paper"] else None) == want
                # observed and judged by the gemini profile's model, not InternVL3 and
                # CLIP-FlanT5: each figure apart, headed by what differs, no difference
                assert row["difference"] == ""
                if want is not None:
                    assert row["paper_differs"].startswith("paper: ")
                    assert "here: " in row["paper_differs"] and "gemini" in row["paper_differs"]
                    if m.metric in ("exag", "faith"):
                        assert "EXAG variant exag:ita" in row["paper_differs"]
                checked += 1
    assert checked >= 16
    said = "made another way than the paper's figures (paper: EXAG variant exag:ita"
    assert f"differs: EXAG ↓: {said}" in done.stdout and f"differs: FAITH ↑: {said}" in done.stdout
    # the terminal shows the table with the paper's figures in parentheses, marked apart
    assert f"{PAPERS} · GN" in done.stdout and "(0.46†)" in done.stdout  # GN's HAL
    # and where this tau comes from: the paper calibrated its 0.52 for InternVL3
    assert "differs: tau here: 0.52 (profile gemini: the AHEaD default" in done.stdout
    page = (out / "table-ahead-table1.html").read_text()
    assert (
        'id="recipe-table"' in page and "(paper 0.46†" in page and "Gemini 2.5 Flash Image" in page
    )
    assert 'id="recipe-notes"' in page and '<span class="muted way">exag:mllm</span>' in page
    tex = (out / "table-ahead-table1.tex").read_text()
    assert r"\multicolumn{4}{c}{N=1}" in tex and r"$\downarrow$" in tex
    assert "paper: EXAG variant exag:ita" in tex and r"\textsuperscript{\dag}" in tex
    # the paper's whole table follows, its models not run here included
    published = (out / "table-ahead-table1-ahead-table1-paper.tex").read_text()
    assert "DALL" in published and "0.61" in published and "Gemini 2.5 Flash Image" in published
    assert published in tex
    if shutil.which("pdflatex") is None:
        pytest.skip("pdflatex is not installed (.ci/run installs texlive-latex-base)")
    build = tmp_path / "tex"
    build.mkdir()
    made = subprocess.run(
        ["pdflatex", "-interaction=nonstopmode", "-halt-on-error", f"-output-directory={build}",
         str(out / "table-ahead-table1.tex")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert made.returncode == 0, made.stdout[-2000:]
    assert (build / "table-ahead-table1.pdf").stat().st_size > 1000


SMALL = """
name = "small-agreement"
title = "A small agreement table"
paper = "AHEaD"
source = "Table 2"
task = "bench"

[select]
countries = ["Iran", "USA"]
activities = ["people eating food at home", "wedding celebration"]
images_per_prompt = 2
seed = 42
generators = ["gemini:gemini-3.1-flash-image", "gemini:gemini-3-pro-image"]

[table]
kind = "agreement"
caption = "Agreement with GT-FAITH"
label = "tab:small"
groups = "region"
group_order = ["Global South", "Global North"]
group_labels = { "Global South" = "GS", "Global North" = "GN" }
protocol = "ahead"
question = "gt_faith"
metrics = [{ metric = "align", header = "ALIGN" }, { metric = "faith", header = "FAITH" }]

[[table.paper]]
row = "FAITH"
metric = "faith"
values = { GS = 0.46, GN = 0.47, All = 0.47 }

[[table.paper]]
row = "ALIGN"
metric = "align"
values = { GS = 0.31, GN = 0.33, All = 0.32 }
"""


@pytest.mark.slow
def test_an_agreement_recipe_with_and_without_ratings(world, siglip_path, tmp_path):
    world.generate_by_model = {"gemini-3.1-flash-image": RED, "gemini-3-pro-image": GREEN}
    recipe = tmp_path / "small.toml"
    recipe.write_text(SMALL)
    out = tmp_path / "b"
    args = ["bench", "--recipe", str(recipe), "--out", str(out), "--baselines", "",
            "--backend", f"image_embedder=siglip:{siglip_path}"]  # fmt: skip
    done = cli(*args)
    assert done.returncode == 0, done.stderr
    # no ratings: the metric side, and what is missing
    assert "missing: people's ratings" in done.stdout and "--ratings FILE" in done.stdout
    side = _table(out, "small-agreement")
    assert {r["column"] for r in side} == {"ALIGN", "FAITH"}
    cells = [json.loads(x) for x in (out / "cells.jsonl").read_text().splitlines()]
    rng = np.random.default_rng(7)
    rows = []
    for cell in cells:
        for im in cell["images"]:
            for rater in ("a", "b"):
                score = int(np.clip(round(1 + 4 * im["faith"] + rng.normal(scale=0.7)), 1, 5))
                rows.append({"image": str(out / im["file"]), "rater": rater, "gt_faith": score,
                             "activity": cell["activity"], "country": cell["country"],
                             "faith": im["faith"], "align": im["align"]})  # fmt: skip
    # the Rate view's rows under the ahead protocol: GT-FAITH on its 1-5 scale
    ratings = tmp_path / "ratings.jsonl"
    ratings.write_text(
        "".join(
            json.dumps(
                {
                    "image": r["image"],
                    "rater": r["rater"],
                    "protocol": "ahead",
                    "answers": {"gt_faith": str(r["gt_faith"])},
                    "activity": r["activity"],
                    "country": r["country"],
                }
            )
            + "\n"
            for r in rows
        )  # fmt: skip
    )
    again = cli(*args, "--ratings", str(ratings))
    assert again.returncode == 0, again.stderr
    table = _table(out, "small-agreement")
    # by hand: Spearman of each metric with the raters' mean, per region and over all
    by_image = {}
    for r in rows:
        by_image.setdefault(r["image"], []).append(r)
    for metric, header in (("align", "ALIGN"), ("faith", "FAITH")):
        for group, label in (("Global South", "GS"), ("Global North", "GN"), (None, "All")):
            pick = [
                v for v in by_image.values()
                if group is None or regions()[v[0]["country"].casefold()] == group
            ]  # fmt: skip
            x = [v[0][metric] for v in pick]
            y = [np.mean([r["gt_faith"] for r in v]) for v in pick]
            (row,) = [t for t in table if t["row"] == header and t["column"] == label]
            assert float(row["value"]) == pytest.approx(sp.spearmanr(x, y).statistic, abs=1e-9)
            assert int(row["n"]) == len(pick)
    # the paper's FAITH is by exag:ita, this world's by exag:mllm: set apart, said
    (faith_all,) = [t for t in table if t["row"] == "FAITH" and t["column"] == "All"]
    assert faith_all["way"] == "exag:mllm" and faith_all["difference"] == ""
    assert "here: EXAG variant exag:mllm" in faith_all["paper_differs"]
    assert "differs: FAITH: made another way than the paper's figures" in again.stdout
    (align_all,) = [t for t in table if t["row"] == "ALIGN" and t["column"] == "All"]
    assert float(align_all["paper"]) == 0.32 and float(align_all["p"]) > 0
    assert "missing: people's ratings" not in again.stdout
    # ratings with a recipe that needs none, and a file that is not there
    bad = cli("bench", "--recipe", "ahead-table1", "--ratings", str(ratings), "--out", str(out))
    assert bad.returncode == 2 and "made from the metrics alone" in bad.stderr
    bad = cli(*args, "--ratings", str(tmp_path / "none.jsonl"))
    assert bad.returncode == 2 and "--ratings: no file" in bad.stderr


def test_dry_run_counts_and_prices(tmp_path):
    from refine.profiles import load_profile

    # the bundled profile without its prices, then with a test's
    profile = load_profile("gemini").path.read_text()
    bare = re.sub(r"(?m)^costs_source = .*\n", "", profile).split("\n[costs]")[0] + "\n"
    unpriced = tmp_path / "unpriced.toml"
    unpriced.write_text(bare)
    priced = tmp_path / "priced.toml"
    priced.write_text(
        'costs_source = "a test price list"\n'
        + bare
        + "\n[costs]\ngenerator = 0.04\nobserver = 0.001\njudge = 0.0005\n"
    )
    out = tmp_path / "none"
    # the profile's own generator, which its prices are for
    own = "gemini:gemini-3.1-flash-lite-image"
    done = cli("bench", "--recipe", "ahead-table1", "--limit", "3", "--dry-run",
               "--generator", own, "--profile", str(priced), "--out", str(out))  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert not out.exists()  # nothing made
    # 3 prompts x 10 images; each: five observer calls (AHEaD's prompts, one a
    # dimension), quality (2 answers), EXAG by the judge's rating (no photos in the bundled
    # pack), CLIPScore (the default baseline) with no call
    images, looks, judge = 30, 150, 30 * 3
    assert f"{images} images" in done.stdout
    assert f"generator: {images} calls" in done.stdout and f"observer: {looks} calls" in done.stdout
    # sampled: 2 answers a reading where the first two agree (the profile's agree), else 8
    said = f"({judge * 2} to {judge * 8} if the judge samples: 2 answers each where they agree"
    assert f"judge: {judge} calls {said}, else 8)" in done.stdout
    low = images * 0.04 + looks * 0.001 + judge * 0.0005
    high = images * 0.04 + looks * 0.001 + judge * 8 * 0.0005
    assert f"cost: about ${low:,.2f} to ${high:,.2f} (a test price list)" in done.stdout
    plain = cli("bench", "--recipe", "ahead-table1", "--limit", "1", "--dry-run",
                "--profile", str(unpriced), "--out", str(out))  # fmt: skip
    assert plain.returncode == 0 and "the profile gives no prices" in plain.stdout
    # without --profile, the recipe's own: the paper's scorers
    paper = cli("bench", "--recipe", "ahead-table1", "--limit", "1", "--dry-run",
                "--out", str(out))  # fmt: skip
    assert paper.returncode == 0 and "profile ahead-paper" in paper.stdout, paper.stderr
    # another API generator than the profile's own is not priced at the profile's price;
    # the bundled recipe's diffusers models are made here, no call
    other = cli("bench", "--recipe", "ahead-table1", "--limit", "1", "--dry-run",
                "--profile", str(priced), "--out", str(out))  # fmt: skip
    assert f"prices its own generator ({own}) only, not {PAPERS}" in other.stdout
    assert "no price for: generator" in other.stdout and "generator: 10 calls" in other.stdout
    assert "generator diffusers:black-forest-labs/FLUX.1-dev" in other.stdout


def test_wrong_input_is_refused_in_one_line(tmp_path):
    out = str(tmp_path / "x")
    bad = cli("bench", "--recipe", "ahead-tabel1", "--out", out)
    assert bad.returncode == 2 and "did you mean 'ahead-table1'" in bad.stderr
    bad = cli("bench", "--cube-quality", "judge", "--out", out)
    assert bad.returncode == 2 and "--cube-quality goes with --recipe NAME" in bad.stderr
    bad = cli("bench", "--recipe", "ahead-table1", "--limit", "0", "--out", out)
    assert bad.returncode == 2
    assert "--limit '0': Input should be greater than or equal to 1" in bad.stderr
    # an option the recipe's task does not take: one line, never dropped without a word
    bad = cli("bench", "--recipe", "caire-table2", "--tau", "0.5", "--out", out)
    assert bad.returncode == 2
    assert "--recipe caire-table2: --tau: a caire recipe takes no tau" in bad.stderr
    bad = cli("bench", "--recipe", "ahead-table1", "--countries", "Iran", "--out", out)
    assert bad.returncode == 2 and "leave out --countries" in bad.stderr
    broken = tmp_path / "broken.toml"
    broken.write_text(SMALL.replace('metric = "faith"\nvalues', 'metric = "faith"\nvalue'))
    bad = cli("bench", "--recipe", str(broken), "--out", out)
    assert bad.returncode == 2 and "table.paper.0.value" in bad.stderr
    bad = cli("bench", "--recipe", "cube-table5", "--out", out)
    assert bad.returncode == 2 and "--concepts FILE" in bad.stderr


@pytest.mark.slow
def test_a_settings_recipe_rescores_its_bench_at_the_photos_quartiles(
    world, siglip_path, tmp_path, monkeypatch
):
    from tests.fakes.gemini_world import png_bytes

    monkeypatch.setenv("REFINE_DATA_DIR", str(tmp_path / "data"))
    photos = tmp_path / "photos"
    photos.mkdir()
    for k, colour in enumerate((GREEN, RED)):
        (photos / f"p{k}.png").write_bytes(png_bytes(colour, (64, 48)))
    act = "people eating food at home"
    assert cli("photos", "add", act, str(photos), "--country", "Iran").returncode == 0
    recipe = small_recipe("ahead-table5", "t5", act, tmp_path)
    out = tmp_path / "b"
    done = cli("bench", "--recipe", str(recipe), "--out", str(out), "--baselines", "",
               "--backend", f"image_embedder=siglip:{siglip_path}")  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = _table(out, "t5")
    assert [r["row"].split(" ")[0] for r in rows] == ["Q1", "median", "Q3"]
    taus = json.loads((out / "settings" / "tau-quantiles.json").read_text())["tau"]
    for r, name in zip(rows, ("q1", "median", "q3"), strict=True):
        cells = json.loads((out / "settings" / f"tau-{name}" / "results.json").read_text())["cells"]
        assert cells[0]["tau"] == pytest.approx(taus[name], abs=1e-5)
        assert float(r["value"]) == pytest.approx(cell_mean(cells[0], "faith"), abs=1e-9)
    assert "missing: people's ratings" in done.stdout
    said = " ".join(done.stdout.split())  # what the paper leaves open, said beside it
    assert "differs: the paper does not identify the statistic of its Tab. 5" in said
    # the dry run counts the photos' looks too: 2 images and 2 photos (this recipe's
    # observer asks once an image)
    dry = cli("bench", "--recipe", str(recipe), "--dry-run", "--out", str(tmp_path / "d"))
    assert "observer: 4 calls" in dry.stdout and "holds the 2 real photos" in dry.stdout


BY_QUESTIONS = """
name = "cf-small"
title = "Metrics against three questions"
paper = "CulturalFrames"
source = "Figure 6"
task = "bench"
[select]
countries = ["Iran", "USA"]
activities = ["people eating food at home", "wedding celebration"]
images_per_prompt = 2
seed = 0
generators = ["gemini:gemini-3.1-flash-image", "gemini:gemini-3-pro-image"]
[table]
kind = "agreement"
columns = "questions"
questions = ["alignment", "overall"]
human_row = true
caption = "by questions"
label = "tab:cf-small"
protocol = "culturalframes"
metrics = [{ metric = "faith", header = "FAITH" }, { metric = "align", header = "ALIGN" }]
[[table.paper]]
row = "Human"
metric = "human"
values = { overall = 0.42 }
"""


@pytest.mark.slow
def test_an_agreement_recipe_by_questions_with_the_human_row(world, siglip_path, tmp_path):
    """CulturalFrames Fig. 6's layout: each metric's Spearman with the mean answer to each
    question, and each rater against the others' mean (averaged) as the last row."""
    world.generate_by_model = {"gemini-3.1-flash-image": RED, "gemini-3-pro-image": GREEN}
    recipe = tmp_path / "cf.toml"
    recipe.write_text(BY_QUESTIONS)
    out = tmp_path / "b"
    args = ["bench", "--recipe", str(recipe), "--out", str(out), "--baselines", "",
            "--backend", f"image_embedder=siglip:{siglip_path}"]  # fmt: skip
    assert cli(*args).returncode == 0
    cells = [json.loads(x) for x in (out / "cells.jsonl").read_text().splitlines()]
    rng = np.random.default_rng(11)
    rows, images = [], []
    for cell in cells:
        for im in cell["images"]:
            path = str(out / im["file"])
            images.append((path, im))
            for rater in ("a", "b", "c"):
                al = ["0", "0.5", "1"][
                    int(np.clip(round(2 * im["align"] + rng.normal(scale=0.5)), 0, 2))
                ]
                ov = str(int(np.clip(round(1 + 4 * im["faith"] + rng.normal(scale=0.8)), 1, 5)))
                rows.append({"image": path, "rater": rater, "protocol": "culturalframes",
                             "answers": {"alignment": al, "overall": ov},
                             "activity": cell["activity"], "country": cell["country"]})  # fmt: skip
    ratings = tmp_path / "r.jsonl"
    ratings.write_text("".join(json.dumps(r) + "\n" for r in rows))
    done = cli(*args, "--ratings", str(ratings))
    assert done.returncode == 0, done.stderr
    table = {
        (r["row"], r["column"]): r for r in csv.DictReader((out / "table-cf-small.csv").open())
    }
    answers = {}
    for r in rows:
        for q, v in r["answers"].items():
            answers.setdefault((r["image"], q), {})[r["rater"]] = float(v)
    for q in ("alignment", "overall"):
        y = [np.mean(list(answers[(p, q)].values())) for p, _ in images]
        for metric, header in (("faith", "FAITH"), ("align", "ALIGN")):
            x = [im[metric] for _, im in images]
            assert float(table[(header, q)]["value"]) == pytest.approx(
                sp.spearmanr(x, y).statistic, abs=1e-9
            )
        # the human row: each rater against the mean of the other two, averaged
        per = []
        for rater in ("a", "b", "c"):
            mine = [answers[(p, q)][rater] for p, _ in images]
            rest = [
                np.mean([v for w, v in answers[(p, q)].items() if w != rater]) for p, _ in images
            ]
            per.append(sp.spearmanr(mine, rest).statistic)
        assert float(table[("Human", q)]["value"]) == pytest.approx(np.mean(per), abs=1e-9)
    assert float(table[("Human", "overall")]["paper"]) == 0.42


def test_dry_runs_of_the_other_tasks_count_and_make_nothing(tmp_path):
    """CUBE's, SoS's and CAIRE's recipes: the images and calls they would make, with
    --limit, and nothing made."""
    concepts = tmp_path / "c.jsonl"
    concepts.write_text(
        json.dumps({"prompt": "Image of a dish", "concept": "Cuisine"}) + "\n"
        + json.dumps({"concept": "cuisine", "country": "Iran"}) + "\n"
    )  # fmt: skip
    out = tmp_path / "none"
    cube = cli("bench", "--recipe", "cube-table5", "--concepts", str(concepts), "--dry-run",
               "--limit", "1", "--out", str(out))  # fmt: skip
    assert cube.returncode == 0, cube.stderr
    # one concept prompt x 80 images x SDXL and Playground: geo-tags and quality answers
    assert "160 images: 2 generator(s) x 1 prompts" in cube.stdout
    assert "observer: 160 calls" in cube.stdout and "judge: 160 calls" in cube.stdout
    both = cli("bench", "--recipe", "cube-table5", "--concepts", str(concepts), "--dry-run",
               "--out", str(out))  # fmt: skip
    assert "judge: 480 calls" in both.stdout  # the within-culture concept's filter too
    ahead = cli("bench", "--recipe", "ahead-table2", "--dry-run", "--out", str(out))
    said = "6 of the 11 countries named run (72 of 132 prompts): France, Brazil, Germany, "
    assert said in ahead.stdout and "`refine data fetch ahead`" in ahead.stdout
    frames = cli("bench", "--recipe", "culturalframes-fig6-cultivate", "--dry-run",
                 "--out", str(out))  # fmt: skip
    said = "3 of the 6 countries named run (36 of 72 prompts): South Africa, Brazil, Germany"
    assert said in frames.stdout, frames.stdout
    sos = cli("bench", "--recipe", "sos-table2", "--dry-run", "--limit", "2", "--out", str(out))
    assert sos.returncode == 0, sos.stderr
    # 7 models x 2 cultures x 14 languages x 9 prompts: images made here, no API call
    assert f"{7 * 2 * 14 * 9} images: 7 generator(s)" in sos.stdout
    assert "generator: " not in sos.stdout and "generator diffusers:" in sos.stdout
    assert "cost: about $0.00" in sos.stdout
    # every culture: the paper's 171 (the authors' "Hondurans" in German is "Honduran")
    # x 14 languages x 9 prompts = 21,546 a generator
    every = cli("bench", "--recipe", "sos-table2", "--dry-run", "--out", str(out))
    assert f"{7 * 21546} images: 7 generator(s) x 21546 prompts" in every.stdout, every.stdout
    lines = tmp_path / "u.txt"
    lines.write_text("wedding\nbreakfast\n")
    caire = cli("bench", "--recipe", "caire-table2", "--concepts", str(lines), "--dry-run",
                "--out", str(out))  # fmt: skip
    assert caire.returncode == 0, caire.stderr
    assert "20 images: 1 generator(s)" in caire.stdout and "judge: 200 calls" in caire.stdout
    assert "run here, no API call: generator diffusers:" in caire.stdout  # SD3, no call
    assert not out.exists()
    bad = cli(
        "bench", "--recipe", "sos-table2", "--dry-run", "--profile", "nope", "--out", str(out)
    )
    assert bad.returncode == 2 and "--profile: unknown profile 'nope'" in bad.stderr


BACKBONES = (
    SMALL.replace('generators = ["gemini', 'baselines = ["judge_align"]\ngenerators = ["gemini')
    .replace(
        "\n[table]",
        """
[[select.backbones]]
label = "Other"
observer = "gemini:gemini-3.5-flash"
judge = "gemini:gemini-3.5-pro"
tau = 0.4

[table]""",
    )
    .replace(
        'header = "ALIGN" },', 'header = "ALIGN" }, { metric = "judge_align", header = "MLLM" },'
    )
    .replace(
        'protocol = "ahead"',
        'protocol = "ahead"\nbackbone_metrics = ["judge_align", "faith"]\nhuman_row = true',
    )
    + """
[[table.paper]]
row = "Other, FAITH"
metric = "faith"
backbone = "Other"
values = { GS = 0.42, GN = 0.38, All = 0.42 }

[[table.paper]]
row = "Other, MLLM"
metric = "judge_align"
backbone = "Other"
values = { GS = 0.27, GN = 0.29, All = 0.28 }
"""
)


@pytest.mark.slow
def test_a_second_backbone_scores_the_same_images_again(world, siglip_path, tmp_path):
    """AHEaD Tab. 2's two backbones in one recipe run: the second observes the bench's
    images again and its judge reads MLLM-as-a-judge again, nothing generated; its rows
    are recomputed by hand from its own cells."""
    world.generate_by_model = {"gemini-3.1-flash-image": RED, "gemini-3-pro-image": GREEN}
    world.judge_shift_by_model = {"gemini-3.5-pro": -1}  # the second judge rates one lower
    out, args = _recipe_run(tmp_path, BACKBONES, siglip_path)
    dry = cli(*args, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    # 8 prompts x 2 images: the bench's 16 observations and the backbone's 16
    assert (
        "backbone Other: 16 observations" in dry.stdout and "judge_align read again" in dry.stdout
    )
    done = cli(*args)
    assert done.returncode == 0, done.stderr
    main = [json.loads(x) for x in (out / "cells.jsonl").read_text().splitlines()]
    folder = out / "backbones" / "Other"
    theirs = [json.loads(x) for x in (folder / "cells.jsonl").read_text().splitlines()]
    assert len(theirs) == len(main) == 8
    # after the bench's own requests: only the second observer and judge, nothing generated
    first = world.by_model.index(("observe", "gemini-3.5-flash"))
    later = world.by_model[first:]
    assert {k for k, _ in later} == {"observe", "judge"}
    assert later.count(("observe", "gemini-3.5-flash")) == 16
    assert later.count(("judge", "gemini-3.5-pro")) == 16  # judge_align, once an image
    by_file = {im["file"]: im for c in main for im in c["images"]}
    for cell in theirs:
        note = cell["rescored"]
        assert note["observed_again"] and note["judged_again"] == ["judge_align"]
        assert note["judge"][1] == "gemini:gemini-3.5-pro" and "exag" in note["kept"]
        for im in cell["images"]:
            mine = by_file[im["file"]]
            assert im["exag"] == mine["exag"]  # VQAScore's EXAG, kept
            assert im["judge_align"] == pytest.approx(
                max(0.0, mine["judge_align"] - 0.25), abs=0.03
            )
            assert (folder / im["file"]).read_bytes() == (out / im["file"]).read_bytes()
    # no ratings: the backbone's rows hold its MLLM and FAITH means alone
    side = _table(out, "small-agreement")
    rows = [r for r in side if r["row"].startswith("Other: ")]
    assert {r["column"] for r in rows if r["value"]} == {"MLLM", "FAITH"}
    gs = [c for c in theirs if c["generator"].endswith("3-pro-image")
          and regions()[c["country"].casefold()] == "Global South"]  # fmt: skip
    (cell,) = [r for r in rows if r["row"] == "Other: gemini:gemini-3-pro-image · GS"
               and r["column"] == "FAITH"]  # fmt: skip
    assert float(cell["value"]) == pytest.approx(np.mean([cell_mean(c, "faith") for c in gs]))
    # ratings: each backbone's agreement from its own scores
    rng = np.random.default_rng(3)
    lines, answers = [], {}
    for c in main:
        for im in c["images"]:
            for rater in ("a", "b"):
                score = int(np.clip(round(1 + 4 * im["faith"] + rng.normal(scale=0.7)), 1, 5))
                answers.setdefault(im["file"], []).append(score)
                lines.append(json.dumps({"image": str(out / im["file"]), "rater": rater,
                    "protocol": "ahead", "answers": {"gt_faith": str(score)},
                    "activity": c["activity"], "country": c["country"]}))  # fmt: skip
    ratings = tmp_path / "ratings.jsonl"
    ratings.write_text("\n".join(lines) + "\n")
    world.by_model.clear()
    again = cli(*args, "--ratings", str(ratings))
    assert again.returncode == 0, again.stderr
    assert world.by_model == []  # the bench and the backbone kept: no model call
    table = _table(out, "small-agreement")
    theirs_by_file = {im["file"]: im for c in theirs for im in c["images"]}
    for bench, prefix in ((by_file, ""), (theirs_by_file, "Other, ")):
        for metric, header in (("judge_align", "MLLM"), ("faith", "FAITH")):
            x = [bench[f][metric] for f in answers]
            y = [np.mean(v) for v in answers.values()]
            (row,) = [t for t in table if t["row"] == prefix + header and t["column"] == "All"]
            assert float(row["value"]) == pytest.approx(sp.spearmanr(x, y).statistic, abs=1e-9)
    (paper,) = [t for t in table if t["row"] == "Other, MLLM" and t["column"] == "GN"]
    assert float(paper["paper"]) == 0.29
    (own,) = [t for t in table if t["row"] == "ALIGN" and t["column"] == "GN"]
    assert float(own["paper"]) == 0.33
    for row in ("Other, FAITH", "FAITH"):  # the paper's by exag:ita, these by exag:mllm
        (faith,) = [t for t in table if t["row"] == row and t["column"] == "GN"]
        assert faith["difference"] == "" and faith["way"] == "exag:mllm"
        assert "EXAG variant exag:ita" in faith["paper_differs"]
    # the Human row: with two raters, each against the other
    (human,) = [t for t in table if t["row"] == "Human" and t["column"] == "All"]
    a, b = zip(*answers.values(), strict=True)
    assert float(human["value"]) == pytest.approx(sp.spearmanr(a, b).statistic, abs=1e-9)
    assert int(human["n"]) == 2
    tex = (out / "table-small-agreement-small.tex").read_text()
    assert r"\textbf" in tex.split("Human")[0] and r"\textbf" not in tex.split("Human")[1]


@pytest.mark.slow
def test_the_proposers_recipe_rescores_its_bench_with_each_proposers_own_set(
    world, siglip_path, tmp_path, monkeypatch, capsys
):
    """AHEaD Tab. 4: the bench made once, then matched again against each proposer's own
    descriptors (fetched with --proposers; GPT-4o's the refined set less a dimension,
    Gemini's words no image shows), nothing observed again; the Proposer-Refiner row is
    the bench itself. Without the proposers' packs, one line says to fetch them."""
    from refine.cli import main
    from refine.evaluate.paper_data import DESCRIPTORS, PROPOSERS, fetch_ahead, proposer_pack
    from refine.evaluate.references import load_pack
    from tests.e2e.test_paper_data import upstream
    from tests.fakes.file_server import FileServer

    act = "people eating food at home"
    repo = tmp_path / "repo"
    upstream(repo, countries=("Iran",))
    refined = json.loads((repo / DESCRIPTORS.format(slug="iran")).read_text())
    gpt = json.loads(json.dumps(refined))
    for subs in gpt.values():
        for dims in subs.values():
            dims["objects"] = []  # one dimension fewer than the refined set
    gemini = {c: {s: {d: [{"token": f"unseen {d} {i}"} for i in range(3)] for d in dims}
                  for s, dims in subs.items()} for c, subs in refined.items()}  # fmt: skip
    for proposer, doc in (("gpt-4o", gpt), ("gemini-2.5-flash", gemini)):
        path = repo / PROPOSERS[proposer].format(slug="iran")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(doc))
    data = tmp_path / "data"
    monkeypatch.setenv("REFINE_DATA_DIR", str(data))
    recipe = small_recipe("ahead-table4", "t4", act, tmp_path)
    out = tmp_path / "b"
    args = ["bench", "--recipe", str(recipe), "--out", str(out), "--baselines", "",
            "--backend", f"image_embedder=siglip:{siglip_path}"]  # fmt: skip
    with FileServer(repo) as server:
        fetch_ahead(data, ["Iran"], server.url)  # the refined set alone
        early = cli(*args)
        assert early.returncode == 2 and "refine data fetch ahead --proposers" in early.stderr
        assert not out.exists()  # refused before any image is made
        with pytest.raises(SystemExit):
            main(["data", "fetch", "ahead", "--countries", "Iran", "--from", server.url,
                  "--data-dir", str(data), "--proposers"])  # fmt: skip
    assert "proposer-only pack (gpt-4o)" in capsys.readouterr().out
    for proposer in PROPOSERS:  # never among packs/, where every run would find them
        assert load_pack(str(proposer_pack(data, proposer))).name == f"ahead-proposer-{proposer}"
    world.log.clear()
    done = cli(*args)
    assert done.returncode == 0, done.stderr
    said = " ".join(done.stdout.split())  # what the paper leaves open, said beside it
    assert "differs: the paper does not identify the statistic of its Tab. 4" in said
    assert "Tab. 2 sets FAITH against at 0.47 (InternVL3)" in said
    rows = {r["row"]: r for r in _table(out, "t4")}
    assert list(rows) == ["Proposer (gpt-4o)", "Proposer (gemini-2.5-flash)", "Proposer-Refiner"]
    faith = {}
    for label, folder in (("Proposer (gpt-4o)", "proposer-gpt-4o"),
                          ("Proposer (gemini-2.5-flash)", "proposer-gemini-2.5-flash"),
                          ("Proposer-Refiner", None)):  # fmt: skip
        where = out / "settings" / folder if folder else out
        cells = json.loads((where / "results.json").read_text())["cells"]
        faith[label] = cell_mean(cells[0], "faith")
        assert float(rows[label]["value"]) == pytest.approx(faith[label], abs=1e-9)
        aligns = [im["align"] for im in cells[0]["images"]]
        if label == "Proposer (gemini-2.5-flash)":
            assert aligns == [0.0, 0.0]  # its words match nothing the images show
    assert faith["Proposer-Refiner"] > faith["Proposer (gemini-2.5-flash)"]
    assert world.log.count("observe") == 2  # the bench's two images, observed once
    bad = cli("rescore", str(out), "--out", str(tmp_path / "r"), "--references", str(repo))
    assert bad.returncode == 2 and "--references: no file" in bad.stderr


JUDGED = (
    SMALL.replace('generators = ["gemini', 'baselines = ["judge_align"]\ngenerators = ["gemini')
    .replace("images_per_prompt = 2", "images_per_prompt = 1")
    .replace(', "gemini:gemini-3-pro-image"]', "]")
    .replace(
        "\n[table]",
        """
[[select.judges]]
judge = "gemini:gemini-3.5-pro"
metrics = ["judge_align"]

[table]""",
    )
    .replace(
        'header = "ALIGN" },', 'header = "ALIGN" }, { metric = "judge_align", header = "MLLM" },'
    )
)


@pytest.mark.slow
def test_a_baseline_the_paper_read_with_another_judge_is_read_again_by_it(
    world, siglip_path, tmp_path
):
    """AHEaD Tab. 2's MLLM row is another judge's than VQAScore's: the recipe's second judge
    reads the bench's images again for it (a rescore, nothing generated or observed), the
    table's MLLM values are its, and its way names it; the dry run counts its readings; on
    another profile than the recipe's it does not run, and the table says so."""
    world.generate_by_model = {"gemini-3.1-flash-image": RED}
    world.judge_shift_by_model = {"gemini-3.5-pro": -1}  # the second judge rates one lower
    out, args = _recipe_run(tmp_path, JUDGED, siglip_path)
    dry = cli(*args, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    said = "judge gemini:gemini-3.5-pro: judge_align of the bench's images read again by it"
    assert said in " ".join(dry.stdout.split())
    done = cli(*args)
    assert done.returncode == 0, done.stderr
    main = [json.loads(x) for x in (out / "cells.jsonl").read_text().splitlines()]
    folder = out / "judges" / "gemini-gemini-3.5-pro"
    theirs = [json.loads(x) for x in (folder / "cells.jsonl").read_text().splitlines()]
    assert len(theirs) == len(main) == 4
    # after the bench: the second judge alone, once an image
    first = world.by_model.index(("judge", "gemini-3.5-pro"))
    assert set(world.by_model[first:]) == {("judge", "gemini-3.5-pro")}
    assert len(world.by_model[first:]) == 4
    # the table's MLLM means are the second judge's (one point lower on 1-5), not the bench's
    side = {(r["row"], r["column"]): r for r in _table(out, "small-agreement")}
    for c, mine in zip(theirs, main, strict=True):
        (im,) = c["images"]
        assert im["judged"]["judge_align"]["by"] == "gemini:gemini-3.5-pro"
        assert im["judge_align"] == pytest.approx(
            max(0.0, mine["images"][0]["judge_align"] - 0.25), abs=0.03
        )
    for group in ("Global South", "Global North"):
        short = "GS" if group == "Global South" else "GN"
        row = side[(f"gemini:gemini-3.1-flash-image · {short}", "MLLM")]
        want = [c["images"][0]["judge_align"] for c in theirs
                if regions()[c["country"].casefold()] == group]  # fmt: skip
        assert float(row["value"]) == pytest.approx(np.mean(want), abs=1e-9)
    # on another profile than the recipe's (gemini), the profile's judge reads it: said
    other = tmp_path / "other.toml"
    other.write_text((recipes_dir().parent / "profiles" / "gemini.toml").read_text())
    dry = cli(*args, "--dry-run", "--profile", str(other))
    assert dry.returncode == 0, dry.stderr
    said = "the paper read judge_align by gemini:gemini-3.5-pro; on profile other"
    assert said in " ".join(dry.stdout.split()) and "read again by it" not in dry.stdout
