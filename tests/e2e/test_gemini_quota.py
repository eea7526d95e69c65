"""429s as the Gemini API words them: a RetryInfo delay holds every request to that model
until it has passed; a spent daily quota (or none on the tier) is not retried, and a run
ends there with its rounds kept and says how to go on. Through the stand-in Gemini world."""

from __future__ import annotations

import json

import pytest

from refine.backends import gemini
from refine.backends.gemini import Quota, quota_of, quota_words
from refine.io.store import RunStore
from refine.loop.refiner import Refiner
from refine.usage import QuotaSpent
from tests.e2e.test_cli_run import cli
from tests.fakes.gemini_server import PER_DAY, PER_MINUTE, quota_answer
from tests.fakes.gemini_world import GREEN, RED
from tests.runs import begin

ACT, COUNTRY = "people eating food at home", "Iran"


class Answered:
    """An APIError's fields as google-genai fills them from a 429's body."""

    def __init__(self, body: dict) -> None:
        self.details, self.message, self.code = body, body["error"]["message"], 429


def test_a_429_is_read_as_the_api_words_it():
    daily = quota_of(Answered(quota_answer("gemini-3.8-flash", PER_DAY, "250", "23s")[1]))
    assert daily == Quota(
        PER_DAY,
        "generativelanguage.googleapis.com/generate_content_free_tier_requests",
        "250",
        23.0,
    )
    assert daily.daily and not daily.none_on_tier
    minute = quota_of(Answered(quota_answer("m", PER_MINUTE, "10", "7.5s")[1]))
    assert (minute.daily, minute.retry_s) == (False, 7.5)
    # no RetryInfo: the message's "Please retry in" is the delay, where it says one
    _, body = quota_answer("m", PER_MINUTE, retry_delay=None)
    assert quota_of(Answered(body)).retry_s is None
    body["error"]["message"] += " Please retry in 12.25s."
    assert quota_of(Answered(body)).retry_s == 12.25
    none = quota_of(Answered(quota_answer("m", PER_DAY, "0", None)[1]))
    said = quota_words("gemini-3.1-pro-preview", none)
    assert said.startswith("gemini-3.1-pro-preview: this model has no quota on the account's tier")
    assert "enable billing" in said
    said = quota_words("gemini-3.8-flash", daily)
    assert "its daily request quota is spent" in said and "midnight Pacific time" in said
    assert quota_of(Answered({"error": {"code": 429, "message": "slow down"}})) is None


@pytest.mark.slow
def test_a_retry_delay_holds_every_thread_of_the_client(world):
    """Four images asked at once, each first answered 429 with retryDelay 0.5s: no request
    reaches the API until 0.5 s after the last 429, then all four are made."""
    from PIL import Image

    world.minute_429 = {"generate": 4}
    world.retry_delay = "0.5s"
    # the four first requests are answered together, however late a loaded machine starts
    # one of their threads (one sent after the others' delay had passed was refused last)
    world.hold_together = 4
    client = gemini.GeminiClient(max_retries=2)
    generator = gemini.GeminiGenerator("gemini-3.1-flash-image", client=client, concurrency=4)
    images = generator.generate("a meal at home", [0, 1, 2, 3])
    assert [im.getpixel((0, 0)) for im in images] == [RED] * 4
    assert isinstance(images[0], Image.Image)
    assert len(world.refused_at) == 4 and len(world.arrived) == 8
    retried = sorted(t for t, _ in world.arrived)[4:]
    # every retry after the delay from the last refusal (answered before it was read)
    assert min(retried) >= max(world.refused_at) + 0.49


def spent_run(world, backends, options, tmp_path):
    # round 2's edit finds the daily quota spent: every request from then on is refused
    world.daily_spent_from = ("edit", 2)
    return begin(
        Refiner("gemini", backends, options),
        ACT,
        COUNTRY,
        out=tmp_path,
        rounds=3,
        candidates=1,
        target=1.0,
        max_drift=2.0,
        patience=5,
    )


