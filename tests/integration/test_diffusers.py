"""Diffusers backends on tiny random-weight pipelines saved to disk and loaded by path."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from refine.backends import create
from refine.backends.diffusers_backends import DiffusersEditor, ModelUnavailable
from tests.fakes.tiny_models import build_tiny_flux2_klein, build_tiny_sd, save_random_lora


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny-diffusers")
    return {
        "sd": build_tiny_sd(root, 4),
        "ip2p": build_tiny_sd(root, 8),
        "klein": build_tiny_flux2_klein(root),
    }


def gen_backend(path, **kw):
    opts = {"device": "cpu", "steps": 2, "width": 32, "height": 32, **kw}
    return create("generator", f"diffusers:{path}", shared=False, **opts)


def arr(im: Image.Image) -> np.ndarray:
    return np.asarray(im, dtype=np.int16)


@pytest.mark.slow
def test_generator_seeds_reproduce(tiny_dir):
    g = gen_backend(tiny_dir["sd"])
    a = g.generate("people eating food at home", seeds=[1, 2])
    b = g.generate("people eating food at home", seeds=[1, 2])
    assert [im.size for im in a] == [(32, 32), (32, 32)]
    assert all(np.array_equal(arr(x), arr(y)) for x, y in zip(a, b, strict=True))
    assert not np.array_equal(arr(a[0]), arr(a[1]))  # different seeds differ
    alone = g.generate("people eating food at home", seeds=[2])[0]
    assert np.abs(arr(alone) - arr(a[1])).max() <= 2  # same seed in another batch
    info = g.info()
    assert info["pipeline"] == "StableDiffusionPipeline"
    assert info["dtype"] == "float32" and info["device"] == "cpu"


@pytest.mark.slow
def test_a_pipeline_autopipeline_does_not_map_loads_as_its_own_class(tmp_path):
    """SoS's AltDiffusion-m9 is an AltDiffusionPipeline, which AutoPipelineForText2Image
    maps to no task, and its model_index.json names its text encoder's library
    "alt_diffusion", which diffusers keeps among its deprecated pipelines: it loads as
    its own class and draws (a tiny pipeline of that layout stands in for it)."""
    from tests.fakes.tiny_models import build_tiny_alt_diffusion

    g = gen_backend(build_tiny_alt_diffusion(tmp_path))
    images = g.generate("people eating food at home", seeds=[1, 2])
    assert type(g.pipe).__name__ == "AltDiffusionPipeline"
    assert type(g.pipe.text_encoder).__name__ == "RobertaSeriesModelWithTransformation"
    assert [im.size for im in images] == [(32, 32), (32, 32)]
    assert not np.array_equal(arr(images[0]), arr(images[1]))


@pytest.mark.slow
def test_a_scheduler_setting_and_an_adapter_file_in_a_hub_repository(tiny_dir):
    """A distilled model's scheduler entries (Qwen-Image-Lightning's shift) are set on the
    pipeline's scheduler, an entry it lacks refused; an adapter named as a file in a hub
    repository is that repository and its weight file."""
    from refine.backends.lora import lora_source

    g = gen_backend(tiny_dir["sd"], scheduler={"timestep_spacing": "trailing"})
    g.load()
    assert g.pipe.scheduler.config["timestep_spacing"] == "trailing"
    plain = gen_backend(tiny_dir["sd"]).generate("x", seeds=[3])[0]
    assert np.abs(arr(g.generate("x", seeds=[3])[0]) - arr(plain)).max() > 0
    with pytest.raises(ValueError, match="has no setting 'no_such_entry'"):
        gen_backend(tiny_dir["sd"], scheduler={"no_such_entry": 1}).load()
    lightning = "lightx2v/Qwen-Image-Lightning/Qwen-Image-Lightning-8steps-V1.1.safetensors"
    assert lora_source(lightning) == (
        "lightx2v/Qwen-Image-Lightning",
        "Qwen-Image-Lightning-8steps-V1.1.safetensors",
    )
    assert lora_source("owner/adapter") == ("owner/adapter", None)
    # a setting the pipeline's call does not take is one line (SD has no true_cfg_scale)
    from refine.harness.generators import check_settings

    with pytest.raises(ValueError, match="takes no true_cfg_scale"):
        check_settings("sd", g, {"true_cfg": 1.0})
    klein = gen_backend(tiny_dir["klein"])
    klein.load()
    with pytest.raises(ValueError, match=r"Flux2KleinPipeline takes no negative_prompt"):
        check_settings("klein", klein, {"negative_prompt": "blurry"})
    check_settings("sd", g, {"steps": 4, "negative_prompt": "blurry"})
    assert lora_source(str(tiny_dir["sd"])) == (str(tiny_dir["sd"]), None)


def test_generator_progress_callback(tiny_dir):
    steps = []
    g = gen_backend(tiny_dir["sd"])
    g.generate("x", seeds=[0], progress=lambda done, total: steps.append((done, total)))
    assert steps == [(1, 2), (2, 2)]


@pytest.mark.slow
def test_lora_changes_output_and_unloads(tiny_dir, tmp_path):
    g = gen_backend(tiny_dir["sd"])
    base = arr(g.generate("x", seeds=[3])[0])
    save_random_lora(tiny_dir["sd"], tmp_path / "lora")
    g.add_lora(str(tmp_path / "lora"), scale=1.0)
    with_lora = arr(g.generate("x", seeds=[3])[0])
    assert np.abs(with_lora - base).max() > 5
    g.unload_loras()
    assert np.array_equal(arr(g.generate("x", seeds=[3])[0]), base)


def test_instruct_pix2pix_editor_keeps_size(tiny_dir):
    ed = create("editor", f"diffusers:{tiny_dir['ip2p']}", shared=False, device="cpu", steps=2)
    src = Image.new("RGB", (40, 24), (120, 60, 30))
    out = ed.edit(src, "remove the hookah", seeds=[5, 6])
    assert [im.size for im in out] == [(40, 24), (40, 24)]
    again = ed.edit(src, "remove the hookah", seeds=[5])[0]  # alone, not in a batch of 2
    assert np.abs(arr(again) - arr(out[0])).max() <= 2
    assert isinstance(ed, DiffusersEditor)


def test_text_to_image_pipeline_is_not_an_editor(tiny_dir):
    ed = create("editor", f"diffusers:{tiny_dir['sd']}", shared=False, device="cpu")
    with pytest.raises(ValueError, match="not an instruction-editing pipeline.*img2img:"):
        ed.load()


@pytest.mark.slow
def test_img2img_shares_generator_weights(tiny_dir):
    name = str(tiny_dir["sd"])
    gen = create("generator", f"diffusers:{name}")  # the shared instance
    ed = create("editor", f"img2img:{name}", strength=0.5)
    ed.load()
    assert ed.generator is gen
    assert ed.pipe.unet is gen.pipe.unet and ed.pipe.vae is gen.pipe.vae
    src = Image.new("RGB", (32, 32), (200, 10, 10))
    out = ed.edit(src, "add a samovar", seeds=[1])[0]
    assert out.size == (32, 32)


def test_missing_model_message():
    g = create("generator", "diffusers:no-such-org/no-such-model", shared=False, device="cpu")
    with pytest.raises(ModelUnavailable, match="no-such-org/no-such-model.*hf download"):
        g.load()


def test_img2img_progress(tiny_dir):
    ed = create("editor", f"img2img:{tiny_dir['sd']}", strength=0.5, steps=4, device="cpu")
    seen = []
    ed.edit(Image.new("RGB", (32, 32)), "x", seeds=[0], progress=lambda d, t: seen.append((d, t)))
    assert seen == [(1, 2), (2, 2)]  # 4 steps at strength 0.5 run 2


@pytest.mark.slow
def test_flux2_klein_generates_and_edits_with_one_set_of_weights(tiny_dir):
    name = f"diffusers:{tiny_dir['klein']}"
    opts = {"device": "cpu", "steps": 2}
    gen = create("generator", name, width=64, height=64, **opts)
    ed = create("editor", name, **opts)
    images = gen.generate("people eating food at home in Iran", seeds=[7, 8])
    assert gen.info()["pipeline"] == "Flux2KleinPipeline"
    assert [im.size for im in images] == [(64, 64), (64, 64)]
    assert not np.array_equal(arr(images[0]), arr(images[1]))
    ed.load()
    assert ed.pipe is gen.pipe  # the editor uses the generator's pipeline
    src = images[0].resize((72, 64))
    steps = []
    out = ed.edit(
        src,
        "replace the chairs with floor cushions",
        seeds=[1],
        progress=lambda d, t: steps.append((d, t)),
    )[0]
    assert out.size == (72, 64)  # worked at 64x64, returned at the input size
    assert steps == [(1, 2), (2, 2)]
    assert np.array_equal(
        arr(ed.edit(src, "replace the chairs with floor cushions", [1])[0]), arr(out)
    )
    assert np.abs(arr(out) - arr(src)).max() > 0
    # a batch of edits gives each one the source once: FLUX.2 reads a list of images as
    # references every prompt attends to, so a list of n sources was n references each
    tokens = []
    hook = ed.pipe.transformer.register_forward_pre_hook(
        lambda _, args, kwargs: tokens.append(kwargs["hidden_states"].shape), with_kwargs=True
    )
    try:
        ed.edit(src, "replace the chairs with floor cushions", seeds=[1])
        one = tokens[-1]
        ed.edit(src, "replace the chairs with floor cushions", seeds=[1, 2, 3])
        three = tokens[-1]
    finally:
        hook.remove()
    assert three[0] == 3 and three[1] == one[1], (one, three)  # 64 image + 64 reference tokens


def test_editor_loads_its_own_pipeline_without_a_generator(tiny_dir):
    ed = create(
        "editor",
        f"diffusers:{tiny_dir['klein']}",
        shared=False,
        device="cpu",
        dtype="float32",
        steps=1,
    )
    ed.load()  # the shared generator above uses dtype=None, so nothing is reused
    assert type(ed.pipe).__name__ == "Flux2KleinPipeline"
    out = ed.edit(Image.new("RGB", (64, 80), (0, 120, 0)), "add a samovar", seeds=[0])[0]
    assert out.size == (64, 80)


def test_revision_and_variant_reach_from_pretrained(tiny_dir, monkeypatch):
    import diffusers

    seen = {}
    real = diffusers.AutoPipelineForText2Image.from_pretrained

    def spy(model, **kwargs):
        seen.update(kwargs)
        kwargs.pop("variant", None)  # the tiny pipeline has no fp16 files
        return real(model, **kwargs)

    monkeypatch.setattr(diffusers.AutoPipelineForText2Image, "from_pretrained", spy)
    gen = gen_backend(tiny_dir["sd"], revision="main", variant="fp16")
    gen.load()
    assert (seen["revision"], seen["variant"]) == ("main", "fp16")
    assert gen.id.endswith("@main") and gen.info()["revision"] == "main"


@pytest.mark.slow
def test_an_edit_batch_gives_each_seed_its_own_image(tiny_dir):
    """N seeds' edits are one pipeline call; each image is the one its seed gives alone."""
    ed = create("editor", f"diffusers:{tiny_dir['ip2p']}", shared=False, device="cpu", steps=2)
    src = Image.new("RGB", (32, 32), (120, 60, 30))
    calls = []
    pipe_call = type(ed.load().pipe).__call__

    def counting(self, *a, **kw):
        calls.append(len(kw["generator"]))
        return pipe_call(self, *a, **kw)

    steps = []
    type(ed.pipe).__call__ = counting
    try:
        batch = ed.edit(
            src, "add a sofreh", [11, 12, 13], progress=lambda d, t: steps.append((d, t))
        )
        alone = [ed.edit(src, "add a sofreh", [s])[0] for s in (11, 12, 13)]
    finally:
        type(ed.pipe).__call__ = pipe_call
    assert calls == [3, 1, 1, 1]  # one call for the batch
    assert steps == [(1, 2), (2, 2)]
    for x, y in zip(batch, alone, strict=True):
        assert np.abs(arr(x) - arr(y)).max() <= 2  # float tolerance on CPU
    assert not np.array_equal(arr(batch[0]), arr(batch[1]))


