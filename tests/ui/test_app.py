"""The app through gradio_client against a launched server (fake Gemini world)."""

from __future__ import annotations

import json
import re
import time
from dataclasses import fields
from pathlib import Path

import pytest

from refine.service import RunService
from tests.ui.clients import served, start
from ui.adapters import TABLE_HEADERS
from ui.app import build_app

# a launched app and its runs behind every test (about 1.3 s each): left out of the fast tests
pytestmark = pytest.mark.slow

CAIRE = TABLE_HEADERS.index("CAIRE 1-5 ↑")
LANGUAGES = TABLE_HEADERS.index("SoS / languages ↑")


def chart_series(html: str) -> dict[str, list]:
    """The lines of the app's metric chart: name -> values per round."""
    import json
    import re

    found = re.findall(r'data-name="([^"]+)" data-values=\'([^\']+)\'', html)
    return {name: json.loads(values) for name, values in found}


@pytest.fixture(scope="module")
def launched_app(gemini_env, siglip_path, tmp_path_factory):
    """One app for a module's tests: building and launching one for each test was 0.3 to
    0.5 s a test (Gradio builds its web app four times on the way)."""
    from tests.conftest import loop_backends, loop_options

    out = tmp_path_factory.mktemp("app")
    service = RunService(
        "gemini", out=out, backends=loop_backends(siglip_path), backend_options=loop_options()
    )
    demo = build_app(service, "test profile")
    with served(demo) as url:
        yield url, service


@pytest.fixture
def app_url(launched_app, world):
    """The module's app (its --out holds the runs of the module's earlier tests), with no
    run going when the test begins; a run the test left going is stopped at its end."""
    url, service = launched_app
    assert not service.busy, "a run of an earlier test is still going"
    yield launched_app
    job = service.job
    if job is not None and service.busy:
        job.stop()
        job.join(60)
        assert not service.busy, "the run the test left going did not stop"


@pytest.fixture
def own_app_url(world, backends, options, tmp_path):
    """An app of the test's own, for a test that counts what --out holds."""
    service = RunService("gemini", out=tmp_path, backends=backends, backend_options=options)
    demo = build_app(service, "test profile")
    with served(demo) as url:
        yield url, service


def test_every_endpoint_takes_its_inputs_by_name(app_url):
    """Every endpoint of the app's API names each input (none is Gradio's param_N), so a
    caller passes them by name; /start takes the form's run settings from the settings
    table, each of which may be left out (the form's default), the upload too; /branch
    the numbers a roll-back may change. Runs started by name: every other app test."""
    from refine.settings import shown_on
    from tests.ui.clients import app_client

    url, _ = app_url
    endpoints = app_client(url).view_api(print_info=False, return_format="dict")
    endpoints = endpoints["named_endpoints"]
    for name, info in endpoints.items():
        names = [p["parameter_name"] for p in info["parameters"]]
        assert not [x for x in names if re.fullmatch(r"param_\d+", x)], (name, names)
        assert len(set(names)) == len(names), name
    given = {p["parameter_name"]: p for p in endpoints["/start"]["parameters"]}
    settings = [s.name for s in shown_on("app")]
    assert list(given) == ["act", "ctry", *settings, "paused", "image", "expectations"]
    assert all(p["parameter_has_default"] for p in given.values())
    numbers = [s.name for s in shown_on("app") if s.kind in (int, float) and not s.choices]
    branch = [p["parameter_name"] for p in endpoints["/branch"]["parameters"]]
    assert branch == ["path", "k", *numbers, "paused"]
    save = [p["parameter_name"] for p in endpoints["/rate_save"]["parameters"]]
    assert save[:4] == ["folder_value", "who", "item", "slot_kind"] and save[4] == "q1_choice"


