"""``refine models download``: a profile's weights fetched ahead of time, with the downloads
stubbed at the hub boundary only (huggingface_hub and open_clip's own download)."""

from __future__ import annotations

import json

import huggingface_hub
import pytest

from refine.cli import main


@pytest.fixture
def hub(monkeypatch, tmp_path):
    fetched: list[tuple] = []

    def snapshot_download(repo_id, revision=None, **kw):
        if repo_id.endswith("Qwen3-VL-8B-Instruct"):
            fetched.append(("refused", repo_id, revision))
            raise OSError("Connection refused")
        fetched.append(("hub", repo_id, revision))
        return str(tmp_path / repo_id)

    def download_pretrained(cfg, **kw):
        fetched.append(("clip", cfg.get("hf_hub") or cfg.get("url")))
        return str(tmp_path / "clip.bin")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot_download)
    import open_clip  # here: its import (torchvision, timm) is 3 s of every worker's collection

    monkeypatch.setattr(open_clip.pretrained, "download_pretrained", download_pretrained)
    return fetched


def test_a_profiles_models_are_fetched_once_each(capsys, hub):
    with pytest.raises(SystemExit) as done:
        main(["models", "download", "--profile", "local-gpu", "--json"])
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    assert done.value.code == 1  # one model could not be fetched
    flux = rows["diffusers:black-forest-labs/FLUX.2-klein-4B"]
    assert flux["status"] == "downloaded" and flux["role"] == "generator, editor"
    failed = rows["hf:Qwen/Qwen3-VL-8B-Instruct"]
    assert failed["role"] == "observer, judge, llm"  # one model, fetched once for three roles
    assert failed["status"] == "failed" and "Connection refused" in failed["detail"]
    assert rows["st:all-MiniLM-L6-v2"] == {
        "role": "text_embedder",
        "name": "st:all-MiniLM-L6-v2",
        "status": "skipped",
        "detail": "bundled",
    }
    assert rows["clip:ViT-L-14/openai"]["status"] == "downloaded"
    assert [f[:2] for f in hub if f[0] != "clip"] == [
        ("hub", "black-forest-labs/FLUX.2-klein-4B"),
        ("refused", "Qwen/Qwen3-VL-8B-Instruct"),
    ]
    assert sum(f[0] == "clip" for f in hub) == 1


def test_the_gemini_profile_needs_only_its_clip_weights(capsys, hub):
    with pytest.raises(SystemExit) as done:
        main(["models", "download", "--profile", "gemini"])
    out = capsys.readouterr().out
    assert done.value.code == 0
    assert "skipped    gemini:gemini-3.8-flash  (observer, judge, llm)  an API model" in out
    assert "downloaded clip:ViT-B-32/laion2b_s34b_b79k" in out
    assert [f[0] for f in hub] == ["clip"]


def test_a_generator_with_a_lora_file_of_a_hub_repository(capsys, hub, monkeypatch, tmp_path):
    """The AHEaD recipes' Qwen-Image-Lightning: the base model's repository whole, then the
    one LoRA file of the adapters' repository (not the name with its adapter as a repo)."""
    files: list[tuple[str, str]] = []

    def hf_hub_download(repo_id, filename, **kw):
        files.append((repo_id, filename))
        return str(tmp_path / filename)

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", hf_hub_download)
    light = "lightx2v/Qwen-Image-Lightning/Qwen-Image-Lightning-8steps-V1.1.safetensors"
    name = f"diffusers:Qwen/Qwen-Image+lora={light}"
    with pytest.raises(SystemExit):
        main(["models", "download", "--profile", "local-gpu", "--backend",
              f"generator={name}", "--json"])  # fmt: skip
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows[name]["status"] == "downloaded"
    assert ("hub", "Qwen/Qwen-Image", None) in hub
    assert files == [
        ("lightx2v/Qwen-Image-Lightning", "Qwen-Image-Lightning-8steps-V1.1.safetensors")
    ]


def test_a_clip_flant5_judge_brings_its_vision_tower_and_tokenizer(capsys, hub, tmp_path):
    """clip-t5: the checkpoint, then the CLIP vision tower its config names and FlanT5-XXL's
    tokenizer (the checkpoint has none), each its transformers files alone."""
    folder = tmp_path / "zhiqiulin/clip-flant5-xxl"
    folder.mkdir(parents=True)
    tower = "openai/clip-vit-large-patch14-336"
    (folder / "config.json").write_text(json.dumps({"mm_vision_tower": tower}))
    name = "clip-t5:zhiqiulin/clip-flant5-xxl"
    with pytest.raises(SystemExit):
        main(["models", "download", "--profile", "gemini", "--backend", f"judge={name}",
              "--json"])  # fmt: skip
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows[name]["status"] == "downloaded"
    assert [h[1] for h in hub if h[0] == "hub"] == [
        "zhiqiulin/clip-flant5-xxl",
        tower,
        "google/flan-t5-xxl",
    ]
