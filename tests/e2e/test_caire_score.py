"""CAIRE scoring: through the CLI with the real Gemini judge backend on the fake server
(with a KB and KB-free), and the 1-5 path on a tiny random Qwen2.5-VL."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from metrics.caire import diversity
from refine.backends import create
from refine.evaluate.caire.kb import KnowledgeBase
from refine.evaluate.caire.scorer import CaireScorer
from tests.e2e.test_cli_run import cli
from tests.fakes.gemini_world import CULTURE, rating_distribution
from tests.integration.test_caire_kb import BLUE, GREEN, RED, TEA_TEXT, draw, run

LABELS = ["Iran", "Turkey", "India"]


def images(tmp_path):
    paths = []
    for name, colour in (("red.png", RED), ("green.png", GREEN)):
        draw(colour, 6).save(tmp_path / name)
        paths.append(tmp_path / name)
    return paths


def test_score_with_a_kb_through_the_cli(capsys, world, kb_dir, tmp_path):
    red, green = images(tmp_path)
    scores = tmp_path / "scores.json"
    code, out, err = run(
        capsys,
        "caire",
        "score",
        red,
        green,
        "--labels",
        "Iran, Turkey,India",
        "--kb",
        kb_dir,
        "--top-k",
        "3",
        "--ranking",
        "frequency",
        "--text-chars",
        "120",
        "--out",
        scores,
        "--json",
    )
    assert code == 0, err
    doc = json.loads(out)
    assert doc["labels"] == LABELS and doc["mode"] == "kb"
    # the world's judge peaks at CULTURE[colour][label]; the score is that argmax
    assert doc["scores"] == [[CULTURE[RED][x] for x in LABELS], [CULTURE[GREEN][x] for x in LABELS]]
    first = doc["images"][0]
    assert first["entity"]["name"] == "tea" and first["entity"]["hits"] == 3
    assert first["mode"] == "kb" and first["ranking"] == "frequency"
    turkey = first["labels"][1]
    assert turkey["probabilities"] == pytest.approx(rating_distribution(4), abs=1e-6)
    expected = sum((k + 1) * p for k, p in enumerate(rating_distribution(4)))
    assert turkey["expected"] == pytest.approx(expected, abs=1e-6)
    # the judge saw the linked entity's text, cut to 120 characters, with each label
    red_prompts = world.prompts[:3]
    assert all("closely associated with the image: tea." in p for p in red_prompts)
    assert TEA_TEXT[:40] in red_prompts[0] and TEA_TEXT[:400] not in red_prompts[0]
    assert first["knowledge"].startswith("a drink. Tea in Iran") and len(first["knowledge"]) < 140
    # (the labels of one image are judged at once: in any order)
    asked = [p.split("align with the culture of ")[1].split(".\n")[0] for p in red_prompts]
    assert sorted(asked) == sorted(LABELS)
    # the green image links to no green entity (none in this KB): still a nearest entity
    assert doc["images"][1]["entity"]["name"] in ("tea", "rice")
    hand = diversity(LABELS, doc["scores"])
    assert doc["diversity"]["js_mean"] == pytest.approx(hand["js_mean"])
    assert doc["diversity"]["covered_labels"] == hand["covered_labels"]
    # CAIRE's specific-set evaluation (Tab. 14) of these scores against true labels
    truth = tmp_path / "truth.csv"
    truth.write_text(f"image,labels\n{red.name},Iran\n{green.name},India;Turkey\n")
    code, out, err = run(capsys, "caire", "evaluate", scores, "--truth", truth, "--json")
    assert code == 0, err
    got = json.loads(out)["thresholds"]
    true = {(0, "Iran"), (1, "India"), (1, "Turkey")}
    for t in (2, 3, 4, 5):
        called = {
            (i, lab)
            for i, row in enumerate(doc["scores"])
            for lab, v in zip(LABELS, row, strict=True)
            if v >= t
        }
        tp, fp, fn = len(called & true), len(called - true), len(true - called)
        assert (got[str(t)]["tp"], got[str(t)]["fp"], got[str(t)]["fn"]) == (tp, fp, fn)
        p = tp / (tp + fp) if tp + fp else None
        assert got[str(t)]["precision"] == (pytest.approx(p) if p is not None else None)
    truth.write_text(f"image,labels\n{red.name},Atlantis\n{green.name},India\n")
    code, _, err = run(capsys, "caire", "evaluate", scores, "--truth", truth)
    assert code == 2 and "labels not scored: Atlantis" in err
    assert json.loads(scores.read_text())["scores"] == doc["scores"]
    code, out, _ = run(capsys, "metrics", "caire-diversity", "--scores", scores, "--json")
    summary = json.loads(out)
    assert summary["coverage"] == pytest.approx(2 / 3)  # Turkey (red) and Iran (green)
    assert summary["mean_per_label"] == pytest.approx({"Iran": 3.5, "Turkey": 3.0, "India": 1.0})
    assert summary["js_mean"] == pytest.approx(diversity(LABELS, doc["scores"])["js_mean"])
    code, out, _ = run(capsys, "metrics", "caire-diversity", "--scores", scores)
    assert "coverage (labels some image rates 4+): 0.67 (Iran, Turkey)" in out


def test_kb_free_mode_is_named_and_sends_no_knowledge(capsys, world, tmp_path):
    red, green = images(tmp_path)
    code, out, err = run(capsys, "caire", "score", red, green, "--labels", "Iran,Turkey")
    assert code == 0, err
    assert "mode: kb-free" in out and "kb-free (no knowledge base)" in err
    assert "Iran    2  ##" in out and "Turkey  4  ####" in out
    assert world.prompts and not any("What the image shows" in p for p in world.prompts)
    code, out, _ = run(capsys, "caire", "score", red, "--labels", "Iran", "--json")
    assert json.loads(out)["images"][0]["mode"] == "kb-free"


def test_bad_inputs_name_what_to_fix(capsys, world, kb_dir, tmp_path):
    red, _ = images(tmp_path)
    code, _, err = run(capsys, "caire", "score", red, "--labels", " , ")
    assert code == 2 and "--labels: no culture labels" in err
    code, _, err = run(capsys, "caire", "score", red, "--labels", "Iran,iran")
    assert code == 2 and "labels given twice" in err
    code, _, err = run(
        capsys,
        "caire",
        "score",
        red,
        "--labels",
        "Iran",
        "--kb",
        kb_dir,
        "--embedder",
        "clip:ViT-B-32/openai",
    )
    assert code == 2 and "was built with the image embedder" in err
    code, _, err = run(capsys, "caire", "score", tmp_path / "no.png", "--labels", "Iran")
    assert code == 2 and "no.png: image not found" in err
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"labels": ["a", "b"], "scores": [[1, 2], [3, 9]]}))
    code, _, err = run(capsys, "metrics", "caire-diversity", "--scores", bad)
    assert code == 2 and "scores[1] holds 9; scores lie in 1..5" in err


@pytest.mark.slow
def test_the_1_to_5_path_on_a_tiny_vlm(tmp_path, siglip_path, kb_dir):
    from tests.fakes.tiny_models import build_tiny_qwen_vl
    from tests.integration.test_hf_models import manual_answer_probs

    vl = build_tiny_qwen_vl(tmp_path)
    judge = create("judge", f"hf:{vl}", shared=False, device="cpu", batch_size=1)
    embedder = create("image_embedder", f"siglip:{siglip_path}", shared=False, device="cpu")
    scorer = CaireScorer(judge, KnowledgeBase.load(kb_dir), embedder, top_k=3, text_chars=80)
    image = draw(BLUE, 6)
    (result,) = scorer.score([image], ["Iran", "Turkey"])
    assert result.entity["name"] == "rice" and result.mode == "kb"
    for s in result.labels:
        prompt = scorer.prompt(s.label, "rice", result.knowledge)
        # CAIRE Fig. 9's wording: the entity, its text, the label, Tab. 12's rubric
        assert "closely associated with the image: rice." in prompt
        assert f"culturally relevant the image is to {s.label}:" in prompt
        assert "* 5 - Highly Relevant: The content is deeply connected" in prompt
        direct = manual_answer_probs(vl, image, prompt, list("12345"))
        assert s.probabilities == pytest.approx(direct, abs=1e-5)
        assert s.score == 1 + max(range(5), key=lambda k: direct[k])
        assert s.expected == pytest.approx(sum((k + 1) * p for k, p in enumerate(direct)))


@pytest.mark.slow
def test_no_api_key_is_one_line_not_a_traceback(tmp_path):
    """In a process of its own, without the key: the tests' process holds a Gemini client
    made with the stand-in's key, which an in-process call would use (seen: 5 retries
    against the stand-in, not the missing key)."""
    import os
    import subprocess

    from tests.e2e.test_cli_run import refine_cmd

    red, _ = images(tmp_path)
    env = {k: v for k, v in os.environ.items() if k not in ("GEMINI_API_KEY", "GOOGLE_API_KEY")}
    done = subprocess.run(
        refine_cmd("caire", "score", str(red), "--labels", "Iran,Turkey"),
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1
    assert "error: GeminiError: no Gemini API key: set GEMINI_API_KEY" in done.stderr
    assert "Traceback" not in done.stderr


def manual_nll(path, image, text, answer, completion):
    """-log P(completion | chat, answer begun) computed directly with transformers."""
    import torch
    from transformers import AutoModelForImageTextToText, AutoProcessor

    proc = AutoProcessor.from_pretrained(path)
    model = AutoModelForImageTextToText.from_pretrained(path).eval()
    content = ([{"type": "image"}] if image is not None else []) + [{"type": "text", "text": text}]
    chat = [{"role": "user", "content": content}]
    head = proc.apply_chat_template(chat, add_generation_prompt=True, tokenize=False) + answer
    kwargs = {"images": [image]} if image is not None else {}
    n = proc(text=[head], return_tensors="pt", **kwargs)["input_ids"].shape[1]
    whole = proc(text=[head + completion], return_tensors="pt", **kwargs)
    with torch.no_grad():
        logits = model(**whole).logits[0]
    ids = whole["input_ids"][0]
    logp = torch.log_softmax(logits.float(), dim=-1)
    return -sum(float(logp[k - 1, ids[k]]) for k in range(n, ids.shape[0]))


@pytest.mark.slow
def test_log_likelihood_scoring_with_affine_debiasing(tmp_path, siglip_path, kb_dir):
    """CAIRE App. B.1 on a tiny VLM: each label's NLL of "This text is relevant to LABEL"
    after the image and its entity's text, after the prompt alone, and debiased, every
    one against transformers directly; the Gemini judge refuses in one line."""
    from refine.assets import prompt_template
    from refine.evaluate.caire.scorer import LOGLIK_PREFIX
    from tests.fakes.tiny_models import build_tiny_qwen_vl

    vl = build_tiny_qwen_vl(tmp_path)
    judge = create("judge", f"hf:{vl}", shared=False, device="cpu", batch_size=1)
    embedder = create("image_embedder", f"siglip:{siglip_path}", shared=False, device="cpu")
    lam, floor = 0.5, 3.0
    scorer = CaireScorer(
        judge, KnowledgeBase.load(kb_dir), embedder, top_k=3, text_chars=80, loglik=(lam, floor)
    )
    image = draw(BLUE, 6)
    (result,) = scorer.score([image], ["Iran", "Turkey"])
    block = prompt_template("caire_knowledge").format(entity="rice", text=result.knowledge)
    asked = prompt_template("caire_loglik")
    for s in result.labels:
        full = manual_nll(vl, image, asked.format(knowledge=block), LOGLIK_PREFIX, " " + s.label)
        base = manual_nll(vl, None, asked.format(knowledge=""), LOGLIK_PREFIX, " " + s.label)
        # float32 on CPU: sums of log-probabilities over a few tokens agree to ~1e-4
        assert s.nll == pytest.approx(full, abs=1e-3) and s.base_nll == pytest.approx(
            base, abs=1e-3
        )
        assert s.debiased == pytest.approx(s.nll - lam * max(s.base_nll, floor), abs=1e-9)
    best = min(result.labels, key=lambda s: s.debiased).label
    assert result.loglik == {
        "lambda": lam, "floor": floor, "completion": LOGLIK_PREFIX + " {label}", "best": best
    }  # fmt: skip
    red, _ = images(tmp_path)
    bad = cli("caire", "score", str(red), "--labels", "Iran,Turkey", "--loglik",
              "--caire-lambda", "0.5", "--caire-floor", "3")  # fmt: skip
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
    assert "--loglik: CAIRE's log-likelihood scoring" in bad.stderr and "gemini:" in bad.stderr
    bad = cli("caire", "score", str(red), "--labels", "Iran", "--loglik")
    assert bad.returncode == 2 and "give --caire-lambda and --caire-floor" in bad.stderr


CAIRE_RECIPE = """
name = "caire-small"
title = "CAIRE against people, country by country"
paper = "CAIRE"
source = "Table 2"
task = "caire"
[select]
countries = ["Iran", "Turkey", "India"]
images_per_prompt = 1
seed = 0
generators = ["gemini:gemini-3.1-flash-image"]
[table]
kind = "agreement"
caption = "per country"
label = "tab:caire-small"
protocol = "caire"
question = "relevance"
correlation = "pearson"
group_order = ["Iran", "Turkey", "India", "Avg"]
metrics = [{ metric = "caire", header = "CAIRE" }]
[[table.paper]]
row = "CAIRE"
metric = "caire"
values = { Iran = 0.6, Avg = 0.56 }