def test_full_run_streams_rounds_then_opens_saved(app_url):
    from tests.ui.clients import app_client

    url, service = app_url
    client = app_client(url)
    job = start(client, rounds=2, memory=True, keep_fixes=3)
    job.result(timeout=300)
    outputs = job.outputs()
    stages = [o[0] for o in outputs]
    # the stage in words: the round of all, what happens, the time spent
    assert any(s.startswith("round 1 of 2 \u00b7 ") and " elapsed" in s for s in stages)
    assert stages[-1] == "finished"
    # the progress bar ends full
    assert 'aria-valuenow="100"' in outputs[-1][10]
    table = outputs[-1][3]
    rows = table["data"] if isinstance(table, dict) else table
    assert [row[1] for row in rows] == ["initial", "accepted", "rejected"]
    # the gallery grew round by round while the run was watched
    sizes = [len(o[1] or []) for o in outputs]
    assert sizes == sorted(sizes) and sizes[-1] == 3 and 1 in sizes
    run_dir = outputs[-1][7]
    run = service.open(run_dir)
    # the Options' memory and fix keeping reach the run; what its accepted round fixed is
    # kept in the visitor's own store inside --out (a hint quotes an instruction)
    assert run.spec.memory and run.spec.keep_fixes == 3
    store = service.out / ".memory" / Path(run.spec.memory_store).name
    assert str(store) == run.spec.memory_store and store.name != "shared.jsonl"
    assert '"kind": "fixed"' in store.read_text() or '"kind": "removed"' in store.read_text()
    chart = chart_series(outputs[-1][2])
    assert chart["FAITH"] == pytest.approx([r.best.scores.faith for r in run.rounds], abs=1e-4)
    assert chart["drift"][0] is None and len(chart["ALIGN"]) == 3
    # quality beside FAITH, in the chart and the table
    quality = [r.best.scores.quality for r in run.rounds]
    assert chart["quality"] == pytest.approx(quality, abs=1e-4)
    column = TABLE_HEADERS.index("quality ↑")
    assert [row[column] for row in rows] == [round(q, 3) for q in quality]  # as shown
    assert 'class="target" data-target="1"' in outputs[-1][2]  # the target FAITH line
    assert outputs[-1][2].count('class="axis-title"') == 4  # x and y, wide and narrow
    assert "score (0 to 1; SoS -1 to 1)" in outputs[-1][2]
    # progress in words: rounds done of all, best FAITH, calls, tokens, time, why it stopped
    progress = outputs[-1][9]
    assert progress.startswith("2 of 2 editing rounds · best FAITH ")
    assert f"· {run.model_calls} model calls · " in progress and "tokens in" in progress
    assert progress.endswith("stopped: max rounds: 2 editing round(s) done")
    assert any(o[9].startswith("0 of 2 editing rounds") for o in outputs)  # after round 0
    opened = client.predict(run_dir, api_name="/open")
    assert opened[0].startswith("run ") and "finished" in opened[0]
    opened_rows = opened[3]["data"] if isinstance(opened[3], dict) else opened[3]
    assert opened_rows == rows
    with pytest.raises(Exception, match="is not a run of this app"):  # an error, not a view
        client.predict("/no/such/run", api_name="/open")


def test_pause_apply_and_stop_through_the_api(app_url, world):
    import time

    from tests.ui.clients import app_client

    url, service = app_url
    client = app_client(url)
    job = start(client, rounds=3, paused=True)
    deadline = time.monotonic() + 120
    while service.job is None or service.job.waiting is None:  # round 1 waits for review
        assert time.monotonic() < deadline, "no instruction came up for review"
        time.sleep(0.1)
    # the stream shows the review (read while the run waits) before the test answers it
    while not any(o[0].startswith("round 1: review") for o in job.outputs()):
        assert time.monotonic() < deadline, "the stream never showed the review"
        time.sleep(0.1)
    assert client.predict("", api_name="/apply").startswith("error: the instruction is empty")
    # a hostile length through the API: refused, and the run still waits for its review
    said = client.predict("x" * 5_000_000, api_name="/apply")
    assert said == "error: the instruction is 5,000,000 characters; at most 2,000", said
    assert service.job.waiting is not None
    assert client.predict("Put a sofreh on the floor.", api_name="/apply").startswith(
        "instruction applied"
    )
    while service.job.waiting is None or service.job.waiting[0] != 2:
        assert time.monotonic() < deadline, "round 2 never came up for review"
        time.sleep(0.1)
    assert client.predict(api_name="/stop").startswith("stopping")
    job.result(timeout=120)
    last = job.outputs()[-1]
    assert last[0] == "finished"
    run = service.open(last[7])
    assert run.stop_reason == "stopped by the user" and len(run.rounds) == 2
    assert run.rounds[1].text == "Put a sofreh on the floor."
    reviewed = [o for o in job.outputs() if o[0].startswith("round 1: review")]
    assert reviewed and reviewed[0][6].startswith("Edit this photo")
    # who wrote it and the changes it was built from, beside the box
    assert "review the instruction (written by the language model)" in reviewed[0][0]
    assert "\nplanned changes: tone down oversized hookahs; " in reviewed[0][0]
    assert "; replace hamburgers with Basket of flatbreads" in reviewed[0][0]
    # while round 1 is edited, the box shows the applied instruction (not round 0's prompt).
    # Each update is read when the stream's reader takes it: a reader that catches the edit
    # in progress shows the applied instruction, a slower one round 1 saved, and one slower
    # still round 2 already up for review. Whatever the pace, no box after round 1's review
    # goes back to round 0; the rule itself is held on the display below.
    boxes = [o[6] for o in job.outputs()]
    applied = "round 1 (applied, editing):\nPut a sofreh on the floor."
    saved = "round 1 (person):\nPut a sofreh on the floor."
    last_review = max(k for k, o in enumerate(job.outputs()) if o[0].startswith("round 1: review"))
    for stage_text, box in ((o[0], o[6]) for o in job.outputs()[last_review + 1 :]):
        if box and not stage_text.startswith("round 2: review"):
            assert box in (applied, saved), (stage_text, box)
    assert saved in boxes and (applied not in boxes or boxes.index(applied) < boxes.index(saved))
    from refine.service import Update
    from ui.views.common import RunDisplay

    editing = run.model_copy(update={"rounds": run.rounds[:1], "best_round": 0})  # round 1 unsaved
    update = Update("round 1: edit", editing, service.resolve(last[7]), applied=(1, saved[18:]))
    names = [f.name for f in fields(RunDisplay)]
    shown = dict(zip(names, RunDisplay.show(update, None), strict=True))["instruction"]
    assert shown == applied
    update = Update("round 1: decided", run, service.resolve(last[7]), applied=(1, saved[18:]))
    assert dict(zip(names, RunDisplay.show(update, None), strict=True))["instruction"] == saved
    assert client.predict(api_name="/stop") == "no run in progress"


