"""The quality guard in the stand-in world where images made by two or more edits look
broken (the judge rates their quality 1 of 10): the round that brings the best FAITH is
rejected for its quality, and with --max-quality-drop 1 the same round is accepted."""

from __future__ import annotations

import json

import pytest

from refine.io.store import RunStore
from refine.loop.refiner import Refiner
from tests.e2e.test_cli_run import cli, run_args
from tests.fakes.gemini_world import BLUE, GREEN, RED
from tests.runs import begin

ACT, COUNTRY = "people eating food at home", "Iran"


@pytest.fixture
def breaking(world):
    """Blue is drawn; an edit turns blue red (better), then red green (best, but broken:
    the second edit)."""
    world.generate = BLUE
    world.edits = {BLUE: (RED, RED), RED: (GREEN, GREEN), GREEN: (GREEN, GREEN)}
    world.degrade_after = 2
    return world


def run(backends, options, tmp_path, **settings):
    return begin(
        Refiner("gemini", backends, options),
        ACT,
        COUNTRY,
        out=tmp_path,
        rounds=2,
        target=1.0,
        max_drift=2.0,
        patience=5,
        **settings,
    )


@pytest.mark.slow
def test_a_round_that_looks_worse_is_rejected_unless_the_guard_is_off(
    breaking, backends, options, tmp_path
):
    guarded = run(backends, options, tmp_path / "on")
    r0, r1, r2 = guarded.rounds
    assert [r.decision for r in guarded.rounds] == ["initial", "accepted", "rejected"]
    q1, q2 = r1.best.scores.quality, r2.best.scores.quality
    # red is rated 7 of 10 by first tokens; the broken green 1 of 10, sampled (its first
    # token "1" may begin "10"): the first two answers, 1 and 1, agree and end the reading
    assert 0.65 < q1 < 0.75 and r1.best.scores.quality_reading.method == "logprobs"
    assert r2.best.scores.quality_reading.method == "sampled k=2"
    assert q2 == pytest.approx(0.1)
    assert r2.best.scores.faith > r1.best.scores.faith + guarded.spec.margin  # it was better
    assert r2.reason.startswith(f"quality fell from {q1:.3f} to {q2:.3f} (more than 0.2")
    assert guarded.best_round == 1
    # the guard off: the same round, accepted on its FAITH
    free = run(backends, options, tmp_path / "off", max_quality_drop=1.0)
    assert [r.decision for r in free.rounds] == ["initial", "accepted", "accepted"]
    assert free.rounds[2].best.scores.quality == pytest.approx(q2)
    assert free.rounds[2].reason.startswith("FAITH ")
    assert free.best_round == 2


@pytest.mark.slow
def test_the_cli_and_a_batch_line_say_why(breaking, siglip_path, tmp_path):
    done = cli(*run_args(tmp_path / "cli", 2, siglip_path), "--patience", "5")
    assert done.returncode == 0, done.stderr
    line = next(x for x in done.stderr.splitlines() if "round 2: rejected" in x)
    assert ", quality 0.100 (quality fell from 0.699 to 0.100 (more than 0.2" in line
    assert "     \u2013" not in done.stdout.split("image\n", 1)[1].split("best round")[0]
    off = cli(*run_args(tmp_path / "off", 2, siglip_path), "--max-quality-drop", "1")
    assert off.returncode == 0 and "round 2: accepted" in off.stderr
    bad = cli(*run_args(tmp_path / "bad", 2, siglip_path), "--max-quality-drop", "1.5")
    assert bad.returncode == 2 and "--max-quality-drop" in bad.stderr
    # batch lines take the setting too
    specs = tmp_path / "specs.jsonl"
    line = {"activity": ACT, "country": COUNTRY, "rounds": 2, "target": 1.0, "max_drift": 2}
    rows = [{**line, "patience": 5}, {**line, "patience": 5, "max_quality_drop": 1}]
    specs.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    batch = cli(
        "batch",
        specs,
        "--out",
        tmp_path / "batch",
        "--backend",
        f"image_embedder=siglip:{siglip_path}",
        "--json",
    )
    assert batch.returncode == 0, batch.stderr
    record = json.loads(batch.stdout)
    decisions = []
    for entry in record["entries"]:
        saved = RunStore(tmp_path / "batch" / record["id"] / entry["run_dir"]).load()
        decisions.append([r.decision for r in saved.rounds])
    assert decisions == [["initial", "accepted", "rejected"], ["initial", "accepted", "accepted"]]
    reasons = [
        RunStore(tmp_path / "batch" / record["id"] / e["run_dir"]).load().rounds[2].reason
        for e in record["entries"]
    ]
    assert reasons[0].startswith("quality fell from 0.699 to 0.100")
