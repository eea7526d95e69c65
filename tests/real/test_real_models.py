"""The bundled profiles' real models, on a GPU machine with the weights in the HF cache.

Run with ``REFINE_REAL_MODELS=1 pytest tests/real`` (add ``HF_HUB_OFFLINE=0`` to let the
hub download what is missing). Skipped otherwise.
"""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from refine.profiles import load_profile

pytestmark = [pytest.mark.weights, pytest.mark.gpu]

DIMS = ["setting", "objects", "attire", "interaction", "spatial"]


def plain_scene() -> Image.Image:
    """A red square on white: a picture whose content is known."""
    im = Image.new("RGB", (448, 448), "white")
    im.paste((220, 20, 20), (112, 112, 336, 336))
    return im


@pytest.mark.parametrize("profile", ["local-gpu", "small-gpu", "cpu"])
def test_generator_and_editor(profile):
    p = load_profile(profile)
    gen = p.create("generator")
    a = gen.generate("people eating food at home in Iran", seeds=[0, 1])
    again = gen.generate("people eating food at home in Iran", seeds=[0])[0]
    assert np.abs(np.asarray(a[0], int) - np.asarray(again, int)).mean() < 2.0
    assert not np.array_equal(np.asarray(a[0]), np.asarray(a[1]))
    edited = p.create("editor").edit(a[0], "add a teapot on the table", seeds=[0])[0]
    assert edited.size == a[0].size
    assert np.abs(np.asarray(edited, int) - np.asarray(a[0], int)).mean() > 1.0


@pytest.mark.parametrize("profile", ["local-gpu", "small-gpu", "cpu"])
def test_observer_and_judge(profile):
    p = load_profile(profile)
    seen = p.create("observer").describe(plain_scene(), DIMS, 5)
    assert set(seen) == set(DIMS) and any(seen.values())
    judge = p.create("judge")
    yes = judge.yes_probability(
        [plain_scene(), plain_scene()],
        ["Is there a red square in the image?", "Is there an elephant in the image?"],
    )
    assert yes[0] > 0.5 > yes[1]
    rating = judge.rate([plain_scene()], ["Rate 1-5 how red this image is. Answer with a digit."])
    assert rating[0].argmax >= 3


@pytest.mark.parametrize("profile", ["local-gpu", "small-gpu", "cpu"])
def test_language_model_json(profile):
    from pydantic import BaseModel

    class Foods(BaseModel):
        foods: list[str]

    llm = load_profile(profile).create("llm")
    out = llm.complete_json('List three Iranian dishes as JSON: {"foods": [...]}', Foods)
    assert len(out.foods) >= 3


def test_clip_scores_the_matching_caption_higher():
    emb = load_profile("local-gpu").create("image_embedder")
    s = emb.clip_score([plain_scene()] * 2, ["a red square", "a photo of a dog on grass"])
    assert s[0] > s[1]


def test_siglip_scores_the_matching_caption_higher():
    from refine.backends import create

    emb = create("image_embedder", "siglip:google/siglip-so400m-patch14-384")
    p = emb.match_probability([plain_scene()] * 2, ["a red square", "a photo of a dog on grass"])
    assert p[0] > p[1]


def test_a_200_step_dpo_lora_on_the_cpu_profiles_generator(tmp_path):
    """Real size: Diffusion-DPO for 200 steps at 512 px on the cpu profile's SD-Turbo (run on
    the GPU),
    on pairs of real generated images (the prompt's own images, preferred by colour)."""
    import json

    from refine.train.tune import TuneConfig, Tuner

    p = load_profile("cpu")
    base = p.backend("generator")
    gen = p.create("generator", device="cuda")
    images = gen.generate("a bowl of red tomatoes on a table", seeds=list(range(8)))
    data = tmp_path / "pairs"
    (data / "images").mkdir(parents=True)
    (data / "train").mkdir()
    reds = sorted(images, key=lambda im: -float(np.asarray(im, float)[..., 0].mean()))
    rows = []
    for k in range(4):
        reds[k].save(data / "images" / f"w{k}.png")
        reds[-1 - k].save(data / "images" / f"l{k}.png")
        rows.append(
            {
                "image_w": f"../images/w{k}.png",
                "image_l": f"../images/l{k}.png",
                "prompt": "a bowl of red tomatoes on a table",
            }
        )
    (data / "train" / "metadata.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    cfg = TuneConfig(
        data=str(data),
        base=base,
        out=str(tmp_path / "adapter"),
        steps=200,
        resolution=512,
        rank=8,
        lr=1e-5,
        checkpoint_every=100,
    )
    summary = Tuner(cfg).run()
    assert summary["steps"] == 200 and summary["final_loss"] < 0.7
    assert (tmp_path / "adapter" / "pytorch_lora_weights.safetensors").is_file()