def test_show_roll_back_and_decide_by_hand(app_url):
    from tests.ui.clients import app_client

    url, service = app_url
    client = app_client(url)
    # one candidate, seed 43: round 1 turns red into blue and is rejected
    start(client, rounds=1, seed=43, candidates=1).result()
    run_dir = service.job.run_dir
    first = service.open(run_dir)
    assert [r.decision for r in first.rounds] == ["initial", "rejected"]
    shown = client.predict(str(run_dir), 0, api_name="/show")
    assert shown[0] == "round 0: initial" and shown[6].startswith("round 0 (prompt)")
    marks = [(m["token"], m["class_or_confidence"]) for m in shown[4]]
    assert any(t.startswith("hamburgers (closest: ") and k == "hallucinated" for t, k in marks)
    with pytest.raises(Exception, match=r"round 9 does not exist \(0..1\)"):
        client.predict(str(run_dir), 9, api_name="/show")
    accepted = client.predict(str(run_dir), 1, 0, api_name="/accept")
    assert accepted[0] == "round 1: accepted by hand (candidate 0)"
    assert service.open(run_dir).best_round == 1
    rejected = client.predict(str(run_dir), 1, 0, api_name="/reject")
    assert rejected[0] == "round 1: rejected by hand" and service.open(run_dir).best_round == 0
    # the "so far" line follows the decision: the best FAITH round 0's, the decision named
    assert rejected[9].endswith(" · then round 1 rejected by hand"), rejected[9]
    best0 = service.open(run_dir).rounds[0].best.scores.faith
    assert f"best FAITH {best0:.3f} " in rejected[9]
    # roll back to round 0 and continue with two candidates: a new run, green accepted
    job = client.submit(
        path=str(run_dir),
        k=0,
        rounds=1,
        target=1.0,
        candidates=2,
        max_drift=2.0,
        api_name="/branch",
    )
    job.result(timeout=300)
    branch = service.open(service.job.run_dir)
    assert service.job.run_dir != run_dir and branch.branched_from["round"] == 0
    assert [r.decision for r in branch.rounds] == ["initial", "accepted"]
    # said at once, and kept in the new run's "so far" line; the parent names its child
    assert job.outputs()[0][0] == (
        f"a new run from round 0 of {run_dir.name}: starting, with these changes: "
        "candidates 2 (the run had 1); seed 42 (the run had 43)"
    )
    # the "so far" line keeps what the roll back did for as long as the run is shown
    assert job.outputs()[-1][9].startswith(
        f"a new run from round 0 of {run_dir.name}: 1 further round(s), with these changes: "
        "candidates 2 (the run had 1); seed 42 (the run had 43) · "
    ), job.outputs()[-1][9]
    assert branch.branched_from["changes"] == {"candidates": [2, 1], "seed": [42, 43]}
    opened = client.predict(str(run_dir), api_name="/open")
    assert opened[9].endswith(f" · continued from round 0 in {service.job.run_dir.name}")


def test_download_zip_and_report(app_url):
    import zipfile

    from tests.ui.clients import app_client

    url, service = app_url
    client = app_client(url)
    start(client, rounds=1).result()
    run = service.open(service.job.run_dir)
    archive, report = client.predict(str(service.job.run_dir), api_name="/download")
    names = set(zipfile.ZipFile(archive).namelist())
    images = {c.image for r in run.rounds for c in r.candidates}
    assert "run.json" in names and images <= names and len(images) == 3
    html = open(report, encoding="utf-8").read()
    assert html.count('class="round ') == 2 and "data:image/png;base64," in html
    with pytest.raises(Exception, match="no run to download yet"):
        client.predict("", api_name="/download")
    # asked again: the same files, not another copy on the server's disk
    import hashlib
    import tempfile
    from pathlib import Path

    client.predict(str(service.job.run_dir), api_name="/download")
    made = Path(tempfile.gettempdir()) / "refine-downloads"
    where = hashlib.sha256(str(service.job.run_dir.resolve()).encode()).hexdigest()[:12]
    assert len(list(made.glob(f"{service.job.run_dir.name}-{where}-*"))) == 1


