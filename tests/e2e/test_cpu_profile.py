"""The cpu profile: every role resolves to its backend, and one refinement run goes end to
end on tiny random models of the profile's own architectures (a Stable Diffusion pipeline as
SD-Turbo's, InstructPix2Pix, Qwen3.5 with its Gated DeltaNet layers for the observer, judge
and language model, an open_clip CLIP), with the profile's options but for the steps and
the image size."""

from __future__ import annotations

import json

import pytest

from metrics.ahead import score_images
from metrics.descriptors import DIMENSIONS
from refine.assets import prompt_template
from refine.backends.structured import observation_prompt
from refine.io.store import RunStore
from refine.profiles import load_profile
from tests.fakes.tiny_models import build_tiny_open_clip, build_tiny_qwen3, build_tiny_sd, teach
from tests.runs import begin

ACT, COUNTRY = "people eating food at home", "Iran"
SEEN = {
    "setting": ["Persian rug on floor"],
    "objects": ["Large rice platter", "hamburgers"],
    "attire": ["Casual modern attire"],
    "interaction": ["Sharing communal dishes"],
    "spatial": [],
}


def test_the_cpu_profiles_roles_resolve_without_loading():
    profile = load_profile("cpu")
    kinds = {
        "generator": "DiffusersGenerator",
        "editor": "DiffusersEditor",
        "observer": "HFObserver",
        "judge": "HFJudge",
        "llm": "HFLanguageModel",
        "text_embedder": "SentenceTransformerTextEmbedder",
        "image_embedder": "OpenClipEmbedder",
    }
    assert set(profile.roles) == set(kinds)
    for role, kind in kinds.items():
        backend = profile.create(role, shared=False)
        assert type(backend).__name__ == kind
        if role in ("generator", "editor"):
            assert backend.pipe is None  # nothing is loaded until a run asks
        elif role in ("observer", "judge", "llm"):
            assert backend.model is None and backend.model_name == "Qwen/Qwen3.5-0.8B"
    assert profile.create("editor", shared=False).steps == 10


@pytest.mark.slow
def test_a_run_on_tiny_models_of_the_cpu_profiles_architectures(tmp_path_factory, tmp_path):
    from refine.loop.refiner import Refiner

    profile = load_profile("cpu")
    root = tmp_path_factory.mktemp("tiny-cpu")
    qwen = build_tiny_qwen3(root, "qwen3.5")
    tiny = {
        "generator": f"diffusers:{build_tiny_sd(root, 4)}",
        "editor": f"diffusers:{build_tiny_sd(root, 8)}",
        "observer": f"hf:{qwen}",
        "judge": f"hf:{qwen}",
        "llm": f"hf:{qwen}",
        "text_embedder": profile.backend("text_embedder"),
        "image_embedder": build_tiny_open_clip(root / "clip"),
    }
    # the profile's options, with tiny steps and images; the language model answers briefly
    options = {role: {**profile.options.get(role, {}), "device": "cpu"} for role in tiny}
    options["generator"].update(steps=2, width=64, height=64)
    options["editor"].update(steps=2)
    options["observer"].update(max_new_tokens=400)
    options["llm"].update(max_new_tokens=16, max_repairs=0)
    assert options["generator"]["guidance"] == 0.0
    refiner = Refiner("cpu", backends=tiny, backend_options=options)
    gen, edit = refiner.backends.get("generator"), refiner.backends.get("editor")
    prompt = prompt_template("generate").strip().format(activity=ACT, country=COUNTRY)
    made = gen.generate(prompt, [42])
    made += edit.edit(made[0], "Remove the hamburgers", [1042, 1043])
    observe = observation_prompt(list(DIMENSIONS), 10)
    # teach raises unless greedy generation writes SEEN for each of the images
    teach(
        refiner.backends.get("observer"), observe, json.dumps(SEEN), images=made, keep="cpu-profile"
    )

    run = begin(refiner, ACT, COUNTRY, out=tmp_path, rounds=1, candidates=2, target=1.0)
    assert run.status == "finished", run.error
    assert run.spec.profile == "cpu" and len(run.rounds) == 2
    info = run.backend_info
    assert info["generator"]["pipeline"] == "StableDiffusionPipeline"
    assert info["editor"]["pipeline"] == "StableDiffusionInstructPix2PixPipeline"
    assert info["observer"]["architecture"] == "Qwen3_5ForConditionalGeneration"
    assert info["observer"]["dtype"] == "float32" and info["observer"]["device"] == "cpu"
    assert run.backend_ids["image_embedder"].startswith("clip:tiny-clip-test/")
    expected = score_images(
        run.references.descriptors, [SEEN], refiner.backends.get("text_embedder")
    )[0]
    clip, store = refiner.backends.get("image_embedder"), RunStore(tmp_path / run.id)
    for r in run.rounds:
        for c in r.candidates:
            assert c.observed == SEEN  # the taught Qwen3.5 answered through real generation
            assert c.scores.align == pytest.approx(expected.align, abs=1e-6)
            assert c.scores.hal == pytest.approx(expected.hal, abs=1e-6)
            assert c.scores.quality_reading.method == "logprobs"
            # CLIP-IQA, computed from the catalog's entry over the CLIP's readings, is the
            # CLIP backend's own reading of the saved image (float32 embeddings of a batch
            # against those of one image: a few units of float32 roundoff, far below 1e-6)
            own = clip.clip_iqa([store.load_image(c.image)])[0]
            assert c.scores.value("clip_iqa") == pytest.approx(own, abs=1e-6)
    edited = run.rounds[1]
    assert [c.seed for c in edited.candidates] == [1042, 1043]
    # the random language model's answer is no instruction: the template wrote it, and the
    # round says why, naming the model
    assert edited.instruction_source == "template"
    assert "language model failed" in edited.instruction_note and "tiny-qwen3.5" in (
        edited.instruction_note
    )
