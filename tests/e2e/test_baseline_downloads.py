"""The baselines' checkpoints fetched with ``refine models download --baselines`` from a
stand-in model hub into the Hugging Face cache, then scored from that cache with no hub at
all, each in this process (``on_hub``, then huggingface_hub offline on that cache: the two
commands in processes of their own spent 9 s more)."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from PIL import Image

from tests.e2e.test_cli_run import in_process as run
from tests.e2e.test_export import on_hub
from tests.fakes.gemini_world import RED
from tests.fakes.hub_server import FakeHub
from tests.fakes.tiny_models import build_tiny_hf_clip, build_tiny_image_reward

pytestmark = pytest.mark.slow
PICK = "test/tiny-pickscore"
CLIP_H = "laion/CLIP-ViT-H-14-laion2B-s32B-b79K"
BERT = "google-bert/bert-base-uncased"


def test_pickscore_and_hps_fetched_then_scored_offline(world, tmp_path):
    folder = build_tiny_hf_clip(tmp_path / "m", seed=3, processor_apart=True)
    hps = tmp_path / "hps"
    hps.mkdir()
    torch.save({"state_dict": {"w": torch.zeros(2)}}, hps / "HPS_v2_compressed.pt")
    (hps / "HPS_v2.1_compressed.pt").write_bytes(b"not fetched")
    # CLIP-H's repository: its processor's files beside its config and weights
    clip_h = tmp_path / "m" / "tiny-hf-clip-processor"
    for name in ("config.json", "model.safetensors"):
        shutil.copy(folder / name, clip_h / name)
    # ImageReward's files, and BERT's tokenizer repository beside its weights
    ir, _ = build_tiny_image_reward(tmp_path / "ir", seed=1)
    bert = tmp_path / "bert"
    bert.mkdir()
    shutil.move(ir / "vocab.txt", bert / "vocab.txt")
    (bert / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": True}))
    (bert / "model.safetensors").write_bytes(b"weights not fetched")
    repos = {PICK: folder, CLIP_H: clip_h, "xswu/HPSv2": hps, "THUDM/ImageReward": ir,
             BERT: bert}  # fmt: skip
    home = tmp_path / "hf"
    with FakeHub(repos) as hub, on_hub(hub, home, downloads=True):
        args = ["models", "download", "--baselines", "pickscore,hpsv2,imagereward,vqascore"]
        args += ["--baseline-model", f"pickscore={PICK}", "--json"]
        args += ["--backend", f"image_embedder=hfclip:{PICK}"]
        got = run(*args)
        assert got.returncode == 0, got.stderr
        rows = {r["role"]: r for r in json.loads(got.stdout)}
        assert rows["baseline pickscore"]["status"] == "downloaded"
        assert rows["baseline pickscore"]["name"] == f"{PICK} (processor {CLIP_H})"
        assert rows["baseline hpsv2"]["name"] == "xswu/HPSv2/HPS_v2_compressed.pt"
        assert rows["baseline hpsv2"]["detail"].endswith("HPS_v2_compressed.pt")
        assert "baseline vqascore" not in rows  # no checkpoint of its own
        asked = [r.split(" ")[1] for r in hub.requests if r.startswith("GET ")]
        # the processor's repository: its processor files only, not its weights
        assert not any("HPS_v2.1" in r for r in asked)
        assert any(r.startswith(f"/{CLIP_H}/resolve/") for r in asked)
        assert not any(r.startswith(f"/{CLIP_H}/") and r.endswith(".safetensors") for r in asked)
        assert rows["baseline imagereward"]["detail"].endswith("ImageReward.pt")
        assert any(r.endswith("/med_config.json") for r in asked)
        assert any(r.startswith(f"/{BERT}/resolve/") for r in asked)
        assert not any(r.startswith(f"/{BERT}/") and r.endswith(".safetensors") for r in asked)
    cached = home / "hub" / "models--test--tiny-pickscore"
    assert cached.is_dir() and (home / "hub" / "models--xswu--HPSv2").is_dir()
    # offline, from the cache: the model, and the processor of the other repository
    image = tmp_path / "red.png"
    Image.new("RGB", (32, 32), RED).save(image)
    args = ["score", str(image), "--activity", "people eating food at home", "--country"]
    args += [
        "Iran",
        "--baselines",
        "pickscore,imagereward",
        "--baseline-model",
        f"pickscore={PICK}",
    ]
    args += ["--backend", f"image_embedder=hfclip:{PICK}", "--json", "--out", tmp_path / "s"]
    from huggingface_hub import constants

    with pytest.MonkeyPatch.context() as patch:  # offline, on the cache the download filled
        patch.setattr(constants, "HF_HUB_OFFLINE", True)
        patch.setattr(constants, "HF_HUB_CACHE", str(home / "hub"))
        scored = run(*args)
    assert scored.returncode == 0, scored.stderr
    values = json.loads(scored.stdout)["cells"][0]["images"][0]["scores"]["values"]
    value = values["pickscore"]
    from refine.evaluate.baseline_models import CHECKPOINTS, model_readings, parse_baseline_models

    ck = CHECKPOINTS["pickscore"].__class__(
        "pickscore", "hfclip", "", path=str(folder), processor=str(repos[CLIP_H])
    )
    prompt = "A photorealistic photo of people eating food at home in Iran."
    with Image.open(image) as im:
        (want,) = model_readings(["pickscore"], [im.convert("RGB")], prompt, {"pickscore": ck})
    r = want["pickscore"]
    assert value == pytest.approx(r.logit_scale * r.cosine, abs=1e-4)
    # ImageReward from the cache: the same reward as its folder gives (with the tokenizer)
    shutil.copy(bert / "vocab.txt", ir / "vocab.txt")
    given = parse_baseline_models([f"imagereward={ir}"])
    with Image.open(image) as im:
        (want,) = model_readings(["imagereward"], [im.convert("RGB")], prompt, given, "cpu")
    assert values["imagereward"] == pytest.approx(want["imagereward"].reward, rel=1e-5)
