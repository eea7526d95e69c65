"""refine bench: two generators (stand-in Gemini image models drawing different scenes)
over 2 countries x 2 activities x 2 seeds, every number recomputed by hand from what the
bench stored; a killed bench goes on; the leaderboard holds the same values."""

from __future__ import annotations

import csv
import json
import math
import re

import numpy as np
import pytest
from PIL import Image

from metrics.ahead import faithfulness, score_images
from refine.evaluate.references import find_references
from refine.harness.cells import latest
from refine.harness.engine import EngineOptions
from refine.harness.tasks.bench.cells import BenchStore
from refine.harness.tasks.bench.plan import BenchPlan, plan_prompts
from refine.harness.tasks.bench.task import run_bench
from refine.present.report.bench import write_bench_page
from tests.e2e.test_cli_run import cli
from tests.fakes.gemini_world import GREEN, RED

GENS = ["gemini:gemini-3.1-flash-image", "gemini:gemini-3-pro-image"]
ACTS = ["people eating food at home", "wedding celebration"]


@pytest.fixture
def bench(world, siglip_path, options, tmp_path):
    world.generate_by_model = {"gemini-3.1-flash-image": RED, "gemini-3-pro-image": GREEN}
    plan = BenchPlan(
        generators=GENS,
        prompts=plan_prompts(["Iran", "India"], ACTS),
        images_per_prompt=2,
        seed=42,
        profile="gemini",
        backends={"image_embedder": f"siglip:{siglip_path}"},
    )
    out = tmp_path / "bench"
    summary = run_bench(plan, out, backend_options=options).summary
    return plan, out, summary


def by_hand_interval(values, seed=42, reps=1000):
    rng = np.random.default_rng(seed)
    x = np.asarray(values, dtype=float)
    idx = rng.integers(0, x.size, size=(reps, x.size))
    means = x[idx].mean(axis=1)
    return tuple(np.percentile(means, [2.5, 97.5]))


def entropy(counts):
    total = sum(counts)
    if len(counts) < 2 or total == 0:
        return 0.0
    return -sum(c / total * math.log(c / total) for c in counts if c) / math.log(len(counts))