[[table.paper]]
row = "VLM baseline"
metric = "vlm"
values = { Iran = 0.5, Avg = 0.52 }
"""


def test_the_caire_recipe_country_by_country(world, tmp_path):
    """The universal set on the stand-in: each concept in each country generated, every
    image scored for every country, and per country the Pearson correlation of the scores
    for it with the mean rating of that country's raters (their nationality in the set's
    profiles), by hand; the average over countries."""
    from metrics.stats import pearson

    world.generate_for = {"wedding": RED, "breakfast": GREEN, "market": BLUE}
    recipe = tmp_path / "caire.toml"
    recipe.write_text(CAIRE_RECIPE)
    concepts = tmp_path / "concepts.jsonl"
    concepts.write_text(
        "".join(json.dumps({"concept": c}) + "\n" for c in ("wedding", "breakfast", "market"))
    )
    out = tmp_path / "out"
    args = ["bench", "--recipe", str(recipe), "--concepts", str(concepts), "--out", str(out)]
    done = cli(*args)
    assert done.returncode == 0, done.stderr
    assert "missing: people's ratings" in done.stdout
    doc = json.loads((out / "caire-scores.json").read_text())
    assert len(doc["images"]) == 9 and doc["labels"] == ["Iran", "Turkey", "India"]
    colour = {"wedding": RED, "breakfast": GREEN, "market": BLUE}
    for im, row in zip(doc["images"], doc["scores"], strict=True):
        c = next(colour[k] for k in colour if k in Path(im["image"]).name)
        assert row == [CULTURE[c][x] for x in doc["labels"]]
    # raters: two from each country, each country written as raters write it (its name, a
    # native spelling, a demonym); each rates every image near CAIRE's score, with noise.
    # Two more are left out, and named: a country no table holds, and one outside the table
    ratings = tmp_path / "rate" / "ratings.jsonl"
    ratings.parent.mkdir()
    written = {"Iran": ("the Islamic Republic of Iran", "Persian"),
               "Turkey": ("Türkiye", "turkish"), "India": ("India", "Indian")}  # fmt: skip
    profiles = {f"{n}{k}": {"nationality": written[n][k]} for n in doc["labels"] for k in (0, 1)}
    country = {f"{n}{k}": n for n in doc["labels"] for k in (0, 1)}
    left_out = {"x1": {"nationality": "Atlantis"}, "x2": {"nationality": "Français"}}
    (ratings.parent / ".profiles.json").write_text(json.dumps({**profiles, **left_out}))
    rng = np.random.default_rng(2)
    lines, mean = [], {}
    for i, (im, row) in enumerate(zip(doc["images"], doc["scores"], strict=True)):
        for rater in profiles:
            k = doc["labels"].index(country[rater])
            v = int(np.clip(round(row[k] + rng.normal(scale=1.0)), 1, 5))
            mean.setdefault((i, country[rater]), []).append(v)
            lines.append({"image": im["image"], "rater": rater, "protocol": "caire",
                          "answers": {"relevance": str(v)}})  # fmt: skip
        for rater in left_out:  # rated far from anyone: counted, they would move the figures
            lines.append({"image": im["image"], "rater": rater, "protocol": "caire",
                          "answers": {"relevance": str(1 + 4 * (i % 2))}})  # fmt: skip
    ratings.write_text("".join(json.dumps(x) + "\n" for x in lines))
    again = cli(*args, "--ratings", str(ratings))
    assert again.returncode == 0, again.stderr
    said = " ".join(again.stdout.split())
    assert "1 rater(s) left out whose country could not be placed" in said, said
    assert "'Atlantis' (1)" in said and "outside the table: 'France' (1)" in said
    rows = list(csv.DictReader((out / "table-caire-small.csv").open()))
    # C.9: per image, Pearson of its 3 country scores with the 3 countries' mean ratings;
    # per country, the mean over the images of its prompts (3 each); Avg their mean
    origins = doc["prompt_countries"]
    assert [Path(im["image"]).parent.name for im in doc["images"]] == [o.lower() for o in origins]
    table = {r["column"]: r for r in rows if r["row"].startswith("CAIRE (C.9")}
    per_image = []
    for i, row in enumerate(doc["scores"]):
        per_image.append(pearson(row, [np.mean(mean[(i, c)]) for c in doc["labels"]]))
    got = []
    for country in doc["labels"]:
        mine = [r for r, o in zip(per_image, origins, strict=True) if o == country]
        mine = [r for r in mine if r is not None]
        assert float(table[country]["value"]) == pytest.approx(np.mean(mine), abs=1e-9)
        assert int(table[country]["n"]) == len(mine) > 0
        got.append(np.mean(mine))
    assert float(table["Avg"]["value"]) == pytest.approx(np.mean(got), abs=1e-9)
    # the other figure, under its own name: per rater country, over the 9 images, with
    # scipy's p-value
    other = {r["column"]: r for r in rows if r["row"] == "per rater country (over images)"}
    got = []
    for k, country in enumerate(doc["labels"]):
        x = [row[k] for row in doc["scores"]]
        y = [np.mean(mean[(i, country)]) for i in range(9)]
        want = stats.pearsonr(x, y)
        assert float(other[country]["value"]) == pytest.approx(want.statistic, abs=1e-9)
        assert float(other[country]["p"]) == pytest.approx(want.pvalue, rel=1e-9)
        assert int(other[country]["n"]) == 9
        got.append(want.statistic)
    assert float(other["Avg"]["value"]) == pytest.approx(np.mean(got), abs=1e-9)
    assert other["Iran"]["paper"] == ""  # the paper's figure only beside its own statistic
    assert float(table["Iran"]["paper"]) == 0.5  # kb-free: the paper's VLM baseline
    bad = cli("bench", "--recipe", str(recipe), "--out", str(out))
    assert bad.returncode == 2 and "--concepts FILE" in bad.stderr


def test_the_universal_set_is_a_task_that_goes_on_where_it_stopped(world, tmp_path):
    """refine caire universal: a cell per generator, concept and country, its results
    record and caire-scores.json; run again, it keeps every cell and calls nothing; a
    recipe of it runs from Python the same way."""
    from refine.harness.recipe_run import run_recipe
    from refine.harness.results import Results

    world.generate_for = {"wedding": RED, "breakfast": GREEN}
    concepts = tmp_path / "concepts.txt"
    concepts.write_text("wedding\nbreakfast\n")
    out = tmp_path / "u"
    args = ["caire", "universal", "--concepts", concepts, "--countries", "Iran,Turkey",
            "--generator", "gemini:gemini-3.1-flash-image", "--out", out]  # fmt: skip
    done = cli(*args)
    assert done.returncode == 0, done.stderr
    results = Results.read(out, "caire")
    assert len(results.cells) == 4 and results.config["countries"] == ["Iran", "Turkey"]
    for cell in results.cells:  # each image scored for every country, the world's scores
        colour = RED if cell["concept"] == "wedding" else GREEN
        (im,) = cell["images"]
        assert im["scores"] == {c: CULTURE[colour][c] for c in ("Iran", "Turkey")}
        assert im["caire"] == CULTURE[colour][cell["country"]]
    doc = json.loads((out / "caire-scores.json").read_text())
    assert doc["prompt_countries"] == ["Iran", "Turkey", "Iran", "Turkey"]
    assert "Iran: mean score" in done.stdout
    calls = len(world.log)
    again = cli(*args)
    assert again.returncode == 0 and len(world.log) == calls  # every cell kept
    assert "0 of 4 cell(s) to do" in again.stderr
    recipe = tmp_path / "caire.toml"
    recipe.write_text(CAIRE_RECIPE)
    made = run_recipe(recipe, tmp_path / "r", concepts=str(concepts), limit=1)
    assert len(made.results.cells) == 3  # one concept in the recipe's three countries
    assert made.table.rows[0].label == "mean 1-5 score"  # no ratings: the metric side
