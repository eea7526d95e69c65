"""Cells in flight: with API models the local engine keeps ``--workers`` cells going at
once, their model calls overlapping (the stand-in server counts the requests it is
answering at the same moment, and holds them until that many are: a client that keeps
fewer going is released after a minute with its count)."""

from __future__ import annotations

import json

from tests.e2e.test_cli_run import cli
from tests.golden.produce import ACTS, GENS

WORKERS = 8


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
