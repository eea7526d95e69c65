"""open_clip embedder and CLIPScore on a tiny random open_clip model loaded from a checkpoint."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

from refine.backends import create
from tests.fakes.tiny_models import build_tiny_open_clip


@pytest.fixture(scope="module")
def tiny_clip(tmp_path_factory):
    name = build_tiny_open_clip(tmp_path_factory.mktemp("tiny-clip"))
    return create("image_embedder", name, shared=False, device="cpu")


def test_embeddings_normalised_and_deterministic(tiny_clip):
    images = [Image.new("RGB", (40, 30), c) for c in ((255, 0, 0), (0, 0, 255), (255, 0, 0))]
    e = tiny_clip.encode_images(images)
    assert e.shape == (3, 16)
    assert torch.allclose(e.norm(dim=1), torch.ones(3), atol=1e-5)
    assert torch.allclose(e[0], e[2], atol=1e-6)  # same picture, same embedding
    assert not torch.allclose(e[0], e[1], atol=1e-3)
    t = tiny_clip.encode_texts(["a red square", "a blue square"])
    assert t.shape == (2, 16) and torch.allclose(t.norm(dim=1), torch.ones(2), atol=1e-5)


def test_clip_score_formula(tiny_clip):
    images = [Image.new("RGB", (32, 32), (200, 100, 0))] * 2
    texts = ["a kitchen", "a wedding"]
    scores = tiny_clip.clip_score(images, texts)
    cos = (tiny_clip.encode_images(images) * tiny_clip.encode_texts(texts)).sum(1).numpy()
    np.testing.assert_allclose(scores, 100 * np.clip(cos, 0, None), rtol=1e-5, atol=1e-4)
    with pytest.raises(ValueError, match="2 images but 1 texts"):
        tiny_clip.clip_score(images, ["x"])


def test_bad_names():
    with pytest.raises(ValueError, match="clip:<architecture>/<pretrained>"):
        create("image_embedder", "clip:ViT-L-14", shared=False, device="cpu")
    bad = create("image_embedder", "clip:ViT-B-32/no-such-tag", shared=False, device="cpu")
    with pytest.raises(ValueError, match="no-such-tag"):
        bad.load()


def test_clip_iqa_formula_on_the_models_own_embeddings(tiny_clip):
    images = [Image.new("RGB", (32, 32), c) for c in ((200, 100, 0), (20, 40, 220))]
    got = tiny_clip.clip_iqa(images)
    e = tiny_clip.encode_images(images).double()
    t = tiny_clip.encode_texts(["Good photo.", "Bad photo."]).double()
    scale = tiny_clip.model.logit_scale.exp().item()
    logits = scale * e @ t.T
    expected = torch.softmax(logits, dim=1)[:, 0].tolist()
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-7)
    assert tiny_clip.logit_scale() == pytest.approx(scale)


def _pushed(model, direction: float) -> Image.Image:
    """A 32 x 32 image moved by gradient steps towards "Good photo." (direction +1) or
    "Bad photo." (-1) through the model's own preprocessing."""
    mean = torch.tensor(model.preprocess.transforms[-1].mean).view(1, 3, 1, 1)
    std = torch.tensor(model.preprocess.transforms[-1].std).view(1, 3, 1, 1)
    with torch.no_grad():
        t = model.encode_texts(["Good photo.", "Bad photo."])
    torch.manual_seed(1)
    x = torch.full((1, 3, 32, 32), 0.5).requires_grad_()
    for _ in range(30):
        e = torch.nn.functional.normalize(model.model.encode_image((x - mean) / std), dim=-1)
        gain = direction * (e @ t[0] - e @ t[1]).sum()
        (grad,) = torch.autograd.grad(gain, x)
        with torch.no_grad():
            x += 0.05 * grad.sign()
            x.clamp_(0, 1)
    pixels = (x.detach()[0].permute(1, 2, 0).numpy() * 255).round().astype("uint8")
    return Image.fromarray(pixels)