@pytest.mark.slow
def test_out_of_memory_halves_the_batch_and_says_so(tiny_dir):
    import torch

    from refine.backends.loading import OutOfMemory

    ed = create("editor", f"diffusers:{tiny_dir['ip2p']}", shared=False, device="cpu", steps=2)
    src = Image.new("RGB", (32, 32), (30, 60, 120))
    pipe_call = type(ed.load().pipe).__call__
    limit = {"n": 2}
    sizes = []

    def small_gpu(self, *a, **kw):
        sizes.append(len(kw["generator"]))
        if len(kw["generator"]) > limit["n"]:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 4.00 GiB")
        return pipe_call(self, *a, **kw)

    reference = ed.edit(src, "add a sofreh", [1, 2, 3, 4, 5])
    assert ed.take_notes() == []
    steps = []
    type(ed.pipe).__call__ = small_gpu
    try:
        out = ed.edit(src, "add a sofreh", [1, 2, 3, 4, 5], progress=lambda d, t: steps.append(d))
        notes = ed.take_notes()
        limit["n"] = 0
        with pytest.raises(OutOfMemory, match="ran out of GPU memory: use the 'small-gpu'"):
            ed.edit(src, "add a sofreh", [1, 2])
    finally:
        type(ed.pipe).__call__ = pipe_call
    # 5 at once failed; then 2 + 2 + 1; then, with no memory at all, 2 and 1 failed
    assert sizes == [5, 2, 2, 1, 2, 1]
    assert notes == [f"{ed.model}: out of GPU memory with 5 images at once; went on 2 at a time"]
    for x, y in zip(out, reference, strict=True):
        assert np.abs(arr(x) - arr(y)).max() <= 2
    assert steps == sorted(steps) and steps[-1] == 6  # 3 calls of 2 steps, counted together


