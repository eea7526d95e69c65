"""The loop end to end: real backends (Gemini through the fake server, bundled MiniLM, a
tiny SigLIP for drift) in a scripted world of solid-colour images."""

from __future__ import annotations

import os

import pytest

from tests.fakes.gemini_server import FakeGemini
from tests.fakes.gemini_world import World
from tests.fakes.tiny_models import build_tiny_siglip


@pytest.fixture(scope="session")
def gemini_env():
    server = FakeGemini().start()
    saved = {k: os.environ.get(k) for k in ("GEMINI_API_KEY", "GOOGLE_GEMINI_BASE_URL")}
    os.environ["GEMINI_API_KEY"] = "test-key"
    os.environ["GOOGLE_GEMINI_BASE_URL"] = server.url
    yield server
    server.stop()
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@pytest.fixture
def world(gemini_env):
    w = World()
    gemini_env.handler = w
    yield w
    gemini_env.handler = None


@pytest.fixture(scope="session")
def siglip_path(tmp_path_factory):
    return build_tiny_siglip(tmp_path_factory.mktemp("loop-siglip"))


@pytest.fixture
def backends(siglip_path):
    return {"image_embedder": f"siglip:{siglip_path}"}


@pytest.fixture
def options():
    # no retries: an injected failure surfaces at once
    fast = {"max_retries": 0}
    return {
        "image_embedder": {"device": "cpu"},
        "text_embedder": {"device": "cpu"},
        **{r: dict(fast) for r in ("generator", "editor", "observer", "judge")},
    }
