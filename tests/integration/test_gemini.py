"""Gemini backends: the real google-genai client against a local fake server."""

from __future__ import annotations

import io
import json
import math

import pytest
from PIL import Image
from pydantic import BaseModel

from refine.backends import create, judging
from refine.backends.gemini import GeminiClient, GeminiError
from refine.backends.structured import InvalidModelOutput
from tests.fakes.gemini_server import FakeGemini, image_answer, png_bytes, text_answer


@pytest.fixture
def fake():
    server = FakeGemini().start()
    yield server
    server.stop()


@pytest.fixture
def client(fake):
    sleeps: list[float] = []
    c = GeminiClient(
        api_key="test-key",
        base_url=fake.url,
        timeout_s=2.0,
        max_retries=2,
        initial_delay_s=0.5,
        jitter=0.0,
        sleep=sleeps.append,
    )
    c.sleeps = sleeps
    return c


def backend(role, name, client, **kw):
    return create(role, name, shared=False, client=client, **kw)


def picture(color=(10, 120, 200), size=(20, 16)):
    return Image.new("RGB", size, color)


def test_generate_image_and_usage(fake, client):
    fake.reply(image_answer(png_bytes((0, 255, 0), (24, 24)), text="here"))
    fake.reply(image_answer(png_bytes((0, 0, 255), (24, 24))))
    # one request at a time: the stand-in answers in the order the requests come
    gen = backend("generator", "gemini:gemini-2.5-flash-image", client, concurrency=1)
    images = gen.generate("a family dinner in Tehran", seeds=[1, 2])
    assert [im.getpixel((0, 0)) for im in images] == [(0, 255, 0), (0, 0, 255)]
    assert fake.paths[0].endswith("/models/gemini-2.5-flash-image:generateContent")
    req = fake.requests[0]
    assert req["contents"][0]["parts"][0]["text"] == "a family dinner in Tehran"
    assert "IMAGE" in req["generationConfig"]["responseModalities"]
    assert [r["generationConfig"]["seed"] for r in fake.requests] == [1, 2]
    assert [c.total_tokens for c in client.calls] == [1310, 1310]
    assert gen.id == "gemini:gemini-2.5-flash-image"


def test_edit_sends_image_and_keeps_input_size(fake, client):
    fake.reply(image_answer(png_bytes((1, 2, 3), (40, 32))))
    ed = backend("editor", "gemini:gemini-2.5-flash-image", client)
    src = picture(size=(20, 16))
    out = ed.edit(src, "remove the hookah", seeds=[7])[0]
    assert out.size == (20, 16)
    parts = fake.requests[0]["contents"][0]["parts"]
    sent = parts[0]["inlineData"]
    assert sent.get("mimeType", sent.get("mime_type")) == "image/png"
    import base64

    decoded = Image.open(io.BytesIO(base64.urlsafe_b64decode(sent["data"])))
    assert decoded.size == (20, 16) and decoded.getpixel((0, 0)) == (10, 120, 200)
    assert parts[1]["text"] == "remove the hookah"


def test_large_reference_photos_are_sent_resized_as_jpeg(fake, client):
    """A user's reference photo over 2,048 px (2,100 x 1,575 here; a 12 MP photo as PNG
    was 15-25 MB) goes out resized to 2,048 px on its longest side, as JPEG. A small photo
    keeps its size; the image edited stays PNG and whole (tests above)."""
    import base64

    from refine.backends.gemini import PHOTO_SIDE

    big = Image.linear_gradient("L").resize((2100, 1575)).convert("RGB")
    small = picture(size=(300, 200))
    for _ in range(2):
        fake.reply(image_answer(png_bytes()))
    gen = backend("generator", "gemini:gemini-2.5-flash-image", client, concurrency=1)
    gen.generate("a family dinner in Tehran", seeds=[1], references=[big, small])
    ed = backend("editor", "gemini:gemini-2.5-flash-image", client)
    ed.edit(picture(size=(20, 16)), "add the samovar", seeds=[2], references=[big])
    photos = [fake.requests[0]["contents"][0]["parts"][k]["inlineData"] for k in (0, 1)]
    photos.append(fake.requests[1]["contents"][0]["parts"][1]["inlineData"])
    sizes = []
    for sent in photos:
        assert sent.get("mimeType", sent.get("mime_type")) == "image/jpeg"
        data = base64.urlsafe_b64decode(sent["data"])
        decoded = Image.open(io.BytesIO(data))
        assert decoded.format == "JPEG"
        sizes.append(decoded.size)
        assert len(data) < 1_000_000
    assert sizes == [(PHOTO_SIDE, 1536), (300, 200), (PHOTO_SIDE, 1536)] and PHOTO_SIDE == 2048
    edited = fake.requests[1]["contents"][0]["parts"][0]["inlineData"]
    assert edited.get("mimeType", edited.get("mime_type")) == "image/png"


