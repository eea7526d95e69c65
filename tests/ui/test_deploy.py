"""The demo as hosted: the Space folder and its entry point configured from environment
variables alone, and the container files (read, since this machine runs no container
engine)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.ui.clients import served, start
from ui import deploy

ROOT = Path(__file__).resolve().parents[2]


def test_the_environment_names_what_is_wrong(tmp_path):
    key = {"GEMINI_API_KEY": "k", "REFINE_OUT": str(tmp_path / "runs")}
    with pytest.raises(deploy.DeployError, match="GEMINI_API_KEY is not set: the gemini profile"):
        deploy.from_env({})
    with pytest.raises(deploy.DeployError, match=r"REFINE_MAX_ROUNDS: a whole number from 0"):
        deploy.from_env({**key, "REFINE_MAX_ROUNDS": "1000"})
    with pytest.raises(
        deploy.DeployError, match=r"REFINE_MAX_RUN_CALLS='many': not a whole number"
    ):
        deploy.from_env({**key, "REFINE_MAX_RUN_CALLS": "many"})
    with pytest.raises(deploy.DeployError, match="REFINE_AUTH: use USER:PASS"):
        deploy.from_env({**key, "REFINE_AUTH": "nopassword"})
    with pytest.raises(deploy.DeployError, match="REFINE_PROFILE: unknown profile 'nope'"):
        deploy.from_env({**key, "REFINE_PROFILE": "nope"})
    with pytest.raises(deploy.DeployError, match="REFINE_BACKENDS: 'judge'"):
        deploy.from_env({**key, "REFINE_BACKENDS": "judge"})
    # a profile of local models needs no key
    assert deploy.from_env({"REFINE_PROFILE": "local-gpu"}).profile == "local-gpu"
    got = deploy.from_env(
        {**key, "REFINE_MAX_ROUNDS": "2", "REFINE_AUTH": "ann:pw", "REFINE_ADMINS": "ann, bo"}
    )
    assert (got.limits.rounds, got.auth, got.admins) == (2, ("ann", "pw"), ("ann", "bo"))
    assert (got.host, got.port, got.login) == ("0.0.0.0", 7860, False)
    # runs outside /data do not survive a restart, and the page says so
    assert not got.persistent and "lost when the demo restarts" in got.status()
    assert str(got.out) not in got.status()  # the page never shows a server path
    assert deploy.from_env({**key, "OAUTH_CLIENT_ID": "x"}).login
    # quotas: 6 runs per visitor per hour unless set (0: none); a Space trusts its proxy
    assert (got.runs_per_hour, got.daily_calls, got.trust_proxy) == (6, None, False)
    assert "quotas: 6 runs per visitor per hour" in got.status()
    space = deploy.from_env(
        {**key, "SPACE_ID": "u/s", "REFINE_RUNS_PER_HOUR": "0", "REFINE_DAILY_CALLS": "500"}
    )
    assert (space.runs_per_hour, space.daily_calls, space.trust_proxy) == (None, 500, True)
    with pytest.raises(deploy.DeployError, match="REFINE_DAILY_CALLS=0: 1 or more"):
        deploy.from_env({**key, "REFINE_DAILY_CALLS": "0"})


@pytest.mark.slow
def test_the_space_entry_point_refuses_to_start_without_the_key(tmp_path):
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        from make_space import make_space
    finally:
        sys.path.remove(str(ROOT / "tools"))
    written = make_space(tmp_path / "space")
    assert written[:3] == ["README.md", "app.py", "requirements.txt"]
    space = tmp_path / "space"
    header = (space / "README.md").read_text().split("---")[1]
    for line in ("sdk: gradio", "app_file: app.py", "hf_oauth: true", 'python_version: "3.11"'):
        assert line in header
    import gradio

    assert f"sdk_version: {gradio.__version__}" in header  # the Gradio the tests ran
    requirements = (space / "requirements.txt").read_text()
    assert "download.pytorch.org/whl/cpu" in requirements and "gradio>=" in requirements
    assert (space / "refine" / "assets" / "prompts" / "quality_artifacts.txt").is_file()
    env = {k: v for k, v in os.environ.items() if k not in ("GEMINI_API_KEY", "GOOGLE_API_KEY")}
    done = subprocess.run(
        [sys.executable, "app.py"], cwd=space, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "error: GEMINI_API_KEY is not set: the gemini profile's generator "
        "gemini:gemini-3.1-flash-lite-image calls an API. Add it as a secret (Space settings > "
        "Variables and secrets) or pass -e GEMINI_API_KEY=... to the container"
    ]
    assert make_space(tmp_path / "gpu", gpu=True) == written
    assert "suggested_hardware: l40sx1" in (tmp_path / "gpu" / "README.md").read_text()
    assert "suggested_hardware" not in (space / "README.md").read_text()
    assert "diffusers" in (tmp_path / "gpu" / "requirements.txt").read_text()
    # the GPU and ZeroGPU Spaces download the local-gpu profile's models as they are built
    preload = [
        "preload_from_hub:",
        "  - black-forest-labs/FLUX.2-klein-4B",
        "  - Qwen/Qwen3-VL-8B-Instruct",
        "  - timm/vit_large_patch14_clip_224.openai",
    ]
    gpu_header = (tmp_path / "gpu" / "README.md").read_text().split("---")[1].splitlines()
    assert gpu_header[gpu_header.index("preload_from_hub:") :][:4] == preload
    assert make_space(tmp_path / "zero", zerogpu=True) == written
    zero = tmp_path / "zero"
    zero_header = (zero / "README.md").read_text().split("---")[1].splitlines()
    assert "suggested_hardware: zero-a10g" in zero_header
    assert zero_header[zero_header.index("preload_from_hub:") :][:4] == preload
    assert (zero / "app.py").read_text() == (ROOT / "deploy/space/app_zerogpu.py").read_text()
    assert "spaces" in (zero / "requirements.txt").read_text().splitlines()
    assert "import spaces" in (zero / "app.py").read_text().split("from ui")[0]


@pytest.mark.slow
def test_the_space_app_runs_from_the_environment_alone(world, siglip_path, tmp_path):
    from tests.ui.clients import app_client

    env = {
        "GEMINI_API_KEY": os.environ["GEMINI_API_KEY"],  # the stand-in server's
        "REFINE_OUT": str(tmp_path / "runs"),
        "REFINE_BACKENDS": f"image_embedder=siglip:{siglip_path}",
        "REFINE_MAX_ROUNDS": "1",
        "REFINE_MAX_CANDIDATES": "2",
    }
    deployment = deploy.from_env(env)
    demo = deploy.build(deployment)
    with served(demo) as url:
        fields = {c["props"].get("elem_id"): c["props"] for c in demo.config["components"]}
        assert fields["rounds"]["label"] == "rounds (at most 1)"
        assert fields["candidates"]["label"] == "candidates (at most 2)"
        assert "lost when the demo restarts" in fields["status"]["value"]
        out = start(app_client(url), rounds=1).result()
        assert out[0] == "finished"
        assert (tmp_path / "runs").is_dir() and list((tmp_path / "runs").rglob("run.json"))


@pytest.mark.parametrize(
    ("name", "base", "profile"),
    [
        ("Dockerfile", "python:3.11-slim", "gemini"),
        ("Dockerfile.gpu", "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime", "local-gpu"),
    ],
)
def test_the_container_files(name, base, profile):
    text = (ROOT / "deploy" / "docker" / name).read_text()
    lines = [x.strip() for x in text.splitlines() if x.strip() and not x.startswith("#")]
    assert lines[0] == f"FROM {base}"
    # a user without privileges runs the app, on the volume, on the exposed port
    users = [x.split()[1] for x in lines if x.startswith("USER ")]
    assert users and users[-1] not in ("root", "0")
    assert "EXPOSE 7860" in lines and 'VOLUME ["/data"]' in lines
    assert any(x.startswith("HEALTHCHECK") for x in lines)
    cmd = [x for x in lines if x.startswith("CMD [")][-1]  # the last CMD is the one run
    for part in ('"refine", "app"', '"--host", "0.0.0.0"', '"--out", "/data/runs"', profile):
        assert part in cmd
    # no secret is baked in: keys come from the environment when the container runs
    assert not re.search(r"(?i)^(ENV|ARG)\b.*(KEY|TOKEN|SECRET|PASS)", text, re.M)
    assert "AIza" not in text and "hf_" not in text.replace("hf-cache", "")


def test_where_the_app_listens_options_then_gradio_then_the_space_then_defaults():
    listen = deploy.listen_address
    space = {"REFINE_HOST": "10.0.0.2", "PORT": "8080"}
    gradio = {"GRADIO_SERVER_NAME": "10.0.0.3", "GRADIO_SERVER_PORT": "9090"}
    assert listen({}) == ("0.0.0.0", 7860)
    assert listen({}, default_host="127.0.0.1") == ("127.0.0.1", 7860)
    assert listen(space) == ("10.0.0.2", 8080)
    assert listen({**space, **gradio}) == ("10.0.0.3", 9090)
    assert listen({**space, **gradio}, host="127.0.0.1", port=7000) == ("127.0.0.1", 7000)
    assert listen({**space, "GRADIO_SERVER_PORT": "9091"}) == ("10.0.0.2", 9091)
    with pytest.raises(deploy.DeployError, match="GRADIO_SERVER_PORT=70000: a port from 1"):
        listen({"GRADIO_SERVER_PORT": "70000"})
    with pytest.raises(deploy.DeployError, match="GRADIO_SERVER_PORT='http': not a whole"):
        listen({"GRADIO_SERVER_PORT": "http", "PORT": "8080"})
    with pytest.raises(deploy.DeployError, match="GRADIO_SERVER_NAME='a b': an address"):
        listen({"GRADIO_SERVER_NAME": "a b"})
    assert deploy.from_env({"GEMINI_API_KEY": "k", **space, **gradio}).port == 9090


def test_refine_app_listens_where_gradio_says_unless_told(monkeypatch, tmp_path):
    from typer.testing import CliRunner

    import ui.app
    from refine.cli import app

    seen = {}
    monkeypatch.setattr(ui.app, "serve", lambda *a, **k: seen.update(host=a[2], port=a[3]))
    monkeypatch.setenv("GRADIO_SERVER_NAME", "127.0.0.2")
    monkeypatch.setenv("GRADIO_SERVER_PORT", "9555")
    monkeypatch.setenv("PORT", "8080")
    args = ["app", "--profile", "gemini", "--out", str(tmp_path / "runs")]
    assert CliRunner().invoke(app, args).exit_code == 0
    assert seen == {"host": "127.0.0.2", "port": 9555}
    assert CliRunner().invoke(app, [*args, "--port", "7001"]).exit_code == 0
    assert seen == {"host": "127.0.0.2", "port": 7001}
    monkeypatch.setenv("GRADIO_SERVER_PORT", "0")
    bad = CliRunner().invoke(app, args)
    # the command line prints a UserInputError as one line (refine.cli.main)
    assert type(bad.exception).__name__ == "UserInputError"
    assert str(bad.exception) == "GRADIO_SERVER_PORT=0: a port from 1 to 65535"


@pytest.mark.slow
def test_the_space_app_serves_on_gradio_server_port(world, tmp_path):
    """The Space's own entry point, as a Space starts it, answers on GRADIO_SERVER_PORT
    (and not on PORT, which comes after it)."""
    import socket
    import time

    import httpx

    sys.path.insert(0, str(ROOT / "tools"))
    try:
        from make_space import make_space
    finally:
        sys.path.remove(str(ROOT / "tools"))
    space = tmp_path / "space"
    make_space(space)

    def free_port() -> int:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]

    port, other = free_port(), free_port()
    env = {
        **os.environ,
        "GRADIO_SERVER_NAME": "127.0.0.1",
        "GRADIO_SERVER_PORT": str(port),
        "PORT": str(other),
        "REFINE_OUT": str(tmp_path / "runs"),
    }
    app = subprocess.Popen(
        [sys.executable, "app.py"],
        cwd=space,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 240  # the import of torch and Gradio, on a busy machine
        page = None
        # one client for every try: a client a try loaded the CA bundle for a plain-HTTP
        # address each time (2.3 s of a suite's py-spy samples, over the 0.2 s waits while
        # the app imports torch and Gradio)
        with httpx.Client(timeout=5) as client:
            while time.monotonic() < deadline and app.poll() is None:
                try:
                    page = client.get(f"http://127.0.0.1:{port}/")
                    break
                except httpx.TransportError:
                    time.sleep(0.2)
        assert app.poll() is None, app.stderr.read()
        assert page is not None and page.status_code == 200
        with pytest.raises(httpx.TransportError):
            httpx.get(f"http://127.0.0.1:{other}/", timeout=2)
    finally:
        app.terminate()
        try:
            app.wait(timeout=30)
        except subprocess.TimeoutExpired:
            app.kill()
            app.wait()
        app.stderr.close()
