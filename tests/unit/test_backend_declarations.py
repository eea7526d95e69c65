"""A backend says what it is in its registry entry: a toy API backend registered here (no
other edit) is treated as remote by readiness, the deployment, the estimate, downloads,
Ray's workers and the command line's errors; the local models' calls are what ZeroGPU
leases."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from refine.backends import registry


class ToyAPIError(RuntimeError):
    """The toy API's own error, whose message says what to do."""


class DerivedToyError(ToyAPIError):
    pass


@pytest.fixture
def toy_api():
    registry.register(
        "judge",
        "toyapi",
        "tests.unit.test_backend_declarations:ToyAPIError",  # never built here
        "a toy API judge",
        "toyapi:judge-1",
        remote=True,
        env=("TOYAPI_BASE_URL",),
        key_env=("TOYAPI_KEY",),
        errors=("tests.unit.test_backend_declarations:ToyAPIError",),
    )
    registry.register("generator", "toyapi", "x:y", "a toy API generator", "toyapi:gen-1",
                      remote=True, key_env=("TOYAPI_KEY",))  # fmt: skip
    yield
    registry.unregister("judge", "toyapi")
    registry.unregister("generator", "toyapi")


def test_a_registered_api_backend_is_remote_everywhere(toy_api, monkeypatch):
    from refine.backends.download import plan
    from refine.evaluate.readings import NotRead, Readings
    from refine.harness.estimate import split_generators
    from refine.harness.ray import worker_env
    from refine.present.terminal.errors import explained

    assert registry.is_remote("judge", "toyapi:judge-1")
    assert not registry.is_remote("judge", "hf:Qwen/Qwen3-VL-8B-Instruct")
    assert registry.missing_keys({"judge": "toyapi:judge-1"}, {}) == [
        ("judge", "toyapi:judge-1", ("TOYAPI_KEY",))
    ]
    assert registry.missing_keys({"judge": "toyapi:judge-1"}, {"TOYAPI_KEY": "k"}) == []
    # Ray's workers get what it reads
    monkeypatch.setenv("TOYAPI_KEY", "secret")
    monkeypatch.setenv("TOYAPI_BASE_URL", "http://toy.example")
    env = worker_env()
    assert (env["TOYAPI_KEY"], env["TOYAPI_BASE_URL"]) == ("secret", "http://toy.example")
    # nothing to download; a local reading is not taken from its answers
    assert plan({"judge": "toyapi:judge-1"}) == [("judge", "toyapi:judge-1", "skip: an API model")]
    backends = SimpleNamespace(names={"judge": "toyapi:judge-1"})
    with pytest.raises(NotRead, match="the judge toyapi:judge-1 is an API model"):
        Readings(backends, [], []).check(["local judge"])
    # the estimate counts its images as API calls
    profile = SimpleNamespace(costs={}, roles={"generator": "toyapi:gen-1"})
    calls, here, _, _ = split_generators(["toyapi:gen-1", "diffusers:some/model"], 3, profile)
    assert (calls, here) == (3, ["generator diffusers:some/model"])
    # its errors are said in one line, a subclass's too; another error is not
    assert explained(ToyAPIError("no key")) and explained(DerivedToyError("quota"))
    assert not explained(RuntimeError("a bug"))


def test_the_deployment_names_a_remote_backends_missing_key(toy_api, tmp_path):
    from ui import deploy

    env = {"REFINE_PROFILE": "small-gpu", "REFINE_BACKENDS": "judge=toyapi:judge-1"}
    env["REFINE_OUT"] = str(tmp_path / "runs")
    with pytest.raises(deploy.DeployError, match="TOYAPI_KEY is not set: the small-gpu profile's "
                       "judge toyapi:judge-1 calls an API"):  # fmt: skip
        deploy.from_env(env)


def test_zerogpu_leases_what_the_registry_says_runs_a_model():
    from ui.zerogpu import model_calls

    calls = model_calls()
    assert calls["refine.backends.diffusers_backends:DiffusersInpainter"] == ("edit",)
    assert calls["refine.backends.clip_t5:ClipT5Judge"] == ("_yes",)
    assert calls["refine.backends.image_reward:ImageReward"] == ("score",)  # no backend
    assert not any("gemini" in c or "openai" in c for c in calls)  # an API runs nothing here