def test_missing_key_is_a_readable_message_and_the_app_goes_on(
    world, backends, options, tmp_path, monkeypatch
):
    from tests.ui.clients import app_client

    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    # a client of its own (the shared one already holds a key)
    gemini_roles = ("generator", "editor", "observer", "judge")
    keyless = {
        role: {**opts, "timeout_s": 119.0} if role in gemini_roles else opts
        for role, opts in options.items()
    }
    service = RunService("gemini", out=tmp_path, backends=backends, backend_options=keyless)
    demo = build_app(service, "no key")
    with served(demo) as url:
        from gradio_client.exceptions import AppError

        client = app_client(url)
        # said as the page opens, in one line with what to do, for every Gemini role at once
        line = client.predict(api_name="/ready")
        assert line == (
            "\u26a0 **Not ready:** generator, observer, judge and editor: no Gemini API key: "
            "set GEMINI_API_KEY (or GOOGLE_API_KEY) to a key from Google AI Studio, or pick a "
            "local profile such as 'local-gpu'"
        )
        # and at Start, at once, before anything is spent
        began = time.monotonic()
        with pytest.raises(AppError) as err:
            start(client, rounds=1).result()
        assert time.monotonic() - began < 10
        assert str(err.value).startswith("generator, observer, judge and editor: no Gemini API")
        assert len(str(err.value)) < 250 and not service.busy and service.job is None
        with pytest.raises(Exception, match="is not a run of this app"):  # still answering
            client.predict("/nowhere", api_name="/open")


def _rounds_on_record(service) -> int:
    job = service.job
    if job is None or job.run_dir is None:
        return 0
    record = job.run_dir / "run.json"
    try:
        return len(json.loads(record.read_text()).get("rounds") or [])
    except (OSError, ValueError):
        return 0


def test_a_client_that_cancels_stops_following_and_the_run_goes_on_until_stop(app_url, world):
    """A run belongs to its visitor, not to the call that follows it: an API client that
    cancels its call (as a page closed or reloaded does) leaves the run going; the same
    visitor still answers its review, and only /stop ends it, recorded as the user's Stop."""
    import time

    from tests.ui.clients import app_client

    url, service = app_url
    client = app_client(url)
    earlier = service.job  # an earlier test's run, in the module's app
    followed = start(client, rounds=3, candidates=1, paused=True)
    deadline = time.monotonic() + 120
    while service.job is earlier or service.job.waiting is None:
        assert time.monotonic() < deadline, "round 1 never came up for review"
        time.sleep(0.05)
    followed.cancel()
    # the client's event stream closes after a cancel, as the server says: a call made
    # while it closes was cancelled with it (gradio_client's CancelledError, seen once
    # under load), so the next call waits for the close
    while not followed.done() or client.stream_open:
        assert time.monotonic() < deadline, "the cancelled call's stream never closed"
        time.sleep(0.05)
    # the run waits on for its owner: Apply continues it to the next review (a cancel that
    # stopped it would leave nothing to apply, or record the round as stopped)
    answer = client.predict("Put a sofreh on the floor.", api_name="/apply")
    assert answer.startswith("instruction applied"), answer
    while service.job.waiting is None or service.job.waiting[0] != 2:
        assert service.busy, "the run ended when its client cancelled"
        assert time.monotonic() < deadline, "round 2 never came up for review"
        time.sleep(0.05)
    # the same visitor's Start is refused while their run goes on, saying why
    with pytest.raises(Exception, match="your run is still in progress"):
        start(client, rounds=1, candidates=1).result()
    assert client.predict(api_name="/stop").startswith("stopping")
    while service.busy:
        assert time.monotonic() < deadline, "the run went on after /stop"
        time.sleep(0.1)
    run = service.open(service.job.run_dir)
    assert run.status == "finished" and run.stop_reason.startswith("stopped by the user")
    assert len(run.rounds) == 2 and run.rounds[1].text == "Put a sofreh on the floor."
    for r in run.rounds:
        assert (service.job.run_dir / r.best.image).is_file()


