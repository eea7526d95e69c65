"""refine rescore and refine compare on a stand-in bench: a new tau makes no model call
and every figure is recomputed by hand from the stored observations; a new observer
observes the stored images again and never generates; compare's differences, intervals
and agreement difference by hand."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from metrics.ahead import faithfulness, score_images
from metrics.stats import mean_interval, spearman
from refine.evaluate.references import find_references
from refine.harness.results import cell_mean
from refine.harness.tasks.bench.plan import BenchPlan, plan_prompts
from refine.harness.tasks.bench.task import run_bench
from refine.io.files import file_sha256
from tests.e2e.test_cli_run import cli
from tests.fakes.gemini_world import GREEN, RED

GENS = ["gemini:gemini-3.1-flash-image", "gemini:gemini-3-pro-image"]


@pytest.fixture
def bench(world, siglip_path, options, tmp_path):
    world.generate_by_model = {"gemini-3.1-flash-image": RED, "gemini-3-pro-image": GREEN}
    plan = BenchPlan(
        generators=GENS,
        prompts=plan_prompts(["Iran", "USA"], ["people eating food at home"]),
        images_per_prompt=3,
        backends={"image_embedder": f"siglip:{siglip_path}"},
        baselines=(),
    )
    out = tmp_path / "bench"
    run_bench(plan, out, backend_options=options)
    return out


def _cells(folder):
    return [json.loads(x) for x in (folder / "cells.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_a_new_tau_makes_no_model_call(bench, world, minilm, tmp_path):
    asked = len(world.log)
    new = tmp_path / "tau"
    done = cli("rescore", str(bench), "--out", str(new), "--tau", "0.3")
    assert done.returncode == 0, done.stderr
    assert len(world.log) == asked  # the stand-in heard nothing
    assert "0 model calls" in done.stdout
    doc = json.loads((new / "results.json").read_text())
    assert doc["config"]["tau"] == 0.3 and doc["config"]["tau_source"] == "given"
    assert doc["config"]["rescored_from"]["tau"] == 0.52
    old = {(c["generator"], c["country"]): c for c in _cells(bench)}
    for cell in _cells(new):
        src = old[(cell["generator"], cell["country"])]
        refs = find_references(cell["activity"], cell["country"]).descriptors
        observed = [im["observed"] for im in src["images"]]
        by_hand = score_images(refs, observed, minilm, tau=0.3)
        for im, was, s in zip(cell["images"], src["images"], by_hand, strict=True):
            assert im["align"] == pytest.approx(s.align, abs=1e-6)
            assert im["hal"] == pytest.approx(s.hal, abs=1e-6)
            assert im["exag"] == was["exag"] and im["quality"] == was["quality"]
            assert im["faith"] == pytest.approx(faithfulness(s.align, s.hal, was["exag"]), abs=1e-6)
            # the same image, in the new bench's own folder
            assert file_sha256(new / im["file"]) == file_sha256(bench / was["file"])
        note = cell["rescored"]
        assert note["model_calls"] == 0 and note["tau"] == [0.52, 0.3]
        assert note["observed_again"] is False and "observed" in note["kept"]
        assert {"align", "hal", "faith", "ddiv", "sdiv"} <= set(note["recomputed"])
        assert cell["vendi"] == src["vendi"]
        assert cell["qvendi"] == pytest.approx(
            np.mean([im["faith"] for im in cell["images"]]) * cell["vendi"], abs=1e-9
        )
    # compare: each metric's mean difference over the paired cells, and its interval
    cmp = cli("compare", str(bench), str(new), "--json")
    assert cmp.returncode == 0, cmp.stderr
    got = json.loads(cmp.stdout)
    assert got["cells"] == 4 and got["images"] == 12
    pairs = [(old[(c["generator"], c["country"])], c) for c in _cells(new)]
    diffs = [cell_mean(b, "align") - cell_mean(a, "align") for a, b in pairs]
    row = got["metrics"]["align"]
    assert row["difference"] == pytest.approx(np.mean(diffs), abs=1e-12)
    assert tuple(row["interval"]) == pytest.approx(mean_interval(diffs, 0), abs=1e-12)
    assert got["metrics"]["exag"]["changed"] == 0 and got["metrics"]["exag"]["difference"] == 0
    # with ratings: each bench's Spearman with the raters, and the difference
    rng = np.random.default_rng(3)
    lines = []
    for c in _cells(bench):
        for im in c["images"]:
            score = int(np.clip(round(1 + 4 * im["faith"] + rng.normal(scale=0.6)), 1, 5))
            lines.append({"image": str(bench / im["file"]), "rater": "a", "faithfulness": score})
    ratings = tmp_path / "ratings.jsonl"
    ratings.write_text("".join(json.dumps(x) + "\n" for x in lines))
    cmp = cli("compare", str(bench), str(new), "--ratings", str(ratings), "--json")
    assert cmp.returncode == 0, cmp.stderr
    agreed = json.loads(cmp.stdout)["agreement"]
    y = [x["faithfulness"] for x in lines]
    xa = [im["faith"] for c in _cells(bench) for im in c["images"]]
    new_by_file = {im["file"]: im["faith"] for c in _cells(new) for im in c["images"]}
    xb = [new_by_file[im["file"]] for c in _cells(bench) for im in c["images"]]
    faith = agreed["metrics"]["faith"]
    assert agreed["question"] == "faithfulness" and faith["n"] == 12
    assert faith["a"] == pytest.approx(spearman(xa, y)) and faith["b"] == pytest.approx(
        spearman(xb, y)
    )
    assert faith["difference"] == pytest.approx(spearman(xb, y) - spearman(xa, y))
    # the same documents as text: a line per metric, and the agreement with people
    text = cli("compare", str(bench), str(new), "--ratings", str(ratings)).stdout.splitlines()
    assert "4 cells paired on the same images (12 images)" in text
    align = next(line for line in text if line.startswith("align "))
    low, high = row["interval"]
    assert f"{row['difference']:+.3f}" in align and f"[{low:+.3f}, {high:+.3f}]" in align
    said = next(line for line in text if line.startswith("  faith "))
    assert said.split("B - A")[1].split()[0] == f"{faith['difference']:+.3f}"


@pytest.mark.slow
def test_a_new_observer_observes_again_and_never_generates(
    bench, world, gemini_env, tmp_path, monkeypatch
):
    world.log.clear()
    new = tmp_path / "obs"
    done = cli(
        "rescore", str(bench), "--out", str(new), "--backend", "observer=gemini:gemini-3.5-flash"
    )
    assert done.returncode == 0, done.stderr
    assert world.log.count("observe") == 12 and "generate" not in world.log
    assert "edit" not in world.log and "judge" not in world.log
    doc = json.loads((new / "results.json").read_text())
    assert doc["config"]["scorer"]["observer"] == "gemini:gemini-3.5-flash"
    # not the profile's observer: the AHEaD default, said
    assert doc["config"]["tau"] == 0.52 and "no value calibrated" in doc["config"]["tau_source"]
    cell = _cells(new)[0]
    assert cell["rescored"]["observed_again"] is True and cell["rescored"]["model_calls"] == 3
    assert cell["rescored"]["observer"] == ["gemini:gemini-3.8-flash", "gemini:gemini-3.5-flash"]
    # run again: every cell is kept
    world.log.clear()
    again = cli(
        "rescore", str(bench), "--out", str(new), "--backend", "observer=gemini:gemini-3.5-flash"
    )
    assert again.returncode == 0 and world.log == []
    # the same as batch jobs (--batch): the 12 observations in one job, where the stand-in's
    # 12 images are 2 distinct ones (each generator draws one colour): 2 requests, each
    # asked once; the same observations as the live rescore
    monkeypatch.setenv("REFINE_GEMINI_BATCH_POLL_S", "0.02")
    monkeypatch.setenv("REFINE_GEMINI_BATCH_GATHER_S", "0.2")
    sent, earlier = len(gemini_env.paths), set(gemini_env.batches)  # (a session's stand-in)
    batch = tmp_path / "obs-batch"
    done = cli("rescore", str(bench), "--out", str(batch), "--batch",
               "--backend", "observer=gemini:gemini-3.5-flash")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert all(p.endswith(":batchGenerateContent") for p in gemini_env.paths[sent:])
    (job,) = [job for name, job in gemini_env.batches.items() if name not in earlier]
    assert job["model"] == "gemini-3.5-flash" and len(job["requests"]) == 2

    def observed(folder):
        by_cell = {(c["generator"], c["country"]): c["images"] for c in _cells(folder)}
        return {key: [im["observed"] for im in images] for key, images in by_cell.items()}

    assert observed(batch) == observed(new)
    assert "batch" in json.loads((batch / "results.json").read_text())["config"]


@pytest.mark.slow
def test_rescore_refuses_what_it_cannot_do(bench, tmp_path):
    new = str(tmp_path / "x")
    bad = cli("rescore", str(bench), "--out", new)
    assert bad.returncode == 2 and "nothing to recompute" in bad.stderr
    for wrong in ("1.5",):  # refused before anything loads (it was after 10-22 s)
        bad = cli("rescore", str(bench), "--out", new, "--tau", wrong)
        assert bad.returncode == 2 and "--tau" in bad.stderr, bad.stderr
    bad = cli("rescore", str(tmp_path), "--out", new, "--tau", "0.4")
    assert bad.returncode == 2 and "holds no bench" in bad.stderr
    bad = cli("rescore", str(bench), "--out", new, "--backend", "generator=gemini:x")
    assert bad.returncode == 2 and "never the generators" in bad.stderr
    bad = cli("rescore", str(bench), "--out", str(bench), "--tau", "0.4")
    assert bad.returncode == 2 and "another folder than the source" in bad.stderr
    bad = cli("compare", str(bench), str(tmp_path))
    assert bad.returncode == 2 and "holds no bench" in bad.stderr


SETTINGS = """
name = "small-tau"
title = "tau at the photos' quartiles"
paper = "AHEaD"
source = "Table 5"
[table]
kind = "settings"
settings = "tau-quantiles"
caption = "tau ablation"
label = "tab:small-tau"
protocol = "ahead"
question = "gt_faith"
metrics = [{ metric = "faith", header = "FAITH" }]
[[table.paper]]
row = "0.52"
setting = "q3"
values = { spearman = 0.33, kendall = 0.24 }
"""


@pytest.mark.slow
def test_tau_at_the_photos_quartiles(bench, world, minilm, tmp_path, monkeypatch):
    from metrics.ahead import best_match_similarities
    from metrics.stats import kendall
    from tests.fakes.gemini_world import SEEN, png_bytes

    monkeypatch.setenv("REFINE_DATA_DIR", str(tmp_path / "data"))
    photos = tmp_path / "photos"
    photos.mkdir()
    for k, colour in enumerate((GREEN, GREEN, RED)):
        (photos / f"p{k}.png").write_bytes(png_bytes(colour, (64, 48)))
    for country in ("Iran", "USA"):
        added = cli(
            "photos", "add", "people eating food at home", str(photos), "--country", country
        )
        assert added.returncode == 0, added.stderr
    rng = np.random.default_rng(5)
    lines = []
    for c in _cells(bench):
        for im in c["images"]:
            for rater in ("a", "b"):
                score = int(np.clip(round(1 + 4 * im["align"] + rng.normal(scale=0.5)), 1, 5))
                lines.append({"image": str(bench / im["file"]), "rater": rater, "protocol": "ahead",
                              "answers": {"gt_faith": str(score)}, "activity": c["activity"],
                              "country": c["country"]})  # fmt: skip
    ratings = tmp_path / "r.jsonl"
    ratings.write_text("".join(json.dumps(x) + "\n" for x in lines))
    recipe = tmp_path / "tau.toml"
    recipe.write_text(SETTINGS)
    world.log.clear()
    out = tmp_path / "q"
    done = cli("rescore", str(bench), "--out", str(out), "--tau-quantiles",
               "--recipe", str(recipe), "--ratings", str(ratings))  # fmt: skip
    assert done.returncode == 0, done.stderr
    # the observer saw each photo once (the two prompts' sets hold the same bytes, green
    # twice and red: two looks); nothing was generated or judged
    assert world.log == ["observe"] * 2
    sims = []
    for country in ("Iran", "USA"):
        refs = find_references("people eating food at home", country).descriptors
        seen = [SEEN[GREEN], SEEN[GREEN], SEEN[RED]]
        sims += best_match_similarities(refs, seen, minilm)
    want = {
        k: float(np.quantile(sims, q)) for k, q in (("q1", 0.25), ("median", 0.5), ("q3", 0.75))
    }
    doc = json.loads((out / "tau-quantiles.json").read_text())
    assert doc["photos"] == 6 and doc["similarities"] == len(sims)
    assert (doc["observed_now"], doc["observed_before"]) == (2, 4)
    for name, tau in want.items():
        assert doc["tau"][name] == pytest.approx(tau, abs=1e-5)
        config = json.loads((out / f"tau-{name}" / "results.json").read_text())["config"]
        assert config["tau"] == pytest.approx(tau, abs=1e-5)
        assert config["tau_source"].startswith(f"{name} (")
    rows = {
        (r["row"].split(" ")[0], r["column"]): r
        for r in csv.DictReader((out / "table-small-tau.csv").open())
    }
    y_by = {}
    for x in lines:
        y_by.setdefault(x["image"], []).append(int(x["answers"]["gt_faith"]))
    for name, label in (("q1", "Q1"), ("median", "median"), ("q3", "Q3")):
        cells = _cells(out / f"tau-{name}")
        xs = [im["faith"] for c in cells for im in c["images"]]
        ys = [np.mean(y_by[str(bench / im["file"])]) for c in cells for im in c["images"]]
        assert float(rows[(label, "Spearman")]["value"]) == pytest.approx(
            spearman(xs, ys), abs=1e-9
        )
        assert float(rows[(label, "Kendall")]["value"]) == pytest.approx(kendall(xs, ys), abs=1e-9)
    # the bench's FAITH was scored by exag:mllm (no photos when it was drawn); Tab. 5's by
    # exag:ita: its figure is set apart, with no difference, and the table says why
    q3 = rows[("Q3", "Spearman")]
    assert q3["difference"] == "" and q3["way"] == "exag:mllm", q3
    assert "here: EXAG variant exag:mllm" in q3["paper_differs"]
    assert "here: EXAG variant exag:mllm" in (out / "table-small-tau.html").read_text()
    # run again: the photos' observations are kept (photo-observations.json), none asked
    world.log.clear()
    again = cli("rescore", str(bench), "--out", str(out), "--tau-quantiles")
    assert again.returncode == 0, again.stderr
    assert world.log == []
    doc = json.loads((out / "tau-quantiles.json").read_text())
    assert (doc["observed_now"], doc["observed_before"]) == (0, 6)
    bad = cli("rescore", str(bench), "--out", str(out), "--tau-quantiles", "--tau", "0.4")
    assert bad.returncode == 2 and "leave out --tau" in bad.stderr


@pytest.mark.slow
def test_exag_read_again_by_another_variant_on_the_same_images(bench, world, tmp_path, monkeypatch):
    """AHEaD Tab. 9 on one set of images: a bench scored by EXAG(MLLM) (no photos) is
    rescored by EXAG(ITA) once photos exist, each candidate's VQAScore on the image against
    its mean on the photos (the world's P("Yes") per colour, by Eq. 3-4's formula), FAITH
    following; read again by MLLM it is the bench's EXAG again. Without photos, --exag ita
    is one line, and so is a variant that does not exist."""
    import math

    from metrics.ahead import exaggeration, ita_baseline
    from tests.fakes.gemini_world import YES_LOGPROB, png_bytes

    monkeypatch.setenv("REFINE_DATA_DIR", str(tmp_path / "data"))
    act = "people eating food at home"
    none = cli("rescore", str(bench), "--out", str(tmp_path / "n"), "--exag", "ita")
    assert none.returncode == 2 and "--exag ita reads the activity's real photos" in none.stderr
    wrong = cli("rescore", str(bench), "--out", str(tmp_path / "w"), "--exag", "clip")
    assert wrong.returncode == 2 and "--exag: ita or mllm, not 'clip'" in wrong.stderr
    photos = tmp_path / "photos"
    photos.mkdir()
    for k, colour in enumerate((GREEN, RED, RED)):
        (photos / f"p{k}.png").write_bytes(png_bytes(colour, (64, 48)))
    for country in ("Iran", "USA"):
        assert cli("photos", "add", act, str(photos), "--country", country).returncode == 0
    source = _cells(bench)
    assert {im["exag_variant"] for c in source for im in c["images"]} == {"exag:mllm"}
    out = tmp_path / "ita"
    world.log.clear()
    done = cli("rescore", str(bench), "--out", str(out), "--exag", "ita")
    assert done.returncode == 0, done.stderr
    assert "observe" not in world.log and "generate" not in world.log
    p = {c: math.exp(YES_LOGPROB[c]) for c in (RED, GREEN)}
    colour = {"gemini:gemini-3.1-flash-image": RED, "gemini:gemini-3-pro-image": GREEN}
    for old, new in zip(source, _cells(out), strict=True):
        cands = find_references(act, new["country"]).stereotypes
        base = ita_baseline([[p[GREEN]] * len(cands), [p[RED]] * len(cands), [p[RED]] * len(cands)])
        want = exaggeration([[p[colour[new["generator"]]]] * len(cands)], base, cands).value
        for was, im in zip(old["images"], new["images"], strict=True):
            assert im["exag_variant"] == "exag:ita" and im["exag"] == pytest.approx(want, abs=1e-6)
            assert im["align"] == pytest.approx(was["align"], abs=1e-9)
            assert im["faith"] == pytest.approx(faithfulness(im["align"], im["hal"], im["exag"]))
        assert "exag" in new["rescored"]["recomputed"] and "exag" not in new["rescored"]["kept"]
        assert new["rescored"]["exag_variant"] == [["exag:mllm"], "exag:ita"]
    back = tmp_path / "mllm"
    assert cli("rescore", str(out), "--out", str(back), "--exag", "mllm").returncode == 0
    for old, new in zip(source, _cells(back), strict=True):
        for was, im in zip(old["images"], new["images"], strict=True):
            assert im["exag_variant"] == "exag:mllm"
            assert im["exag"] == pytest.approx(was["exag"], abs=1e-9)
            assert im["faith"] == pytest.approx(was["faith"], abs=1e-9)


@pytest.mark.slow
def test_clip_flant5_as_the_new_judge_reads_exag_ita_and_says_what_it_cannot(
    world, siglip_path, options, tmp_path, monkeypatch
):
    """AHEaD Tab. 9 as the paper ran it: the bench's images rescored with CLIP-FlanT5 as
    the judge (a tiny checkpoint of its layout) and --exag ita; the MLLM-as-a-judge rows,
    which it cannot read (no ratings), are said missing by name, never kept as the old
    judge's nor refused."""
    from tests.fakes.gemini_world import png_bytes
    from tests.fakes.tiny_models import build_tiny_clip_t5

    monkeypatch.setenv("REFINE_DATA_DIR", str(tmp_path / "data"))
    act = "people eating food at home"
    plan = BenchPlan(
        generators=GENS[:1],
        prompts=plan_prompts(["Iran"], [act]),
        images_per_prompt=2,
        backends={"image_embedder": f"siglip:{siglip_path}"},
        baselines=("judge_align",),
    )
    bench = tmp_path / "bench"
    run_bench(plan, bench, backend_options=options)
    photos = tmp_path / "photos"
    photos.mkdir()
    for k, colour in enumerate((GREEN, RED)):
        (photos / f"p{k}.png").write_bytes(png_bytes(colour, (64, 48)))
    assert cli("photos", "add", act, str(photos), "--country", "Iran").returncode == 0
    judge = f"clip-t5:{build_tiny_clip_t5(tmp_path / 'm')}"
    out = tmp_path / "t5"
    done = cli("rescore", str(bench), "--out", str(out), "--exag", "ita",
               "--backend", f"judge={judge}")  # fmt: skip
    assert done.returncode == 0, done.stderr
    (cell,) = _cells(out)
    for im in cell["images"]:
        assert im["exag_variant"] == "exag:ita" and 0 <= im["exag"] <= 1
        assert "judge_align" not in im
        assert "gives no rate_prefixed ratings" in im["missing"]["judge_align"]
    assert cell["rescored"]["unreadable"] == {"judge_align": im["missing"]["judge_align"]}
    assert "judge_align" not in cell["rescored"]["kept"]
