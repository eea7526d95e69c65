"""The backend contract, where backends are registered (refine.backends.registry): every
registered backend answers its role's methods and declares the options its constructor
takes; a profile naming an option its backend does not take is refused as it loads; and
every registered remote backend, driven against its stand-in under a call budget of N,
sends at most N requests (the usage contract: refine.usage.sent before each request)."""

from __future__ import annotations

import pytest
from PIL import Image
from pydantic import BaseModel

from refine.backends import openai_compat, registry
from refine.usage import CallBudget, CallBudgetSpent, call_budget
from tests.fakes.openai_server import FakeOpenAI

# constructor parameters that are objects a caller hands in, never a profile's option
HANDED_IN = {"client", "calls", "sleep"}


def registered() -> list[registry.BackendInfo]:
    return [info for by_prefix in registry._REGISTRY.values() for info in by_prefix.values()]


def test_every_backend_answers_its_roles_methods_and_declares_its_options():
    for info in registered():
        cls = registry._resolve(info.target)
        lacks = [m for m in info.methods if not callable(getattr(cls, m, None))]
        assert not lacks, f"{info.prefix} ({info.role}) lacks {lacks}"
        assert info.options is not None, f"{info.prefix} ({info.role}) declares no options"
        taken = registry.constructor_options(cls) - HANDED_IN
        assert set(info.options) == taken, (info.prefix, info.role, set(info.options) ^ taken)


def test_an_option_the_backend_does_not_take_is_refused_as_the_profile_loads(tmp_path):
    from refine.profiles import load_profile

    path = tmp_path / "mine.toml"
    body = '[roles]\njudge = "gemini:gemini-3.8-flash"\n[options.judge]\n{}\n'
    path.write_text(body.format("samples = 3"))
    assert load_profile(str(path)).options["judge"] == {"samples": 3}
    path.write_text(body.format("sample = 3"))  # a typo, refused before any run
    with pytest.raises(ValueError, match=r"options\.judge\.sample: gemini: takes no option "
                       r"'sample' for its judge \(it takes agree, .*samples"):  # fmt: skip
        load_profile(str(path))


class Translation(BaseModel):
    translation: str


IMAGE = Image.new("RGB", (32, 32), (150, 90, 40))
# each role's method, called once (a request or more)
DRIVE = {
    "generator": lambda b: b.generate("people drinking tea in Iran", [1]),
    "editor": lambda b: b.edit(IMAGE, "add a teapot", [1]),
    "observer": lambda b: b.describe(IMAGE, ["objects"]),
    "judge": lambda b: b.yes_probability([IMAGE], ["Is there a teapot?"]),
    # a prompt the stand-in world answers (a translation)
    "llm": lambda b: b.complete_json(
        "Translate the prompt into French. Keep it short.\nPrompt: tea at home\n", Translation
    ),
}


@pytest.fixture
def openai_server(world, monkeypatch):
    monkeypatch.setattr(openai_compat, "_SHARED", {})  # clients are shared by address
    fake = FakeOpenAI(world, models=("qwen3-vl",)).start()
    try:
        yield fake
    finally:
        fake.stop()


@pytest.mark.slow  # the first request of each client imports its package (about 2 s)
def test_every_remote_backend_sends_at_most_its_call_budget(world, gemini_env, openai_server):
    limit = 2  # one request may be let through, the next not
    # each remote prefix's stand-in: its server (whose requests are counted) and the
    # model and options that point the backend at it; a remote backend registered
    # without one fails here, so that none escapes the budget untested
    stand_ins = {
        "gemini": (gemini_env, None, {"max_retries": 0}),
        "openai": (openai_server, "qwen3-vl", {"base_url": openai_server.url, "max_retries": 0}),
    }
    remote = [info for info in registered() if info.remote]
    assert {i.prefix for i in remote} <= set(stand_ins), "a remote backend without a stand-in"
    for info in remote:
        server, model, options = stand_ins[info.prefix]
        name = f"{info.prefix}:{model}" if model else info.example
        backend = registry.create(info.role, name, shared=False, **options)
        before = len(server.requests)
        spent = False
        with call_budget(CallBudget(limit)):
            for _ in range(limit + 3):
                try:
                    DRIVE[info.role](backend)
                except CallBudgetSpent:
                    spent = True
                    break
        went = len(server.requests) - before
        assert spent, f"{name} ({info.role}) never reached its budget of {limit}"
        assert 1 <= went <= limit, f"{name} ({info.role}) sent {went} under a budget of {limit}"
