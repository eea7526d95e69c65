"""The app is a composition of views: the run display is filled by name, and the app's API
is what the views wire, endpoint by endpoint."""

from __future__ import annotations

import pytest

from refine.service import RunService
from ui.app import build_app
from ui.views.common import RunDisplay

NAMES = [
    "stage",
    "gallery",
    "plot",
    "table",
    "checklist",
    "slider",
    "instruction",
    "run_dir",
    "languages",
    "progress",
    "bar",
]


def test_the_run_display_is_filled_by_name():
    values = RunDisplay.values(**{n: n.upper() for n in NAMES})
    assert values == [n.upper() for n in NAMES]
    with pytest.raises(TypeError, match="needs"):
        RunDisplay.values(**{n: 0 for n in NAMES[:-1]})
    empty = dict(zip(NAMES, RunDisplay.pack("nothing yet", None), strict=True))
    bar = empty.pop("bar")
    assert empty == {
        "stage": "nothing yet",
        "gallery": [],
        "plot": "",
        "table": [],
        "checklist": [],
        "slider": None,
        "instruction": "",
        "run_dir": "",
        "languages": [],
        "progress": "",
    }
    assert "not started" in bar and 'aria-valuenow="0"' in bar


def test_the_views_wire_the_app_api(tmp_path, backends, options):
    service = RunService("gemini", out=tmp_path, backends=backends, backend_options=options)
    demo = build_app(service, "test profile")
    named = {
        d["api_name"]: d
        for d in demo.config["dependencies"]
        if d.get("api_name") not in (None, False)
    }
    assert {
        "start",
        "stop",
        "apply",
        "open",
        "show",
        "branch",
        "accept",
        "reject",
        "download",
        "runs",
        "build_references",
        "save_references",
    } <= set(named)
    ids = {c["id"]: c.get("props", {}).get("elem_id") for c in demo.config["components"]}
    shown = [ids[k] for k in named["start"]["outputs"]]
    assert shown == [
        "stage",
        "gallery",
        "plot",
        "table",
        "checklist",
        "slider",
        "instruction",
        "run-dir",
        "languages",
        "progress",
        "progress-bar",
    ]
    for endpoint in ("open", "show", "branch", "accept", "reject"):
        assert [ids[k] for k in named[endpoint]["outputs"]] == shown
    first = [ids[k] for k in named["branch"]["inputs"]][3:]
    assert first == [
        "rounds",
        "target",
        None,  # seed
        "candidates",
        "max-drift",
        "pause",
        "max-quality-drop",
    ]
