"""Before a run spends anything: every local model loads and every API model is known to
the API, or the run stops with all problems, one line each, and no run directory."""

from __future__ import annotations

import pytest

from refine.cli import main
from tests.e2e.test_cli_run import run_args

ACT = "people eating food at home"


def run(capsys, tmp_path, *args):
    with pytest.raises(SystemExit) as done:
        main(["run", ACT, "--country", "Iran", "--out", str(tmp_path / "runs"), *args])
    return done.value.code, capsys.readouterr().err


def test_unknown_models_stop_the_run_before_any_request(capsys, world, gemini_env, tmp_path):
    posts = len(gemini_env.requests)
    code, err = run(
        capsys,
        tmp_path,
        "--backend",
        "observer=gemini:gemini-1.0-pro",
        "--backend",
        "editor=gemini:nano-banana-0-image",
        "--backend",
        "image_embedder=clip:ViT-B-32/laion2b_s34b_b79k",
    )
    assert code == 1, err
    # the loading is said first; then one error line
    loading, err = err.split("\n", 1)
    assert loading.strip().startswith("loading models: generator, observer, judge")
    assert err.startswith("error: models not available: ") and err.count("\n") == 1
    # every problem at once: the retired text model, the unknown image model, the CLIP
    # weights that are not in the cache (no network here)
    assert "observer (gemini:gemini-1.0-pro): GeminiError: gemini-1.0-pro: no such" in err
    assert "text models the API offers: gemini-2.5-flash, gemini-2.5-pro" in err
    assert "image models the API offers: gemini-2.5-flash-image, gemini-3-pro-image" in err
    assert "image_embedder (clip:ViT-B-32/laion2b_s34b_b79k): model not available" in err
    assert len(gemini_env.requests) == posts and world.log == []  # nothing was paid for
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_known_models_are_checked_once_then_the_run_goes(
    capsys, world, gemini_env, tmp_path, siglip_path
):
    from refine.backends import gemini

    for client in gemini._SHARED.values():
        client._checked.clear()  # checked once per process: forget earlier tests' checks
    gemini_env.model_gets.clear()
    with pytest.raises(SystemExit) as done:
        main([*run_args(tmp_path / "runs", 1, siglip_path)])
    code, err = done.value.code, capsys.readouterr().err
    assert code == 0, err
    checked = [p.rsplit("/", 1)[-1] for p in gemini_env.model_gets]
    assert sorted(set(checked)) == [
        "gemini-3.1-flash-lite-image",
        "gemini-3.8-flash",
        "gemini-nano-banana-2.1",
    ]
    assert world.log[0] == "generate"  # the checks are GETs: no paid call before round 0
