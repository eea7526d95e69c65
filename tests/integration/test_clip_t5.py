"""CLIP-FlanT5 (``clip-t5:``) on a tiny random checkpoint of its layout: VQAScore as
t2v-metrics computes it (the chat prompt around the image's projected patch features,
exp(-mean cross-entropy) of "Yes" and its end token), against a hand computation from the
checkpoint's own tensors; batches padded and masked give each image's score alone; EXAG(ITA)
reads it; a checkpoint of another layout is named."""

from __future__ import annotations

import json
import math

import pytest
import torch

from refine.backends import create
from tests.fakes.tiny_models import build_tiny_clip_t5

pytestmark = pytest.mark.slow  # a transformers model built and loaded

RED, BLUE = (200, 30, 30), (30, 30, 200)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return build_tiny_clip_t5(tmp_path_factory.mktemp("clip-t5"))


def images():
    from PIL import Image

    return [Image.new("RGB", (40, 24), RED), Image.new("RGB", (24, 40), BLUE)]


def by_hand(checkpoint, image, text):
    """VQAScore from the checkpoint's tensors, step by step."""
    from PIL import Image
    from safetensors.torch import load_file
    from transformers import (
        AutoTokenizer,
        CLIPImageProcessorPil,
        CLIPVisionModel,
        T5ForConditionalGeneration,
    )

    tower = json.loads((checkpoint / "config.json").read_text())["mm_vision_tower"]
    t5 = T5ForConditionalGeneration.from_pretrained(checkpoint).eval()
    tok = AutoTokenizer.from_pretrained(checkpoint)
    t5.resize_token_embeddings(len(tok))  # as t2v-metrics' loader does
    w = load_file(checkpoint / "model.safetensors")
    vision = CLIPVisionModel.from_pretrained(tower).eval()
    own = "vision_tower.vision_tower."  # the checkpoint's own tower weights, over the repo's
    vision.load_state_dict({k[len(own) :]: v for k, v in w.items() if k.startswith(own)})
    processor = CLIPImageProcessorPil.from_pretrained(tower)  # t2v-metrics' (PIL) processor
    # padded to a square of the processor's mean colour, the image centred
    side = max(image.size)
    fill = tuple(int(255 * m) for m in processor.image_mean)
    square = Image.new("RGB", (side, side), fill)
    square.paste(image, ((side - image.width) // 2, (side - image.height) // 2))
    pixels = processor(images=[square], return_tensors="pt")["pixel_values"]
    with torch.no_grad():
        patches = vision(pixels, output_hidden_states=True).hidden_states[-2][0, 1:]
        h = torch.nn.functional.gelu(
            patches @ w["mm_projector.0.weight"].T + w["mm_projector.0.bias"]
        )
        feats = h @ w["mm_projector.2.weight"].T + w["mm_projector.2.bias"]
        system = (
            "A chat between a curious user and an artificial intelligence assistant. The "
            "assistant gives helpful, detailed, and polite answers to the user's questions."
        )
        question = f'Does this figure show "{text}"? Please answer yes or no.'
        before = tok(f"{system} USER: ").input_ids
        after = tok(f"\n{question} ASSISTANT: ").input_ids
        embed = t5.get_input_embeddings()
        inputs = torch.cat([embed(torch.tensor(before)), feats, embed(torch.tensor(after))])
        answer = tok("Yes").input_ids  # "Yes" and </s>
        logits = t5(inputs_embeds=inputs[None], labels=torch.tensor([answer])).logits[0]
        logp = torch.log_softmax(logits, dim=-1)
    assert logits.shape[-1] == len(tok)  # over the tokenizer's tokens alone
    vqa = math.exp(sum(float(logp[k, a]) for k, a in enumerate(answer)) / len(answer))
    yes, no = float(logits[0, answer[0]]), float(logits[0, tok("No").input_ids[0]])
    return vqa, math.exp(yes) / (math.exp(yes) + math.exp(no))


def test_vqascore_is_t2v_metrics_computation(checkpoint):
    judge = create("judge", f"clip-t5:{checkpoint}", device="cpu", shared=False)
    texts = ["a person", "a photo of a chat"]
    got = judge.vqa_score(images(), texts)
    assert [a.text for a in got] == texts and {a.mode for a in got} == {"logprobs"}
    for a, image, text in zip(got, images(), texts, strict=True):
        # float32 on the CPU; the batch's padding is masked, so only summation order differs
        assert a.value == pytest.approx(by_hand(checkpoint, image, text)[0], rel=1e-4)
    # a yes-probability is P(Yes) / (P(Yes) + P(No)) at the first answer position
    asked = judge.yes_probability(images()[:1], ["Does this show a chat?"])
    want = by_hand(checkpoint, images()[0], "x")[1]  # its question: the template's own
    q = 'Does this figure show "x"? Please answer yes or no.'
    assert judge.yes_probability(
        images()[:1], [q.removesuffix(" Please answer yes or no.")]
    ) == pytest.approx([want], rel=1e-4)
    assert 0 < asked[0] < 1
    with pytest.raises(ValueError, match="holds '<image>'"):
        judge.vqa_score(images()[:1], ["a <image> here"])
    one = create("judge", f"clip-t5:{checkpoint}", device="cpu", batch_size=1, shared=False)
    alone = [a.value for a in one.vqa_score(images(), texts)]
    assert alone == pytest.approx([a.value for a in got], rel=1e-4)
    assert got[0].value != pytest.approx(got[1].value, rel=1e-3)  # the images differ
    info = judge.info()
    assert info["id"] == f"clip-t5:{checkpoint}" and info["tokenizer"].startswith("T5")
    assert info["vision_weights"] == "the checkpoint's"


def test_exag_ita_reads_its_vqascore(checkpoint, tmp_path):
    """EXAG(ITA) with CLIP-FlanT5 as the judge: each candidate's VQAScore on the image
    against its mean on the real photos (AHEaD Eq. 3-4, the paper's image-text score)."""
    from metrics.ahead import exaggeration, ita_baseline
    from refine.backends.selection import Backends
    from refine.evaluate.assess import Assessor
    from refine.profiles import load_profile
    from refine.records import ReferencePack

    photos = []
    for k, im in enumerate(images()):
        photos.append(str(tmp_path / f"p{k}.png"))
        im.save(photos[-1])
    candidates = ["a flying carpet", "a desert"]
    refs = ReferencePack(activity="a wedding", country="Iran", descriptors={},
                         stereotypes=candidates, reference_images=photos)  # fmt: skip
    backends = Backends(load_profile("gemini"), {"judge": f"clip-t5:{checkpoint}"},
                        {"judge": {"device": "cpu"}})  # fmt: skip
    judged = Assessor(backends).exaggeration(images()[0], {}, refs)
    judge = backends.get("judge")
    base = ita_baseline([[a.value for a in judge.vqa_score([im] * 2, candidates)]
                         for im in images()])  # fmt: skip
    yes = [a.value for a in judge.vqa_score([images()[0]] * 2, candidates)]
    assert judged.answer.variant == "exag:ita"
    assert list(judged.answer.yes) == pytest.approx(yes, rel=1e-6)
    assert list(judged.answer.baseline) == pytest.approx(base, rel=1e-6)
    want = exaggeration([yes], base, candidates).value
    from metrics.ahead import exag_of

    assert exag_of([judged.answer])[0].value == pytest.approx(want, abs=1e-9)


def test_another_layout_is_named(tmp_path):
    from transformers import T5Config, T5ForConditionalGeneration

    plain = tmp_path / "t5"
    config = T5Config(vocab_size=40, d_model=16, d_kv=8, d_ff=16, num_layers=1, num_heads=2)
    T5ForConditionalGeneration(config).save_pretrained(plain)
    judge = create("judge", f"clip-t5:{plain}", device="cpu", shared=False)
    with pytest.raises(ValueError, match="no CLIP-FlanT5 checkpoint.*mm_hidden_size"):
        judge.load()