def test_a_model_shut_down_is_named_with_its_date_and_replacement(fake, client):
    """The preflight of a model the API no longer knows reads the list of models
    (assets/gemini_models.toml): its shutdown date, source and replacement; a model the
    list does not know is 'unknown or retired'."""
    from tests.fakes.gemini_server import CATALOG

    fake.models = [m for m in CATALOG if m != "gemini-2.5-flash-image"]
    with pytest.raises(GeminiError) as err:
        client.check_model("gemini-2.5-flash-image", image=True)
    text = str(err.value)
    assert text.startswith(
        "gemini-2.5-flash-image: no such Gemini model (shut down on 2026-10-02 "
        "(https://ai.google.dev/gemini-api/docs/deprecations, read 2026-12-06); use "
        "gemini-nano-banana-2.1); image models the API offers: "
    )
    assert "gemini-nano-banana-2.1" in text.split("offers: ")[1] and "\n" not in text
    with pytest.raises(GeminiError, match=r"gemini-0-made-up: no such Gemini model \(unknown"):
        client.check_model("gemini-0-made-up", image=False)


def test_retry_on_429_then_success(fake, client):
    fake.fail(429, "RESOURCE_EXHAUSTED", "slow down")
    fake.fail(503, "UNAVAILABLE", "busy")
    fake.reply(image_answer(png_bytes()))
    gen = backend("generator", "gemini:gemini-2.5-flash-image", client)
    assert gen.generate("x", [0])[0].size == (16, 12)
    assert client.sleeps == [0.5, 1.0]  # exponential backoff
    assert client.calls[-1].attempts == 3


def test_persistent_500_gives_up_with_message(fake, client):
    for _ in range(3):
        fake.fail(500, "INTERNAL", "boom")
    gen = backend("generator", "gemini:gemini-2.5-flash-image", client)
    with pytest.raises(GeminiError, match=r"HTTP 500 after 3 attempt\(s\): boom"):
        gen.generate("x", [0])
    assert len(fake.requests) == 3


def test_bad_key_is_not_retried(fake, client):
    fake.fail(403, "PERMISSION_DENIED", "API key not valid")
    gen = backend("generator", "gemini:gemini-2.5-flash-image", client)
    with pytest.raises(GeminiError, match="GEMINI_API_KEY"):
        gen.generate("x", [0])
    assert len(fake.requests) == 1


@pytest.mark.slow
def test_timeout_is_retried_then_reported(fake, client):
    client.timeout_s = 0.3  # each answer comes 1 s late: three attempts time out in ~1 s
    for _ in range(3):
        fake.reply(image_answer(png_bytes()), delay_s=1.0)
    gen = backend("generator", "gemini:gemini-2.5-flash-image", client)
    with pytest.raises(GeminiError, match="no answer after 3 attempt"):
        gen.generate("x", [0])


def test_blocked_and_imageless_answers(fake, client):
    fake.reply({"promptFeedback": {"blockReason": "SAFETY"}, "usageMetadata": {}})
    gen = backend("generator", "gemini:gemini-2.5-flash-image", client)
    with pytest.raises(GeminiError, match=r"blocked \(SAFETY\)"):
        gen.generate("x", [0])
    fake.reply(text_answer("I can't draw that", finish="STOP"))
    with pytest.raises(GeminiError, match="no image .*finish reason STOP.*I can't draw that"):
        gen.generate("x", [0])
    fake.reply(text_answer("", finish="IMAGE_SAFETY"))
    with pytest.raises(GeminiError, match="IMAGE_SAFETY"):
        gen.generate("x", [0])


