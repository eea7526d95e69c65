"""What the Ray engine's workers get of the driver's environment: the API keys and
addresses of every API backend (an OpenAI-compatible server's too: a worker on another
machine has none of its own), the caches, the data directory and the hub's switches;
nothing else."""

from __future__ import annotations

from refine.harness.ray import worker_env


def test_workers_get_the_api_settings_and_the_data_directory(monkeypatch):
    given = {
        "OPENAI_API_KEY": "sk-test",
        "OPENAI_BASE_URL": "http://127.0.0.1:8000/v1",
        "GEMINI_API_KEY": "g",
        "REFINE_DATA_DIR": "/data/refine",
        "HF_ENDPOINT": "http://mirror.invalid",
        "SOMETHING_ELSE": "kept home",
    }
    for k, v in given.items():
        monkeypatch.setenv(k, v)
    env = worker_env()
    assert {k: env.get(k) for k in given if k != "SOMETHING_ELSE"} == {
        k: v for k, v in given.items() if k != "SOMETHING_ELSE"
    }
    assert "SOMETHING_ELSE" not in env
