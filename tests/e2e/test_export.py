"""refine export on runs of the fake Gemini world: the image folder, the preference pairs
and the edit triplets equal what the run records say; datasets loads the image folder;
bad inputs get one clear line."""

from __future__ import annotations

import json
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
from PIL import Image

from refine.io.store import RunStore
from tests.e2e.test_cli_run import cli

# the runs every test exports are made once, by a module fixture (8 s)
pytestmark = pytest.mark.slow

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


def test_a_full_disk_is_one_line_and_the_same_command_finishes(runs, tmp_path, monkeypatch):
    """The disk fills while the second image is copied: one line says so and what to do,
    no image is left cut short under its own name (it was a 0-byte file), and the same
    command into the same --out (refused before as "not empty") finishes the export."""
    import errno
    import shutil

    from PIL import Image

    from tests.e2e.test_cli_run import in_process as cli  # the patch is this process's

    out, loaded, _ = runs
    real, copied = shutil.copyfile, []

    def filling(src, dst, *args, **kwargs):
        copied.append(dst)
        if len(copied) == 2:  # half of it written, then the disk is full
            Path(dst).write_bytes(Path(src).read_bytes()[:100])
            raise OSError(errno.ENOSPC, "No space left on device", str(dst))
        return real(src, dst, *args, **kwargs)

    target = tmp_path / "if"
    with monkeypatch.context() as m:
        m.setattr(shutil, "copyfile", filling)
        done = cli("export", str(out), "--format", "imagefolder", "--out", str(target))
    assert done.returncode == 1 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert done.stderr.startswith("error: the disk is full writing ") and "again" in done.stderr
    images = sorted((target / "train").iterdir())
    assert [p.suffix for p in images] == [".png"]  # the first, whole; no temp file left
    with Image.open(images[0]) as im:
        im.verify()
    (target / "train" / "stray.png").write_bytes(b"left by the cut-off export")
    again = cli("export", str(out), "--format", "imagefolder", "--out", str(target))
    assert again.returncode == 0, again.stderr
    accepted = [r for run in loaded for r in run.rounds if r.decision == "accepted"]
    assert len(read(target / "train" / "metadata.jsonl")) == len(accepted)
    # what the cut-off export left went first: nothing of it is mixed in
    assert len(list((target / "train").glob("*.png"))) == len(accepted)
    assert not (target / ".export-incomplete").exists()
    # a folder with another's files stays refused
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    no = cli("export", str(out), "--format", "imagefolder", "--out", str(tmp_path / "other"))
    assert no.returncode == 2 and "is not empty; give a new folder" in no.stderr


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
    assert no.returncode == 2 and "'zip' is not one of imagefolder, pairs, edits, dpo" in no.stderr
    no = cli("export", str(out), "--format", "edits", "--out", str(tmp_path / "e"))
    assert no.returncode == 2 and "is not empty" in no.stderr


def _diffusion_dpo_batch(examples, resolution=32):
    """The loading code of diffusers' Diffusion-DPO example
    (examples/research_projects/diffusion_dpo/train_diffusion_dpo.py, preprocess_train),
    copied as it reads the columns: the images' bytes opened with PIL, the pair swapped
    when label_0 is 0 so that the preferred image comes first, the caption tokenized."""
    import io

    import torch
    from torchvision import transforms

    train_transforms = transforms.Compose(
        [
            transforms.Resize(resolution, interpolation=transforms.InterpolationMode.BILINEAR),
            transforms.CenterCrop(resolution),
            transforms.ToTensor(),
            transforms.Normalize([0.5], [0.5]),
        ]
    )
    all_pixel_values = []
    for col_name in ["jpg_0", "jpg_1"]:
        images = [
            Image.open(io.BytesIO(im_bytes)).convert("RGB") for im_bytes in examples[col_name]
        ]
        pixel_values = [train_transforms(image) for image in images]
        all_pixel_values.append(pixel_values)
    im_tup_iterator = zip(*all_pixel_values)  # noqa: B905 (the example's own line)
    combined_pixel_values = []
    for im_tup, label_0 in zip(im_tup_iterator, examples["label_0"]):  # noqa: B905
        if label_0 == 0:
            im_tup = im_tup[::-1]
        combined_im = torch.cat(im_tup, dim=0)  # no batch dim
        combined_pixel_values.append(combined_im)
    examples["pixel_values"] = combined_pixel_values
    examples["input_ids"] = list(examples["caption"])  # the example tokenizes these
    return examples