def test_missing_key_message(monkeypatch, fake):
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    gen = create(
        "generator",
        "gemini:gemini-2.5-flash-image",
        shared=False,
        client=GeminiClient(base_url=fake.url),
    )
    with pytest.raises(GeminiError, match="set GEMINI_API_KEY"):
        gen.generate("x", [0])


def test_key_from_environment(monkeypatch, fake):
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.setenv("GOOGLE_API_KEY", "from-env")
    fake.reply(image_answer(png_bytes()))
    gen = create(
        "generator",
        "gemini:gemini-2.5-flash-image",
        shared=False,
        client=GeminiClient(base_url=fake.url),
    )
    gen.generate("x", [0])
    assert len(fake.requests) == 1


def test_observer_structured_output(fake, client):
    answer = {
        "setting": [" a carpet ", "a carpet", "a window"],
        "objects": ["rice"] * 1,
        "attire": [],
        "interaction": ["sharing food"],
        "spatial": [],
    }
    fake.reply(text_answer(json.dumps(answer)))
    obs = backend("observer", "gemini:gemini-2.5-flash", client)
    dims = ["setting", "objects", "attire", "interaction", "spatial"]
    got = obs.describe(picture(), dims, max_per_dimension=1)
    assert got == {
        "setting": ["a carpet"],
        "objects": ["rice"],
        "attire": [],
        "interaction": ["sharing food"],
        "spatial": [],
    }
    cfg = fake.requests[0]["generationConfig"]
    assert cfg["responseMimeType"] == "application/json"
    assert "setting" in json.dumps(cfg.get("responseSchema") or cfg.get("responseJsonSchema"))
    assert cfg["temperature"] == 0.0
    assert "inlineData" in fake.requests[0]["contents"][0]["parts"][0]


def test_observer_repairs_then_fails_with_raw_output(fake, client):
    dims = ["setting"]
    fake.reply(text_answer("Sure! The setting is a kitchen."))
    fake.reply(text_answer('{"setting": ["a kitchen"]}'))
    obs = backend("observer", "gemini:gemini-2.5-flash", client)
    assert obs.describe(picture(), dims) == {"setting": ["a kitchen"]}
    repair_prompt = fake.requests[1]["contents"][0]["parts"][-1]["text"]
    assert "could not be used" in repair_prompt and "The setting is a kitchen" in repair_prompt
    for _ in range(3):
        fake.reply(text_answer('{"setting": "not a list"}'))
    with pytest.raises(InvalidModelOutput, match=r"(?s)3 attempt.*setting.*valid list.*not a list"):
        obs.describe(picture(), dims)


def test_llm_complete_json(fake, client):
    from pydantic import BaseModel

    class Candidates(BaseModel):
        candidates: list[str]

    fake.reply(text_answer('{"candidates": ["giant domes", "oversized hookahs"]}'))
    llm = backend("llm", "gemini:gemini-2.5-flash", client)
    out = llm.complete_json("List stereotypes", Candidates)
    assert out.candidates == ["giant domes", "oversized hookahs"]


def test_gemini_3_keeps_its_temperature_and_thinks_at_the_level_set(fake, client):
    """No temperature below 1.0 goes to a Gemini 3 model that takes one (3.1 Pro) unless a
    call sets one (a paper's protocol: the reference builder's 0.2 goes as it is); a model
    before Gemini 3 still gets 0.0. The observer and the writer send the thinking level set
    (a level the API does not know is refused, naming the levels), and an answer's thought
    tokens are counted as billed output."""
    from pydantic import BaseModel

    from refine.backends.gemini import gemini_3_or_later

    class Candidates(BaseModel):
        candidates: list[str]

    for _ in range(4):
        fake.reply(text_answer('{"candidates": ["giant domes"]}'))
    pro = backend("llm", "gemini:gemini-3.1-pro-preview", client, thinking_level="low")
    old = backend("llm", "gemini:gemini-2.5-flash", client)
    pro.complete_json("List", Candidates)
    pro.complete_json("List", Candidates, temperature=0.2)
    old.complete_json("List", Candidates)
    configs = [r["generationConfig"] for r in fake.requests]
    assert "temperature" not in configs[0] and configs[1]["temperature"] == 0.2
    assert configs[2]["temperature"] == 0.0 and "thinkingConfig" not in configs[2]
    # (google-genai 3.6 writes the level's key as thinking_level)
    assert [list(c["thinkingConfig"].values()) for c in configs[:2]] == [["LOW"], ["LOW"]]
    answer = {k: [] for k in ("setting", "objects", "attire", "interaction", "spatial")}
    fake.reply(text_answer(json.dumps(answer)))
    obs = backend("observer", "gemini:gemini-3.8-flash", client, thinking_level="minimal")
    obs.describe(picture(), list(answer))
    assert list(fake.requests[-1]["generationConfig"]["thinkingConfig"].values()) == ["MINIMAL"]
    # the stand-in's text answers: 11 in, 7 out and 12 thought tokens
    assert {(c.output_tokens, c.thought_tokens, c.total_tokens) for c in client.calls} == {
        (7 + 12, 12, 30)
    }
    with pytest.raises(ValueError, match="thinking_level must be one of minimal, low, medium"):
        backend("observer", "gemini:gemini-3.8-flash", client, thinking_level="deep")
    assert [gemini_3_or_later(m) for m in ("gemini-3.1-pro-preview", "gemini-2.5-flash")] == [
        True,
        False,
    ]
    assert gemini_3_or_later("gemini-flash-latest") and not gemini_3_or_later("gemma-3-27b-it")


