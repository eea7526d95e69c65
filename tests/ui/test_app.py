"""The app through gradio_client against a launched server (fake Gemini world)."""

from __future__ import annotations

import pytest

from refine.service import RunService
from ui.app import build_app


@pytest.fixture
def app_url(world, backends, options, tmp_path):
    service = RunService("gemini", out=tmp_path, backends=backends, backend_options=options)
    demo = build_app(service, "test profile")
    _, url, _ = demo.launch(server_name="127.0.0.1", prevent_thread_lock=True, quiet=True)
    yield url, service
    demo.close()


def test_full_run_streams_rounds_then_opens_saved(app_url):
    from gradio_client import Client

    url, service = app_url
    client = Client(url, verbose=False)
    job = client.submit(
        "people eating food at home", "Iran", 2, 1.0, 42, 2, 2.0, False, None, api_name="/start"
    )
    job.result(timeout=300)
    outputs = job.outputs()
    stages = [o[0] for o in outputs]
    assert "round 1: edit x2" in stages and stages[-1] == "finished"
    table = outputs[-1][3]
    rows = table["data"] if isinstance(table, dict) else table
    assert [row[1] for row in rows] == ["initial", "accepted", "rejected"]
    # the gallery grew round by round while the run was watched
    sizes = [len(o[1] or []) for o in outputs]
    assert sizes == sorted(sizes) and sizes[-1] == 3 and 1 in sizes
    run_dir = outputs[-1][7]
    opened = client.predict(run_dir, api_name="/open")
    assert opened[0].startswith("run ") and "finished" in opened[0]
    opened_rows = opened[3]["data"] if isinstance(opened[3], dict) else opened[3]
    assert opened_rows == rows
    bad = client.predict("/no/such/run", api_name="/open")
    assert bad[0].startswith("error: ") and "not a run directory" in bad[0]
