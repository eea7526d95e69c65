"""A recipe run on the paper's own models sets the paper's figures and their differences
beside its values: AHEaD Tab. 1's recipe on its default profile (ahead-paper), whose
InternVL3-14B and CLIP-FlanT5-xxl are random stand-ins served from a Hugging Face cache
under the paper's ids, the observer taught one answer. The bench records the ids, the
judge's reading (by log-probabilities) and tau 0.52, so every stated part of the paper's
way is met. The same recipe on the gemini profile sets the figures apart
(tests/e2e/test_recipes.py::test_ahead_table1_with_a_limit)."""

from __future__ import annotations

import json

import pytest

from refine.harness.recipes import recipes_dir
from refine.present.report.recipe import csv_rows
from tests.e2e.test_cli_run import cli
from tests.fakes.gemini_server import png_bytes
from tests.fakes.gemini_world import GREEN, RED
from tests.fakes.tiny_models import (
    build_tiny_clip_t5,
    build_tiny_internvl,
    serve_from_hub_cache,
    teach,
)

ACT = "people eating food at home"
PAPERS = "gemini:gemini-nano-banana-2.1"  # run in place of the paper's Gemini 2.5 Flash Image
SEEN = {
    "setting": ["Persian rug on floor"],
    "objects": ["Large rice platter"],
    "attire": [],
    "interaction": [],
    "spatial": [],
}


@pytest.mark.slow
def test_a_bench_on_the_papers_models_sets_its_figures_and_differences_beside(
    world, siglip_path, tmp_path, monkeypatch
):
    from huggingface_hub import constants

    from metrics.descriptors import DIMENSIONS
    from refine.assets import prompt_template
    from refine.backends import create
    from refine.backends.structured import observation_prompt
    from refine.harness.recipe_run import run_recipe

    cache = tmp_path / "hub"
    models = tmp_path / "models"
    serve_from_hub_cache(cache, "OpenGVLab/InternVL3-14B-hf", build_tiny_internvl(models))
    clip_t5 = build_tiny_clip_t5(models)
    serve_from_hub_cache(cache, "zhiqiulin/clip-flant5-xxl", clip_t5)
    # the checkpoint has no tokenizer of its own: FlanT5-XXL's is read, as for the real one
    serve_from_hub_cache(cache, "google/flan-t5-xxl", clip_t5)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    # real photos of the activity, for EXAG(ITA), in this test's data folder
    monkeypatch.setenv("REFINE_DATA_DIR", str(tmp_path / "data"))
    photos = tmp_path / "photos"
    photos.mkdir()
    for k, colour in enumerate((GREEN, RED)):
        (photos / f"p{k}.png").write_bytes(png_bytes(colour, (64, 48)))
    assert cli("photos", "add", ACT, str(photos), "--country", "Iran").returncode == 0
    # the observer (by the paper's id, one copy of its weights a process) taught to list SEEN
    # for the stand-in generator's image
    world.generate_by_model = {"gemini-nano-banana-2.1": RED}
    prompt = prompt_template("generate").strip().format(activity=ACT, country="Iran")
    (image,) = create("generator", PAPERS).generate(prompt, [42])
    observer = create("observer", "hf:OpenGVLab/InternVL3-14B-hf")
    teach(
        observer,
        observation_prompt(list(DIMENSIONS), 10),
        json.dumps(SEEN),
        images=[image],
        keep="paper-way",
    )
    # AHEaD Tab. 1's recipe on one prompt of Iran (the Global South), one image
    text = (recipes_dir() / "ahead-table1.toml").read_text()
    start, end = text.index("[select]"), text.index("[table]")
    recipe = tmp_path / "one.toml"
    recipe.write_text(
        text[:start]
        + f'[select]\nprofile = "ahead-paper"\ncountries = ["Iran"]\nactivities = ["{ACT}"]\n'
        + f'images_per_prompt = 1\nseed = 42\ngenerators = ["{PAPERS}"]\n\n'
        + text[end:]
    )
    out = tmp_path / "bench"
    made = run_recipe(
        recipe, out, generators=[PAPERS], backends={"image_embedder": f"siglip:{siglip_path}"}
    )
    (cell,) = made.results.cells
    assert cell["scorer"]["observer"] == "hf:OpenGVLab/InternVL3-14B-hf"
    assert cell["scorer"]["judge"] == "clip-t5:zhiqiulin/clip-flant5-xxl" and cell["tau"] == 0.52
    (im,) = cell["images"]
    assert im["observed"] == SEEN and im["exag_variant"] == "exag:ita"
    assert im["judged"]["exag"] == {"by": "clip-t5:zhiqiulin/clip-flant5-xxl", "read": "logprobs"}
    rows = {r["column"]: r for r in csv_rows(made.table) if r["row"] == f"{PAPERS} · GS"}
    # Gemini 2.5 Flash Image's GS figures in the paper, each with its difference
    for column, figure in (("ALIGN ↑", 0.35), ("HAL ↓", 0.5), ("EXAG ↓", 0.12), ("FAITH ↑", 0.57)):
        row = rows[column]
        assert row["paper"] == figure and row["paper_differs"] == "", row
        assert row["difference"] == pytest.approx(row["value"] - figure, abs=1e-12)
    assert rows["FAITH ↑"]["made_with"] == (
        "observer InternVL3-14B-hf, tau 0.52, judge clip-flant5-xxl, by log-probabilities"
    )
    assert not [n for n in made.table.notes if "made another way" in n]
