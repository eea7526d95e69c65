"""siglip: embedder on a tiny random SigLIP saved to disk and loaded by path."""

from __future__ import annotations

import pytest
import torch
from PIL import Image

from refine.backends import create
from tests.fakes.tiny_models import build_tiny_siglip


@pytest.fixture(scope="module")
def siglip(tmp_path_factory):
    path = build_tiny_siglip(tmp_path_factory.mktemp("tiny-siglip"))
    return create("image_embedder", f"siglip:{path}", shared=False, device="cpu", batch_size=2)


def test_image_and_text_embeddings(siglip):
    red, blue = Image.new("RGB", (50, 40), (255, 0, 0)), Image.new("RGB", (20, 20), (0, 0, 255))
    e = siglip.encode_images([red, blue, red])  # two batches of at most 2
    assert e.shape == (3, 32)
    assert torch.allclose(e.norm(dim=1), torch.ones(3), atol=1e-5)
    assert torch.allclose(e[0], e[2], atol=1e-6) and not torch.allclose(e[0], e[1], atol=1e-3)
    t = siglip.encode_texts(["a photo of rice", "tea", "a photo of rice"])
    assert torch.allclose(t[0], t[2], atol=1e-6) and not torch.allclose(t[0], t[1], atol=1e-3)


def test_scores_follow_their_formulas(siglip):
    im = Image.new("RGB", (32, 32), (10, 200, 10))
    text = "people eating rice"
    cos = float((siglip.encode_images([im]) * siglip.encode_texts([text])).sum())
    assert siglip.clip_score([im], [text])[0] == pytest.approx(100 * max(cos, 0.0), abs=1e-4)
    m = siglip.model
    expected = torch.sigmoid(torch.tensor(cos) * m.logit_scale.exp() + m.logit_bias).item()
    assert siglip.match_probability([im], [text])[0] == pytest.approx(expected, abs=1e-5)
    info = siglip.info()
    assert info["architecture"] == "SiglipModel" and info["device"] == "cpu"
    with pytest.raises(ValueError, match="1 images but 2 texts"):
        siglip.clip_score([im], ["a", "b"])


@pytest.mark.slow
def test_models_loaded_on_several_threads_at_once_are_their_checkpoints(siglip):
    """Candidates, batch workers and app sessions first use a shared model at the same
    time: loads on several threads must each give the checkpoint's weights. (Unserialised,
    about 1 in 25 rounds of three concurrent loads gave a model with other weights.)"""
    import threading

    from refine.backends.siglip_embedder import SiglipEmbedder

    path = siglip.model_name
    image = Image.new("RGB", (32, 32), (200, 30, 30))
    expected = siglip.encode_images([image])
    for _ in range(60):
        shared, other = SiglipEmbedder(path, device="cpu"), SiglipEmbedder(path, device="cpu")
        threads = [threading.Thread(target=b.load) for b in (shared, shared, other)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for backend in (shared, other):
            torch.testing.assert_close(backend.encode_images([image]), expected)
