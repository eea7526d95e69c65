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
    "checked",
    "glossary",
    "timeline",
]


def test_the_run_display_is_filled_by_name():
    values = RunDisplay.values(**{n: n.upper() for n in NAMES})
    assert values == [n.upper() for n in NAMES]
    with pytest.raises(TypeError, match="needs"):
        RunDisplay.values(**{n: 0 for n in NAMES[:-1]})
    empty = dict(zip(NAMES, RunDisplay.pack("nothing yet", None), strict=True))
    bar = empty.pop("bar")
    # no run: the glossary without a line on the run's EXAG
    assert "EXAG in this run" not in empty.pop("glossary")
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
        "checked": [],
        "timeline": "",
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
        "checked",
        "glossary-text",
        "timeline",
    ]
    for endpoint in ("open", "show", "branch", "accept", "reject"):
        assert [ids[k] for k in named[endpoint]["outputs"]] == shown
    # a roll-back takes the run settings the form shows, in the table's order, then pause
    from refine.settings import shown_on

    first = [ids[k] for k in named["branch"]["inputs"]][3:]
    table = [s.flag.removeprefix("--") for s in shown_on("app") if s.kind in (int, float)]
    assert first == [*table, "pause"] and "rounds" in table and "seed" in table


@pytest.mark.slow
def test_the_app_says_what_each_metric_means_and_which_way_is_better(tmp_path, backends, options):
    """In the app's component config: the table's headers carry each metric's arrow, the
    glossary under it explains every metric a run shows (from the catalog), and the target
    and max drift boxes say what they do; every other button empties the message box in
    the browser, Stop and Apply answer there themselves."""
    from metrics.catalog import CATALOG
    from refine.present.views import run_metrics

    service = RunService("gemini", out=tmp_path, backends=backends, backend_options=options)
    demo = build_app(service, "test profile")
    props = {
        c.get("props", {}).get("elem_id"): c.get("props", {}) for c in demo.config["components"]
    }
    headers = props["table"]["value"]["headers"]
    assert headers[2:8] == ["FAITH ↑", "quality ↑", "ALIGN ↑", "HAL ↓", "EXAG ↓", "drift ↓"]
    text = props["glossary-text"]["value"]
    for name in run_metrics():
        m = CATALOG[name]
        assert f"- **{m.heading}**: {m.better} is better, {m.span}. {m.help}" in text
    assert "0 to 1, higher is better" in props["target"]["info"]
    assert "further than this from its parent" in props["max-drift"]["info"]
    ids = {c["id"]: c.get("props", {}).get("elem_id") for c in demo.config["components"]}
    clears = {
        ids[d["targets"][0][0]]
        for d in demo.config["dependencies"]
        if d.get("js") and "''" in d["js"] and [ids[k] for k in d["outputs"]] == ["notice"]
    }
    assert {"start", "show", "branch", "accept", "reject", "open", "tune-start"} <= clears
    assert not {"stop", "apply"} & clears
    # the page runs a click's handlers in this order, each to its end (a streamed run
    # too): the emptying comes first, or it wipes what Stop wrote once the run has ended;
    # and the page's API recorder finds a handler by its place: its place is its id
    deps = demo.config["dependencies"]
    assert [d["id"] for d in deps] == list(range(len(deps)))
    first = {}
    for d in demo.config["dependencies"]:
        for target, event in d["targets"]:
            first.setdefault((target, event), d)
    for (target, event), d in first.items():
        if ids.get(target) in clears and event == "click":
            assert d.get("js") and [ids[k] for k in d["outputs"]] == ["notice"], ids[target]


def test_the_apps_queue_looks_for_work_at_its_own_pace(tmp_path):
    """Gradio's queue looks for an event every 1 ms while it has none (an idle app's
    server at about 4 % of a core); the app's looks every 20 ms and for progress every
    50 ms. The two attributes set are the ones Gradio's loops read."""
    import inspect

    from gradio.queueing import Queue

    from ui.app import PROGRESS_LOOK_S, QUEUE_LOOK_S

    demo = build_app(RunService("gemini", out=tmp_path), "test profile")
    assert (demo._queue.sleep_when_free, demo._queue.progress_update_sleep_when_free) == (
        QUEUE_LOOK_S,
        PROGRESS_LOOK_S,
    )
    assert "asyncio.sleep(self.sleep_when_free)" in inspect.getsource(Queue.start_processing)
    progress = inspect.getsource(Queue.start_progress_updates)
    assert "asyncio.sleep(self.progress_update_sleep_when_free)" in progress