@pytest.mark.slow
def test_a_lora_named_with_the_generator(tiny_dir, tmp_path):
    """``diffusers:MODEL+lora=PATH@SCALE`` (as --backend generator=... takes it) and the
    ``lora`` option load the adapter; the id says which; scale 0 draws the base."""
    lora = save_random_lora(tiny_dir["sd"], tmp_path / "lora")
    base = gen_backend(tiny_dir["sd"])
    named = create(
        "generator",
        f"diffusers:{tiny_dir['sd']}+lora={lora}@1",
        shared=False,
        device="cpu",
        steps=2,
        width=32,
        height=32,
    )
    assert named.loras == [(str(lora), 1.0)] and named.id.endswith(f"+lora={lora}@1")
    assert named.model == str(tiny_dir["sd"])
    a, b = arr(base.generate("x", seeds=[3])[0]), arr(named.generate("x", seeds=[3])[0])
    assert np.abs(a - b).max() > 5
    optioned = gen_backend(tiny_dir["sd"], lora=str(lora), lora_scale=0.0)
    assert np.abs(arr(optioned.generate("x", seeds=[3])[0]) - a).max() <= 2


def test_a_stop_ends_a_pipeline_between_denoising_steps(tiny_dir):
    """With a stop event on the work (refine.usage.stop_on), a stop asked for during step 2
    of 6 ends the pipeline call before step 3."""
    import threading

    from refine import usage

    g = gen_backend(tiny_dir["sd"], steps=6)
    stop, steps = threading.Event(), []

    def progress(done, total):
        steps.append(done)
        if done == 2:
            stop.set()

    with usage.stop_on(stop), pytest.raises(usage.StopRequested):
        g.generate("x", seeds=[0], progress=progress)
    assert steps == [1, 2]
    with usage.stop_on(threading.Event()):  # no stop asked: the whole call
        assert len(g.generate("x", seeds=[0])) == 1