@pytest.mark.slow
def test_every_number_recomputed_by_hand(bench, minilm, world):
    plan, out, summary = bench
    cells = BenchStore(out).records()
    assert len(cells) == 8 and plan.prompts == [
        ("people eating food at home", "Iran"),
        ("wedding celebration", "Iran"),
        ("people eating food at home", "India"),
        ("wedding celebration", "India"),
    ]
    per_gen = {g: [] for g in GENS}
    for cell in cells:
        refs = find_references(cell["activity"], cell["country"]).descriptors
        aligned_counts = {d: [0] * len(v) for d, v in refs.items() if v}
        singles = []
        for im in cell["images"]:
            (s,) = score_images(refs, [im["observed"]], minilm, tau=0.52)
            assert im["align"] == pytest.approx(s.align, abs=1e-6)
            assert im["hal"] == pytest.approx(s.hal, abs=1e-6)
            assert im["faith"] == pytest.approx(faithfulness(s.align, s.hal, im["exag"]), abs=1e-9)
            assert (out / im["file"]).is_file()
            singles.append(s.align)
            for d in aligned_counts:
                for k, ok in enumerate(s.aligned_mask(d)):
                    aligned_counts[d][k] += int(ok)
        ddiv = sum(entropy(c) for c in aligned_counts.values()) / len(aligned_counts)
        assert cell["ddiv"] == pytest.approx(ddiv, abs=1e-6)
        merged = {
            d: sorted({p for im in cell["images"] for p in im["observed"].get(d, [])}) for d in refs
        }
        (pooled,) = score_images(refs, [merged], minilm, tau=0.52)
        assert cell["pooled_align"] == pytest.approx(pooled.align, abs=1e-6)
        assert cell["sdiv"] == pytest.approx(pooled.align - sum(singles) / len(singles), abs=1e-6)
        # Vendi: exp of the entropy of the eigenvalues of the cosine kernel over n
        e = np.asarray(cell["embeddings"], dtype=float)
        e /= np.linalg.norm(e, axis=1, keepdims=True)
        lam = np.linalg.eigvalsh(e @ e.T / len(e))
        lam = lam[lam > 1e-12] / lam[lam > 1e-12].sum()
        assert cell["vendi"] == pytest.approx(math.exp(-(lam * np.log(lam)).sum()), abs=1e-4)
        faiths = [im["faith"] for im in cell["images"]]
        assert cell["qvendi"] == pytest.approx(np.mean(faiths) * cell["vendi"], abs=1e-9)
        per_gen[cell["generator"]].append(float(np.mean(faiths)))
    for g in GENS:
        row = summary["generators"][g]
        assert row["prompts"] == 4 and row["images"] == 8
        assert row["faith"]["mean"] == pytest.approx(np.mean(per_gen[g]), abs=1e-9)
        assert tuple(row["faith"]["interval"]) == pytest.approx(by_hand_interval(per_gen[g]))
    diffs = [b - a for a, b in zip(per_gen[GENS[0]], per_gen[GENS[1]], strict=True)]
    (paired,) = summary["paired"]
    assert paired["mean_difference"] == pytest.approx(np.mean(diffs), abs=1e-9)
    assert paired["share_improved"] == sum(d > 0 for d in diffs) / 4
    assert tuple(paired["interval"]) == pytest.approx(by_hand_interval(diffs))
    # the green scenes score better than the red ones (the fake world's observations)
    assert paired["mean_difference"] > 0
    # the tidy table: one row per image
    rows = list(csv.DictReader((out / "rows.csv").open()))
    assert len(rows) == 16 and {r["generator"] for r in rows} == set(GENS)
    assert float(rows[0]["faith"]) == pytest.approx(cells[0]["images"][0]["faith"])
    # quality per image beside FAITH, and per generator with its interval
    assert float(rows[0]["quality"]) == pytest.approx(cells[0]["images"][0]["quality"])
    assert rows[0]["clip_iqa"] == ""  # an API judge: no CLIP-IQA reading
    for g in GENS:
        mine = [c for c in cells if c["generator"] == g]
        q = [float(np.mean([im["quality"] for im in c["images"]])) for c in mine]
        stat = summary["generators"][g]["quality"]
        assert stat["mean"] == pytest.approx(np.mean(q), abs=1e-9)
        assert tuple(stat["interval"]) == pytest.approx(by_hand_interval(q))
        assert "clip_iqa" not in summary["generators"][g]
    # the leaderboard holds the same values
    html = write_bench_page(out).read_text()
    for g in GENS:
        found = re.search(
            rf'data-generator="{re.escape(g)}" data-metric="faith" data-mean="([0-9.]+)"', html
        )
        assert float(found.group(1)) == pytest.approx(summary["generators"][g]["faith"]["mean"])
    assert '<th data-metric="quality">quality</th>' in html
    assert html.count("<figure>") == 4  # best and worst per country
    assert 'class="chart-figure bars"' in html and 'class="chart-figure scatter"' in html


@pytest.mark.slow
def test_a_killed_bench_goes_on_and_a_new_generator_reuses_the_rest(
    bench, world, options, siglip_path
):
    plan, out, summary = bench
    store = BenchStore(out)
    lines = store.cells_path.read_text().splitlines()
    store.cells_path.write_text("\n".join(lines[:-1]) + "\n" + lines[-1][:40])  # cut mid-line
    before = world.log.count("generate")
    again = run_bench(plan, out, backend_options=options)
    assert world.log.count("generate") - before == 2  # only the lost cell, two seeds
    assert again.summary["generators"] == summary["generators"]
    # a third generator: only its cells are made
    world.generate_by_model["gemini-2.5-flash-image"] = GREEN
    plan.generators.append("gemini:gemini-2.5-flash-image")
    before = world.log.count("generate")
    third = run_bench(plan, out, backend_options=options)
    assert world.log.count("generate") - before == 8
    assert third.summary["generators"][GENS[0]] == summary["generators"][GENS[0]]
    assert len(third.summary["paired"]) == 2
    # scored another way (another tau): nothing is reused, nothing is mixed
    plan.tau = 0.6
    before = world.log.count("generate")
    other = run_bench(plan, out, backend_options=options)
    assert world.log.count("generate") - before == 24 and other.config["tau"] == 0.6
    assert all(row["prompts"] == 4 for row in other.summary["generators"].values())