def test_dpo_shards_load_in_the_diffusion_dpo_example(runs, tmp_path):
    out, loaded, dirs = runs
    common = [str(out), "--max-drift", "2", "--out"]
    done = cli("export", *common, str(tmp_path / "d"), "--format", "dpo", "--json")
    assert done.returncode == 0, done.stderr
    pairs = cli("export", *common, str(tmp_path / "pp"), "--format", "pairs")
    assert pairs.returncode == 0, pairs.stderr
    want = read(tmp_path / "pp" / "train" / "metadata.jsonl")
    assert sorted((tmp_path / "d" / "data").iterdir())[0].name == "train-00000-of-00001.parquet"
    import datasets
    import torch

    # as the example loads it: load_dataset(args.dataset_name, split=args.dataset_split_name)
    ds = datasets.load_dataset(str(tmp_path / "d"), split="train", cache_dir=str(tmp_path / "hf"))
    assert ds.features["jpg_0"] == datasets.Value("binary")
    assert len(ds) == len(want) == json.loads(done.stdout)["taken"]
    assert set(ds["label_0"]) == {0.0, 1.0}  # the preferred image is not always first
    batch = _diffusion_dpo_batch(ds[:])
    for k, row in enumerate(want):  # the same pairs in the same order
        winner = (tmp_path / "pp" / "train" / row["image_w_file_name"]).read_bytes()
        got = ds[k]
        assert (got["jpg_0"] if got["label_0"] == 1.0 else got["jpg_1"]) == winner
        assert got["caption"] == row["prompt"] and got["margin"] == row["margin"]
        # the example's tensor: the preferred image's channels first, then the other's
        alone = _diffusion_dpo_batch(
            {"jpg_0": [winner], "jpg_1": [winner], "label_0": [1], "caption": ["x"]}
        )
        assert batch["pixel_values"][k].shape == (6, 32, 32)
        assert torch.equal(batch["pixel_values"][k][:3], alone["pixel_values"][0][:3])
    from huggingface_hub import DatasetCard

    card = DatasetCard.load(tmp_path / "d" / "README.md")
    assert card.data.task_categories == ["text-to-image"]
    assert "ties" in card.text and "train_diffusion_dpo.py" in card.text


def test_judge_formats_load_in_trl_layouts(runs, tmp_path):
    out, loaded, dirs = runs
    import datasets

    done = cli("export", str(out), "--format", "judge-dpo", "--out", str(tmp_path / "j"),
               "--max-drift", "2", "--holdout", ACTS[1])  # fmt: skip
    assert done.returncode == 0, done.stderr
    ds = datasets.load_dataset(str(tmp_path / "j"), cache_dir=str(tmp_path / "hf"))
    assert set(ds) == {"train", "test"}
    row = ds["train"][0]
    assert [m["role"] for m in row["prompt"]] == ["user"]
    assert [c["type"] for c in row["prompt"][0]["content"]] == ["image", "image", "text"]
    assert len(row["images"]) == 2 and row["images"][0].size[1] == 48
    chosen, rejected = (
        row["chosen"][0]["content"][0]["text"],
        row["rejected"][0]["content"][0]["text"],
    )
    # the answer names the image FAITH prefers; the rejected one the other
    assert {chosen[:8], rejected[:8]} == {"Image 1.", "Image 2."}
    run = next(r for r in loaded if r.id == row["run"])
    assert ACTS[0] in row["prompt"][0]["content"][2]["text"] and run.spec.activity == ACTS[0]
    kto = cli("export", str(out), "--format", "judge-kto", "--out", str(tmp_path / "k"))
    assert kto.returncode == 0, kto.stderr
    ks = datasets.load_dataset(str(tmp_path / "k"), split="train", cache_dir=str(tmp_path / "hf"))
    decided = [
        (run, r)
        for run in loaded
        for r in run.rounds
        if r.kind == "edit" and r.decision in ("accepted", "rejected")
    ]
    assert len(ks) == 2 * len(decided) >= 2
    for k, (run, r) in enumerate(decided):
        good, bad = ks[2 * k], ks[2 * k + 1]
        verdict = "Keep." if r.decision == "accepted" else "Reject."
        assert good["label"] is True and good["completion"][0]["content"][0]["text"].startswith(
            verdict
        )
        assert bad["label"] is False and not bad["completion"][0]["content"][0]["text"].startswith(
            verdict
        )
        assert good["decision"] == r.decision and r.text in good["prompt"][0]["content"][2]["text"]
        after = Image.open(dirs[loaded.index(run)] / r.best.image).convert("RGB")
        assert good["images"][1].convert("RGB").tobytes() == after.tobytes()


