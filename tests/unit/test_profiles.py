"""Profiles name one registered backend per role."""

from __future__ import annotations

import pytest

from refine.profiles import list_profiles, load_profile


def test_gemini_profile_names_registered_backends():
    assert "gemini" in list_profiles()
    p = load_profile("gemini")
    assert p.backend("generator") == "gemini:gemini-3.1-flash-image"
    assert p.backend("text_embedder") == "st:all-MiniLM-L6-v2"
    assert {"generator", "editor", "observer", "judge", "llm"} <= set(p.roles)
    assert "GEMINI_API_KEY" in p.description


def test_unknown_profile_lists_bundled():
    with pytest.raises(ValueError, match="unknown profile 'huge-gpu'.*gemini"):
        load_profile("huge-gpu")


def test_profile_file_errors(tmp_path):
    bad_role = tmp_path / "p.toml"
    bad_role.write_text('[roles]\npainter = "gemini:x"\n')
    with pytest.raises(ValueError, match="unknown role 'painter'"):
        load_profile(str(bad_role))
    bad_name = tmp_path / "q.toml"
    bad_name.write_text('[roles]\ngenerator = "dalle:3"\n')
    with pytest.raises(ValueError, match=r"roles.generator: unknown generator backend 'dalle:3'"):
        load_profile(str(bad_name))
    empty = tmp_path / "e.toml"
    empty.write_text('description = "x"\n')
    with pytest.raises(ValueError, match=r"\[roles\]"):
        load_profile(str(empty))
    broken = tmp_path / "b.toml"
    broken.write_text("[roles\n")
    with pytest.raises(ValueError, match="invalid TOML"):
        load_profile(str(broken))


def test_gpu_profiles():
    assert {"gemini", "local-gpu", "small-gpu"} <= set(list_profiles())
    local = load_profile("local-gpu")
    assert local.backend("generator") == local.backend("editor")
    assert "FLUX.2-klein-4B" in local.backend("generator")
    assert local.options["generator"]["steps"] == 4 and local.options["editor"]["steps"] == 4
    assert local.backend("observer") == local.backend("judge") == "hf:Qwen/Qwen2.5-VL-7B-Instruct"
    assert local.backend("image_embedder") == "clip:ViT-L-14/openai"
    small = load_profile("small-gpu")
    assert "sd-turbo" in small.backend("generator")
    assert "instruct-pix2pix" in small.backend("editor")
    assert small.backend("observer") == "hf:Qwen/Qwen2.5-VL-3B-Instruct"
    for p in (local, load_profile("gemini"), small):
        assert set(p.roles) == {
            "generator",
            "editor",
            "observer",
            "judge",
            "llm",
            "text_embedder",
            "image_embedder",
        }


def test_profile_creates_backends_with_options(tmp_path):
    small = load_profile("small-gpu")
    gen = small.create("generator", device="cpu")
    assert (gen.model, gen.steps, gen.guidance, gen.width) == ("stabilityai/sd-turbo", 4, 0.0, 512)
    assert gen.pipe is None  # nothing loaded yet
    bad = tmp_path / "bad.toml"
    bad.write_text('[roles]\ngenerator = "diffusers:x"\n[options.generator]\nwings = 2\n')
    with pytest.raises(ValueError, match="options.generator do not fit backend 'diffusers:x'"):
        load_profile(str(bad)).create("generator")
    orphan = tmp_path / "orphan.toml"
    orphan.write_text('[roles]\ngenerator = "diffusers:x"\n[options.editor]\nsteps = 2\n')
    with pytest.raises(ValueError, match="options.editor given but roles.editor is not set"):
        load_profile(str(orphan))


def test_the_profile_chosen_when_none_is_named(monkeypatch):
    import refine.backends.device as device
    from refine.profiles import choose_profile

    for key in ("GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setattr(device, "gpu_name", lambda: None)
    name, why = choose_profile()
    assert name == "gemini" and why.startswith("No model can run here yet")
    monkeypatch.setattr(device, "gpu_name", lambda: "NVIDIA H100")
    assert choose_profile() == ("local-gpu", "GPU NVIDIA H100: the local-gpu profile.")
    monkeypatch.setenv("GEMINI_API_KEY", "k")
    assert choose_profile()[0] == "gemini"