@pytest.mark.slow
def test_bench_from_the_command_line(world, gemini_env, siglip_path, tmp_path):
    world.generate_by_model = {"gemini-3.1-flash-image": RED, "gemini-3-pro-image": GREEN}
    served = gemini_env.served_as
    gemini_env.served_as = {"gemini-3-pro-image": "gemini-3-pro-image-preview-11-2026"}
    args = [
        "bench",
        "--generator",
        GENS[0],
        "--generator",
        GENS[1],
        "--countries",
        "Iran",
        "--activity",
        ACTS[0],
        "--images-per-prompt",
        "2",
        "--out",
        str(tmp_path / "b"),
        "--backend",
        f"image_embedder=siglip:{siglip_path}",
    ]
    try:
        done = cli(*args)
    finally:
        gemini_env.served_as = served
    assert done.returncode == 0, done.stderr
    assert "gemini:gemini-3-pro-image - gemini:gemini-3.1-flash-image: FAITH +" in done.stdout
    # each cell's line says the time left, until the last
    cells = [x for x in done.stderr.splitlines() if x.lstrip().startswith("[")]
    assert len(cells) == 2 and cells[0].lstrip().startswith("[1/2] ")
    assert cells[0].rstrip().endswith(" left") and " · about " in cells[0]
    assert not cells[1].rstrip().endswith(" left")
    doc = json.loads((tmp_path / "b" / "results.json").read_text())
    assert doc["task"] == "bench" and doc["schema"] == 2
    # each model with the weights it resolved to: the API's modelVersion, a local
    # folder's none
    # (only this bench's answers: the process's client served earlier commands too)
    assert doc["models"]["gemini:gemini-3-pro-image"] == "gemini-3-pro-image-preview-11-2026"
    assert doc["models"][f"siglip:{siglip_path}"] == "no_revision_available"
    assert doc["config"]["prompts"] == [[ACTS[0], "Iran"]] and doc["config"]["tau"] == 0.52
    assert [c["generator"] for c in doc["cells"]] == GENS[:2]  # the plan's order
    assert "embeddings" not in doc["cells"][0]  # kept in cells.jsonl only
    # CLIPScore, the default baseline, needs a CLIP: with a SigLIP the bench says why not
    assert doc["config"]["baselines"] == ["clipscore"]
    why = doc["summary"]["missing"]["clipscore"]
    assert why.startswith("CLIPScore needs a CLIP image embedder") and "siglip:" in why
    assert f"clipscore: not computed: {why}" in done.stdout
    page = (tmp_path / "b" / "bench.html").read_text()
    assert "Baselines asked for and not computed" in page and "CLIPScore needs a CLIP" in page
    # a bench folder another process holds is refused in one line, nothing sent: two
    # processes on one folder would both make, and pay for, the same cells
    import socket
    import subprocess
    import sys

    from refine.io.store import RunStore

    asked = len(gemini_env.paths)
    hold = "import sys, time\nfrom refine.io.store import held\nwith held(sys.argv[1]):\n"
    hold += "    print('held', flush=True)\n    time.sleep(120)\n"
    other = subprocess.Popen(
        [sys.executable, "-c", hold, str(tmp_path / "b")], stdout=subprocess.PIPE, text=True
    )
    try:
        assert other.stdout.readline().strip() == "held"
        again = cli(*args)
    finally:
        other.kill()
        other.wait()
        other.stdout.close()
    them = f"{other.pid}@{socket.gethostname()}"
    assert again.returncode == 2 and again.stderr == (
        f"error: {tmp_path / 'b'} is in use by process {them}; wait for it to end, or stop it\n"
    ), again.stderr
    assert len(gemini_env.paths) == asked and RunStore(tmp_path / "b").holder() is None
    bad = cli("bench", "--countries", "Atlantis", "--out", str(tmp_path / "c"))
    assert bad.returncode == 2 and "no country 'Atlantis'" in bad.stderr
    bad = cli("bench", "--countries", "France", "--out", str(tmp_path / "c"))
    assert bad.returncode == 2 and "no prompts" in bad.stderr