def hub_env(hub, home: Path, token: bool = True) -> dict[str, str]:
    """The environment of a refine process that reaches the stand-in hub: its address, a
    cache of its own, LFS uploads (the stand-in does not speak Xet) and, with ``token``,
    the hub's token."""
    import os

    env = {**os.environ, "HF_ENDPOINT": hub.url, "HF_HOME": str(home), "HF_HUB_DISABLE_XET": "1"}
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"):
        env.pop(name, None)
    if token:
        env["HF_TOKEN"] = hub.token
    return env


@contextmanager
def on_hub(hub, home: Path, token: bool = True, downloads: bool = False):
    """This process reaching the stand-in hub, as ``hub_env`` makes a refine process reach
    it: the hub's address (read when a command asks the hub), a token store of its own,
    LFS uploads and, with ``token``, the hub's token. ``huggingface_hub`` reads its offline
    and Xet switches once, at its import, so they are set on its constants meanwhile. With
    ``downloads``, what it reads from HF_ENDPOINT and HF_HOME at its import too: the address
    files are downloaded from (its constants, and its module-level client's, which
    diffusers asks), and the cache ``home``/hub; and transformers' client, made once on
    its first use with the address of then, is made anew meanwhile and forgotten after
    (one kept from a stand-in hub gone asked it again for 98 s in a later test)."""
    import transformers.utils.hub as transformers_hub
    from huggingface_hub import constants, hf_api

    with pytest.MonkeyPatch.context() as patch:
        if downloads:
            patch.setattr(constants, "ENDPOINT", hub.url)
            template = hub.url + "/{repo_id}/resolve/{revision}/{filename}"
            patch.setattr(constants, "HUGGINGFACE_CO_URL_TEMPLATE", template)
            patch.setattr(constants, "HF_HUB_CACHE", str(home / "hub"))
            patch.setattr(hf_api.api, "endpoint", hub.url)
            patch.setattr(transformers_hub, "_hf_api", None)
        patch.setenv("HF_ENDPOINT", hub.url)
        for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_HUB_OFFLINE"):
            patch.delenv(name, raising=False)
        if token:
            patch.setenv("HF_TOKEN", hub.token)
        patch.setattr(constants, "HF_HUB_OFFLINE", False)
        patch.setattr(constants, "HF_HUB_DISABLE_XET", True)
        patch.setattr(constants, "HF_TOKEN_PATH", str(home / "token"))
        patch.setattr(constants, "HF_STORED_TOKENS_PATH", str(home / "stored_tokens"))
        yield


