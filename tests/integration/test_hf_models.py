"""hf: observer, judge and language model on tiny random Qwen2.5-VL / Qwen2 models, and on
tiny Qwen3-VL and Qwen3.5 (the profiles' current architectures), saved to disk and loaded by
path, as a hub id would be."""

from __future__ import annotations

import json

import pytest
import torch
from PIL import Image
from pydantic import BaseModel

from refine.backends import create
from refine.backends.hf_models import HFModel
from refine.backends.loading import ModelUnavailable
from refine.backends.structured import InvalidModelOutput, observation_prompt
from tests.fakes.tiny_models import (
    build_tiny_qwen3,
    build_tiny_qwen_lm,
    build_tiny_qwen_vl,
    teach,
)

# the module's tiny Qwen models, built once (3 s to set up)
pytestmark = pytest.mark.slow

DIMS = ["setting", "objects", "attire", "interaction", "spatial"]
RED = Image.new("RGB", (64, 48), (200, 30, 30))
BLUE = Image.new("RGB", (30, 90), (0, 0, 255))


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny-hf")
    return {"vl": build_tiny_qwen_vl(root), "lm": build_tiny_qwen_lm(root), "root": root}


def backend(role, path, **kw):
    return create(role, f"hf:{path}", shared=False, device="cpu", **kw)


def manual_answer_probs(path, image, text, answers, **template):
    """The answer distribution computed directly with transformers, for comparison;
    ``template``: variables of the chat template (enable_thinking)."""
    from transformers import AutoModelForImageTextToText, AutoProcessor

    proc = AutoProcessor.from_pretrained(path)
    model = AutoModelForImageTextToText.from_pretrained(path).eval()
    chat = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": text}]}]
    prompt = proc.apply_chat_template(chat, add_generation_prompt=True, tokenize=False, **template)
    inputs = proc(text=[prompt], images=[image], return_tensors="pt")
    with torch.no_grad():
        logits = model(**inputs).logits[0, -1]
    ids = [proc.tokenizer.convert_tokens_to_ids(a) for a in answers]
    return torch.softmax(logits[ids], dim=0).tolist()


def test_judge_yes_probability_matches_direct_computation(tiny):
    judge = backend("judge", tiny["vl"])
    questions = ["Is there food on the table?", "Is anyone wearing a tall hat?"]
    batched = judge.yes_probability([RED, BLUE], questions)
    assert all(0.0 < p < 1.0 for p in batched)
    # left padding: each prompt in a batch scores as it does alone
    singles = [
        judge.yes_probability([im], [q])[0] for im, q in zip([RED, BLUE], questions, strict=True)
    ]
    assert batched == pytest.approx(singles, abs=1e-5)
    expected = manual_answer_probs(
        tiny["vl"], RED, f'{questions[0]} Please answer "Yes" or "No".', ["Yes", "No"]
    )
    assert batched[0] == pytest.approx(expected[0], abs=1e-5)


def manual_logits(path, image, text, answer=""):
    """The next-token logits after the chat of ``text`` with the answer begun by
    ``answer``, computed directly with transformers."""
    from transformers import AutoModelForImageTextToText, AutoProcessor

    proc = AutoProcessor.from_pretrained(path)
    model = AutoModelForImageTextToText.from_pretrained(path).eval()
    chat = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": text}]}]
    prompt = proc.apply_chat_template(chat, add_generation_prompt=True, tokenize=False)
    inputs = proc(text=[prompt + answer], images=[image], return_tensors="pt")
    with torch.no_grad():
        return model(**inputs).logits[0, -1], proc.tokenizer


def test_vqascore_is_p_yes_over_the_whole_vocabulary(tiny):
    """VQAScore on a local judge: P("Yes") from the model's own logits for VQAScore's
    question as t2v_metrics asks it, over every token (not renormalised over "Yes" and
    "No"), the token "Yes" alone (t2v_metrics' answer)."""
    judge = backend("judge", tiny["vl"])
    texts = ["a tall hat", "a sofreh on the floor"]
    got = judge.vqa_score([RED, BLUE], texts)
    assert [a.text for a in got] == texts and {a.mode for a in got} == {"logprobs"}
    logits, tok = manual_logits(
        tiny["vl"], RED, 'Does this figure show "a tall hat"? Please answer yes or no.'
    )
    probs = torch.softmax(logits.float(), dim=0)
    (yes,) = tok.encode("Yes", add_special_tokens=False)
    expected = float(probs[yes])
    # fp32 softmax over the vocabulary, batched against alone: 1e-5
    assert got[0].value == pytest.approx(expected, abs=1e-5)
    # the renormalised yes-probability is another number
    renormalised = judge.yes_probability([RED], ["Does this figure show 'a tall hat'?"])[0]
    assert got[0].value < renormalised
    singles = [
        judge.vqa_score([im], [t])[0].value for im, t in zip([RED, BLUE], texts, strict=True)
    ]
    assert [a.value for a in got] == pytest.approx(singles, abs=1e-5)


