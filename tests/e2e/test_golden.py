"""Golden outputs: the six jobs of tests/golden made again on the stand-in Gemini world give
the files of tests/golden/data (numbers to 1e-9; timings and start times aside), and those
folders, written by an earlier version, still open and go on without a new model call."""

from __future__ import annotations

import json
import shutil
import sys

import pytest

from tests.e2e.test_cli_run import cli
from tests.fakes.gemini_world import World
from tests.golden.produce import (
    DATA,
    GENS,
    Printed,
    agree_args,
    bench_args,
    compare,
    compare_csv,
    compare_numbers_in_text,
    concepts_args,
    differences,
    files,
    normalise_text,
    placeholders,
    produce,
    read_meta,
    sos_args,
    write_meta,
)

REMAKE = "if the change is on purpose: python tools/make_golden.py, and say why in the commit"


@pytest.mark.slow
def test_the_jobs_give_the_golden_outputs(gemini_env, siglip_path, tmp_path):
    """Made again with a metric registered since (a toy one), the jobs give the golden
    files: each golden file's own columns, keys and page cells compared by name, and the
    new metric's left to the fresh files, so that a new metric regenerates no golden file."""
    from metrics.catalog import registered
    from tests.e2e.test_toy_metric import TOY

    fresh = tmp_path / "data"
    with registered(TOY):  # compared while the catalog holds it, as a new metric would be
        produce(fresh, gemini_env, siglip_path, cli)
        write_meta(fresh, siglip_path)
        found = differences(DATA, fresh)
    assert not found, "\n".join([*found[:40], REMAKE])
    # the toy metric was there: a column of the fresh rows, a cell of the fresh page
    assert "toy_redness" in (fresh / "bench" / "rows.csv").read_text().splitlines()[0]
    assert 'data-metric="toy_redness"' in (fresh / "bench" / "bench.html").read_text()
    # and a golden column lost, or a page cell of a known metric gone, is still found
    rows = (DATA / "bench" / "rows.csv").read_text()
    assert compare_csv(rows, rows.replace(",vendi,", ",vendi_gone,", 1))
    page = (DATA / "bench" / "bench.html").read_text()
    assert compare_numbers_in_text(page, page.replace('data-metric="vendi"', "", 1))


def moved(tmp_path, siglip_path):
    """The golden tree copied here, its machine's folder names (and Python environment)
    changed to this one's."""
    copy = tmp_path / "data"
    shutil.copytree(DATA, copy)
    meta = read_meta(DATA)
    for path in files(copy).values():
        if path.suffix in {".json", ".jsonl", ".csv", ".html"}:
            text = path.read_text()
            text = text.replace(meta["siglip"], str(siglip_path)).replace(meta["root"], str(copy))
            text = text.replace(meta["prefix"], sys.prefix)
            path.write_text(text)
    write_meta(copy, siglip_path)
    return copy


@pytest.mark.slow
def test_golden_folders_open_and_go_on(gemini_env, siglip_path, tmp_path):
    copy = moved(tmp_path, siglip_path)
    embedder = ["--backend", f"image_embedder=siglip:{siglip_path}"]
    world = World()
    gemini_env.handler = world
    try:
        (run_dir,) = (copy / "run").iterdir()
        (batch_dir,) = (copy / "batch").iterdir()
        done = [
            cli("run", "--resume", run_dir, "--json"),
            cli("batch", copy / "inputs" / "batch.jsonl", "--out", copy / "batch", "--resume"),
            cli(*bench_args(copy / "bench", embedder), "--json"),
            cli(*concepts_args(copy / "concepts", copy / "inputs" / "concepts.jsonl", embedder)),
            cli(*sos_args(copy / "sos", embedder), "--json"),
            cli("report", run_dir, "--out", tmp_path / "run.html"),
            cli("report", batch_dir, "--out", tmp_path / "batch.html"),
            # read again by the jobs that read these folders, written over in place
            cli("sos", "report", copy / "sos", "--json"),
            cli(*agree_args(copy)),
        ]
    finally:
        gemini_env.handler = None
    for d in done:
        assert d.returncode == 0, d.stderr
    # nothing was made again: not one model call
    assert world.log == []
    # what they say is what the golden files hold
    record = json.loads(done[0].stdout)
    stored = json.loads((run_dir / "run.json").read_text())  # paths of this machine
    assert record["status"] == "finished"
    assert not compare(record["rounds"], stored["rounds"], "rounds")
    bench = json.loads(done[2].stdout)
    assert not compare(bench, json.loads((copy / "bench" / "results.json").read_text()), "")
    assert [g for g in bench["summary"]["generators"]] == GENS
    (copy / "sos" / "analysis.json").write_text(done[-2].stdout)
    for name in ("run.html", "batch.html"):
        assert "<html" in (tmp_path / name).read_text()
    # and the folders still hold the same files and numbers
    found = differences(DATA, copy)
    assert not found, "\n".join(found[:40])