def test_a_second_visitor_waits_in_line_and_can_browse_meanwhile(app_url):
    import time

    from gradio_client.utils import Status

    from tests.ui.clients import app_client

    url, service = app_url
    first, second = app_client(url), app_client(url)
    held = start(first, rounds=1, candidates=1, paused=True)  # waits for review
    deadline = time.monotonic() + 120
    while service.job is None or service.job.waiting is None:
        assert time.monotonic() < deadline, "the first run never paused"
        time.sleep(0.1)
    first_dir = service.job.run_dir
    queued = start(second, rounds=1, candidates=1)
    # told in words, on its stage, how many runs are ahead and what the one in progress is
    # doing (not Gradio's "queue: 1/1" on every output)
    ahead = "waiting: 1 run ahead of yours (one in progress: round 1"
    while not any(str(o[0]).startswith(ahead) for o in queued.outputs()):
        assert queued.status().code != Status.FINISHED, queued.outputs()
        assert time.monotonic() < deadline, f"no place in the line was said: {queued.outputs()}"
        time.sleep(0.1)
    # a third visitor is told of both
    third = app_client(url)
    also = start(third, rounds=1, candidates=1)
    two = "waiting: 2 runs ahead of yours (one in progress: round 1"
    while not any(str(o[0]).startswith(two) for o in also.outputs()):
        assert time.monotonic() < deadline, f"no place in the line was said: {also.outputs()}"
        time.sleep(0.1)
    assert any("; 1 waiting); yours starts when they end" in str(o[0]) for o in also.outputs())
    # the second leaves (its page closed): the third moves up
    queued.cancel()
    seen = len(also.outputs())
    while not any(str(o[0]).startswith(ahead) for o in also.outputs()[seen:]):
        assert time.monotonic() < deadline, f"the third did not move up: {also.outputs()}"
        time.sleep(0.1)
    queued = also
    # browsing a saved run is not held up by the run in progress
    opened = second.predict(str(first_dir), api_name="/open")
    # the run in progress opens as it stands: paused for its instruction's review
    assert opened[0].startswith("round 1: review the instruction")
    assert service.job.run_dir == first_dir
    # the run belongs to the first client: the second can watch it, not stop or steer it
    assert second.predict(api_name="/stop").startswith("this run belongs to another visitor")
    assert second.predict("Paint it all red.", api_name="/apply").startswith(
        "this run belongs to another visitor"
    )
    with pytest.raises(Exception, match="this run belongs to another visitor"):
        second.predict(str(first_dir), 0, 0, api_name="/reject")
    assert service.job.waiting is not None and service.busy  # still waiting for its owner
    assert first.predict(api_name="/stop").startswith("stopping")
    held.result(timeout=120)
    queued.result(timeout=300)
    last = queued.outputs()[-1]
    assert last[0] == "finished" and last[7] != str(first_dir)
    assert service.open(last[7]).status == "finished"


def test_out_of_gpu_memory_is_advice_in_the_app(world, backends, options, tmp_path):
    from tests.ui.clients import app_client

    class FullGpu:
        id = "full-gpu"

        def generate(self, prompt, seeds):
            import torch

            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    service = RunService(
        "gemini",
        out=tmp_path,
        backends=backends,
        backend_options=options,
        instances={"generator": FullGpu()},
    )
    demo = build_app(service, "full GPU")
    with served(demo) as url:
        client = app_client(url)
        out = start(client, rounds=1).result()
        assert out[0].startswith("error: out of GPU memory: use the 'small-gpu' profile")
        assert "Tried to allocate 2.00 GiB" in out[0] and not service.busy
        again = start(client, rounds=1).result()  # the app still takes runs
        assert again[0].startswith("error: out of GPU memory")


def test_caire_per_round_in_the_app(app_url, siglip_path, tmp_path):
    from refine.backends import create
    from refine.evaluate.caire.kb import KnowledgeBase, read_source
    from tests.integration.test_caire_kb import folder_source
    from tests.ui.clients import app_client

    url, service = app_url
    embedder = create("image_embedder", f"siglip:{siglip_path}", shared=False, device="cpu")
    kb = KnowledgeBase.open_or_create(service.out / "kb", embedder.id)  # inside --out
    kb.add(read_source(folder_source(tmp_path)), embedder)
    client = app_client(url)
    kb = str(service.out / "kb")
    out = start(client, rounds=1, caire_labels="Turkey, India", caire_kb=kb).result()
    assert out[0] == "finished"
    rows = out[3]["data"] if isinstance(out[3], dict) else out[3]
    # linked by name similarity over all six KB pictures (a random tiny model): either entity
    assert rows[0][CAIRE].startswith("Iran 2 \u00b7 Turkey 4 \u00b7 India 1 (kb, linked to ")
    assert rows[0][CAIRE].endswith("); reads more as Turkey (4/5) than Iran (2/5)")
    assert rows[1][CAIRE].startswith("Iran 5 \u00b7 Turkey 2 \u00b7 India 1 (kb, linked to ")
    assert chart_series(out[2])["CAIRE Iran (0-1)"] == [0.25, 1.0]
    with pytest.raises(Exception, match="CAIRE knowledge base: .*not a knowledge base"):
        start(client, rounds=1, caire_labels="Turkey", caire_kb=str(service.out)).result()
    assert not service.busy


