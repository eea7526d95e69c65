"""`refine batch` and `refine score` through the real Gemini backends and the fake server."""

from __future__ import annotations

import csv
import json

import pytest
from PIL import Image

from refine.events import EntryChanged
from refine.harness.engine import EngineOptions
from refine.harness.tasks.batch.record import summarise
from refine.harness.tasks.batch.specs import open_batch, read_specs
from refine.harness.tasks.batch.task import run_batch
from refine.io.store import RunStore
from refine.loop.refiner import Refiner
from tests.e2e.test_cli_run import cli, no_retries_profile, scored
from tests.fakes.gemini_world import BLUE, GREEN, RATING, RED, TIFA_QUESTIONS, tifa_p

ACT, COUNTRY = "people eating food at home", "Iran"


def write_jsonl(path, rows):
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


@pytest.mark.slow
def test_batch_records_a_failing_run_and_resumes_it(world, siglip_path, tmp_path):
    Image.new("RGB", (64, 48), BLUE).save(tmp_path / "blue.png")
    specs = write_jsonl(
        tmp_path / "specs.jsonl",
        [
            # one candidate, seed 1043 (odd): RED -> BLUE, worse, rejected
            {"activity": ACT, "country": COUNTRY, "rounds": 1, "seed": 43, "candidates": 1},
            {"activity": ACT, "country": "iran", "image": "blue.png", "rounds": 1, "name": "blue"},
            # RED -> GREEN accepted, then GREEN -> GREEN (no gain) rejected
            {
                "activity": ACT,
                "country": COUNTRY,
                "rounds": 2,
                "seed": 7,
                "target": 1.0,
                "max_drift": 2,
            },
        ],
    )
    world.fail_edit_of = BLUE  # the second run fails in its first edit
    args = ["batch", str(specs), "--out", str(tmp_path / "out")]
    args += ["--backend", f"image_embedder=siglip:{siglip_path}"]
    args += ["--profile", str(no_retries_profile(tmp_path))]
    first = cli(*args, "--json")
    assert first.returncode == 1, first.stderr
    batch = json.loads(first.stdout)
    assert [e["status"] for e in batch["entries"]] == ["finished", "failed", "finished"]
    failed = batch["entries"][1]
    assert "500" in failed["error"] and failed["name"] == "blue"
    # the failed run kept its round 0 (the given image, observed and scored)
    run_dir = tmp_path / "out" / batch["id"] / failed["run_dir"]
    kept = RunStore(run_dir).load()
    assert kept.status == "failed" and len(kept.rounds) == 1 and "500" in kept.error
    assert failed["initial_faith"] == kept.rounds[0].best.scores.faith
    # summary figures from the entries
    s = batch["summary"]
    assert s["runs"] == 3 and s["finished"] == 2 and s["failed"] == 1
    assert s["success_rate"] == pytest.approx(2 / 3)
    done = [batch["entries"][0], batch["entries"][2]]
    gains = [e["best_faith"] - e["initial_faith"] for e in done]
    assert gains[0] == 0.0 and gains[1] > 0.2 and s["improved_runs"] == 1
    assert s["mean_faith_gain"] == pytest.approx(sum(gains) / 2)
    assert [e["edit_rounds"] for e in done] == [1, 2] and s["editing_rounds"] == 3
    assert [e["regressions"] for e in done] == [1, 0] and s["regression_rate"] == 1 / 3
    generated = world.log.count("generate")
    assert generated == 2

    again = cli(*args)
    assert again.returncode == 2 and "add --resume" in again.stderr

    world.fail_edit_of = None
    resumed = cli(*args, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert "[3/3] blue: finished" in resumed.stderr and "success rate 100% (3/3" in resumed.stdout
    assert world.log.count("generate") == generated  # finished runs were not run again
    final = RunStore(run_dir).load()
    assert final.status == "finished" and final.rounds[0] == kept.rounds[0]
    assert [r.decision for r in final.rounds] == ["initial", "rejected"]  # blue stays blue


def test_specs_are_checked_before_anything_runs(tmp_path):
    csv_path = tmp_path / "specs.csv"
    csv_path.write_text(
        "activity,country,rounds,instructions,profile\n"
        f'{ACT},Iran,2,"{{""1"": ""Add a sofreh""}}",\n'
        "people eating at home,Iran,1,,\n"
        f"{ACT},Iran,many,,\n"
        f"{ACT},Iran,1,,local-gpu\n"
    )
    out = cli("batch", str(csv_path), "--out", str(tmp_path / "out"))
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 3
    assert "line 3" in lines[0] and "did you mean 'people eating food at home'" in lines[0]
    assert "line 4: rounds:" in lines[1] and "valid integer" in lines[1]
    assert "line 5: profile is set for the whole batch" in lines[2]
    assert not (tmp_path / "out").exists()
    csv_path.write_text(
        f'activity,country,rounds,instructions\n{ACT},Iran,2,"{{""1"": ""Add a sofreh""}}"\n'
    )
    (entry,) = read_specs(csv_path)
    assert entry.spec.rounds == 2 and entry.spec.instructions == {1: "Add a sofreh"}
    assert entry.line == 2 and entry.references.country == "Iran"


@pytest.mark.slow
def test_workers_share_models_and_keep_runs_apart(world, backends, options, tmp_path):
    specs = write_jsonl(
        tmp_path / "same.jsonl",
        [{"activity": ACT, "country": COUNTRY, "rounds": 1, "max_drift": 2}] * 4,
    )
    refiner = Refiner("gemini", backends=backends, backend_options=options)
    assert refiner.sibling().backends is refiner.backends
    # one run first: answers cached on disk and baselines shared by the workers are then
    # there for every run alike (else the two first runs, side by side, each pay for them)
    one = write_jsonl(tmp_path / "one.jsonl", [json.loads(specs.read_text().splitlines()[0])])
    run_batch(*open_batch(one, tmp_path / "warm", "gemini", backends), refiner)
    batch, store = open_batch(specs, tmp_path, "gemini", backends)
    events = []
    batch = run_batch(
        batch, store, refiner, on_event=events.append, engine=EngineOptions(workers=2)
    )
    assert [e.status for e in batch.entries] == ["finished"] * 4
    runs = [RunStore(store.dir / e.run_dir).load() for e in batch.entries]
    assert len({r.id for r in runs}) == 4
    # identical specs give identical runs: no counter or record is shared between workers
    assert len({r.model_calls for r in runs}) == 1 and runs[0].model_calls > 0
    assert {tuple(r.decision for r in run.rounds) for run in runs} == {("initial", "accepted")}
    assert batch.summary == summarise(batch.entries)
    assert batch.summary["improved_runs"] == 4
    progress = {e.done for e in events if isinstance(e, EntryChanged) and e.done is not None}
    assert progress == {1, 2, 3, 4}
    assert json.loads((store.dir / "batch.json").read_text())["summary"]["finished"] == 4
    # the results record: the same summary, a cell per entry, FAITH gains with an interval
    record = json.loads((store.dir / "results.json").read_text())
    assert record["task"] == "batch" and record["config"]["source_sha256"] == batch.source_sha256
    assert {k: record["summary"][k] for k in batch.summary} == batch.summary
    gains = [r.rounds[-1].best.scores.faith - r.rounds[0].best.scores.faith for r in runs]
    assert [c["faith_gain"] for c in record["cells"]] == pytest.approx(gains, abs=1e-12)
    assert record["summary"]["faith_gain"]["mean"] == pytest.approx(sum(gains) / 4, abs=1e-12)
    lo, hi = record["summary"]["faith_gain"]["interval"]
    assert lo <= record["summary"]["faith_gain"]["mean"] <= hi
    csv_rows = list(csv.DictReader((store.dir / "runs.csv").open()))
    assert [float(r["faith_gain"]) for r in csv_rows] == pytest.approx(gains, abs=1e-9)
    assert {r["stop_reason"] for r in csv_rows} == {c["stop_reason"] for c in record["cells"]}


@pytest.mark.slow
def test_score_existing_images(world, siglip_path, tmp_path, monkeypatch):
    # a cache of its own: TIFA's questions are asked of the language model once
    monkeypatch.setenv("REFINE_CACHE_DIR", str(tmp_path / "cache"))
    for name, colour in (("red.png", RED), ("green.png", GREEN)):
        Image.new("RGB", (64, 48), colour).save(tmp_path / name)
    args = ["score", str(tmp_path / "red.png"), str(tmp_path / "green.png")]
    args += ["--activity", ACT, "--country", COUNTRY, "--out", str(tmp_path / "score")]
    out = cli(*args, "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    red, green = scored(out.stdout)
    assert green["scores"]["values"]["faith"] > red["scores"]["values"]["faith"] + 0.2
    assert "hamburgers" in [h["phrase"] for h in red["feedback"]["hallucinated"]]
    assert red["observed"]["objects"] == ["oversized hookah", "Large rice platter", "hamburgers"]
    assert doc["config"]["scorer"]["observer"] == "gemini:gemini-3.8-flash"
    assert world.log.count("edit") == 0 and world.log.count("generate") == 0
    text = cli(*args)
    assert text.returncode == 0 and "hallucinated: " in text.stdout
    assert "EXAG: exag:mllm (the judge's expected 1-5 exaggeration rating" in text.stdout
    # the judge baselines of AHEaD Tab. 29-30, asked for: the world's judge rates a red image
    # 4 and a green one 1 whatever the scale, so (E[r] - 1) / 4 from its distribution
    from tests.fakes.gemini_world import rating_distribution

    asked = cli(*args, "--baselines", "judge_align,judge_hal", "--json")
    assert asked.returncode == 0, asked.stderr
    for row, colour in zip(scored(asked.stdout), (RED, GREEN), strict=True):
        dist = rating_distribution(RATING[colour])
        expected = (sum((k + 1) * p for k, p in enumerate(dist)) - 1) / 4
        values = row["scores"]["values"]
        assert values["judge_align"] == pytest.approx(expected, abs=1e-9)
        assert values["judge_hal"] == pytest.approx(expected, abs=1e-9)
        assert values["vqascore"] is None
    prompts = [p for p in world.prompts if "PROMPT: A photorealistic photo of" in p]
    assert any("scoring how well an image depicts an activity" in p for p in prompts)
    assert any("scoring whether an image contains incorrect elements" in p for p in prompts)
    # TIFA: the language model's questions once per prompt (kept on disk, so not asked
    # again by a second command), the judge's answer per question and image
    for _ in range(2):
        tifa = cli(*args, "--baselines", "tifa,soft_tifa", "--json")
        assert tifa.returncode == 0, tifa.stderr
    from refine.assets import prompt_template

    prompt = prompt_template("generate").strip().format(activity=ACT, country=COUNTRY)
    assert world.tifa_asked == [prompt]
    questions = [q["question"] for q in TIFA_QUESTIONS]
    questions[0] += "?"  # a question the model wrote without its mark gets one
    # per image, in the first command only (in any order: the judge is asked several at
    # once); the second, into the same folder, keeps the cells it finds made the same way
    assert sorted(world.tifa_answered) == sorted(questions * 2)
    for row, colour in zip(scored(tifa.stdout), (RED, GREEN), strict=True):
        p = [tifa_p(colour, q) for q in questions]
        values, kept = row["scores"]["values"], row["scores"]["tifa"]
        assert values["tifa"] == sum(x > 0.5 for x in p) / 4  # red 2 of 4, green 3 of 4
        assert values["soft_tifa"] == pytest.approx(sum(p) / 4, abs=1e-9)
        assert [a["question"] for a in kept] == questions
        assert [a["p_yes"] for a in kept] == pytest.approx(p, abs=1e-9)
        assert kept[1]["element"] == "eating" and kept[1]["category"] == "activity"
        assert values["judge_align"] is None  # not asked for this time
    # an image whose bytes changed is scored again; the other's cell is kept
    Image.new("RGB", (64, 48), BLUE).save(tmp_path / "green.png")
    observed = world.log.count("observe")
    again = cli(*args, "--baselines", "tifa,soft_tifa", "--json")
    assert again.returncode == 0, again.stderr
    assert world.log.count("observe") == observed + 1
    red_again, blue = scored(again.stdout)
    assert red_again == scored(tifa.stdout)[0] and blue["observed"] != green["observed"]
    bad = cli(*args, "--baselines", "clipscore9")
    assert bad.returncode == 2 and "--baselines: no baseline 'clipscore9'" in bad.stderr
    missing = cli("score", str(tmp_path / "nope.png"), "--activity", ACT, "--country", "Iran")
    assert missing.returncode == 2 and "IMAGES: nope.png: no such image file" in missing.stderr


@pytest.mark.slow
def test_ctrl_c_on_a_batch_says_how_to_go_on_and_the_run_is_recorded_as_interrupted(
    world, siglip_path, tmp_path
):
    """SIGINT (Ctrl-C) during a batch's run: the command says where the batch is kept and
    the command that goes on with it, exits 130, and the run's record says interrupted
    (not failed), with its round 0 kept."""
    import signal
    import subprocess
    import time

    from tests.e2e.test_cli_run import env, refine_cmd

    world.edit_delay_s = 60.0
    specs = write_jsonl(
        tmp_path / "specs.jsonl", [{"activity": ACT, "country": COUNTRY, "rounds": 2}]
    )
    out = tmp_path / "out"
    args = ["batch", str(specs), "--out", str(out)]
    args += ["--backend", f"image_embedder=siglip:{siglip_path}"]
    # Ctrl-C's default answer in the child (KeyboardInterrupt): a shell starts a background
    # job, such as a suite run with "&", with SIGINT ignored, and Python keeps it ignored
    proc = subprocess.Popen(
        refine_cmd(*args),
        env=env(),
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        deadline = time.monotonic() + 120
        while "edit" not in world.log:  # round 0 is saved before the first edit is asked
            assert proc.poll() is None, proc.stderr.read()
            assert time.monotonic() < deadline, "the run never reached its first edit"
            time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        _, said = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, said
    (batch_dir,) = [p for p in out.iterdir() if p.is_dir()]
    assert f"interrupted: the batch so far is kept in {batch_dir}" in said, said
    again = f"refine batch {specs} --out {out} --resume --backend image_embedder=siglip:"
    assert f"go on with\n  {again}{siglip_path}" in said, said
    assert "Traceback" not in said
    batch = json.loads((batch_dir / "batch.json").read_text())
    run_dir = batch_dir / batch["entries"][0]["run_dir"]
    run = RunStore(run_dir).load()
    assert run.status == "interrupted" and run.error is None and len(run.rounds) == 1