@pytest.mark.parametrize(
    "model, fixed",
    [
        ("gemini-2.5-flash", False),
        ("gemini-3-flash-preview", False),
        ("gemini-3.1-pro-preview", False),
        ("gemini-3.5-flash", False),
        ("gemini-3.1-flash-lite-image", False),
        ("gemini-3.5-flash-lite", True),
        ("gemini-3.6-flash", True),
        ("gemini-3.8-flash", True),
        ("models/gemini-3.10-flash", True),
        ("gemini-4.0-pro", True),
        ("gemini-flash-latest", True),  # an alias follows the newest model
        ("publishers/google/models/gemini-2.5-flash", False),
        ("gemma-3-27b-it", False),
        ("gemini-exp-1206", False),
        ("tunedModels/my-model-123", False),
    ],
)
def test_which_models_fix_their_sampling(model, fixed):
    from refine.backends.gemini import fixed_sampling

    assert fixed_sampling(model) is fixed


def test_requests_to_a_model_that_fixes_its_sampling(fake, client):
    """Gemini 3.6 Flash and later ignore temperature, top_p and top_k: no request to them
    carries one (the stand-in refuses one that does), an earlier model still gets the
    protocol's; every request opts out of storage; the model version that answered is
    recorded beside the model asked for (an alias the API serves with a newer model)."""
    from pydantic import BaseModel

    class Candidates(BaseModel):
        candidates: list[str]

    fake.served_as = {"gemini-3.7-flash": "gemini-3.8-flash"}  # 3.7 routes to 3.8
    for _ in range(3):
        fake.reply(text_answer('{"candidates": ["giant domes"]}'))
    new = backend("llm", "gemini:gemini-3.7-flash", client)
    old = backend("llm", "gemini:gemini-2.5-flash", client)
    assert "model_version" not in new.info()  # none before the first answer
    assert new.complete_json("List", Candidates, temperature=0.2).candidates == ["giant domes"]
    assert old.complete_json("List", Candidates, temperature=0.2).candidates == ["giant domes"]
    first, second = (r["generationConfig"] for r in fake.requests[:2])
    assert not {"temperature", "topP", "topK"} & set(first) and second["temperature"] == 0.2
    assert [r["store"] for r in fake.requests[:2]] == [False, False]
    assert new.info()["model_version"] == "gemini-3.8-flash" and not new.sets_temperature
    assert "ignores temperature" in new.info()["sampling"]
    assert old.info()["model_version"] == "gemini-2.5-flash" and "sampling" not in old.info()
    # storage left to the project's setting ("project" in a profile): no ``store`` sent
    keeps = GeminiClient(api_key="k", base_url=fake.url, store="project")
    backend("llm", "gemini:gemini-2.5-flash", keeps).complete_json("List", Candidates)
    assert "store" not in fake.requests[2]
    assert "store" not in backend("llm", "gemini:gemini-2.5-flash", keeps).info()
    with pytest.raises(ValueError, match="store: true, false or"):
        GeminiClient(store="no")
    # a request that still sent a temperature would be refused by the stand-in
    from tests.fakes.gemini_server import sampling_refused

    path = "/v1beta/models/gemini-3.8-flash:generateContent"
    assert sampling_refused(path, {"generationConfig": {"temperature": 0}})[0] == 400
    assert sampling_refused(path, {"generationConfig": {"seed": 3}}) is None