def test_every_edit_pipeline_is_called_with_what_it_takes():
    """Each pipeline's call arguments are parameters of that pipeline in the installed
    diffusers, and a pipeline asked for true classifier-free guidance also gets the
    negative prompt without which diffusers turns that guidance off (Qwen-Image-Edit ran
    at guidance 1)."""
    import inspect

    import diffusers

    from refine.backends.diffusers_backends import EDIT_PIPELINES

    for name, args in EDIT_PIPELINES.items():
        taken = inspect.signature(getattr(diffusers, name).__call__).parameters
        assert set(args) <= set(taken), (name, set(args) - set(taken))
        if args.get("true_cfg_scale", 1.0) > 1.0:
            assert args.get("negative_prompt") is not None, name
    assert EDIT_PIPELINES["QwenImageEditPlusPipeline"]["negative_prompt"] == " "


def test_an_edit_batch_gives_the_negative_prompt_once_per_image():
    """The negative prompt goes with each image of a batch, as the instruction does."""
    from types import SimpleNamespace

    from refine.backends.diffusers_backends import EDIT_PIPELINES, _edit_batch

    calls = []

    def pipe(**kw):
        calls.append(kw)
        return SimpleNamespace(images=[Image.new("RGB", (8, 8))] * len(kw["prompt"]))

    args = dict(EDIT_PIPELINES["QwenImageEditPipeline"])
    made = _edit_batch(
        "qwen", pipe, Image.new("RGB", (8, 8)), "add tea", [1, 2, 3], args, None, 2, []
    )
    assert len(made) == 3
    (kw,) = calls
    assert kw["prompt"] == ["add tea"] * 3 and kw["negative_prompt"] == [" "] * 3
    assert kw["true_cfg_scale"] == 4.0 and args["negative_prompt"] == " "  # the table kept


