"""A bench whose Gemini requests go out as batch jobs (--batch) against the stand-in's Batch
API: the same cells and summary as the live bench on the same answers, one job per model
and stage, nothing sent live, and the price of both in the dry run."""

from __future__ import annotations

import json

import pytest

from refine.harness.engine import EngineOptions
from refine.harness.tasks.bench.cells import BenchStore
from refine.harness.tasks.bench.plan import BenchPlan, plan_prompts
from refine.harness.tasks.bench.task import run_bench
from tests.e2e.test_cli_run import cli
from tests.fakes.gemini_world import GREEN, RED

GENS = ["gemini:gemini-3.1-flash-lite-image", "gemini:gemini-3-pro-image"]
ACTS = ["people eating food at home"]


def timeless(value):
    """``value`` without what differs from run to run (timings, times)."""
    if isinstance(value, dict):
        return {
            k: timeless(v)
            for k, v in value.items()
            if not (k in ("timings", "created", "updated", "batch") or k.endswith("_s"))
        }
    if isinstance(value, list):
        return [timeless(v) for v in value]
    return value


@pytest.mark.slow
def test_a_batch_bench_is_the_live_bench(
    world, gemini_env, siglip_path, options, tmp_path, monkeypatch
):
    monkeypatch.setenv("REFINE_GEMINI_BATCH_POLL_S", "0.02")
    monkeypatch.setenv("REFINE_GEMINI_BATCH_GATHER_S", "0.2")
    world.generate_by_model = {"gemini-3.1-flash-lite-image": RED, "gemini-3-pro-image": GREEN}
    plan = BenchPlan(
        generators=GENS,
        prompts=plan_prompts(["Iran"], ACTS),
        images_per_prompt=2,
        seed=42,
        profile="gemini",
        backends={"image_embedder": f"siglip:{siglip_path}"},
    )
    # the judge samples, as on the developer API, and stops at its first two agreeing
    # answers (the profile's agree): a batch job sends all k and reads them so
    options = {**options, "judge": {**options["judge"], "judge_mode": "sampled"}}
    live = run_bench(plan, tmp_path / "live", backend_options=options)
    sent_live = len(gemini_env.paths)
    earlier = set(gemini_env.batches)  # the stand-in serves the whole session
    # the cap of image answers a job lowered to 1: each model's two images, two jobs
    monkeypatch.setattr("refine.backends.gemini_batch.MAX_IMAGE_ANSWERS", 1)
    batch = run_bench(
        plan, tmp_path / "batch", backend_options=options, engine=EngineOptions(batch=True)
    )
    # the same cells, images and numbers; the same summary
    cells = [
        sorted(
            BenchStore(tmp_path / d).records(),
            key=lambda c: (c["generator"], c["activity"], c["country"]),
        )
        for d in ("live", "batch")
    ]
    assert len(cells[0]) == 2 and timeless(cells[0]) == timeless(cells[1])
    # the world's judge follows seeds: each reading's first two answers agree there, so a
    # live reading stops at them, and the batch job's reading of all k reads them so too
    # (it used to read all 8: other numbers than the live bench's)
    modes = {j["read"] for c in cells[1] for i in c["images"] for j in i["judged"].values()}
    assert modes == {"sampled k=2"}
    assert timeless(live.summary) == timeless(batch.summary)
    # nothing live: a job per model and stage (the two generators' images, a job per
    # image under the cap, then every image's observation and readings together); the
    # image jobs' requests go up as files, and the rest inline
    paths = gemini_env.paths[sent_live:]
    assert paths and all(p.endswith((":batchGenerateContent", "/files")) for p in paths)
    jobs = [job for name, job in gemini_env.batches.items() if name not in earlier]
    models = [job["model"] for job in jobs]
    assert sorted(models[:4]) == ["gemini-3-pro-image"] * 2 + ["gemini-3.1-flash-lite-image"] * 2
    assert models[4:] == ["gemini-3.8-flash"]
    assert [len(job["requests"]) for job in jobs[:4]] == [1] * 4  # 2 seeds each, 1 a job
    assert [bool(job["file"]) for job in jobs] == [True] * 4 + [False]
    # the record says how the judge read: all k answers sent, read as a live reading
    config = json.loads((tmp_path / "batch" / "results.json").read_text())["config"]
    assert "a sampled reading sends all k answers at once" in config["batch"]
    assert "batch" not in json.loads((tmp_path / "live" / "results.json").read_text())["config"]


def test_the_dry_run_prices_live_and_batch_work(tmp_path):
    out = tmp_path / "none"
    done = cli("bench", "--recipe", "ahead-table1", "--limit", "1", "--dry-run",
               "--profile", "gemini", "--out", str(out))  # fmt: skip
    assert done.returncode == 0, done.stderr
    # the bundled profile's prices: live, from the agreeing answers to all k, and as batch
    # jobs, at half the price of all k
    (line,) = [x for x in done.stdout.splitlines() if x.startswith("cost: about")]
    (half,) = [x for x in done.stdout.splitlines() if "as batch jobs (--batch)" in x]
    low, high = (float(v.split()[0].replace(",", "")) for v in line.split("$")[1:3])
    batch = float(half.split("$")[1].split(",")[0])
    assert "Gemini API list prices read 2026-11-28" in line and 0 < low < high
    assert batch == pytest.approx(high / 2, abs=0.006)  # each rounded to the cent
    assert "each judge reading sends all its answers at once: 8" in half
    refused = cli("strategies", "--strategies", "best-of-n", "--batch", "--out", str(out))
    assert refused.returncode == 2 and "No such option: --batch" in refused.stderr


def test_batch_on_vertex_ai_and_an_unreadable_journal_are_one_line(tmp_path, monkeypatch):
    """--batch on Vertex AI is refused before anything is made or sent (inline batch jobs
    are the developer API's; it was the SDK's raw ValueError); a journal that is a folder
    is named in one line (it was a traceback)."""
    from refine.backends.gemini_batch import JOURNAL

    out = tmp_path / "b"
    args = ("bench", "--recipe", "ahead-table1", "--limit", "1", "--batch", "--profile", "gemini",
            "--out", str(out))  # fmt: skip
    monkeypatch.setenv("GOOGLE_GENAI_USE_VERTEXAI", "true")
    refused = cli(*args)
    assert refused.returncode == 2 and not out.exists()
    (said,) = refused.stderr.strip().splitlines()
    assert said == (
        "error: --batch: jobs of inline requests are the Gemini developer API's; Vertex AI "
        "(GOOGLE_GENAI_USE_VERTEXAI is set) takes batch jobs from Cloud Storage, which this "
        "toolkit does not send: leave out --batch, or unset GOOGLE_GENAI_USE_VERTEXAI"
    )
    monkeypatch.delenv("GOOGLE_GENAI_USE_VERTEXAI")
    (out / JOURNAL).mkdir(parents=True)
    broken = cli(*args)
    assert broken.returncode == 1, broken.stderr
    (said,) = broken.stderr.strip().splitlines()
    assert said.startswith(f"error: BatchJournalError: {out / JOURNAL}: not a batch journal (")
    assert said.endswith("move it away to send every request again")