def test_a_rating_read_after_score_is(tiny):
    """AHEaD Tab. 31's format on a local judge: the answer begun with "score is " and the
    digit's distribution read at the next position."""
    judge = backend("judge", tiny["vl"])
    prompt = "Rate 1-5. Respond with ONLY: score is <num>"
    (rating,) = judge.rate_prefixed([RED], [prompt], "score is ")
    logits, tok = manual_logits(tiny["vl"], RED, prompt, "score is ")
    ids = [tok.convert_tokens_to_ids(d) for d in "12345"]
    expected = torch.softmax(logits[ids].float(), dim=0).tolist()
    assert rating.probabilities == pytest.approx(expected, abs=1e-5)
    assert rating.expectation == pytest.approx(sum((k + 1) * p for k, p in enumerate(expected)))
    # not the distribution of the first answer token
    first = judge.rate([RED], [prompt])[0].probabilities
    assert rating.probabilities != pytest.approx(first, abs=1e-3)


def test_judge_rating_distribution(tiny):
    judge = backend("judge", tiny["vl"], batch_size=1)
    prompts = ["Rate from 1 to 5 how Iranian this looks.", "Rate 1-5."]
    ratings = judge.rate([RED, BLUE], prompts)
    for r, (im, p) in zip(ratings, [(RED, prompts[0]), (BLUE, prompts[1])], strict=True):
        assert sum(r.probabilities) == pytest.approx(1.0, abs=1e-6)
        assert r.probabilities == pytest.approx(
            manual_answer_probs(tiny["vl"], im, p, list("12345")), abs=1e-5
        )
        assert r.expectation >= 1.0 and r.expectation <= 5.0
        assert r.argmax == 1 + max(range(5), key=lambda k: r.probabilities[k])


def test_judge_rates_quality_0_to_10_splitting_one_and_ten(tiny):
    from transformers import AutoModelForImageTextToText, AutoProcessor

    from metrics.judge import expected_rating

    judge = backend("judge", tiny["vl"], batch_size=2)
    prompt = "Rate the naturalness from 0 to 10. Answer with the number only."
    ratings = judge.rate_scale([RED, BLUE], [prompt, prompt], 0, 10)
    # by hand: the first token over the digits, and P("0" | "1") over the whole vocabulary
    proc = AutoProcessor.from_pretrained(tiny["vl"])
    model = AutoModelForImageTextToText.from_pretrained(tiny["vl"]).eval()
    chat = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": prompt}]}]
    text = proc.apply_chat_template(chat, add_generation_prompt=True, tokenize=False)
    for rating, image in zip(ratings, [RED, BLUE], strict=True):
        first = manual_answer_probs(tiny["vl"], image, prompt, [str(d) for d in range(10)])
        inputs = proc(text=[text + "1"], images=[image], return_tensors="pt")
        with torch.no_grad():
            nxt = torch.softmax(model(**inputs).logits[0, -1], dim=0)
        ten = float(nxt[proc.tokenizer.convert_tokens_to_ids("0")])
        expected = [*first, 0.0]
        expected[1], expected[10] = first[1] * (1 - ten), first[1] * ten
        assert rating.low == 0 and len(rating.probabilities) == 11
        assert rating.probabilities == pytest.approx(expected, abs=1e-5)
        assert rating.expectation == pytest.approx(expected_rating(expected, 0), abs=1e-4)


def test_answer_tokens_must_be_single_tokens(tiny):
    judge = backend("judge", tiny["vl"])
    judge.load()
    yes, no = judge.answer_token_ids(["Yes", "No"])
    assert yes != no
    with pytest.raises(ValueError, match="'Maybe' is 5 tokens"):
        judge.answer_token_ids(["Maybe"])
    with pytest.raises(ValueError, match="2 images but 1 questions"):
        judge.yes_probability([RED, BLUE], ["one question"])


