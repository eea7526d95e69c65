"""The openai: backends through the real ``openai`` client against a stand-in
OpenAI-compatible server that answers as the Gemini stand-in world does."""

from __future__ import annotations

import math

import pytest
from PIL import Image

from refine.backends import create, judging, openai_compat
from refine.backends.openai_compat import OpenAIServer, OpenAIServerError
from refine.loop.refiner import Refiner
from tests.fakes.gemini_world import GREEN, RED
from tests.fakes.openai_server import FakeOpenAI
from tests.runs import begin

MODEL = "qwen3-vl"


@pytest.fixture
def server(world, monkeypatch):
    # servers (and their clients, with the key they were given) are shared by address: a
    # stand-in of an earlier test may have had this one's port
    monkeypatch.setattr(openai_compat, "_SHARED", {})
    fake = FakeOpenAI(world, models=(MODEL, "other-model")).start()
    try:
        yield fake
    finally:
        fake.stop()


def role(name: str, server: FakeOpenAI, **options):
    """The openai: backend for ``name`` on the stand-in (not shared between tests: each
    stand-in has its own address)."""
    return create(
        name, f"openai:{MODEL}", shared=False, base_url=server.url, max_retries=0, **options
    )


def distribution(top: list[dict], answers: tuple[str, ...]) -> list[float]:
    """The answers' probabilities from one position's top log-probabilities, as the test
    reads them: case pooled, renormalised over the answers."""
    mass = dict.fromkeys(answers, 0.0)
    for cand in top:
        for a in answers:
            if cand["token"].strip().lower() == a.lower():
                mass[a] += math.exp(cand["logprob"])
    total = sum(mass.values())
    return [mass[a] / total for a in answers]


@pytest.mark.slow
def test_the_judge_reads_the_servers_log_probabilities(server, monkeypatch):
    monkeypatch.setattr(judging, "_HAS_LOGPROBS", set())
    monkeypatch.setattr(judging, "_NO_LOGPROBS", set())
    judge = role("judge", server)
    red, green = Image.new("RGB", (8, 8), RED), Image.new("RGB", (8, 8), GREEN)
    yes = judge.yes_probability([red, green], ["Does this image show hookahs?"] * 2)
    sent = server.answers[-2:]
    expected = [
        distribution(a["choices"][0]["logprobs"]["content"][0]["top_logprobs"], ("Yes", "No"))[0]
        for a in sent
    ]
    assert yes == pytest.approx(expected, abs=1e-12)
    assert 0.0 < yes[0] < 1.0 and yes[0] != yes[1]
    (rating,) = judge.rate([green], ["How exaggerated is this picture? Answer 1-5."])
    top = server.answers[-1]["choices"][0]["logprobs"]["content"][0]["top_logprobs"]
    assert list(rating.probabilities) == pytest.approx(
        distribution(top, ("1", "2", "3", "4", "5")), abs=1e-12
    )
    assert rating.method == "logprobs" and judge.info()["server"] == server.url
    # what went to the server: the image as a data URL, log-probabilities asked for
    body = server.requests[-1]["body"]
    parts = body["messages"][0]["content"]
    assert parts[0]["image_url"]["url"].startswith("data:image/png;base64,")
    assert body["logprobs"] is True and body["top_logprobs"] == 20 and body["temperature"] == 0


def test_a_server_without_log_probabilities_is_sampled(server, monkeypatch):
    monkeypatch.setattr(judging, "_HAS_LOGPROBS", set())
    monkeypatch.setattr(judging, "_NO_LOGPROBS", set())
    server.logprobs = False  # it answers, but with none
    judge = role("judge", server, samples=4)
    (rating,) = judge.rate([Image.new("RGB", (8, 8), GREEN)], ["How exaggerated? 1-5"])
    assert rating.method == "sampled k=4" and sum(rating.probabilities) == pytest.approx(1.0)
    sampled = [r["body"] for r in server.requests[1:]]
    assert sorted(b["seed"] for b in sampled) == [0, 1, 2, 3]  # sent together
    assert all(b["response_format"]["type"] == "json_schema" for b in sampled)
    assert judge.method == "sampled k=4"