def test_judge_yes_probability_from_logprobs(fake, client):
    fake.reply(
        text_answer(
            "Yes",
            logprobs={
                "Yes": math.log(0.6),
                "No": math.log(0.2),
                "yes": math.log(0.1),
                "Maybe": math.log(0.05),
            },
        )
    )
    judge = backend("judge", "gemini:gemini-2.5-flash", client)
    p = judge.yes_probability([picture()], ["Is there a giant dome?"])[0]
    assert p == pytest.approx(0.7 / 0.9)  # Yes + yes over Yes + yes + No
    cfg = fake.requests[0]["generationConfig"]
    assert cfg["responseLogprobs"] is True
    thinking = cfg["thinkingConfig"]
    assert thinking.get("thinkingBudget", thinking.get("thinking_budget")) == 0
    assert cfg["maxOutputTokens"] == 4


def test_judge_vqascore_is_the_full_distributions_yes(fake, client):
    """VQAScore from log-probabilities: P("Yes") (the token "Yes", as t2v_metrics reads
    it, a leading space aside) over everything the model might answer, not renormalised
    over "Yes" and "No"; sampled, the share of "Yes" of k answers with its standard
    error."""
    lp = {"Yes": math.log(0.5), "No": math.log(0.2), "yes": math.log(0.1), " Yes": math.log(0.1)}
    fake.reply(text_answer("Yes", logprobs=lp))
    judge = backend("judge", "gemini:gemini-2.5-flash", client, samples=4)
    (got,) = judge.vqa_score([picture()], ["giant domes"])
    # "Yes" and " Yes" added: 0.6 ("yes" is another answer)
    assert got.value == pytest.approx(0.6) and got.mode == "logprobs" and got.text == "giant domes"
    asked = fake.requests[-1]["contents"][0]["parts"][-1]["text"]
    assert asked == 'Does this figure show "giant domes"? Please answer yes or no.'
    # a model without log-probabilities: 4 sampled answers, 3 of them yes
    sampled = backend("judge", "gemini:gemini-2.5-flash", client, samples=4, judge_mode="sampled")
    for answer in ("Yes", "No", "Yes", "Yes"):
        fake.reply(text_answer(json.dumps({"answer": answer})))
    (got,) = sampled.vqa_score([picture()], ["giant domes"])
    assert got.value == pytest.approx(0.75) and got.mode == "sampled k=4"
    from metrics.vqascore import VqaAnswer, vqascore_of

    (computed,) = vqascore_of([VqaAnswer("x", 0.75, "sampled k=4")])
    # the posterior's, Beta(3 + 1/2, 1 + 1/2) (metrics.judge.PRIOR_MASS)
    assert computed.reading.stderr == pytest.approx(math.sqrt(3.5 * 1.5 / (5**2 * 6)))


