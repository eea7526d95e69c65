"""The app's Tune view through gradio_client: the saved runs counted as training data, a
small DPO tune of the profile's generator (a tiny random SD pipeline) inside --out, base
against tuned images for one prompt and seed; hostile values refused."""

from __future__ import annotations

import csv
import json
import re

import numpy as np
import pytest
from PIL import Image

from refine.service import RunService
from tests.fakes.tiny_models import build_tiny_sd
from tests.ui.clients import served, start
from ui.app import build_app


@pytest.fixture
def app(world, siglip_path, tmp_path):
    from tests.ui.clients import app_client

    sd = build_tiny_sd(tmp_path / "models")
    backends = {"image_embedder": f"siglip:{siglip_path}", "generator": f"diffusers:{sd}"}
    options = {
        "image_embedder": {"device": "cpu"},
        "text_embedder": {"device": "cpu"},
        "generator": {"device": "cpu", "steps": 2},
        **{r: {"max_retries": 0} for r in ("editor", "observer", "judge")},
    }
    out = tmp_path / "out"
    service = RunService("gemini", out=out, backends=backends, backend_options=options)
    demo = build_app(service, "test profile")
    with served(demo) as url:
        yield app_client(url), service


@pytest.mark.slow
def test_count_tune_and_compare(app, world):
    from tests.fakes.gemini_world import BLUE, GREEN, GREY, RED

    client, service = app
    with pytest.raises(Exception, match="pick a tuned adapter first"):
        client.predict(None, "a photo", 3, api_name="/tune_compare")
    # whatever colour the tiny pipeline's first draft reads as, an edit makes it green or blue
    world.edits = {c: (GREEN, BLUE) for c in (RED, GREEN, BLUE, GREY)}
    assert client.predict(2.0, api_name="/tune_count").startswith("0 saved runs of yours")
    with pytest.raises(Exception, match="no saved runs to learn from yet"):
        client.predict("dpo", 5, 1e-3, 32, 2.0, api_name="/tune")
    assert start(client, rounds=1).result()[0] == "finished"
    counted = client.predict(2.0, api_name="/tune_count")
    assert counted.startswith("1 saved runs of yours: ")
    assert "the generator to tune: `diffusers:" in counted
    pairs = int(counted.split(": ")[1].split()[0])
    assert pairs >= 1
    for bad, match in (
        (("rm -rf", 5, 1e-3, 32), "dpo or sft|not in the list of choices"),
        (("dpo", 99999, 1e-3, 32), "steps must be a whole number from 1 to 5000|maximum"),
        (("dpo", 5, 5.0, 32), "learning rate|maximum"),
        (("dpo", 5, 1e-3, 33), "multiple of 8"),
    ):
        with pytest.raises(Exception, match=match):
            client.predict(*bad, 2.0, api_name="/tune")
    text, chart, chosen = client.predict("dpo", 3, 5e-3, 32, 2.0, api_name="/tune")
    assert text.startswith("**tuned** ") and f"on {pairs} rows" in text
    name = chosen if isinstance(chosen, str) else chosen["value"]
    adapter = service.out / "tunes" / name / "adapter"
    assert (adapter / "pytorch_lora_weights.safetensors").is_file()
    # the view shows the loss per step, the numbers of loss.csv, and loss.html beside it
    with open(adapter / "loss.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 3
    found = re.search(
        r'id="w-series-0" class="series" data-name="dpo loss" '
        r"data-steps='([^']+)' data-values='([^']+)'",
        chart,
    )
    assert json.loads(found.group(1)) == list(range(1, 4))
    assert json.loads(found.group(2)) == pytest.approx([float(r["loss"]) for r in rows], abs=1e-6)
    assert "reward accuracy" in chart and "dpo loss" in (adapter / "loss.html").read_text()
    assert (service.out / "tunes" / name / "data" / "train" / "metadata.jsonl").is_file()
    base, tuned = client.predict(name, "a photo of food", 3, api_name="/tune_compare")
    a = np.asarray(Image.open(base), dtype=int)
    b = np.asarray(Image.open(tuned), dtype=int)
    assert a.shape == b.shape and np.abs(a - b).max() > 0  # the adapter changes the drawing
    # the generator is back to the base afterwards
    again, _ = client.predict(name, "a photo of food", 3, api_name="/tune_compare")
    assert np.array_equal(np.asarray(Image.open(again), dtype=int), a)
    for bad in ("../../etc", "/tmp", "nothing"):
        with pytest.raises(Exception, match="is not a tune of this app|not in the list"):
            client.predict(bad, "a photo", 3, api_name="/tune_compare")
    assert service.tuning.training_data()["runs"] == 1  # the tune's own folders are not runs
    for drift in (-1, 99):
        with pytest.raises(Exception, match="drift is a number from 0 to 2|minimum|maximum"):
            client.predict(drift, api_name="/tune_count")
    with pytest.raises(
        Exception, match="upstream Gradio app|float|is not a number"
    ):  # refused before the handler
        client.predict("lots", api_name="/tune_count")


@pytest.mark.slow
def test_the_tune_view_is_on_where_the_generator_can_be_tuned(siglip_path, tmp_path):
    """On a profile with a diffusers generator every control of the Tune view is on, and
    nothing says tuning is off. Its buttons act as the visitor, so they are drawn disabled
    and the page's load event, once it has read the visitor's token, turns them on. (The
    page's configuration as built: the one the server sends, unlaunched.)"""
    sd = build_tiny_sd(tmp_path / "models")
    backends = {"image_embedder": f"siglip:{siglip_path}", "generator": f"diffusers:{sd}"}
    service = RunService("gemini", out=tmp_path / "out", backends=backends)
    demo = build_app(service, "test profile")
    config = demo.config
    props = {c.get("props", {}).get("elem_id"): c.get("props", {}) for c in config["components"]}
    assert "tune-off" not in props
    assert props["tune-steps"].get("interactive") is not False
    (visit,) = [f for f in demo.fns.values() if f.name == "on_visit"]
    made = visit.fn(None)
    after = {
        b.elem_id: u for b, u in zip(visit.outputs, made, strict=True) if hasattr(b, "elem_id")
    }
    for elem in ("tune-start", "tune-count", "tune-compare"):
        assert props[elem].get("interactive") is False, elem  # until the visitor is known
        assert after[elem]["interactive"] is True, elem
