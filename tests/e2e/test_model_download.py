"""A model the profile needs but the cache lacks is downloaded as the app opens, its
progress said on the page; tested with the real huggingface_hub against a stand-in hub
(``HF_ENDPOINT``), the app in a process of its own (the hub's address is read when
huggingface_hub is imported)."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.fakes.hub_server import FakeHub
from tests.fakes.tiny_models import build_tiny_siglip

pytestmark = pytest.mark.slow


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_app_says_how_far_a_model_download_is(gemini_env, tmp_path):
    from tests.ui.clients import app_client
    from ui.views.ready import READY

    hub = FakeHub({"test/tiny-siglip": build_tiny_siglip(tmp_path / "m")}, chunk_delay_s=0.4)
    hub.start()
    env = {**os.environ, "HF_ENDPOINT": hub.url, "HF_HOME": str(tmp_path / "hf")}
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        env.pop(name, None)
    port = free_port()
    refine = Path(sys.executable).with_name("refine")
    args = [str(refine), "app", "--profile", "gemini", "--out", str(tmp_path / "out")]
    args += ["--port", str(port), "--backend", "image_embedder=siglip:test/tiny-siglip"]
    app = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        while True:
            assert app.poll() is None, app.stdout.read().decode()[-3000:]
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                assert time.monotonic() < deadline, "the app did not start"
                time.sleep(0.5)
        client = app_client(f"http://127.0.0.1:{port}/")
        job = client.submit(api_name="/ready")
        assert job.result(timeout=180) == READY
        said = job.outputs()
        # how far, as the files arrive (huggingface_hub counts a small file's bytes once
        # it is whole; which ones the page catches depends on the machine's pace)
        far = [x for x in said if x.startswith("downloading siglip:test/tiny-siglip: ")]
        assert far, said
        for line in far:
            assert re.fullmatch(r"downloading siglip:test/tiny-siglip: \d+% of \d+ k?B", line)
        assert (tmp_path / "hf" / "hub" / "models--test--tiny-siglip").is_dir()
        assert any(r.startswith("GET /test/tiny-siglip/resolve/") for r in hub.requests)
        # a second look finds it ready, with nothing downloaded again
        fetched = len(hub.requests)
        assert client.predict(api_name="/ready") == READY
        assert len(hub.requests) == fetched
    finally:
        app.terminate()
        app.wait(timeout=30)
        hub.stop()
