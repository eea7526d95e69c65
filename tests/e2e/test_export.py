"""refine export on runs of the fake Gemini world: the image folder, the preference pairs
and the edit triplets equal what the run records say; datasets loads the image folder;
bad inputs get one clear line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PIL import Image

from refine.io.store import RunStore
from tests.e2e.test_cli_run import cli

ACTS = ["people eating food at home", "wedding celebration"]


@pytest.fixture(scope="module")
def runs(gemini_env, siglip_path, tmp_path_factory):
    """Two runs made once for the module (the tests only read them)."""
    from tests.fakes.gemini_world import World

    world, saved = World(), gemini_env.handler
    gemini_env.handler = world
    try:
        return _make_runs(world, siglip_path, tmp_path_factory.mktemp("export") / "runs")
    finally:
        gemini_env.handler = saved


def _make_runs(world, siglip_path, out):
    for k, act in enumerate(ACTS):
        world.size = (64 + 8 * k, 48)  # other bytes: the runs' images are not the same files
        done = cli(
            "run",
            act,
            "--country",
            "Iran",
            "--out",
            str(out),
            "--rounds",
            "2",
            "--target",
            "1.0",
            "--max-drift",
            "2",
            "--patience",
            "3",
            "--backend",
            f"image_embedder=siglip:{siglip_path}",
        )
        assert done.returncode == 0, done.stderr
    return out, [RunStore(p).load() for p in sorted(out.iterdir())], sorted(out.iterdir())


def read(path):
    return [json.loads(x) for x in path.read_text().splitlines()]


def test_imagefolder_and_datasets(runs, tmp_path):
    out, loaded, dirs = runs
    done = cli("export", str(out), "--format", "imagefolder", "--out", str(tmp_path / "if"))
    assert done.returncode == 0, done.stderr
    rows = read(tmp_path / "if" / "train" / "metadata.jsonl")
    accepted = [(run, r) for run in loaded for r in run.rounds if r.decision == "accepted"]
    assert len(rows) == len(accepted) >= 2
    for row, (run, r) in zip(rows, accepted, strict=True):
        assert row["run"] == run.id and row["round"] == r.index
        assert row["faith"] == r.best.scores.faith and row["hal"] == r.best.scores.hal
        assert row["prompt"] == run.rounds[0].text and row["activity"] == run.spec.activity
    import datasets

    ds = datasets.load_dataset(
        "imagefolder", data_dir=str(tmp_path / "if"), split="train", cache_dir=str(tmp_path / "hf")
    )
    assert len(ds) == len(rows) and set(ds["faith"]) == {r["faith"] for r in rows}
    assert ds[0]["image"].size[1] == 48
    # the dataset card: the Hub's header, the same columns through it, counts per country
    from huggingface_hub import DatasetCard

    card = DatasetCard.load(tmp_path / "if" / "README.md")
    assert card.data.task_categories == ["text-to-image"] and card.data.license == "other"
    named = {f["name"]: f["dtype"] for f in card.data.dataset_info["features"]}
    assert named["image"] == "image" and named["faith"] == "float64" and named["round"] == "int64"
    via_card = datasets.load_dataset(
        str(tmp_path / "if"), split="train", cache_dir=str(tmp_path / "hf")
    )
    assert via_card["faith"] == ds["faith"] and via_card.features == ds.features
    for run in loaded:
        n = sum(1 for r in rows if r["run"] == run.id)
        assert f"| {run.references.country} | {run.spec.activity} | {n} |" in card.text
    assert f"imagefolder: {len(rows)} item(s) written" in done.stdout


def test_pairs_margins_holdout_and_duplicates(runs, tmp_path):
    out, loaded, dirs = runs
    args = [
        "export",
        str(out),
        "--format",
        "pairs",
        "--out",
        str(tmp_path / "p"),
        "--max-drift",
        "2",
        "--holdout",
        ACTS[1],
        "--json",
    ]
    done = cli(*args)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    train = read(tmp_path / "p" / "train" / "metadata.jsonl")
    test = read(tmp_path / "p" / "test" / "metadata.jsonl")
    assert {r["activity"] for r in train} == {ACTS[0]} and {r["activity"] for r in test} == {
        ACTS[1]
    }
    for rows, run in zip((train, test), loaded, strict=True):
        best = run.rounds[run.best_round].best
        first = [r for r in rows if r["source"] == "best-vs-first"]
        assert len(first) == 1
        assert first[0]["margin"] == pytest.approx(
            best.scores.faith - run.rounds[0].best.scores.faith
        )
        # within a round: the better candidate first; the same two pictures only once
        within = [r for r in rows if r["source"] == "within-round"]
        assert within and all(r["faith_w"] - r["faith_l"] >= 0.02 for r in within)
        split = "train" if rows is train else "test"
        for r in rows:  # each split's images beside its metadata, as datasets reads them
            assert (tmp_path / "p" / split / r["image_w_file_name"]).is_file()
    import datasets

    for ds in (
        datasets.load_dataset(str(tmp_path / "p"), cache_dir=str(tmp_path / "hf")),  # the card
        datasets.load_dataset(
            "imagefolder", data_dir=str(tmp_path / "p"), cache_dir=str(tmp_path / "hf")
        ),
    ):
        assert {s: len(ds[s]) for s in ds} == {"train": len(train), "test": len(test)}
        assert isinstance(ds["train"].features["image_w"], datasets.Image)
        assert isinstance(ds["train"].features["image_l"], datasets.Image)
        assert ds["train"]["margin"] == [r["margin"] for r in train]
        first = ds["train"][0]
        want = tmp_path / "p" / "train" / train[0]["image_w_file_name"]
        assert first["image_w"].tobytes() == Image.open(want).convert("RGB").tobytes()
    assert doc["skipped"].get("the same pair again", 0) >= 1
    # refine tune reads the pairs as written (and the ../images/ layout of older exports)
    from refine.train.data import load_rows

    tuned = load_rows(tmp_path / "p", "dpo")
    assert [Path(r["image_w"]) for r in tuned] == [
        (tmp_path / "p" / "train" / r["image_w_file_name"]).resolve() for r in train
    ]
    strict_args = [a if a != str(tmp_path / "p") else str(tmp_path / "p2") for a in args[:-1]]
    strict = cli(*strict_args, "--min-margin", "0.99")
    assert strict.returncode == 2
    assert (
        "nothing to export as pairs" in strict.stderr and "FAITH margin below 0.99" in strict.stderr
    )
    assert len(strict.stderr.strip().splitlines()) == 1


def test_edits_and_bad_inputs(runs, world, siglip_path, tmp_path):
    out, loaded, dirs = runs
    done = cli("export", str(out), "--format", "edits", "--out", str(tmp_path / "e"))
    assert done.returncode == 0, done.stderr
    rows = read(tmp_path / "e" / "train" / "metadata.jsonl")
    edits = [
        (d, run, r)
        for d, run in zip(dirs, loaded, strict=True)
        for r in run.rounds
        if r.decision == "accepted"
    ]
    assert len(rows) == len(edits)
    for row, (d, run, r) in zip(rows, edits, strict=True):
        assert row["edit_prompt"] == r.text
        parent = run.rounds[r.parent].best
        assert (tmp_path / "e" / "train" / row["input_image_file_name"]).read_bytes() == (
            d / parent.image
        ).read_bytes()
        assert (tmp_path / "e" / "train" / row["edited_image_file_name"]).read_bytes() == (
            d / r.best.image
        ).read_bytes()
    import datasets

    # the columns diffusers' InstructPix2Pix training reads, images as images
    ds = datasets.load_dataset(str(tmp_path / "e"), split="train", cache_dir=str(tmp_path / "hf"))
    assert ds.column_names[:3] == ["input_image", "edit_prompt", "edited_image"]
    assert isinstance(ds.features["input_image"], datasets.Image)
    assert ds["edit_prompt"] == [row["edit_prompt"] for row in rows]
    card = (tmp_path / "e" / "README.md").read_text()
    assert "task_categories:" in card and '- "image-to-image"' in card
    empty = tmp_path / "empty"
    empty.mkdir()
    no = cli("export", str(empty), "--format", "pairs", "--out", str(tmp_path / "x"))
    assert no.returncode == 2 and "no runs inside" in no.stderr
    # a run with no editing rounds has nothing accepted
    zero = tmp_path / "zero"
    assert (
        cli(
            "run",
            ACTS[0],
            "--country",
            "Iran",
            "--out",
            str(zero),
            "--rounds",
            "0",
            "--backend",
            f"image_embedder=siglip:{siglip_path}",
        ).returncode
        == 0
    )
    no = cli("export", str(zero), "--format", "imagefolder", "--out", str(tmp_path / "y"))
    assert no.returncode == 2 and "1 run without an accepted round" in no.stderr
    no = cli("export", str(out), "--format", "zip", "--out", str(tmp_path / "z"))
    assert no.returncode == 2 and "'zip' is not one of imagefolder, pairs, edits" in no.stderr
    no = cli("export", str(out), "--format", "edits", "--out", str(tmp_path / "e"))
    assert no.returncode == 2 and "is not empty" in no.stderr