def test_an_export_is_pushed_to_the_hub_in_one_private_commit(runs, tmp_path):
    """In this process (``on_hub``): each command asks the hub named when it runs. Its
    commands run here even under REFINE_TEST_SUBPROCESS=1 (what ``on_hub`` sets on
    ``huggingface_hub`` reaches no other process; six processes took 8 s more)."""
    from huggingface_hub import DatasetCard

    from tests.e2e.test_cli_run import in_process as cli
    from tests.fakes.hub_server import FakeHub

    out, loaded, dirs = runs
    args = ["export", str(out), "--format", "dpo", "--max-drift", "2"]
    home = tmp_path / "hf"
    with FakeHub({}) as hub:
        # no token: refused before anything is written or asked
        with on_hub(hub, home, token=False):
            done = cli(*args, "--out", str(tmp_path / "a"), "--push-to-hub", "me/culture-dpo")
        assert done.returncode == 2, done.stderr
        assert "--push-to-hub: no Hugging Face token" in done.stderr
        assert not (tmp_path / "a").exists() and hub.requests == []
        with on_hub(hub, home):
            bad = cli(*args, "--out", str(tmp_path / "b"), "--push-to-hub", "culture-dpo")
            assert bad.returncode == 2 and "give the repository as OWNER/NAME" in bad.stderr
            done = cli(*args, "--out", str(tmp_path / "d"), "--push-to-hub", "me/culture-dpo")
            assert done.returncode == 0, done.stderr
            repo = hub.pushed[("dataset", "me/culture-dpo")]
            written = {
                p.relative_to(tmp_path / "d").as_posix(): p.read_bytes()
                for p in (tmp_path / "d").rglob("*")
                if p.is_file()
            }
            assert repo["files"] == written and repo["private"] is True
            assert (
                len(repo["commits"]) == 1
                and "refine export --format dpo" in (repo["commits"][0]["summary"])
            )
            shards = [p for p in written if p.endswith(".parquet")]
            # the shards went through LFS (one upload each), the card as a regular file
            assert sum(r.startswith("PUT /lfs-upload/") for r in hub.requests) == len(shards) == 1
            assert f"pushed to the Hub: {hub.url}/me/culture-dpo/commit/" in done.stdout
            # a public repository is pushed to only with --public; a read-only token, never
            opened = cli(
                *args, "--out", str(tmp_path / "e"), "--push-to-hub", "me/open", "--public"
            )
            assert opened.returncode == 0, opened.stderr
            assert hub.pushed[("dataset", "me/open")]["private"] is False
            again = cli(*args, "--out", str(tmp_path / "f"), "--push-to-hub", "me/open")
            assert again.returncode == 2
            assert "me/open exists and is public; add --public to push to it" in again.stderr
            assert len(hub.pushed[("dataset", "me/open")]["commits"]) == 1
            # a conflict the hub names no repository in: said as such (it read "('url')")
            hub.conflicts.add("me/taken")
            taken = cli(*args, "--out", str(tmp_path / "t"), "--push-to-hub", "me/taken")
            assert taken.returncode == 2 and taken.stderr == (
                "error: --push-to-hub: the hub refused to create me/taken (HTTP 409, a "
                "conflict: the name may be held by a repository of another kind or one being "
                f"made); nothing was pushed; {tmp_path / 't'} is kept\n"
            ), taken.stderr
            hub.conflicts.add("me/taken-bare")  # a 409 with no JSON at all
            bare = cli(*args, "--out", str(tmp_path / "tb"), "--push-to-hub", "me/taken-bare")
            assert bare.returncode == 2 and "HTTP 409, a conflict" in bare.stderr, bare.stderr
            # a hub that drips its answer about the token is given up on within the limit,
            # and the token is not blamed (it held the push for the server's 300 s)
            import refine.train.hub as hub_module

            hub.whoami_drip_s, began = 0.5, time.monotonic()
            with pytest.MonkeyPatch.context() as m:
                m.setattr(hub_module, "WHOAMI_S", 1.0)
                slow = cli(*args, "--out", str(tmp_path / "s"), "--push-to-hub", "me/slow")
            hub.whoami_drip_s = 0.0
            assert time.monotonic() - began < 10 and slow.returncode == 2, slow.stderr
            assert f"the hub ({hub.url}) did not answer within 1 s" in slow.stderr
            assert "token" not in slow.stderr and not (tmp_path / "s").exists()
            hub.token_role = "read"
            reader = cli(*args, "--out", str(tmp_path / "g"), "--push-to-hub", "me/culture-dpo")
            assert reader.returncode == 2 and "the token can only read" in reader.stderr
            assert not (tmp_path / "g").exists()  # refused before the export
    lone = cli(*args, "--out", str(tmp_path / "h"), "--public")
    assert lone.returncode == 2 and "give --push-to-hub OWNER/NAME too" in lone.stderr
    card = tmp_path / "card.md"
    card.write_bytes(repo["files"]["README.md"])
    assert DatasetCard.load(card).data.task_categories == ["text-to-image"]