def test_an_inpainting_edit_leaves_every_pixel_outside_its_boxes(tiny_dir):
    """A localized edit on the tiny SD's inpainting pipeline (the generator's weights):
    every pixel outside the mask is the original's, and the inside changed."""
    from refine.backends.regions import inside

    ed = create("editor", f"inpaint:{tiny_dir['sd']}", steps=2, device="cpu")
    assert ed.localizes == "mask" and ed.id == f"inpaint:{tiny_dir['sd']}"
    rng = np.random.default_rng(0)
    src = Image.fromarray(rng.integers(0, 255, (32, 48, 3), dtype=np.uint8))
    boxes = [[0.25, 0.25, 0.5, 0.75]]
    (out,) = ed.edit(src, "add a samovar", seeds=[3], regions=boxes)
    assert out.size == src.size and ed.info()["pipeline"].endswith("InpaintPipeline")
    region = inside(boxes, src.size)
    assert np.array_equal(arr(out)[~region], arr(src)[~region])
    assert not np.array_equal(arr(out)[region], arr(src)[region])
    # a region drawn by hand (a brush's mask, one channel) is edited the same way
    drawn = np.zeros((32, 48), dtype=bool)
    drawn[4:12, 30:44] = True
    mask = Image.fromarray(drawn.astype(np.uint8) * 255, mode="L")
    (by_hand,) = ed.edit(src, "add a samovar", seeds=[3], mask=mask)
    assert np.array_equal(arr(by_hand)[~drawn], arr(src)[~drawn])
    assert not np.array_equal(arr(by_hand)[drawn], arr(src)[drawn])
    with pytest.raises(ValueError, match="a region's mask is 24x16, the image 48x32"):
        ed.edit(src, "add a samovar", seeds=[3], mask=mask.resize((24, 16)))


def test_a_call_budget_counts_each_image_and_sends_none_past_it(tiny_dir):
    """A local generator takes one call an image from a call budget before the pipeline
    runs; a batch that does not fit is refused whole, the pipeline never called."""
    from refine import usage

    g = gen_backend(tiny_dir["sd"])
    budget = usage.CallBudget(3)
    calls = []
    g.load()
    real = g.pipe
    g.pipe = lambda *a, **k: calls.append(1) or real(*a, **k)
    with usage.call_budget(budget):
        assert len(g.generate("x", seeds=[1, 2])) == 2
        assert budget.spent == 2 and len(calls) == 1
        with pytest.raises(usage.CallBudgetSpent, match="has 1 left, 2 needed"):
            g.generate("x", seeds=[3, 4])
    assert budget.spent == 2 and len(calls) == 1
