"""Who may change a run, through gradio_client against the app on the fake Gemini world:
a run keeps its owner for as long as it exists; other visitors watch, never change; a run
made outside the app is read-only; text from visitors and models comes back escaped."""

from __future__ import annotations

import json
import zipfile

import pytest

from refine.service import NOT_YOURS, RunService, visitor_hash
from tests.runs import prepared
from tests.ui.clients import rate_begin, rate_profile, rate_save, served, start
from tests.ui.test_app import (  # noqa: F401 (fixtures)
    app_url,
    launched_app,
    own_app_url,
)
from ui.app import build_app
from ui.visitors import new_token, visitor_id

# a launched app and its runs behind most tests: left out of the fast tests
pytestmark = pytest.mark.slow


def snapshot(folder) -> dict[str, bytes]:
    """Every file under ``folder`` (a run folder, or --out) and its bytes."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_a_finished_run_keeps_its_owner(app_url):  # noqa: F811
    """Visitor A's run finishes; visitor B starts another (A's is no longer the app's
    current job); visitor C's accept, reject and roll-back on A's run are refused and
    nothing changes on disk. A can still decide it."""
    from gradio_client.exceptions import AppError

    from tests.ui.clients import app_client

    url, service = app_url
    a, b, c = (app_client(url) for _ in range(3))
    # one candidate, seed 43: round 1 is rejected, so it can be accepted by hand
    start(a, rounds=1, seed=43, candidates=1).result()
    a_dir = service.job.run_dir
    start(b, rounds=0, candidates=1).result()
    assert service.job.run_dir != a_dir
    before = snapshot(service.out)
    for api, args in (
        ("/accept", (str(a_dir), 1, 0)),
        ("/reject", (str(a_dir), 1, 0)),
        ("/branch", (str(a_dir), 0, 1, 1.0, 42, 1, 2.0, False)),
        ("/accept", (a_dir.name, 1, 0)),  # named by id, not path
    ):
        with pytest.raises(AppError, match="this run belongs to another visitor"):
            c.predict(*args, api_name=api)
    assert snapshot(service.out) == before  # no decision flipped, no new run folder
    assert service.open(a_dir).rounds[1].decision == "rejected"
    # the owner may, for as long as the run exists
    accepted = a.predict(str(a_dir), 1, 0, api_name="/accept")
    assert accepted[0] == "round 1: accepted by hand (candidate 0)"
    assert service.open(a_dir).best_round == 1
    # the folder keeps a hash of the visitor, never the id; downloads leave it out
    owner = (a_dir / ".owner").read_text().strip()
    assert owner == visitor_hash(f"session:{a.session_hash}")
    assert all(a.session_hash.encode() not in data for data in snapshot(service.out).values())
    archive, report = c.predict(str(a_dir), api_name="/download")  # watching is allowed
    assert ".owner" not in zipfile.ZipFile(archive).namelist()
    assert owner not in open(report, encoding="utf-8").read()
    opened = c.predict(str(a_dir), api_name="/open")
    assert owner not in json.dumps(opened)


def test_another_visitors_paused_run_cannot_be_applied_or_stopped(app_url):  # noqa: F811
    import time

    from tests.ui.clients import app_client

    url, service = app_url
    owner, other = app_client(url), app_client(url)
    job = start(owner, rounds=2, candidates=1, paused=True)
    deadline = time.monotonic() + 120
    while service.job is None or service.job.waiting is None:
        assert time.monotonic() < deadline, "no instruction came up for review"
        time.sleep(0.1)
    run_dir = service.job.run_dir
    before = snapshot(run_dir)
    assert other.predict("Paint it all blue.", api_name="/apply") == NOT_YOURS
    assert other.predict(api_name="/stop") == NOT_YOURS
    time.sleep(0.5)
    assert service.job.waiting is not None and service.busy  # still waiting for its owner
    assert snapshot(run_dir) == before
    first = service.job.waiting[0]
    assert owner.predict("Put a sofreh on the floor.", api_name="/apply").startswith(
        "instruction applied"
    )
    # the next review is of a later round (the first one can still be showing for a moment
    # after the apply returns)
    while service.job.waiting is None or service.job.waiting[0] == first:
        assert time.monotonic() < deadline, "round 2 never came up for review"
        time.sleep(0.1)
    assert owner.predict(api_name="/stop").startswith("stopping")
    job.result(timeout=120)
    run = service.open(run_dir)
    assert run.rounds[1].text == "Put a sofreh on the floor." and len(run.rounds) == 2


def test_a_run_made_outside_the_app_is_read_only(app_url):  # noqa: F811
    from gradio_client.exceptions import AppError

    from tests.ui.clients import app_client

    url, service = app_url
    # a run the service makes for no visitor (as the CLI does): no owner in its folder
    job = service.start(
        *prepared("people eating food at home", "Iran", rounds=1, candidates=1, seed=43)
    )
    job.wait()
    assert not (job.run_dir / ".owner").exists()
    client = app_client(url)
    before = snapshot(service.out)
    for api, args in (
        ("/accept", (str(job.run_dir), 1, 0)),
        ("/reject", (str(job.run_dir), 1, 0)),
        ("/branch", (str(job.run_dir), 0, 1, 1.0, 42, 1, 2.0, False)),
    ):
        with pytest.raises(AppError, match="made outside the app"):
            client.predict(*args, api_name=api)
    assert snapshot(service.out) == before
    # a rating set that is a run: only its owner rates it
    with pytest.raises(AppError, match="made outside the app"):
        rate_begin(client, str(job.run_dir), "ana")
    # watching is fine
    assert client.predict(str(job.run_dir), api_name="/open")[0].startswith("run ")


def test_a_user_name_is_one_visitor_across_sessions(world, backends, options, tmp_path):
    """With --auth the visitor is the user name: a second session of the same user (a
    reload, another tab) changes the run; another user cannot."""
    from gradio_client.exceptions import AppError

    from tests.ui.clients import app_client

    service = RunService("gemini", out=tmp_path, backends=backends, backend_options=options)
    demo = build_app(service, "with auth")
    with served(demo, auth=[("ana", "pw-ana"), ("ben", "pw-ben")]) as url:
        first = app_client(url, auth=("ana", "pw-ana"))
        start(first, rounds=1, seed=43, candidates=1).result()
        run_dir = service.job.run_dir
        assert (run_dir / ".owner").read_text().strip() == visitor_hash("user:ana")
        ben = app_client(url, auth=("ben", "pw-ben"))
        with pytest.raises(AppError, match="belongs to another visitor"):
            ben.predict(str(run_dir), 1, 0, api_name="/accept")
        again = app_client(url, auth=("ana", "pw-ana"))  # a new session
        assert again.session_hash != first.session_hash
        out = again.predict(str(run_dir), 1, 0, api_name="/accept")
        assert out[0] == "round 1: accepted by hand (candidate 0)"


def test_rater_names_belong_to_the_visitor_who_took_them(app_url, tmp_path):  # noqa: F811
    from gradio_client.exceptions import AppError

    from tests.fakes.gemini_server import png_bytes
    from tests.ui.clients import app_client

    url, service = app_url
    folder = service.out / "study"
    folder.mkdir()
    for i in range(2):
        (folder / f"img{i}.png").write_bytes(png_bytes((10 * i, 20, 30), (16, 16)))
    ana, mallory = app_client(url), app_client(url)
    rate_begin(ana, "study", "ana")
    first = rate_profile(ana, "study", "ana")
    assert "0 of 2 rated by ana" in first[0]
    with pytest.raises(AppError, match="rater name 'ana' is taken in this set"):
        rate_begin(mallory, "study", "ana")
    with pytest.raises(AppError, match="is taken in this set"):
        rate_save(mallory, "study", "ana", first, {})  # (her page offers no choices)
    with pytest.raises(AppError, match="is taken in this set"):
        rate_profile(mallory, "study", "ana")
    assert not (folder / "ratings.jsonl").exists()
    rate_save(ana, "study", "ana", first, {0: "4", 2: "5"})
    rows = [json.loads(x) for x in (folder / "ratings.jsonl").read_text().splitlines()]
    assert [(r["rater"], r["answers"]["alignment"]) for r in rows] == [("ana", "4")]
    # a name of one's own is fine; the name shown in the page is escaped
    shown = rate_begin(mallory, "study", "<b>mal</b>")[0]
    assert "<b>" not in shown and "&lt;b&gt;mal&lt;/b&gt;" in shown


def test_the_browser_key_is_kept_in_out_for_the_operator_only(tmp_path):
    """The key browser tokens are encrypted with outlives a restart (the same key from the
    same --out), so visitors keep their token; only the operator can read it."""
    import stat

    from ui.visitors import SECRET_FILE, browser_secret

    first = browser_secret(tmp_path)
    assert len(first) == 64 and browser_secret(tmp_path) == first
    assert stat.S_IMODE((tmp_path / SECRET_FILE).stat().st_mode) == 0o600
    assert browser_secret(tmp_path / "elsewhere") != first


def test_identity_rules():
    class Request:
        def __init__(self, session_hash=None, username=None):
            self.session_hash, self.username = session_hash, username

    token = new_token(None)
    assert len(token) == 32 and new_token(token) == token  # kept across visits
    assert new_token("not-a-token") != "not-a-token"
    assert new_token("<script>") != "<script>"
    # the same browser token on a new session (a reload) is the same visitor
    assert visitor_id(Request("s1"), token) == visitor_id(Request("s2"), token)
    assert visitor_id(Request("s1"), token) == f"browser:{token}"
    # no token (an API client): its session; a user name wins over both
    assert visitor_id(Request("s1"), None) == "session:s1"
    assert visitor_id(Request("s1"), "forged") == "session:s1"
    assert visitor_id(Request("s1", "ana"), token) == "user:ana"
    assert visitor_id(None, token) is None


def test_visitor_and_model_text_comes_back_escaped(app_url, world, monkeypatch):  # noqa: F811
    """An activity and a model's answer carrying <script> and <img onerror> come back
    escaped in every HTML and Markdown output of the app (and in error toasts)."""
    from gradio_client.exceptions import AppError

    from tests.fakes import gemini_world
    from tests.ui.clients import app_client

    url, service = app_url
    client = app_client(url)
    act = "<script>alert(1)</script> dinner <img src=x onerror=alert(2)>"
    hostile = "<img src=x onerror=alert(3)>"
    monkeypatch.setitem(gemini_world.SEEN[gemini_world.RED], "objects", [hostile, "hamburgers"])
    world.refs = {
        **world.refs,
        "propose": {**world.refs["propose"], "objects": [hostile, "Goldfish bowl"]},
        "refine": {**world.refs["refine"], "objects": [hostile, "Goldfish bowl"]},
    }
    raw = ("<script", "<img")

    def clean(text: str) -> None:
        assert not any(r in text for r in raw), text[:400]

    note, review = client.predict(act, "Iran", api_name="/build_references")
    clean(note)
    assert "&lt;script&gt;" in note
    # a run of it: the HTML outputs (chart, progress bar) carry no raw markup
    job = start(client, act=act, rounds=1, candidates=1)
    job.result(timeout=300)
    outputs = job.outputs()
    assert outputs[-1][0] == "finished"
    for out in outputs:
        clean(out[2] or "")  # the metric chart (inline SVG)
        clean(out[10] or "")  # the progress bar
    run = service.open(outputs[-1][7])
    assert hostile in run.rounds[0].best.observed["objects"]  # the model did say it
    # error toasts: gradio renders their text as HTML
    with pytest.raises(AppError) as refused:
        start(client, act=act + " x", rounds=1, candidates=1).result()
    clean(str(refused.value))
    assert "&lt;script&gt;" in str(refused.value)
    with pytest.raises(AppError) as refused:
        client.predict(f"{hostile}/run", api_name="/open")
    clean(str(refused.value))


def test_reviewed_references_stay_with_their_visitor_unless_admin(tmp_path):
    """References reviewed by a visitor serve that visitor's runs; the shared folder under
    --out changes only for an admin (``refine app --admin USER``)."""
    service = RunService("gemini", out=tmp_path, admins=["user:root"])
    act, doc = "people flying kites on rooftops", {"descriptors": {"objects": ["Paper kites"]}}
    service.save_references(act, "Iran", json.dumps(doc), "user:ana")
    assert service.find_references(act, "Iran", "user:ana").descriptors["objects"] == [
        "Paper kites"
    ]
    for other in ("user:ben", "browser:" + "0" * 32, None):
        with pytest.raises(ValueError, match="build references"):
            service.find_references(act, "Iran", other)
    assert not list(service.references_dir.glob("*.json"))
    service.save_references(act, "Iran", json.dumps(doc), "user:root")
    assert [p.parent for p in service.references_dir.glob("*.json")] == [service.references_dir]
    assert service.find_references(act, "Iran", "user:ben").activity == act  # shared now


def test_the_rate_view_lists_the_sets_a_visitor_may_rate(own_app_url):  # noqa: F811
    """The Rate view's list (filled when it opens): the visitor's own runs, never another
    visitor's, the batch and bench folders and the folders of images inside --out, newest
    first; tunes and hidden folders are left out; a listed set opens for rating."""
    from tests.fakes.gemini_server import png_bytes
    from tests.ui.clients import app_client

    url, service = own_app_url
    ana, ben = app_client(url), app_client(url)
    start(ana, rounds=0, candidates=1).result()
    ana_run = service.job.run_dir.relative_to(service.out).as_posix()
    start(ben, rounds=0, candidates=1).result()
    ben_run = service.job.run_dir.relative_to(service.out).as_posix()
    for folder, marker in (("studies/bench-a", "cells.jsonl"), ("batches/b1", "batch.json")):
        (service.out / folder).mkdir(parents=True)
        (service.out / folder / marker).write_text("{}")
    for folder in ("photos", ".hidden", "tunes/t1"):
        (service.out / folder).mkdir(parents=True)
        (service.out / folder / "a.png").write_bytes(png_bytes((10, 20, 30), (16, 16)))

    def listed(client) -> dict[str, str]:
        update = client.predict(api_name="/rate_sets")
        return {value: label for label, value in update["choices"]}

    mine = listed(ana)
    assert mine == {
        ana_run: f"run: {ana_run}",
        "studies/bench-a": "bench: studies/bench-a",
        "batches/b1": "batch: batches/b1",
        "photos": "images: photos",
    }
    assert list(mine)[-1] == ana_run  # the oldest last
    assert ben_run in listed(ben) and ana_run not in listed(ben)
    rate_begin(ana, "photos", "ana")
    assert "0 of 1 rated by ana" in rate_profile(ana, "photos", "ana")[0]
    rate_begin(ana, ana_run, "ana")
    assert "0 of 1 rated by ana" in rate_profile(ana, ana_run, "ana")[0]