def test_records_name_their_layout_packages_and_weights(runs, tmp_path):
    """run.json and the export's card carry a layout version, the toolkit's and the
    packages' versions and the weights each model resolved to; a run.json written before
    the field opens as layout 1, one from a newer toolkit is refused naming both."""
    from refine import __version__
    from refine.records import RUN_SCHEMA, WRITTEN_SCHEMA

    out, loaded, dirs = runs
    run = loaded[0]
    # written at layout 2 (3 only with refused rounds: test_finish_reasons; 4 with a
    # person's change of references: test_changed_references), read up to 4
    assert run.schema_version == WRITTEN_SCHEMA == 2 and RUN_SCHEMA == 4
    assert run.toolkit == __version__
    # the image embedder is a local folder, not a cached snapshot: no commit to name
    assert run.backend_info["image_embedder"]["commit"] == "no_revision_available"
    assert "torch" in run.packages
    doc = json.loads((dirs[0] / "run.json").read_text())
    old = {k: v for k, v in doc.items() if k not in ("schema_version", "toolkit")}
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "run.json").write_text(json.dumps(old))
    assert RunStore(tmp_path / "old").load().schema_version == 1
    (tmp_path / "new").mkdir()
    (tmp_path / "new" / "run.json").write_text(json.dumps({**doc, "schema_version": 9}))
    with pytest.raises(ValueError, match="layout version 9, newer than this toolkit reads"):
        RunStore(tmp_path / "new").load()
    done = cli("export", str(out), "--format", "edits", "--out", str(tmp_path / "e"))
    assert done.returncode == 0, done.stderr
    from huggingface_hub import DatasetCard

    made = DatasetCard.load(tmp_path / "e" / "README.md").data.to_dict()["refine"]
    assert made["schema"] == 1 and made["toolkit"] == __version__
    assert made["packages"]["torch"] == run.packages["torch"]
    assert made["models"]["image_embedder"] == [
        f"{run.backend_info['image_embedder']['id']} @ no_revision_available"
    ]
    # the fake Gemini answers name their modelVersion: the generator's is the API's word
    gen = run.backend_info["generator"]
    assert made["models"]["generator"] == [f"{gen['id']} @ {gen['model_version']}"]


def test_a_hostile_run_folder_writes_nothing_outside_and_copies_no_link(runs, tmp_path):
    """A run folder whose run.json names its id ``../../x`` (or an absolute path), or
    whose image is a link to a private file, is left out with its reason: nothing is
    written outside --out, the linked file is neither copied nor named (it was copied, and
    pushed to the Hub); an --out that is a file is one line."""
    import shutil

    out, loaded, dirs = runs
    secret = tmp_path / "id_rsa"
    secret.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\n")
    hostile = tmp_path / "hostile"
    for k, (rid, link) in enumerate(
        [("../../escaped", False), (str(tmp_path / "abs"), False), (None, True)]
    ):
        copy = hostile / f"run{k}"
        shutil.copytree(dirs[0], copy)
        doc = json.loads((copy / "run.json").read_text())
        if rid is not None:
            doc["id"] = rid
        (copy / "run.json").write_text(json.dumps(doc))
        if link:
            image = copy / loaded[0].rounds[-1].best.image
            image.unlink()
            image.symlink_to(secret)
    shutil.copytree(dirs[1], hostile / "good")  # and one run as it was made
    target = tmp_path / "deep" / "a" / "b"
    for fmt in ("imagefolder", "pairs", "dpo"):
        loose = [] if fmt == "imagefolder" else ["--max-drift", "10"]  # the good run's pairs
        done = cli("export", str(hostile), "--format", fmt, "--out", str(target / fmt), *loose)
        assert done.returncode == 0, done.stderr
        assert "skipped 2: a run whose id is not a plain name" in done.stdout
        link = "skipped 1: a run whose image is a link, outside its folder or missing"
        assert link in done.stdout and f"{fmt}: 0 item(s)" not in done.stdout
    written = {p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file()}
    assert not {p for p in written if "escaped" in str(p) or str(p).startswith("abs")}
    for p in target.rglob("*"):
        assert not p.is_symlink() and "OPENSSH" not in (
            p.read_text(errors="ignore") if p.is_file() else ""
        )
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    said = cli("export", str(out), "--format", "imagefolder", "--out", str(a_file))
    assert (
        said.returncode == 2
        and said.stderr.strip() == f"error: --out: {a_file} is a file; give a new folder"
    )