def test_prompt_languages_and_sos_per_round_in_the_app(app_url, world):
    from tests.fakes.gemini_world import build_activity_bank
    from tests.ui.clients import app_client

    url, service = app_url
    bank = service.out / "bank"  # inside --out
    build_activity_bank(world, service.refiner().backends, bank)
    client = app_client(url)
    languages = {"prompt_languages": "fr", "sos_bank": str(bank), "language_scores": True}
    out = start(client, rounds=1, **languages).result()
    assert out[0] == "finished"
    run = service.open(out[7])
    rows = out[3]["data"] if isinstance(out[3], dict) else out[3]
    for row, r in zip(rows, run.rounds, strict=True):
        fr = r.languages["fr"]
        faith = fr.scores.faith
        assert row[LANGUAGES] == f"en {r.sos:+.3f} \u00b7 fr {fr.sos:+.3f} (FAITH {faith:.3f})"
    # the French image stays blue (the world's blue scene), so its FAITH stays low
    r1 = run.rounds[1]
    assert r1.languages["fr"].scores.faith < r1.best.scores.faith
    assert "robots" in r1.languages["fr"].hallucinated
    (item,) = out[8]
    caption = item["caption"] if isinstance(item, dict) else item[1]
    assert caption == (
        f"round 1, fr: SoS {r1.languages['fr'].sos:+.3f}, "
        f"FAITH {r1.languages['fr'].scores.faith:.3f}"
    )
    chart = chart_series(out[2])
    assert chart["SoS fr"] == pytest.approx([r.languages["fr"].sos for r in run.rounds], abs=1e-4)
    assert chart["SoS en"] == pytest.approx([r.sos for r in run.rounds], abs=1e-4)
    assert chart["FAITH fr"] == pytest.approx(
        [r.languages["fr"].scores.faith for r in run.rounds], abs=1e-4
    )
    shown = client.predict(out[7], 0, api_name="/show")  # round 0 in French
    (item,) = shown[8]
    caption = item["caption"] if isinstance(item, dict) else item[1]
    assert caption.startswith("round 0, fr: SoS ")
    with pytest.raises(Exception, match="SoS bank: .*not an SoS bank"):
        start(client, rounds=1, prompt_languages="fr", sos_bank=str(service.out)).result()


def test_references_built_reviewed_and_used_in_the_app(app_url, world):
    """An activity the pack lacks: Build asks the profile's language models (two proposers,
    one refiner) once, keeps the result inside --out, shows it for review; a reviewed
    change is saved and the next run uses it."""

    from gradio_client.exceptions import AppError

    from tests.ui.clients import app_client
    from ui.app import references_note

    url, service = app_url
    client = app_client(url)
    act = "people celebrating Nowruz at home"
    note, missing = references_note(service, act, "Iran")
    assert missing and "no references yet" in note
    # a Start before the build names the app's own button, not a command; nothing is asked
    build = 'press "Build references with the language models" under the form'
    near = "did you mean 'people eating food at home' or 'people participating in Nowruz'"
    said = f"no references yet for '{act}' in Iran; {near}.*; or {build}"
    with pytest.raises(AppError, match=said):
        start(client, act=act, rounds=0, candidates=1).result()
    assert world.refs_asked == [] and "refs build" not in note
    note, review = client.predict(act, "Iran", api_name="/build_references")
    assert world.refs_asked == ["propose", "propose", "refine", "stereotypes"]
    assert "references built" in note and "(4 model calls, 0 answers from the cache)" in note
    # the review table: one row per descriptor (its dimension, its phrase), then stereotypes
    assert review["headers"] == ["dimension", "phrase"]
    rows = review["data"]
    assert [p for d, p in rows if d == "objects"] == [
        "Sabzeh sprouts",
        "Goldfish bowl",
        "Painted eggs",
    ]
    assert [p for d, p in rows if d == "stereotype"] == ["flying carpets", "desert backdrop"]
    assert {d for d, _ in rows} == {"setting", "objects", "attire", "interaction", "spatial"} | {
        "stereotype"
    }
    # kept for this visitor's runs (an API client: its session), not in the shared folder
    me = f"session:{client.session_hash}"
    assert not list((service.out / "references").glob("*.json"))
    # (the module's --out: another test's visitors may have references of their own there)
    kept = list((service.out / "references" / "visitors").glob("*/*nowruz*.json"))
    assert len(kept) == 1 and kept[0].parent == service.visitor_references_dir(me)
    assert [p.name for p in kept[0].parent.glob("*.json")] == [kept[0].name]
    assert references_note(service, act, "Iran")[1]  # another visitor has none yet
    # asked again: every answer comes from the cache inside --out
    note, _ = client.predict(act, "Iran", api_name="/build_references")
    assert "(0 model calls, 4 answers from the cache)" in note and len(world.refs_asked) == 4
    assert references_note(service, act, "Iran", me) == (
        "references: 7 descriptors and 2 stereotype candidates for *people celebrating Nowruz "
        "at home* in Iran (built with language models)",
        False,
    )
    # the user adds a descriptor, empties another (removing it) and saves; the run uses
    # the reviewed references
    edited = [[d, "" if p == "Painted eggs" else p] for d, p in rows]
    table = {"headers": ["dimension", "phrase"], "data": [*edited, ["objects", "Samanu pudding"]]}
    note = client.predict(act, "Iran", table, api_name="/save_references")
    assert "references saved" in note and "(7 descriptors)" in note
    job = start(client, act=act, rounds=0, candidates=1)
    job.result(timeout=300)
    run = service.open(job.outputs()[-1][7])
    assert run.references.descriptors["objects"] == [
        "Sabzeh sprouts",
        "Goldfish bowl",
        "Samanu pudding",
    ]
    assert run.references.stereotypes == ["flying carpets", "desert backdrop"]
    assert run.references.source.startswith("reviewed in the app")
    # bad input is an error naming it; nothing is written
    before = sorted(str(p) for p in (service.out / "references").rglob("*"))
    wrong = {"headers": ["dimension", "phrase"], "data": [*rows, ["colour", "red"]]}
    with pytest.raises(AppError, match="row 10: 'colour' is not one of setting, objects, "):
        client.predict(act, "Iran", wrong, api_name="/save_references")
    with pytest.raises(AppError, match="at most 120 characters"):
        client.predict("x" * 500, "Iran", api_name="/build_references")
    nothing = {"headers": ["dimension", "phrase"], "data": [["objects", " "]]}
    with pytest.raises(AppError, match="hold no descriptors"):
        client.predict(act, "Iran", nothing, api_name="/save_references")
    many = {"headers": ["dimension", "phrase"], "data": [["objects", "x"]] * 501}
    with pytest.raises(AppError, match="a table of at most 500 rows"):
        client.predict(act, "Iran", many, api_name="/save_references")
    assert sorted(str(p) for p in (service.out / "references").rglob("*")) == before
    assert len(world.refs_asked) == 4