@pytest.mark.slow
def test_workers_make_the_same_bench(world, siglip_path, options, tmp_path):
    """Several prompts at a time (API models): the same results record as one at a time."""
    world.generate_by_model = {"gemini-3.1-flash-image": RED, "gemini-3-pro-image": GREEN}
    plan = BenchPlan(
        generators=GENS,
        prompts=plan_prompts(["Iran", "India"], ACTS),
        images_per_prompt=2,
        backends={"image_embedder": f"siglip:{siglip_path}"},
    )
    docs = {}
    for workers in (1, 4):
        world.busy[:] = [0, 0]
        # every answer takes a while, so that requests overlap where they can: 50 ms with 4
        # workers, where several prompts must be seen in flight together; 10 ms with one,
        # where a second prompt's requests would still be seen (at 50 ms its 48-odd
        # requests, two at a time, were a third of this test's time)
        world.delay_s = 0.05 if workers > 1 else 0.01
        # with 4 workers the world answers the first image request and holds the others
        # until 3 are held together: a prompt asks for its 2 images at once, so 3 held
        # means that several prompts were in flight together (a state, not a time)
        world.hold_after_first = ("generate", 4) if workers > 1 else None
        run_bench(
            plan,
            tmp_path / f"w{workers}",
            backend_options=options,
            engine=EngineOptions(workers=workers),
        )
        doc = json.loads((tmp_path / f"w{workers}" / "results.json").read_text())
        docs[workers] = ((doc["config"], doc["summary"]), world.busy[1])  # cells: timings
    assert docs[1][0] == docs[4][0]
    # one prompt at a time has at most its 2 images' requests in flight, each image's
    # observation, EXAG and two quality questions together; with 4 workers, several
    # prompts' image requests were held together
    assert docs[1][1] <= 8 and world.held_peak == 3


@pytest.mark.slow
def test_categories_select_prompts_and_get_their_own_aggregates(bench):
    plan, out, summary = bench
    cells = BenchStore(out).records()
    assert {c["category"] for c in cells} == {"eating", "wedding"}
    for g in GENS:
        for cat in ("eating", "wedding"):
            mine = [
                float(np.mean([im["faith"] for im in c["images"]]))
                for c in cells
                if c["generator"] == g and c["category"] == cat
            ]
            stat = summary["categories"][g][cat]
            assert stat["prompts"] == 2
            assert stat["faith"]["mean"] == pytest.approx(np.mean(mine), abs=1e-9)
    rows = list(csv.DictReader((out / "rows.csv").open()))
    assert {r["category"] for r in rows} == {"eating", "wedding"}
    assert "FAITH per activity category" in write_bench_page(out).read_text()
    # selection by category
    from refine.evaluate.references import load_pack

    acts = load_pack().countries["Iran"]["activities"]
    eating = plan_prompts(["Iran"], categories=["Eating"])
    assert eating == [
        (a, "Iran") for a, e in acts.items() if e["category"] == "eating" and e.get("descriptors")
    ]
    assert len(eating) == 3 and ("wedding celebration", "Iran") not in eating
    with pytest.raises(ValueError, match="no activity category 'cooking'.*eating"):
        plan_prompts(["Iran"], categories=["cooking"])


def test_sample_draws_per_country_and_a_misspelled_country_gets_the_nearest():
    """--sample draws per country (before, 3 of all the prompts could all be Iran's), the
    same draw for the same seed; a misspelled country is answered with the nearest one."""
    from refine.evaluate.references import load_pack

    drawn = plan_prompts(["Iran", "India"], sample=2, seed=5)
    assert [c for _, c in drawn] == ["India", "India", "Iran", "Iran"], drawn
    assert drawn == plan_prompts(["Iran", "India"], sample=2, seed=5)
    india = {
        a for a, e in load_pack().countries["India"]["activities"].items() if e.get("descriptors")
    }
    assert {a for a, c in drawn if c == "India"} <= india
    # a misspelled country: the nearest one the pack has
    with pytest.raises(ValueError, match="no country 'Nigreia'; did you mean 'Nigeria'\\?"):
        plan_prompts(["Nigreia"])


