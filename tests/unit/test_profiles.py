"""Profiles name one registered backend per role."""

from __future__ import annotations

import pytest

from refine.profiles import list_profiles, load_profile


def test_gemini_profile_names_registered_backends():
    assert "gemini" in list_profiles()
    p = load_profile("gemini")
    assert p.backend("generator") == "gemini:gemini-3.1-flash-lite-image"
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


def test_bundled_profiles():
    assert {"gemini", "local-gpu", "small-gpu", "cpu", "vllm"} <= set(list_profiles())
    local = load_profile("local-gpu")
    assert local.backend("generator") == local.backend("editor")
    assert "FLUX.2-klein-4B" in local.backend("generator")
    assert local.options["generator"]["steps"] == 4 and local.options["editor"]["steps"] == 4
    vl = "hf:Qwen/Qwen3-VL-8B-Instruct"
    assert local.backend("observer") == local.backend("judge") == local.backend("llm") == vl
    assert local.backend("image_embedder") == "clip:ViT-L-14/openai"
    small = load_profile("small-gpu")
    assert small.backend("generator") == small.backend("editor") == local.backend("generator")
    assert small.options["generator"]["cpu_offload"] and small.options["editor"]["cpu_offload"]
    assert small.backend("observer") == small.backend("llm") == "hf:Qwen/Qwen3.5-0.8B"
    cpu = load_profile("cpu")
    assert "sd-turbo" in cpu.backend("generator")
    assert "instruct-pix2pix" in cpu.backend("editor")
    assert cpu.backend("observer") == cpu.backend("judge") == "hf:Qwen/Qwen3.5-0.8B"
    gemini = load_profile("gemini")
    assert gemini.backend("generator") == "gemini:gemini-3.1-flash-lite-image"
    assert gemini.backend("editor") == "gemini:gemini-nano-banana-2.1"
    # priced for the dry run, with where the prices come from
    assert set(gemini.costs) == {"generator", "editor", "observer", "judge", "llm"}
    assert gemini.costs["editor"] > gemini.costs["generator"] > gemini.costs["llm"]
    assert "list prices read 2026-11-28" in gemini.costs_source
    assert gemini.backend("observer") == gemini.backend("judge") == "gemini:gemini-3.8-flash"
    # every bundled profile's observer is uncalibrated: the AHEaD default, said so
    for p in (local, gemini, small, cpu):
        assert p.tau == 0.52 and "not calibrated" in p.tau_source
    for p in (local, gemini, small, cpu):
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
    cpu = load_profile("cpu")
    gen = cpu.create("generator", device="cpu")
    assert (gen.model, gen.steps, gen.guidance, gen.width) == ("stabilityai/sd-turbo", 4, 0.0, 512)
    assert gen.pipe is None  # nothing loaded yet
    bad = tmp_path / "bad.toml"
    bad.write_text('[roles]\ngenerator = "diffusers:x"\n[options.generator]\nwings = 2\n')
    # refused as the profile loads, before any backend is built
    with pytest.raises(ValueError, match="options.generator.wings: diffusers: takes no option"):
        load_profile(str(bad))
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
    # the cpu profile, named at the top of the page with its measured time a round
    cpu = load_profile("cpu")
    minutes = f"{cpu.round_seconds / 60:.0f} min"
    assert name == "cpu" and why.startswith("CPU profile (cpu): no GPU and no API key")
    assert f"Expect about {minutes} an editing round ({cpu.round_source})" in why
    assert cpu.round_seconds > 0 and "2 cores" in cpu.round_source
    monkeypatch.setattr(device, "gpu_name", lambda: "NVIDIA H100")
    assert choose_profile() == ("local-gpu", "GPU NVIDIA H100: the local-gpu profile.")
    monkeypatch.setenv("GEMINI_API_KEY", "k")
    assert choose_profile()[0] == "gemini"


def test_only_a_slow_profile_gets_a_notice(tmp_path):
    from refine.profiles import slow_notice

    assert slow_notice(load_profile("gemini")) == "profile: gemini"
    cpu = load_profile("cpu")
    notice = slow_notice(cpu)
    assert notice.startswith("CPU profile (cpu): the smallest current models run")
    assert "budget" not in notice
    # how many editing rounds fit in the app's run budget, from the measured time a round
    rounds = int(30 * 60 // cpu.round_seconds)
    assert rounds >= 1 and slow_notice(cpu, run_minutes=30).endswith(
        f"A run stops at its budget of 30 min: about {rounds} editing round(s). Set "
        "GEMINI_API_KEY (Google AI Studio) or start the app on a machine with a CUDA GPU "
        "for rounds in seconds."
    )
    bad = tmp_path / "slow.toml"
    for value in ("0", "-3", "true", '"long"'):
        bad.write_text(f'round_seconds = {value}\n[roles]\ngenerator = "diffusers:x"\n')
        with pytest.raises(ValueError, match="round_seconds must be a positive number"):
            load_profile(str(bad))