def test_roles_of_one_model_share_weights(tiny):
    obs = create("observer", f"hf:{tiny['vl']}", device="cpu")
    judge = create("judge", f"hf:{tiny['vl']}", device="cpu")
    assert obs is not judge
    assert obs.load().model is judge.load().model
    info = judge.info()
    assert info["architecture"] == "Qwen2_5_VLForConditionalGeneration"
    assert (info["dtype"], info["device"]) == ("float32", "cpu")
    assert info["id"] == f"hf:{tiny['vl']}"


def test_observer_random_model_fails_with_raw_output(tiny, monkeypatch):
    obs = backend("observer", tiny["vl"], max_new_tokens=12, max_repairs=1)
    prompts = []
    real = HFModel.generate_text

    def spy(self, prompt, image=None):
        prompts.append(prompt)
        return real(self, prompt, image)

    monkeypatch.setattr(HFModel, "generate_text", spy)
    with pytest.raises(InvalidModelOutput) as info:
        obs.describe(RED, DIMS, 3)
    assert info.value.attempts == 2 and len(prompts) == 2
    assert "raw output:" in str(info.value) and info.value.raw in str(info.value)
    assert "could not be used" in prompts[1]  # the repair prompt was sent
    # 12 new tokens and no end of answer: the message says which option to raise
    assert obs.truncated and "cut at max_new_tokens=12" in str(info.value)


def test_observer_repair_then_valid(tiny, monkeypatch):
    obs = backend("observer", tiny["vl"])
    answers = iter(
        ['{"setting": "a kitchen"', '```json\n{"setting": ["Kitchen", "kitchen "]}\n```']
    )
    seen = []

    def scripted(self, prompt, image=None):
        seen.append((prompt, image))
        return next(answers)

    monkeypatch.setattr(HFModel, "generate_text", scripted)
    out = obs.describe(RED, DIMS, 3)
    assert out == {
        "setting": ["Kitchen"],
        "objects": [],
        "attire": [],
        "interaction": [],
        "spatial": [],
    }
    assert seen[0][1] is RED and seen[1][1] is RED
    assert "not valid JSON" in seen[1][0]


TAUGHT = {
    "setting": ["living room"],
    "objects": ["rice", "tea glasses"],
    "attire": [],
    "interaction": ["sharing food"],
    "spatial": ["sitting on the floor"],
}


@pytest.fixture(scope="module")
def taught(tiny):
    """The tiny VL observer taught to answer TAUGHT about RED (its kept weights, or about
    9 s of training; once for the module's two tests of real generation); returns it with
    the last loss."""
    obs = backend("observer", tiny["vl"], max_new_tokens=160)
    loss = teach(
        obs, observation_prompt(DIMS, 3), json.dumps(TAUGHT), image=RED, keep="hf-observer"
    )
    return obs, loss


def test_taught_observer_lists_descriptors_through_real_generation(taught):
    obs, loss = taught
    assert loss < 0.1  # taught: every answer token ahead by a margin (see teach)
    assert obs.describe(RED, DIMS, 3) == TAUGHT


@pytest.mark.slow  # the taught observer: about 9 s where its kept weights do not hold
def test_observer_describes_several_images_in_one_generate_call(taught):
    """describe_many: the first answers of all images in one left-padded generate call,
    the same as describing each alone."""
    obs, _ = taught
    alone = obs.describe(RED, DIMS, 3)
    calls = []
    generate = obs.model.generate

    def counting(**kw):
        calls.append(kw["input_ids"].shape[0])
        return generate(**kw)

    obs.model.generate = counting
    try:
        many = obs.describe_many([RED, RED, RED], DIMS, 3)
    finally:
        obs.model.generate = generate
    assert calls == [3] and many == [alone] * 3 and alone == TAUGHT


class Candidates(BaseModel):
    candidates: list[str]