def test_generator_specs_name_their_problem():
    from refine.harness.generators import parse_generator

    spec = parse_generator("diffusers:org/sd+lora=adapters/a@0.5+lora=hub/b")
    assert spec.name == "diffusers:org/sd"
    assert spec.loras == (("adapters/a", 0.5), ("hub/b", 1.0))
    with pytest.raises(ValueError, match="diffusers: generators only"):
        parse_generator("gemini:gemini-3-pro-image+lora=a")
    with pytest.raises(ValueError, match="scale 'x' is not a number"):
        parse_generator("diffusers:m+lora=a@x")
    with pytest.raises(ValueError, match="between 0 and 4"):
        parse_generator("diffusers:m+lora=a@9")
    with pytest.raises(ValueError, match="needs a path"):
        parse_generator("diffusers:m+lora=@1")


@pytest.mark.slow
def test_a_base_model_against_itself_with_a_lora(world, siglip_path, options, tmp_path):
    """A tiny random SD pipeline with and without a LoRA adapter: two generators of one
    bench, the adapter's images differ from the base's, the same seeds otherwise."""
    from PIL import Image

    from tests.fakes.tiny_models import build_tiny_sd, save_random_lora

    sd = build_tiny_sd(tmp_path / "sd")
    lora = save_random_lora(sd, tmp_path / "lora")
    base = f"diffusers:{sd}"
    tuned = f"{base}+lora={lora}@1.0"
    plan = BenchPlan(
        generators=[base, tuned],
        prompts=plan_prompts(["Iran"], [ACTS[0]]),
        images_per_prompt=2,
        backends={"image_embedder": f"siglip:{siglip_path}"},
    )
    opts = {**options, "generator": {"device": "cpu"}}
    summary = run_bench(plan, tmp_path / "b", backend_options=opts).summary
    cells = {c["generator"]: c for c in BenchStore(tmp_path / "b").records()}
    assert set(cells) == {base, tuned} and set(summary["generators"]) == {base, tuned}
    a, b = (
        [
            np.asarray(Image.open(tmp_path / "b" / im["file"]), dtype=int)
            for im in cells[g]["images"]
        ]
        for g in (base, tuned)
    )
    assert cells[base]["images"][0]["file"] != cells[tuned]["images"][0]["file"]
    assert np.abs(a[0] - b[0]).max() > 5  # the adapter changes what is drawn
    assert summary["paired"][0]["other"] == tuned and summary["paired"][0]["prompts"] == 1


@pytest.mark.slow
def test_a_recipes_generator_settings_reach_the_pipeline_and_are_kept_with_its_cells(
    world, siglip_path, options, tmp_path
):
    """A recipe's steps, size and negative prompt (CulturalFrames A.1.4, CUBE Tab. 13)
    are the pipeline call's, recorded with the cell; other settings in the same folder
    draw the cell again. (A setting a pipeline does not take, and one given to an API
    generator, are refused: tests/integration/test_diffusers.py, tests/unit/test_recipes.py.)"""
    from PIL import Image

    from tests.fakes.tiny_models import build_tiny_sd

    sd = f"diffusers:{build_tiny_sd(tmp_path / 'sd')}"
    settings = {"steps": 3, "width": 40, "height": 48, "negative_prompt": "blurry"}
    plan = BenchPlan(
        generators=[sd],
        prompts=plan_prompts(["Iran"], [ACTS[0]]),
        images_per_prompt=1,
        backends={"image_embedder": f"siglip:{siglip_path}"},
        generator_settings={sd: settings},
    )
    opts = {**options, "generator": {"device": "cpu"}}
    results = run_bench(plan, tmp_path / "b", backend_options=opts)
    (cell,) = BenchStore(tmp_path / "b").records()
    with Image.open(tmp_path / "b" / cell["images"][0]["file"]) as im:
        assert im.size == (40, 48)
    assert results.config["generator_settings"] == {sd: settings}
    assert cell["generator_settings"] == settings
    # other settings in the same folder: the cell is drawn again, never reused
    wider = {**settings, "width": 56}
    again = BenchPlan(**{**plan.__dict__, "generator_settings": {sd: wider}})
    (cell,) = run_bench(again, tmp_path / "b", backend_options=opts).cells
    with Image.open(tmp_path / "b" / cell["images"][0]["file"]) as im:
        assert im.size == (56, 48) and cell["generator_settings"] == wider