def test_clip_iqa_prefers_the_image_made_closer_to_good_photo(tiny_clip):
    good, bad = _pushed(tiny_clip, +1.0), _pushed(tiny_clip, -1.0)
    iqa_good, iqa_bad = tiny_clip.clip_iqa([good, bad])
    assert iqa_good > iqa_bad
    assert tiny_clip.clip_iqa([bad, good]) == pytest.approx([iqa_bad, iqa_good], abs=1e-6)


@pytest.fixture(scope="module")
def tiny_hf_clip(tmp_path_factory):
    from tests.fakes.tiny_models import build_tiny_hf_clip

    return build_tiny_hf_clip(tmp_path_factory.mktemp("tiny-hf-clip"))


# pictures the size of the tiny CLIP's crop, so no resizing differs between a PIL image
# and torchmetrics' tensor (both go through the same CLIP processor unresized)
PAIRS = [((200, 100, 0), "a kitchen"), ((20, 40, 220), "a wedding"), ((90, 200, 60), "tea")]


class _Tensors(torch.nn.Module):
    """The same CLIP, its features as tensors: torchmetrics 1.9 normalises what
    ``get_*_features`` return, which transformers 5 returns as a model output (the
    features are its ``pooler_output``)."""

    def __init__(self, model):
        super().__init__()
        self.model, self.config = model, model.config

    def get_image_features(self, *args, **kwargs):
        out = self.model.get_image_features(*args, **kwargs)
        return getattr(out, "pooler_output", out)

    def get_text_features(self, *args, **kwargs):
        out = self.model.get_text_features(*args, **kwargs)
        return getattr(out, "pooler_output", out)


@pytest.mark.slow
def test_hessel_clipscore_on_a_transformers_clip_equals_torchmetrics_over_40(tiny_hf_clip):
    """clipscore (Hessel's 2.5 x max(cos, 0)) through the hfclip: embedder equals the formula
    on the model's own embeddings, and torchmetrics' CLIPScore (100 x max(cos, 0)) / 40."""
    from torchmetrics.multimodal.clip_score import CLIPScore
    from transformers import CLIPModel, CLIPProcessor

    from metrics.baselines import clipscore_of

    clip = create("image_embedder", f"hfclip:{tiny_hf_clip}", shared=False, device="cpu")
    images = [Image.new("RGB", (32, 32), c) for c, _ in PAIRS]
    texts = [t for _, t in PAIRS]
    ours = clipscore_of(clip.encode_images(images).numpy(), clip.encode_texts(texts).numpy())
    model = CLIPModel.from_pretrained(tiny_hf_clip).eval()
    processor = CLIPProcessor.from_pretrained(tiny_hf_clip)
    with torch.inference_mode():
        got = processor(text=texts, images=images, return_tensors="pt", padding=True)
        img = model.get_image_features(pixel_values=got["pixel_values"])
        txt = model.get_text_features(
            input_ids=got["input_ids"], attention_mask=got["attention_mask"]
        )
    img = getattr(img, "pooler_output", img)
    txt = getattr(txt, "pooler_output", txt)
    cos = torch.nn.functional.cosine_similarity(img, txt, dim=-1)
    # fp32 reductions over 16-d projections: equal to well below 1e-5 on any CPU
    assert ours == pytest.approx((2.5 * cos.clamp(min=0)).tolist(), abs=1e-5)
    assert any(c > 0 for c in cos) and any(c <= 0 for c in cos)  # the clamp both ways
    metric = CLIPScore(model_name_or_path=lambda: (_Tensors(model), processor))
    for image, text, mine in zip(images, texts, ours, strict=True):
        metric.reset()
        pixels = torch.from_numpy(np.array(image)).permute(2, 0, 1)
        metric.update(pixels, text)
        assert float(metric.compute()) / 40 == pytest.approx(mine, abs=1e-4)
    assert clip.logit_scale() == pytest.approx(float(model.logit_scale.exp()))
    assert clip.id == f"hfclip:{tiny_hf_clip}"


def test_hfclip_refuses_a_siglip(siglip_path):
    clip = create("image_embedder", f"hfclip:{siglip_path}", shared=False, device="cpu")
    with pytest.raises(ValueError, match="not a CLIP model"):
        clip.load()