def test_a_spent_daily_quota_ends_the_run_at_once_with_its_rounds_kept(
    world, backends, options, tmp_path
):
    world.edits = {RED: (GREEN, GREEN), GREEN: (GREEN, GREEN)}
    options = {**options, "editor": {"max_retries": 4}}  # retries allowed, none taken
    with pytest.raises(QuotaSpent, match="gemini-nano-banana-2.1: its daily request quota"):
        spent_run(world, backends, options, tmp_path)
    # no retry, nothing sent after it (how soon the run ends: benchmarks/bench_gemini_run.py)
    assert len(world.refused_at) == 1
    (run_dir,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    saved = RunStore(run_dir).load()
    assert saved.status == "failed" and [r.index for r in saved.rounds] == [0, 1]
    assert "QuotaSpent" in saved.error and "midnight Pacific time" in saved.error
    # the quota is back: the run goes on from round 2
    world.daily_spent_from = None
    done = Refiner("gemini", backends, options).resume(run_dir)
    assert done.status == "finished" and [r.index for r in done.rounds] == [0, 1, 2, 3]


@pytest.mark.slow
def test_the_command_line_says_it_in_one_line_with_how_to_go_on(world, siglip_path, tmp_path):
    world.daily_spent_from = ("edit", 2)
    done = cli(
        "run", ACT, "--country", COUNTRY, "--rounds", "3", "--candidates", "1", "--target", "1",
        "--max-drift", "2", "--patience", "5", "--out", str(tmp_path),
        "--backend", f"image_embedder=siglip:{siglip_path}",
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    (line,) = [x for x in done.stderr.splitlines() if x.startswith("error:")]
    (run_dir,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    assert "gemini-nano-banana-2.1: its daily request quota is spent" in line
    assert line.endswith(f"go on later with refine run --resume {run_dir}")
    assert "Traceback" not in done.stderr
    assert json.loads((run_dir / "run.json").read_text())["status"] == "failed"


@pytest.mark.slow
def test_a_batch_stops_at_a_spent_daily_quota_and_a_rerun_goes_on(world, siglip_path, tmp_path):
    """Two runs, one at a time: the first run's second edit finds the quota spent, so the
    batch stops there (the second run is not begun, nothing is retried) and says so in one
    line; run again once the quota is back, it finishes both, the first from its round 1."""
    world.daily_spent_from = ("edit", 2)
    specs = tmp_path / "specs.jsonl"
    line = {"activity": ACT, "country": COUNTRY, "rounds": 2, "candidates": 1, "target": 1.0}
    specs.write_text(
        "".join(json.dumps({**line, "seed": s, "max_drift": 2}) + "\n" for s in (1, 2))
    )
    args = ("batch", specs, "--out", tmp_path / "batch", "--backend",
            f"image_embedder=siglip:{siglip_path}", "--workers", "1")  # fmt: skip
    done = cli(*args)
    assert done.returncode == 1, done.stderr
    (said,) = [x for x in done.stderr.splitlines() if x.startswith("error:")]
    assert "gemini-nano-banana-2.1: its daily request quota is spent" in said
    assert f"the batch so far is kept in {tmp_path / 'batch'}" in said
    go_on = said.split("go on once it is back with ")[1]
    assert go_on.startswith(f"refine batch {specs} --out {tmp_path / 'batch'} --resume")
    assert len(world.refused_at) == 1 and world.log.count("generate") == 1  # run 2 not begun
    world.daily_spent_from = None
    world.log.clear()
    again = cli(*args, "--resume", "--json")
    assert again.returncode == 0, again.stderr
    record = json.loads(again.stdout)
    assert record["summary"]["finished"] == 2
    # the first run went on from its rounds 0 and 1: one more edit, and the second run's
    assert world.log.count("generate") == 1


def test_the_app_shows_a_visitor_the_same_words(world, backends, options, tmp_path):
    from refine.service import RunService
    from tests.runs import prepared

    world.daily_spent_from = ("edit", 2)
    service = RunService("gemini", out=tmp_path, backends=backends, backend_options=options)
    spec, refs = prepared(
        ACT, COUNTRY, rounds=3, candidates=1, target=1.0, max_drift=2.0, patience=5
    )
    last = service.start(spec, refs).wait()
    assert last.error.startswith("gemini-nano-banana-2.1: its daily request quota is spent")
    assert "midnight Pacific time" in last.error and len(world.refused_at) == 1


@pytest.mark.slow
def test_a_bench_stops_at_a_spent_daily_quota_and_a_rerun_makes_only_what_is_left(
    world, siglip_path, tmp_path
):
    """Two cells (two generators, one prompt), one at a time: the second cell's first image
    finds the quota spent; the bench stops with the first cell kept and says so in one line;
    run again once it is back, it makes the second cell only."""
    gens = ["gemini:gemini-3.1-flash-image", "gemini:gemini-3-pro-image"]
    args = ("bench", "--generator", gens[0], "--generator", gens[1], "--countries", "Iran",
            "--activity", ACT,
            "--images-per-prompt", "1", "--out", tmp_path / "b",
            "--backend", f"image_embedder=siglip:{siglip_path}")  # fmt: skip
    world.daily_spent_from = ("generate", 2)
    done = cli(*args)
    assert done.returncode == 1, done.stderr
    (said,) = [x for x in done.stderr.splitlines() if x.startswith("error:")]
    assert "gemini-3-pro-image: its daily request quota is spent" in said
    assert said.endswith("what was done is kept: run the same command again once it is back")
    assert len(world.refused_at) == 1
    world.daily_spent_from = None
    world.log.clear()
    again = cli(*args)
    assert again.returncode == 0, again.stderr
    assert world.log.count("generate") == 1  # the second cell's image only
    doc = json.loads((tmp_path / "b" / "results.json").read_text())
    assert [c["generator"] for c in doc["cells"]] == gens