def test_a_run_with_every_text_and_vision_role_on_the_server_finishes(
    server, world, siglip_path, tmp_path
):
    """Observer, judge and language model on the stand-in; images from the Gemini
    stand-in (the same world)."""
    names = {r: f"openai:{MODEL}" for r in ("observer", "judge", "llm")}
    backends = {"image_embedder": f"siglip:{siglip_path}", **names}
    options = {
        "image_embedder": {"device": "cpu"},
        "text_embedder": {"device": "cpu"},
        **{r: {"base_url": server.url, "max_retries": 0} for r in names},
        **{r: {"max_retries": 0} for r in ("generator", "editor")},
    }
    run = begin(
        Refiner("gemini", backends, options),
        "people eating food at home",
        "Iran",
        out=tmp_path,
        rounds=1,
        target=1.0,
        max_drift=2.0,
    )
    assert run.status == "finished", run.error
    assert [r.decision for r in run.rounds][0] == "initial" and len(run.rounds) == 2
    assert run.rounds[0].best.scores.faith is not None
    kinds = {r["body"].get("logprobs", False) for r in server.requests}
    assert kinds == {True, False}  # judgements and observations both went there
    assert run.rounds[1].candidates[0].scores.readings["exag"].method == "logprobs"


def test_a_model_the_server_does_not_serve_is_one_line(server):
    observer = create("observer", "openai:nope", shared=False, base_url=server.url)
    with pytest.raises(OpenAIServerError) as err:
        observer.verify()
    assert str(err.value) == f"nope: not served by {server.url} (it serves: other-model, qwen3-vl)"
    role("observer", server).verify()  # a served one passes


@pytest.mark.slow
def test_a_rate_limit_is_waited_out_as_the_server_says(server, monkeypatch):
    monkeypatch.setattr(judging, "_HAS_LOGPROBS", set())
    server.too_many, server.retry_after_s = 1, 1
    judge = create("judge", f"openai:{MODEL}", shared=False, base_url=server.url, max_retries=2)
    (yes,) = judge.yes_probability([Image.new("RGB", (8, 8), RED)], ["Hookahs?"])
    assert 0.0 < yes < 1.0
    first, second = server.requests[0], server.requests[1]
    assert len(server.requests) == 2 and first["body"] == second["body"]
    assert second["at"] - first["at"] >= 0.9  # waited as its Retry-After said (1 s)


def test_errors_name_the_server_and_quote_it(server):
    judge = create("judge", "openai:unlisted", shared=False, base_url=server.url, max_retries=0)
    with pytest.raises(OpenAIServerError) as err:
        judge.rate([Image.new("RGB", (8, 8), RED)], ["1-5?"])
    said = str(err.value)
    assert said.startswith(f"unlisted: {server.url} answered HTTP 404")
    assert "The model `unlisted` does not exist." in said


def test_the_key_comes_from_the_variable_the_role_names(server, monkeypatch):
    monkeypatch.setenv("MY_SERVER_KEY", "sk-mine")
    role("observer", server, api_key_env="MY_SERVER_KEY").verify()
    assert server.key_seen[-1] == "Bearer sk-mine"
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    role("observer", server).verify()  # a server of one's own: no key needed
    assert server.key_seen[-1] == "Bearer EMPTY"
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(OpenAIServerError, match="no API key for https://api.openai.com/v1: set "):
        OpenAIServer().client()