def test_judge_reads_the_digit_after_score_is(fake, client):
    """AHEaD Tab. 31's answer "score is 4": the digit's log-probabilities at the position
    after "score is"; an answer in another format is read at its first digit, and one
    with no digit is sampled in the format instead."""
    digits = {"4": math.log(0.6), "3": math.log(0.2), "5": math.log(0.2)}
    # the space before the digit is a token of its own for many tokenizers (GPT-4o's,
    # Llama 3's, Qwen's), with a digit among its alternatives: the digit is read after it
    space = {" ": math.log(0.9), "4": math.log(0.1)}
    positions = [("score", {"score": -0.01}), (" is", {" is": -0.01}), (" ", space), ("4", digits)]
    fake.reply(text_answer("score is 4", positions=positions))
    judge = backend("judge", "gemini:gemini-2.5-flash", client, samples=2)
    (rating,) = judge.rate_prefixed([picture()], ["Rate. score is <num>"], "score is ")
    assert rating.method == "logprobs"
    assert rating.probabilities == pytest.approx((0.0, 0.0, 0.2, 0.6, 0.2))
    assert fake.requests[-1]["generationConfig"]["maxOutputTokens"] == 8  # room for the format
    # the model answered "4" alone: read there, one call
    fake.reply(text_answer("4", logprobs=digits))
    (rating,) = judge.rate_prefixed([picture()], ["Rate. score is <num>"], "score is ")
    assert rating.method == "logprobs"
    assert rating.probabilities == pytest.approx((0.0, 0.0, 0.2, 0.6, 0.2))
    # the model answered in words: two answers sampled in the format
    fake.reply(text_answer("Four", logprobs={"Four": -0.1, "Three": -2.0}))
    fake.reply(text_answer(json.dumps({"answer": "score is 4"})))
    fake.reply(text_answer(json.dumps({"answer": "score is 2"})))
    (rating,) = judge.rate_prefixed([picture()], ["Rate. score is <num>"], "score is ")
    assert rating.method == "sampled k=2" and rating.expectation == pytest.approx(3.0)
    schema = fake.requests[-1]["generationConfig"]["responseJsonSchema"]
    assert schema["properties"]["answer"]["enum"] == [f"score is {d}" for d in range(1, 6)]


def test_judge_rating_distribution(fake, client):
    lp = {"4": math.log(0.5), "3": math.log(0.3), "5": math.log(0.1), "The": math.log(0.05)}
    fake.reply(text_answer("4", logprobs=lp))
    judge = backend("judge", "gemini:gemini-2.5-flash", client)
    rating = judge.rate([picture()], ["Rate the relevance to Iran, 1-5."])[0]
    assert rating.probabilities == pytest.approx((0.0, 0.0, 3 / 9, 5 / 9, 1 / 9))
    assert sum(rating.probabilities) == pytest.approx(1.0)
    assert rating.argmax == 4
    assert rating.expectation == pytest.approx((3 * 3 + 4 * 5 + 5 * 1) / 9)


def test_judge_rates_quality_0_to_10_with_ten_as_two_tokens(fake, client):
    judge = backend("judge", "gemini:gemini-2.5-flash", client, samples=2)
    # the answer "10", written "1" then "0" as Gemini's tokenizer writes numbers
    first = {"1": math.log(0.7), "9": math.log(0.3)}
    fake.reply(text_answer("10", positions=[("1", first), ("0", {"0": math.log(0.9)})]))
    (rating,) = judge.rate_scale([picture()], ["Rate 0-10."], 0, 10)
    assert rating.low == 0 and rating.method == "logprobs"
    assert rating.probabilities[10] == pytest.approx(0.63)
    assert rating.probabilities[1] == pytest.approx(0.07)
    assert rating.probabilities[9] == pytest.approx(0.3)
    assert rating.expectation == pytest.approx(6.3 + 0.07 + 2.7)
    # "9" with "1" as a strong second: 1 or 10 cannot be told apart, so 2 answers are sampled
    fake.reply(text_answer("9", logprobs={"9": math.log(0.7), "1": math.log(0.3)}))
    fake.reply(text_answer(json.dumps({"answer": "9"})))
    fake.reply(text_answer(json.dumps({"answer": "10"})))
    (rating,) = judge.rate_scale([picture()], ["Rate 0-10."], 0, 10)
    assert rating.method == "sampled k=2" and rating.expectation == pytest.approx(9.5)
    # the posterior's: Dirichlet(1/11 + the counts) over 0..10, one "9" and one "10"
    alpha = [1 / 11] * 9 + [1 + 1 / 11] * 2
    mean = sum(v * a for v, a in enumerate(alpha)) / 3
    var = (sum(v * v * a for v, a in enumerate(alpha)) / 3 - mean**2) / 4
    assert rating.stderr == pytest.approx(math.sqrt(var))
    sampled = fake.requests[-1]["generationConfig"]["responseJsonSchema"]
    assert sampled["properties"]["answer"]["enum"] == [str(v) for v in range(11)]


def test_judge_errors_without_answer_tokens(fake, client):
    judge = backend("judge", "gemini:gemini-2.5-flash", client)
    fake.reply(text_answer("The", logprobs={"The": -0.1, "It": -2.0}))
    with pytest.raises(GeminiError, match="none of the answer tokens"):
        judge.rate([picture()], ["Rate"])
    fake.reply(text_answer("Yes"))
    with pytest.raises(GeminiError, match="no log-probabilities"):
        judge.yes_probability([picture()], ["?"])


