"""Cells in flight: with API models the local engine keeps ``--workers`` cells going at
once, their model calls overlapping (the stand-in server counts the requests it is
answering at the same moment, and holds them until that many are: a client that keeps
fewer going is released after a minute with its count)."""

from __future__ import annotations

import json
import threading

import pytest

from refine.backends import judging
from refine.harness.engine import EngineOptions
from refine.harness.tasks.bench.plan import BenchPlan, plan_prompts
from refine.harness.tasks.bench.task import run_bench
from tests.e2e.test_cli_run import cli
from tests.golden.produce import ACTS, GENS

WORKERS = 8


@pytest.mark.slow
def test_a_bench_with_8_workers_has_8_requests_in_flight(gemini_env, world, siglip_path, tmp_path):
    gemini_env.reset_peak()
    with gemini_env.held_until_in_flight(WORKERS):
        done = cli(
            "bench",
            *[x for g in GENS for x in ("--generator", g)],
            "--countries",
            "Iran,India",
            *[x for a in ACTS for x in ("--activity", a)],
            "--images-per-prompt",
            "1",
            "--workers",
            str(WORKERS),
            "--out",
            tmp_path / "bench",
            "--backend",
            f"image_embedder=siglip:{siglip_path}",
        )
    assert done.returncode == 0, done.stderr
    assert len((tmp_path / "bench" / "cells.jsonl").read_text().splitlines()) == 8
    assert gemini_env.peak_in_flight >= WORKERS, gemini_env.peak_in_flight


@pytest.mark.slow
def test_a_batch_with_8_workers_has_8_requests_in_flight(gemini_env, world, siglip_path, tmp_path):
    specs = tmp_path / "specs.jsonl"
    rows = [
        {"activity": ACTS[0], "country": "Iran", "rounds": 1, "seed": k, "max_drift": 2}
        for k in range(WORKERS)
    ]
    specs.write_text("".join(json.dumps(r) + "\n" for r in rows))
    gemini_env.reset_peak()
    with gemini_env.held_until_in_flight(WORKERS):
        done = cli(
            "batch",
            specs,
            "--workers",
            str(WORKERS),
            "--out",
            tmp_path / "runs",
            "--backend",
            f"image_embedder=siglip:{siglip_path}",
            "--json",
        )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["summary"]["finished"] == WORKERS
    assert gemini_env.peak_in_flight >= WORKERS, gemini_env.peak_in_flight


class CountingLock:
    """A lock that counts the threads waiting for it."""

    def __init__(self) -> None:
        self._lock, self._count, self.waiting = threading.Lock(), threading.Lock(), 0

    def __enter__(self) -> CountingLock:
        with self._count:
            self.waiting += 1
        self._lock.acquire()
        with self._count:
            self.waiting -= 1
        return self

    def __exit__(self, *exc) -> None:
        self._lock.release()


@pytest.mark.slow
def test_the_first_judgements_of_a_bench_go_out_together(
    world, siglip_path, options, tmp_path, monkeypatch
):
    """A cold start (the judge's model not yet known to give log-probabilities): the first
    judgement finds out alone while every other prompt's first judgement waits for its
    answer (the stand-in holds that answer until they all wait); then they go out
    together. They went one at a time, each holding the lock while it asked."""
    monkeypatch.setattr(judging, "_HAS_LOGPROBS", set())
    monkeypatch.setattr(judging, "_NO_LOGPROBS", set())
    probe = CountingLock()
    monkeypatch.setattr(judging, "_probe_lock", lambda key: probe)
    wave = 12  # prompts, one image each, and workers
    prompts = plan_prompts(["Iran", "India", "Nigeria", "USA"])[:wave]
    assert len(prompts) == wave
    world.hold_after_first = ("judge", wave)
    world.first_held_until = lambda: probe.waiting >= wave - 1
    plan = BenchPlan(
        generators=[GENS[0]],
        prompts=prompts,
        images_per_prompt=1,
        backends={"image_embedder": f"siglip:{siglip_path}"},
    )
    run_bench(plan, tmp_path / "bench", backend_options=options, engine=EngineOptions(workers=wave))
    assert not world._held[2], world.held_peak  # nothing was given up on
    # the judgements that waited for the first answer, in flight at once
    assert world.held_peak >= wave - 1, world.held_peak