def test_saved_runs_as_thumbnails(own_app_url):
    """/runs lists the saved runs newest first, each with its best image as a thumbnail."""
    from tests.ui.clients import app_client

    url, service = own_app_url
    client = app_client(url)
    for seed in (1, 2):
        start(client, rounds=0, seed=seed, candidates=1).result(timeout=300)
    listing, thumbs = client.predict(api_name="/runs")
    assert len(thumbs) == 2 and len(listing["choices"]) == 2
    cards = service.cards()
    assert [c.id for c in cards] == [choice[1] for choice in listing["choices"]]
    for card in cards:
        assert card.image is not None and card.image.name == "round_00_c0.png"
        assert re.fullmatch(
            r"Iran: people eating food at home · best FAITH 0\.\d{3} · \d{4}-\d\d-\d\d \d\d:\d\d",
            card.caption,
        ), card.caption
    # the visitor's own runs are marked; another visitor sees the same cards unmarked
    assert [t["caption"] for t in thumbs] == [f"{c.caption} · yours" for c in cards]
    _, theirs = app_client(url).predict(api_name="/runs")
    assert [t["caption"] for t in theirs] == [c.caption for c in cards]
    # a roll-back's card names what it continues
    branch = {"path": cards[0].id, "k": 0, "rounds": 1, "target": 1.0, "candidates": 1, "seed": 7}
    client.submit(**branch, max_drift=2.0, api_name="/branch").result(timeout=300)
    _, thumbs = client.predict(api_name="/runs")
    parent = cards[0].id.rsplit("/", 1)[-1]
    assert thumbs[0]["caption"].endswith(f" · yours, rolled back from round 0 of {parent}")


def test_cultural_expectations_in_the_app(app_url, world):
    """The Options box asks for expectations: built from the run's prompt by the language
    model (cached inside --out), checked every round, shown in the checklist and chart."""
    from tests.ui.clients import app_client

    url, service = app_url
    client = app_client(url)
    out = start(client, rounds=1, expectations=True).result()
    assert out[0] == "finished"
    run = service.open(out[7])
    assert len(run.spec.expectations) == 5 and run.rounds[1].expectations is not None
    assert world.refs_asked.count("expectations") == 1  # asked once, for the run prompt
    assert list((service.out / "references" / "llm").rglob("*.json"))  # cached inside --out
    chart = chart_series(out[2])
    assert chart["explicit met"] == [r.expectations.explicit_met for r in run.rounds]

    def pairs_of(shown):
        return [
            (p["token"], p["class_or_confidence"]) if isinstance(p, dict) else tuple(p)
            for p in shown
        ]

    # the checklist holds what to fix (not met), the folded part under it what is met
    to_fix, checked = pairs_of(out[4]), pairs_of(out[11])
    assert {k for _, k in to_fix} - {None} <= {"missing", "hallucinated", "exaggerated", "not met"}
    assert {k for _, k in checked} - {None} <= {"aligned", "near match", "met"}
    pairs = to_fix + checked
    last = run.rounds[1].expectations
    met = sum(c.met for c in last.checks if c.kind == "implicit")
    assert (f"implicit expectations ({met}/3 met): ", None) in pairs
    assert sum(1 for _, kind in pairs if kind in ("met", "not met")) == 5
    assert sum(1 for _, kind in checked if kind == "met") == sum(c.met for c in last.checks)


def test_many_visitors_browsing_at_once_are_all_answered(app_url):
    """Forty list and open clicks at once, as a study with many raters makes: none is
    refused with "Queue is full" (Gradio's queue limit once sized for the run line held
    every event; runs wait in the app's own line, ui.line)."""
    from tests.ui.clients import app_client

    url, _ = app_url
    client = app_client(url)
    jobs = [client.submit(api_name="/runs") for _ in range(30)]
    jobs += [client.submit(api_name="/rate_sets") for _ in range(10)]
    answered, refused = 0, []
    for job in jobs:
        try:
            job.result(timeout=120)
            answered += 1
        except Exception as err:  # noqa: BLE001 - what a refused click gets
            refused.append(str(err)[:80])
    assert answered == 40 and not refused, refused[:3]