def test_unknown_backend_lists_registered():
    with pytest.raises(ValueError, match="unknown generator backend 'dalle:3'.*gemini:"):
        create("generator", "dalle:3")


def test_retry_waits_are_jittered(fake):
    sleeps: list[float] = []
    c = GeminiClient(
        api_key="k", base_url=fake.url, max_retries=3, initial_delay_s=1.0, sleep=sleeps.append
    )
    for _ in range(3):
        fake.fail(503, "UNAVAILABLE")
    fake.reply(text_answer("ok"))
    from google.genai import types

    c.generate("gemini-3.5-flash", ["hi"], types.GenerateContentConfig(), "test")
    assert len(sleeps) == 3
    for k, wait in enumerate(sleeps):  # 1, 2, 4 s, each within 20 %
        assert 0.8 * 2**k <= wait <= 1.2 * 2**k


def test_a_garbage_answer_is_retried_then_said_in_one_line(fake, client):
    """A 200 whose body is a proxy's HTML page, JSON cut short, an image that is not
    base64 or base64 of bytes that are no image: tried again, and when every try gets
    one, one GeminiError saying what came back, counting the requests sent (it was a
    traceback; the last was PIL's UnidentifiedImageError)."""
    good = json.dumps(image_answer(png_bytes())).encode()
    fake.garbage(b"<html>502 Bad Gateway</html>", "text/html")
    fake.reply(image_answer(png_bytes()))
    gen = backend("generator", "gemini:gemini-2.5-flash-image", client)
    assert len(gen.generate("x", [0])) == 1 and len(fake.requests) == 2
    fake.reply(image_answer(b"<html>a proxy's page</html>"))
    fake.reply(image_answer(png_bytes()))
    assert len(gen.generate("x", [0])) == 1 and len(fake.requests) == 4
    noimage = json.dumps(image_answer(png_bytes()[:40])).encode()  # cut within its header
    for raw, said in (
        (good[: len(good) // 2], "JSONDecodeError"),
        (good.replace(b'"data": "', b'"data": "!!!'), "ValidationError"),
        (noimage, "NotAnImage: an image part of 40 bytes that is no image"),
    ):
        before = len(fake.requests)
        for _ in range(3):
            fake.garbage(raw)
        with pytest.raises(GeminiError) as err:
            gen.generate("x", [0])
        text = str(err.value)
        assert f"could not be read after 3 attempt(s) ({said}" in text and "\n" not in text
        assert len(fake.requests) - before == 3


# every FinishReason google-genai knows that can end an answer without content, but the
# ones handled before (SAFETY, PROHIBITED_CONTENT, BLOCKLIST, SPII, IMAGE_SAFETY)
BARE = [
    "IMAGE_PROHIBITED_CONTENT", "RECITATION", "IMAGE_RECITATION", "IMAGE_OTHER", "OTHER",
    "MALFORMED_RESPONSE", "MAX_TOKENS", "NO_IMAGE", "LANGUAGE", "MODEL_ARMOR",
    "FINISH_REASON_UNSPECIFIED", "STOP",
]  # fmt: skip


def test_every_finish_reason_without_content_is_one_error_naming_it(fake, client):
    """An answer of any finish reason and no content is a GeminiBlocked naming the reason
    and what to do, for images and for text; once, not retried (another request might be
    answered, but the caller decides: the loop's candidates, the judge's readings)."""
    from google.genai import types

    from refine.backends.gemini import GeminiBlocked, finish_hint
    from tests.fakes.gemini_server import bare_answer

    assert {*BARE, "SAFETY", "PROHIBITED_CONTENT", "BLOCKLIST", "SPII", "IMAGE_SAFETY"} >= {
        r.name for r in types.FinishReason if r.name not in (
            "UNEXPECTED_TOOL_CALL", "TOO_MANY_TOOL_CALLS", "MALFORMED_FUNCTION_CALL",
            "MISSING_THOUGHT_SIGNATURE", "ESCALATION", "PUP_LIMITED_DISABLED", "CONTINUATION",
        )  # (tool calls and continuations: nothing this toolkit asks for)
    }  # fmt: skip
    gen = backend("generator", "gemini:gemini-2.5-flash-image", client, concurrency=1)
    llm = backend("llm", "gemini:gemini-2.5-flash", client, max_repairs=0)
    for reason in BARE:
        before = len(fake.requests)
        fake.reply(bare_answer(reason))
        with pytest.raises(GeminiBlocked, match=f"finish reason {reason}") as err:
            gen.generate("x", [0])
        assert err.value.reason == reason and finish_hint(reason) in str(err.value)
        assert len(fake.requests) == before + 1
    hints = {finish_hint(r) for r in BARE}
    assert len(hints) == 6  # refused, recited, cut, language, no image, and no answer
    assert "rephrase" in finish_hint("IMAGE_PROHIBITED_CONTENT")
    assert "output limit" in finish_hint("MAX_TOKENS")
    # a language model's answer withheld is asked once more from a seed of its own
    fake.reply(bare_answer("OTHER"))
    fake.reply(text_answer('{"answer": "fine"}'))
    got = llm.complete_json("say fine", Said)
    assert got.answer == "fine" and len(fake.requests) == before + 3
    assert fake.requests[-1]["generationConfig"]["seed"] == judging.RETRY_SEED
    fake.reply(bare_answer("RECITATION"))
    fake.reply(bare_answer("RECITATION"))
    with pytest.raises(GeminiBlocked, match="finish reason RECITATION"):
        llm.complete_json("say fine", Said)


class Said(BaseModel):
    answer: str


def test_a_region_the_api_is_not_offered_in_is_said_so(fake, client):
    fake.fail(400, "FAILED_PRECONDITION", "User location is not supported for the API use.")
    gen = backend("generator", "gemini:gemini-2.5-flash-image", client)
    with pytest.raises(GeminiError, match="not offered in the region") as err:
        gen.generate("x", [0])
    assert "check the request" not in str(err.value) and len(fake.requests) == 1


def test_log_probabilities_are_remembered_per_endpoint(monkeypatch):
    """The developer API, Vertex AI and another base URL are three memories: a model
    without log-probabilities on one is still asked for them on the others."""
    from refine.backends.gemini import GeminiJudge

    for name in (
        "GOOGLE_GEMINI_BASE_URL",
        "GOOGLE_GENAI_USE_VERTEXAI",
        "GOOGLE_GENAI_USE_ENTERPRISE",
    ):
        monkeypatch.delenv(name, raising=False)
    model = "gemini-test-endpoints"
    developer = GeminiJudge(model, client=GeminiClient(api_key="k"))
    proxied = GeminiJudge(model, client=GeminiClient(api_key="k", base_url="http://proxy:1"))
    assert (developer.probe_key, proxied.probe_key) == (model, f"{model}@http://proxy:1")
    monkeypatch.setenv("GOOGLE_GENAI_USE_VERTEXAI", "True")
    assert developer.probe_key == f"{model}@vertex-ai"
    try:
        judging._NO_LOGPROBS.add(model)  # found out on the developer API
        assert not developer.sampling and not proxied.sampling  # Vertex AI, the proxy: ask
        monkeypatch.delenv("GOOGLE_GENAI_USE_VERTEXAI")
        assert developer.sampling
    finally:
        judging._NO_LOGPROBS.discard(model)


def test_a_spend_cap_is_one_line_and_not_retried(fake, client):
    """A 429 whose QuotaFailure names a spend limit (the shape of the other quotas: no such
    answer has been seen) is not retried, even with a RetryInfo delay: one request, one
    line naming the cap and where to raise it, no wait."""
    from refine.usage import QuotaSpent
    from tests.fakes.gemini_server import Reply, quota_answer

    cap = "GenerateContentSpendCapPerMonthPerProject"
    fake.replies.append(Reply(*quota_answer("gemini-3.8-flash", cap, "50", "30s")))
    llm = backend("llm", "gemini:gemini-3.8-flash", client, max_repairs=0)
    with pytest.raises(QuotaSpent, match="spend cap is reached") as err:
        llm.complete_json("say fine", Said)
    assert len(fake.requests) == 1
    assert f"({cap}, limit 50)" in str(err.value) and "rate-limits" in str(err.value)
    assert client.sleeps == []  # no wait for the RetryInfo delay