@pytest.mark.slow
def test_expectations_in_a_bench(world, siglip_path, options, tmp_path):
    """--expectations: each prompt's expectations listed once (cached) and checked on every
    image; the met shares per image by hand, their means in results.json, rows.csv and the
    leaderboard; cells made without them are not reused."""
    from tests.fakes.gemini_world import EXPECT_P

    world.generate_by_model = {"gemini-3.1-flash-image": RED}
    plan = BenchPlan(
        generators=[GENS[0]],
        prompts=plan_prompts(["Iran"], ACTS),
        images_per_prompt=2,
        backends={"image_embedder": f"siglip:{siglip_path}"},
    )
    out = tmp_path / "b"
    plain = run_bench(plan, out, backend_options=options)
    assert "explicit_met" not in plain.summary["generators"][GENS[0]]
    plan.expectations = True
    before = world.log.count("generate")
    summary = run_bench(plan, out, backend_options=options).summary
    assert world.log.count("generate") - before == 4  # nothing reused from the plain cells
    red = EXPECT_P[RED]
    explicit = (red["A family"] > 0.5) / 2 + (red["celebrating Nowruz"] > 0.5) / 2
    implicit = sum(red[k] > 0.5 for k in ("haft-sin", "goldfish", "spring clothes")) / 3
    for cell in (c for c in BenchStore(out).records() if c["expectations"]):
        for im in cell["images"]:
            assert im["explicit_met"] == explicit and im["implicit_met"] == pytest.approx(implicit)
            assert len(im["expectations"]) == 5
    row = summary["generators"][GENS[0]]
    assert row["explicit_met"]["mean"] == explicit
    assert row["implicit_met"]["mean"] == pytest.approx(implicit)
    rows = list(csv.DictReader((out / "rows.csv").open()))
    assert {float(r["explicit_met"]) for r in rows} == {explicit}
    html = write_bench_page(out).read_text()
    assert 'data-metric="explicit_met" data-mean="0.500000"' in html


def test_a_profile_names_its_generator_with_its_options(tmp_path):
    from refine.harness.generators import parse_generator
    from refine.profiles import load_profile

    spec = parse_generator("small-gpu")
    small = load_profile("small-gpu")
    assert spec.name == small.backend("generator") and spec.label == "small-gpu"
    assert dict(spec.options) == small.options.get("generator", {})
    with pytest.raises(ValueError, match="neither a backend name .* nor a profile"):
        parse_generator("no-such-profile")


