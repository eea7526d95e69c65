"""A model the profile needs but the cache lacks is downloaded as the app opens, its
progress said on the page; tested with the real huggingface_hub against a stand-in hub, the
app served in this process (``on_hub``: the app in a process of its own spent 6 s
more)."""

from __future__ import annotations

import re

import pytest

from tests.fakes.hub_server import FakeHub
from tests.fakes.tiny_models import build_tiny_siglip

pytestmark = pytest.mark.slow


def test_the_app_says_how_far_a_model_download_is(gemini_env, tmp_path):
    from refine.service import RunService
    from tests.e2e.test_export import on_hub
    from tests.ui.clients import app_client, served
    from ui.app import build_app
    from ui.views.ready import READY

    hub = FakeHub({"test/tiny-siglip": build_tiny_siglip(tmp_path / "m")}, chunk_delay_s=0.4)
    cache = tmp_path / "hf" / "hub"
    with hub, on_hub(hub, tmp_path / "hf", downloads=True):
        service = RunService(
            "gemini", tmp_path / "out", backends={"image_embedder": "siglip:test/tiny-siglip"}
        )
        with served(build_app(service)) as url:
            client = app_client(url)
            job = client.submit(api_name="/ready")
            assert job.result(timeout=180) == READY
            said = job.outputs()
            # how far, as the files arrive (huggingface_hub counts a small file's bytes once
            # it is whole; which ones the page catches depends on the machine's pace)
            far = [x for x in said if x.startswith("downloading siglip:test/tiny-siglip: ")]
            assert far, said
            for line in far:
                assert re.fullmatch(r"downloading siglip:test/tiny-siglip: \d+% of \d+ k?B", line)
            assert (cache / "models--test--tiny-siglip").is_dir()
            assert any(r.startswith("GET /test/tiny-siglip/resolve/") for r in hub.requests)
            # a second look finds it ready, with nothing downloaded again
            fetched = len(hub.requests)
            assert client.predict(api_name="/ready") == READY
            assert len(hub.requests) == fetched