def test_completion_log_likelihood_from_vllms_prompt_logprobs(server):
    """CAIRE App. B.1 on an OpenAI-compatible server: each completion's NLL is the sum of
    the prompt log-probabilities (vLLM's prompt_logprobs) of the tokens the completion adds
    to the continued assistant message; a server that gives none is named an error."""
    judge = role("judge", server)
    prefix = "This text is relevant to"
    got = judge.completion_nll(
        [Image.new("RGB", (8, 8), RED), None],
        ["Which culture is this relevant to?"] * 2,
        prefix,
        [" Iran", " South Africa"],
    )
    w = FakeOpenAI.word_logprob
    assert got == pytest.approx([-w("Iran"), -(w("South") + w("Africa"))])
    asked = [r["body"] for r in server.requests if r["body"].get("prompt_logprobs") is not None]
    assert len(asked) == 4 and all(b["prompt_logprobs"] == 0 for b in asked)
    assert asked[1]["messages"][-1] == {"role": "assistant", "content": prefix + " Iran"}
    assert asked[1]["continue_final_message"] is True and asked[1]["max_tokens"] == 1
    server.prompt_logprobs_served = False
    with pytest.raises(OpenAIServerError, match="no prompt log-probabilities"):
        judge.completion_nll([None], ["x"], prefix, [" Iran"])


@pytest.mark.slow
def test_under_a_call_budget_retries_are_counted_requests_and_wait_as_told(server, monkeypatch):
    """A retry is a request the budget must count: under one, the client does not retry
    by itself; the backend does, each retry taken from the budget, waiting as the
    server's Retry-After says; a refusal counts the requests it sent; and the request
    past the budget is never sent."""
    from refine import usage

    monkeypatch.setattr(judging, "_HAS_LOGPROBS", set())
    server.too_many, server.retry_after_s = 1, 1
    judge = create("judge", f"openai:{MODEL}", shared=False, base_url=server.url, max_retries=2)
    budget = usage.CallBudget(5)
    with usage.call_budget(budget):
        (yes,) = judge.yes_probability([Image.new("RGB", (8, 8), RED)], ["Hookahs?"])
    assert 0.0 < yes < 1.0 and len(server.requests) == 2 and budget.spent == 2
    assert server.requests[1]["at"] - server.requests[0]["at"] >= 0.9  # its Retry-After
    server.too_many, server.retry_after_s = 10, 0
    with usage.call_budget(budget), pytest.raises(OpenAIServerError) as err:
        judge.yes_probability([Image.new("RGB", (8, 8), RED)], ["Hookahs?"])
    assert "HTTP 429" in str(err.value) and "(after 3 attempt(s))" in str(err.value)
    assert len(server.requests) == 5 and budget.spent == 5
    with usage.call_budget(budget), pytest.raises(usage.CallBudgetSpent):
        judge.yes_probability([Image.new("RGB", (8, 8), RED)], ["Hookahs?"])
    assert len(server.requests) == 5


def test_a_server_that_fails_for_good_mid_run_is_one_line_on_the_command_line(
    world, monkeypatch, capsys, tmp_path
):
    """An OpenAI-compatible server that refuses the observation (HTTP 400, never retried)
    ends `refine score` with the server's words on one line and exit code 1, as a Gemini
    error does: never a traceback."""
    from PIL import Image

    from refine.cli import main

    monkeypatch.setattr(openai_compat, "_SHARED", {})
    fake = FakeOpenAI(lambda path, body: (400, {"error": {"message": "prompt too long"}}),
                      models=(MODEL,)).start()  # fmt: skip
    try:
        monkeypatch.setenv("OPENAI_BASE_URL", fake.url)
        monkeypatch.setenv("OPENAI_API_KEY", "k")
        Image.new("RGB", (32, 32), (200, 30, 30)).save(tmp_path / "red.png")
        args = ["score", str(tmp_path / "red.png"), "--activity", "people eating food at home",
                "--country", "Iran", "--backend", f"observer=openai:{MODEL}",
                "--backend", f"judge=openai:{MODEL}", "--out", str(tmp_path / "s")]  # fmt: skip
        with pytest.raises(SystemExit) as done:
            main(args)
    finally:
        fake.stop()
    err = capsys.readouterr().err
    assert done.value.code == 1, err
    assert "error: " in err and "prompt too long" in err and "Traceback" not in err