@pytest.mark.slow
def test_baselines_in_a_bench(world, siglip_path, options, tmp_path, monkeypatch):
    """--baselines clipscore,vqascore,tifa: TIFA's questions asked once per prompt and
    answered per image, kept with the cell's images; CLIPScore on the bench's CLIP; each
    baseline a column of rows.csv and a mean with an interval in the summary; agree ranks
    them by their agreement with people."""
    from metrics.baselines import clipscore
    from refine.backends import create
    from refine.human.agree import agreement
    from refine.human.ratings import load_ratings
    from refine.human.stored import stored_metrics
    from tests.fakes.gemini_world import TIFA_QUESTIONS, YES_LOGPROB, tifa_p
    from tests.fakes.tiny_models import build_tiny_hf_clip

    monkeypatch.setenv("REFINE_CACHE_DIR", str(tmp_path / "cache"))  # questions asked once
    clip = build_tiny_hf_clip(tmp_path / "clip", seed=1)
    world.generate_by_model = {"gemini-3.1-flash-image": RED, "gemini-3-pro-image": GREEN}
    plan = BenchPlan(
        generators=GENS[:2],  # a copy: a plan's list is its own
        prompts=plan_prompts(["Iran"], ACTS),
        images_per_prompt=2,
        backends={"image_embedder": f"hfclip:{clip}"},
        baselines=("clipscore", "vqascore", "tifa"),
    )
    out = tmp_path / "b"
    # a bench made without them first: asked for later, the baselines are read from the
    # kept images, with nothing generated, observed or judged for FAITH again
    first = run_bench(plan.model_copy(update={"baselines": ()}), out, backend_options=options)
    assert not world.tifa_asked
    made, told = len(world.log), []
    summary = run_bench(plan, out, backend_options=options, on_event=told.append).summary
    assert "4 of 4 cell(s) to do (4 of them kept, scored again from their images)" in told[0]
    # the language model's questions (one a prompt), and one judge call an image for
    # VQAScore and one a question and image for TIFA: no observation, generation or rating
    asked = world.log[made:]
    assert sorted(set(asked)) == ["judge", "observe"], asked
    assert asked.count("observe") == len(ACTS)
    assert asked.count("judge") == 2 * len(ACTS) * 2 * (1 + len(TIFA_QUESTIONS))
    for g in GENS[:2]:
        assert summary["generators"][g]["faith"] == first.summary["generators"][g]["faith"]
    assert sorted(world.tifa_asked) == sorted(
        f"A photorealistic photo of {a} in Iran." for a in ACTS
    )
    assert len(world.tifa_answered) == 2 * len(ACTS) * 2 * len(TIFA_QUESTIONS)
    colours = {GENS[0]: RED, GENS[1]: GREEN}
    embedder = create("image_embedder", f"hfclip:{clip}", shared=False, device="cpu")
    cells = latest(BenchStore(out).cells()).values()
    assert len(cells) == 4
    for cell in (c.record() for c in cells):
        assert cell["baselines"] == ["clipscore", "vqascore", "tifa"]
        p = [tifa_p(colours[cell["generator"]], q["question"]) for q in TIFA_QUESTIONS]
        for im in cell["images"]:
            assert im["tifa"] == sum(x > 0.5 for x in p) / len(p)
            # Soft-TIFA reads the same answers: no call of its own, so it comes with TIFA
            assert im["soft_tifa"] == pytest.approx(sum(p) / len(p), abs=1e-9)
            assert [a["p_yes"] for a in im["tifa_answers"]] == pytest.approx(p, abs=1e-9)
            with Image.open(out / im["file"]) as picture:
                e = embedder.encode_images([picture.convert("RGB")])
            cos = float((e * embedder.encode_texts([cell["prompt"]])).sum())
            assert im["clipscore"] == pytest.approx(clipscore(cos), abs=1e-5)
    rows = list(csv.DictReader((out / "rows.csv").open()))
    for g, colour in colours.items():
        mine = [r for r in rows if r["generator"] == g]
        yes = math.exp(YES_LOGPROB[colour])
        assert {round(float(r["vqascore"]), 9) for r in mine} == {round(yes, 9)}
        row = summary["generators"][g]
        for name in ("clipscore", "vqascore", "tifa"):
            lo, hi = row[name]["interval"]
            assert lo <= row[name]["mean"] <= hi
    # people rate the green images 5 and the red ones 1: TIFA (higher for green) agrees,
    # VQAScore (higher for red, in this world) disagrees
    ratings = tmp_path / "ratings.csv"
    with open(ratings, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["image", "rater", "faithfulness"])
        for r in rows:
            for rater in ("a", "b"):
                w.writerow(
                    [str(out / r["file"]), rater, 5 if colours[r["generator"]] == GREEN else 1]
                )
    result = agreement(
        load_ratings(ratings), stored_metrics([out]), ["clipscore", "vqascore", "tifa"]
    )
    ranked = result.to_dict()["ranking"]["faithfulness"]
    order = [e["metric"] for e in ranked]
    assert order.index("tifa") < order.index("vqascore")
    top = ranked[order.index("tifa")]
    assert top["agreement"] == pytest.approx(1.0) and top["rank"] == order.index("tifa") + 1
    assert ranked[order.index("vqascore")]["agreement"] == pytest.approx(-1.0)
    assert [e["rank"] for e in ranked] == [1, 2, 3]