def test_the_tune_view_says_why_it_is_off_on_an_api_profile(tmp_path, backends, options):
    """On the gemini profile (no local generator) the Tune view's title and first line say
    tuning is off and why, every control is disabled, and the endpoints refuse anyway."""
    service = RunService("gemini", out=tmp_path, backends=backends, backend_options=options)
    demo = build_app(service, "test profile")
    comps = demo.config["components"]
    props = {c.get("props", {}).get("elem_id"): c.get("props", {}) for c in comps}
    assert props["tune"]["label"].endswith(": not on this profile")
    off = props["tune-off"]["value"]
    assert off.startswith("**Tuning is off here:** the generator gemini:") and (
        "cannot be tuned here: tuning needs a diffusers:" in off
    )
    for elem in (
        "tune-count",
        "tune-method",
        "tune-steps",
        "tune-lr",
        "tune-resolution",
        "tune-drift",
        "tune-start",
        "tune-adapter",
        "tune-prompt",
        "tune-seed",
        "tune-compare",
    ):
        assert props[elem]["interactive"] is False, elem
    # the page's load event turns on the buttons that wait for the visitor, not these
    (visit,) = [f for f in demo.fns.values() if f.name == "on_visit"]
    made = visit.fn(None)
    after = {
        b.elem_id: u for b, u in zip(visit.outputs, made, strict=True) if hasattr(b, "elem_id")
    }
    assert after["start"]["interactive"] is True
    for elem in ("tune-count", "tune-start", "tune-compare"):
        assert after[elem]["interactive"] is False, elem
    with pytest.raises(ValueError, match="cannot be tuned here"):
        service.tuning.tune("dpo", 5, 1e-3, 32)


def test_the_references_table_round_trips_and_names_a_bad_row():
    import json

    from refine.evaluate.references import ReferencePack
    from ui.views.references import references_doc, references_rows

    pack = ReferencePack(
        activity="tea",
        country="Iran",
        descriptors={"objects": ["samovar", "glass cups"], "setting": ["living room"]},
        stereotypes=["camels"],
        source="built",
    )
    rows = references_rows(pack)
    assert rows == [
        ["setting", "living room"],
        ["objects", "samovar"],
        ["objects", "glass cups"],
        ["stereotype", "camels"],
    ]
    doc = json.loads(references_doc([*rows, ["attire", " scarf "], ["objects", None]], "built"))
    assert doc["descriptors"]["objects"] == ["samovar", "glass cups"]
    assert doc["descriptors"]["attire"] == ["scarf"] and doc["stereotypes"] == ["camels"]
    assert doc["source"] == "built"
    with pytest.raises(ValueError, match="row 2: a row is a dimension and a phrase"):
        references_doc([["objects", "a"], ["objects"]])
    with pytest.raises(ValueError, match="row 1: 'smell' is not one of setting"):
        references_doc([["smell", "smoke"]])
    with pytest.raises(ValueError, match="a table of at most 500 rows"):
        references_doc("objects,samovar")
    with pytest.raises(ValueError, match="row 2: the phrase must be printable text of at most 200"):
        references_doc([["objects", "tea"], ["objects", "tea\x00pot"]])
    with pytest.raises(ValueError, match="row 1: the phrase must be printable"):
        references_doc([["attire", "x" * 201]])


def test_a_problem_with_the_models_reads_as_one_line():
    from ui.views.ready import _short

    assert (
        _short(
            "generator (gemini:gemini-2.5-flash-image), judge (gemini:gemini-2.5-flash): "
            "GeminiError: no Gemini API key: set GEMINI_API_KEY"
        )
        == "generator and judge: no Gemini API key: set GEMINI_API_KEY"
    )
    assert (
        _short("image_embedder (clip:ViT-B-32): model not available: run refine models download")
        == "image_embedder: model not available: run refine models download"
    )


def test_the_new_page_handlers_take_hostile_values_as_nothing(tmp_path, backends, options):
    """Anyone can call any handler: a run folder outside --out (or no text at all) puts
    nothing in the form, a forged token attaches to no run, and a refusal is only ever
    given back to the page session it was made for."""
    import gradio as gr

    from ui.safe import error, take_refusal

    service = RunService("gemini", out=tmp_path, backends=backends, backend_options=options)
    demo = build_app(service, "test profile")
    forms = {f.fn for f in demo.fns.values() if f.name == "settings_of"}
    assert len(forms) == 2  # after opening a saved run, after showing a round
    for settings_of in forms:
        for hostile in ("/etc", "../../..", "x" * 10_000, None, 7, "\x00"):
            assert all(isinstance(v, type(gr.skip())) for v in settings_of(hostile)), hostile
    (attach,) = [f for f in demo.fns.values() if f.name == "on_attach"]

    class Request:
        username, session_hash, headers, client = None, "s-hostile", {}, None

    for token in ("<script>", "0" * 500, None, {"a": 1}):
        shown = list(attach.fn(token, request=Request()))
        assert len(shown) == 1 and all(isinstance(v, type(gr.skip())) for v in shown[0])
    # a refusal outside any request is kept for nobody; inside one, for its session only
    error("refused for nobody")
    assert take_refusal(None) is None and take_refusal("s-hostile") is None