def test_language_model_complete_json(tiny, tmp_path, monkeypatch):
    """A taught language model answers in JSON. Its taught weights, kept (as teach keeps
    the suite's observers'), are taken by a fresh model without a training step; kept for
    another answer, or not kept, they are a warning and the model is trained."""
    import torch

    from tests.fakes import tiny_models

    monkeypatch.setattr(tiny_models, "TAUGHT", tmp_path)
    monkeypatch.setenv("REFINE_TAUGHT", "record")
    lm = backend("llm", tiny["lm"], max_new_tokens=60)
    prompt, answer = "List stereotype candidates for Iran as JSON.", '{"candidates": ["carpets"]}'
    teach(lm, prompt, answer, keep="lm")
    assert lm.complete_json(prompt, Candidates) == Candidates(candidates=["carpets"])
    with pytest.raises(ValueError, match="text-only model and cannot observe"):
        lm.describe(RED, DIMS, 3)
    monkeypatch.delenv("REFINE_TAUGHT")
    other = backend("llm", tiny["lm"], max_new_tokens=60)
    with pytest.warns(UserWarning, match=r"lm\.safetensors are for another model, prompt or"):
        with pytest.raises(AssertionError, match="not taught in 1 steps"):  # it trains
            teach(other, prompt, '{"candidates": ["rugs"]}', max_steps=1, keep="lm")
    with pytest.warns(UserWarning, match=r"taught weights gone\.safetensors are not kept"):
        with pytest.raises(AssertionError, match="not taught in 1 steps"):
            teach(other, prompt, answer, max_steps=1, keep="gone")
    steps = []
    monkeypatch.setattr(torch.optim.Adam, "step", lambda self, *a, **k: steps.append(1))
    fresh = backend("llm", tiny["lm"], max_new_tokens=60)
    assert teach(fresh, prompt, answer, keep="lm") < 0.1 and steps == []
    assert fresh.complete_json(prompt, Candidates) == Candidates(candidates=["carpets"])


def test_unavailable_model_errors_name_the_model(tmp_path):
    with pytest.raises(ModelUnavailable, match="no-such-org/no-such-model.*hf download"):
        backend("observer", "no-such-org/no-such-model").load()
    with pytest.raises(ModelUnavailable, match="not a local model folder"):
        backend("judge", tmp_path / "missing").load()
    with pytest.raises(ValueError, match="needs a model id"):
        create("llm", "hf:", shared=False)


@pytest.fixture(scope="module", params=["qwen3-vl", "qwen3.5"])
def current(request, tmp_path_factory):
    """A tiny Qwen3-VL and a tiny Qwen3.5 (Gated DeltaNet), the profiles' architectures."""
    return build_tiny_qwen3(tmp_path_factory.mktemp("tiny-qwen3"), request.param)


def test_current_architectures_judge_as_computed_directly(current):
    judge = backend("judge", current)
    info = judge.info()
    assert (
        info["architecture"]
        == {
            "tiny-qwen3-vl": "Qwen3VLForConditionalGeneration",
            "tiny-qwen3.5": "Qwen3_5ForConditionalGeneration",
        }[current.name]
    )
    # the answer follows an empty reasoning block: the first token read is the answer's
    assert judge._chat_text("q", True).endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    thinking = backend("judge", current, thinking=True)
    thinking.load()
    assert thinking._chat_text("q", True).endswith("<|im_start|>assistant\n")
    questions = ["Is there food on the table?", "Is anyone wearing a tall hat?"]
    batched = judge.yes_probability([RED, BLUE], questions)
    # left padding (and the linear-attention layers' masked states) leave each answer as alone
    singles = [
        judge.yes_probability([im], [q])[0] for im, q in zip([RED, BLUE], questions, strict=True)
    ]
    assert batched == pytest.approx(singles, abs=1e-5)
    for p, im, q in zip(batched, [RED, BLUE], questions, strict=True):
        expected = manual_answer_probs(
            current, im, f'{q} Please answer "Yes" or "No".', ["Yes", "No"], enable_thinking=False
        )
        assert p == pytest.approx(expected[0], abs=1e-5)
    rating = judge.rate([BLUE], ["Rate 1-5."])[0]
    assert rating.probabilities == pytest.approx(
        manual_answer_probs(current, BLUE, "Rate 1-5.", list("12345"), enable_thinking=False),
        abs=1e-5,
    )


def test_current_architectures_generate_in_batches_as_alone(current):
    obs = backend("observer", current, max_new_tokens=6, batch_size=2)
    batched = obs.generate_texts(["Describe.", "What is shown here?"], [RED, BLUE])
    singles = [obs.generate_text("Describe.", RED), obs.generate_text("What is shown here?", BLUE)]
    assert batched == singles and all(batched)