def test_a_region_and_changed_references_through_the_api(app_url, world, tmp_path):
    """At the pause, /apply takes by name a region drawn in the editor and a change of the
    references: what cannot be is refused in one line, the review still waiting; what can
    reaches the edit, the round's record and the next round's instruction."""
    import numpy as np
    from gradio_client import handle_file
    from PIL import Image, ImageDraw

    from refine.backends.regions import region_words
    from tests.ui.clients import app_client

    url, service = app_url
    client = app_client(url)
    job = start(client, rounds=2, paused=True)
    deadline = time.monotonic() + 120
    while service.job is None or service.job.waiting is None:
        assert time.monotonic() < deadline, "no instruction came up for review"
        time.sleep(0.1)
    w, h = service.job.review_image().size
    Image.new("RGB", (w, h), (9, 9, 9)).save(tmp_path / "bg.png")
    layer = Image.new("RGBA", (w, h), (0, 0, 0, 0))
    ImageDraw.Draw(layer).rectangle([w // 2, h // 2, w - 1, h - 1], fill=(255, 0, 255, 255))
    layer.save(tmp_path / "layer.png")
    layer.resize((w // 2, h // 2)).save(tmp_path / "small.png")

    def region(name):
        return {"background": handle_file(str(tmp_path / "bg.png")), "composite": None,
                "layers": [handle_file(str(tmp_path / name))]}  # fmt: skip

    text = "Put a samovar on the table."
    for given, said in (
        ({"region": region("small.png")}, f"is {w // 2}x{h // 2}, the image {w}x{h}"),
        ({"add": "objects: " + "x" * 121}, "a descriptor is at most 120 characters, got 121"),
        ({"add": "furniture: a low table"}, "is dimension: phrase, the dimension one of setting"),
        ({"remove": ["objects: Hamburgers"]}, "'Hamburgers' is no reference descriptor of objects"),
    ):
        answer = client.predict(text=text, api_name="/apply", **given)
        assert answer.startswith("error: ") and said in answer and "\n" not in answer, answer
        assert service.job.waiting is not None  # still waiting: nothing was applied
    answer = client.predict(
        text=text, region=region("layer.png"), remove=["objects: Basket of flatbreads"],
        add="objects: Brass samovar <on a tray>", api_name="/apply",
    )  # fmt: skip
    assert answer.startswith("instruction applied"), answer
    while service.job.waiting is None or service.job.waiting[0] != 2:
        assert time.monotonic() < deadline, "round 2 never came up for review"
        time.sleep(0.1)
    second = service.job.waiting[1]
    planned = service.job.review_info[1]  # the changes round 2's instruction was built from
    assert client.predict(api_name="/stop").startswith("stopping")
    job.result(timeout=120)
    run = service.open(job.outputs()[-1][7])
    r1 = run.rounds[1]
    (mine,) = r1.regions
    assert (mine.source, mine.mask) == ("by hand", "round_01_mask.png")
    assert mine.box == pytest.approx([0.5, 0.5, 1.0, 1.0], abs=1.0 / min(w, h))
    mask = np.asarray(Image.open(Path(service.resolve(job.outputs()[-1][7])) / mine.mask))
    assert mask.mean() / 255 == pytest.approx(0.25, abs=0.05)
    assert region_words([mine.box]) in world.edited[-1]
    (change,) = run.reference_changes
    assert change.source == "app" and change.round == 1
    assert [d.phrase for d in change.added] == ["Brass samovar <on a tray>"]
    # round 2's instruction was written against the visitor's references: it asks for their
    # descriptor, never for the one not wanted (shown now, it is to go)
    assert "add Brass samovar <on a tray>" in planned and "brass samovar" in second.lower()
    assert not [c for c in planned if c.startswith("add ") and "flatbread" in c.lower()]
    assert "replace Basket of flatbreads with Bowls of mast" in planned
    # kept as the visitor's own references: their next run of the pair starts from them;
    # another visitor may not keep them
    path = job.outputs()[-1][7]
    other = app_client(url)
    assert other.predict(path=path, api_name="/keep_references").startswith("error: ")
    said = client.predict(path=path, api_name="/keep_references")
    assert said.startswith("references kept for your next runs of people eating food at home")
    # a roll back copies the region's mask beside the record, with the change
    again = service.refiner().branch(service.resolve(path), 1, rounds=0)
    assert (service.resolve(path).parent / again.id / "round_01_mask.png").is_file()
    assert again.reference_changes == run.reference_changes
    found = service.find_references("people eating food at home", "Iran", service.job.owner)
    mine = found.descriptors["objects"]
    assert "Brass samovar <on a tray>" in mine and "Basket of flatbreads" not in mine