@pytest.mark.slow
def test_readiness_without_a_hub_names_every_problem_and_asks_the_hub_once(tmp_path, monkeypatch):
    """No key and no hub that answers (a server that takes connections and never replies):
    the check names both problems (the Gemini roles' key, the CLIP weights not in the
    cache), asking the hub once, briefly; Start's check then refuses without asking it
    again. Before, each check retried the two CLIP files for about 23 s each."""
    import socket
    import threading

    from huggingface_hub import constants

    from refine.service import RunService
    from ui.views import ready
    from ui.views.ready import Readiness, check_before_start

    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    asked: list[socket.socket] = []

    def take() -> None:
        while True:
            try:
                conn, _ = silent.accept()
            except OSError:  # closed at the end of the test
                return
            asked.append(conn)

    threading.Thread(target=take, daemon=True).start()
    try:
        monkeypatch.delenv("GEMINI_API_KEY", raising=False)
        monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
        monkeypatch.setattr(constants, "ENDPOINT", f"http://127.0.0.1:{silent.getsockname()[1]}")
        monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub-cache"))
        monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
        monkeypatch.setattr(ready, "HUB_TIMEOUT_S", 0.5)
        # Gemini clients of their own (one made by an earlier test holds its key)
        own = {r: {"timeout_s": 118.0} for r in ("generator", "editor", "observer", "judge")}
        check = Readiness(RunService("gemini", out=tmp_path / "out", backend_options=own))
        line = check.line()
        assert line.startswith("\u26a0 **Not ready**, 2 problems:\n- "), line
        keyless, clip = line.split("\n")[1:]
        assert keyless.startswith("- generator, observer, judge and editor: no Gemini API key")
        assert clip.startswith(
            "- image_embedder: clip:ViT-B-32/laion2b_s34b_b79k is not in the cache, and the "
            f"model hub {constants.ENDPOINT} cannot be reached (ReadTimeout"
        ), clip
        assert len(asked) == 1
        with pytest.raises(ValueError) as refused:
            check_before_start(check)
        said = str(refused.value)
        assert said.startswith("1) generator, observer, judge and editor: no Gemini API key")
        assert "; 2) image_embedder: clip:ViT-B-32/laion2b_s34b_b79k is not in the cache" in said
        assert len(asked) == 1  # Start's check did not ask the hub again
    finally:
        silent.close()
        for conn in asked:
            conn.close()


def test_the_line_says_how_many_are_ahead_and_refuses_past_its_length():
    """The app's line of waiting starts: first come, first served; its words count the
    run in progress and those waiting ahead; a full line refuses at once, saying so."""
    from refine.service import ServiceBusy
    from ui.line import Line, line_length, waiting_words

    assert line_length(30) == 8 and line_length(5) == 24  # two hours of the longest run
    line = Line(most=2)
    first, second = line.join(), line.join()
    assert (line.before(first), line.before(second)) == (0, 1)
    with pytest.raises(ServiceBusy, match="the line is full: 2 runs are waiting"):
        line.join()
    line.leave(first)
    assert line.before(second) == 0 and len(line) == 1
    assert waiting_words(0, "round 1 of 3") == (
        "waiting: 1 run ahead of yours (one in progress: round 1 of 3); yours starts when it ends"
    )
    assert waiting_words(2, "round 2 of 3") == (
        "waiting: 3 runs ahead of yours (one in progress: round 2 of 3; 2 waiting); "
        "yours starts when they end"
    )
    assert waiting_words(1, None) == (
        "waiting: 1 run ahead of yours (1 waiting); yours starts when it ends"
    )


def test_messages_and_boxes_name_no_server_path(tmp_path):
    """A path under the app's folder is named relative to it; any other absolute path by
    its last part; URLs, fractions and words with a slash are left as they are."""
    from ui.safe import error, hide_paths_of, no_server_paths, shown_path

    class Service:
        out = tmp_path / "out"

    service = Service()
    hide_paths_of(service)
    out = str(service.out)
    assert shown_path(f"{out}/runs/r1") == "runs/r1" and shown_path(out) == "."
    assert shown_path("/etc/passwd") == "passwd" and shown_path("runs/r1") == "runs/r1"
    said = no_server_paths(
        f"no run at {out}/runs/r1. '/home/ann/.cache/refine/refs/x.json' is not a pack; "
        "see https://ai.google.dev/gemini-api/docs at 3/5 km/h"
    )
    assert said == (
        "no run at runs/r1. 'x.json' is not a pack; "
        "see https://ai.google.dev/gemini-api/docs at 3/5 km/h"
    )
    refused = str(error(f"{out}/a/b.png: not an image"))
    assert out not in refused and "a/b.png: not an image" in refused


def test_a_refusal_is_one_log_line_at_the_level_refine_app_shows(caplog):
    """`refine app` logs warnings without -v: a refusal is one such line (it was INFO, so
    the line the docs promise never showed)."""
    import logging

    from ui.safe import error

    with caplog.at_level(logging.WARNING, logger="ui.safe"):
        error("rounds: 50 is above this app's limit of 10\nediting rounds")
    (record,) = [r for r in caplog.records if r.name == "ui.safe"]
    assert record.levelno == logging.WARNING
    assert (
        record.getMessage() == "refused: rounds: 50 is above this app's limit of 10 editing rounds"
    )