def test_a_changed_number_is_found(tmp_path):
    copy = tmp_path / "data"
    shutil.copytree(DATA, copy)
    bench = copy / "bench" / "results.json"
    doc = json.loads(bench.read_text())
    (gen,) = [g for g in doc["summary"]["generators"] if g == GENS[0]]
    doc["summary"]["generators"][gen]["faith"]["mean"] += 1e-5
    bench.write_text(json.dumps(doc))
    rows = copy / "bench" / "rows.csv"
    rows.write_text(rows.read_text().replace("faith", "faithful", 1))
    (copy / "sos" / "labels.csv").unlink()
    found = differences(DATA, copy)
    assert any("results.json: .summary.generators" in f and ".faith.mean" in f for f in found)
    assert any(f.startswith("bench/rows.csv: columns") for f in found), found
    assert "sos/labels.csv: only in golden" in found
    assert len(found) == 3, found


@pytest.mark.parametrize(
    "a,b,same",
    [
        (0.5, 0.5 + 5e-7, True),  # float32 rounding: within TOLERANCE (1e-6)
        (0.5, 0.5 + 2e-6, False),
        (300.0, 300.0 + 2e-4, True),  # relative above 1
        (300.0, 300.0 + 4e-4, False),
        (Printed("0.550"), Printed("0.549"), True),  # a page's 3 places: one in the last
        (Printed("0.550"), Printed("0.548"), False),
        ("0.5", "0.501", False),  # a file's repr, however short, keeps to TOLERANCE
        ("0.5498877763748169", "0.5498876571655273", True),
        ("0.5498877763748169", "0.5498857763748169", False),
    ],
)
def test_numbers_agree_within_float32_rounding(a, b, same):
    assert (compare({"x": [a]}, {"x": [b]}, "") == []) is same


@pytest.mark.slow
def test_a_slightly_changed_computation_is_found(gemini_env, siglip_path, tmp_path):
    """The tolerance is tight enough to see a real change: every phrase embedding nudged by
    1e-5 (then normalised again) moves the similarities past it."""
    from unittest import mock

    import torch

    from metrics.text_embedding import PhraseEmbeddingCache

    real = PhraseEmbeddingCache.matrix

    def nudged(self, embedder):
        vectors = real(self, embedder)
        if not vectors.numel():
            return vectors
        step = torch.zeros_like(vectors)
        step[:, 0] = 1e-5
        return torch.nn.functional.normalize(vectors + step, dim=1)

    fresh = tmp_path / "data"
    with mock.patch.object(PhraseEmbeddingCache, "matrix", nudged):
        produce(fresh, gemini_env, siglip_path, cli, jobs={"run"})  # the others match alike
    write_meta(fresh, siglip_path)
    found = [f for f in differences(DATA, fresh) if f.startswith("run/")]
    assert any(".similarity:" in f for f in found), found[:10]


@pytest.mark.slow
def test_cells_written_before_their_schema_open_and_go_on(gemini_env, siglip_path, tmp_path):
    """Bench and concepts lines of layout version 0 (no schema, timings or errors, as
    written before the harness) are read as they were: nothing is made again and the
    summaries are the golden ones."""
    copy = moved(tmp_path, siglip_path)
    for name in ("bench/cells.jsonl", "concepts/concepts.jsonl"):
        path = copy / name
        lines = [json.loads(line) for line in path.read_text().splitlines()]
        assert all(line.pop("schema") == 1 for line in lines)
        for line in lines:
            del line["timings"], line["errors"]
        path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    embedder = ["--backend", f"image_embedder=siglip:{siglip_path}"]
    world = World()
    gemini_env.handler = world
    try:
        bench = cli(*bench_args(copy / "bench", embedder), "--json")
        concepts = cli(
            *concepts_args(copy / "concepts", copy / "inputs" / "concepts.jsonl", embedder)
        )
    finally:
        gemini_env.handler = None
    assert bench.returncode == 0, bench.stderr
    assert concepts.returncode == 0, concepts.stderr
    assert world.log == []
    found = [d for d in differences(DATA, copy) if d.startswith("bench/rows.csv:")]
    assert not found, found
    for name in ("bench", "concepts"):
        golden, now = (
            json.loads(normalise_text((d / name / "results.json").read_text(), placeholders(d)))
            for d in (DATA, copy)
        )
        for part in ("config", "summary"):
            assert not compare(golden[part], now[part], f"{name} {part}")
        # the record keeps each cell's line as it was read, of layout version 0
        assert {c["schema"] for c in now["cells"]} == {0}


def test_cells_of_a_newer_layout_are_refused(gemini_env, siglip_path, tmp_path):
    copy = moved(tmp_path, siglip_path)
    path = copy / "bench" / "cells.jsonl"
    first, *rest = path.read_text().splitlines()
    line = json.loads(first)
    line["schema"] = 99
    path.write_text("\n".join([json.dumps(line), *rest]) + "\n")
    embedder = ["--backend", f"image_embedder=siglip:{siglip_path}"]
    done = cli(*bench_args(copy / "bench", embedder))
    assert done.returncode != 0
    assert "layout version 99" in done.stderr and "upgrade" in done.stderr
    assert "Traceback" not in done.stderr
