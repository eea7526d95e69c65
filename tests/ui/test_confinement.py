"""The app reads and writes only inside its --out folder: probes from outside, through
gradio_client against a launched app, are refused and touch nothing."""

from __future__ import annotations

import json
import os
import shutil
import types
import zipfile

import pytest

from refine.service import RunService
from tests.ui.clients import (
    PROFILE,
    positional,
    rate_begin,
    rate_profile,
    rate_save,
    served,
    start,
    start_values,
)
from ui.app import build_app

# one launched app and its finished run for the module's probes (2.5 s to set up)
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def launched(gemini_env, siglip_path, tmp_path_factory):
    """One app and one finished run for the module's probes: each test checks that its
    probes change nothing, and what a test makes for itself (a copied or crafted run, a
    secret, pictures) has a name of its own. Launching an app and making a run for each
    test was 6 s of this module's 13 s."""
    from tests.conftest import in_world, loop_backends, loop_options
    from tests.ui.clients import app_client

    base = tmp_path_factory.mktemp("confinement")
    out = base / "out"
    out.mkdir()
    service = RunService(
        "gemini", out=out, backends=loop_backends(siglip_path), backend_options=loop_options()
    )
    demo = build_app(service, "test profile")
    with served(demo) as url:
        client = app_client(url)
        with in_world(gemini_env):
            start(client, rounds=1).result()
        yield client, service, service.job.run_dir, base


@pytest.fixture
def app(launched, world):
    """The module's app and run, and the folder holding --out (``out``), where a test
    may put what lies outside --out."""
    client, service, run_dir, base = launched
    assert not service.busy and service.job.run_dir == run_dir
    return launched


def beside_out(base) -> dict[str, bytes]:
    """What lies beside --out, and its bytes."""
    return {
        str(p.relative_to(base)): p.read_bytes() if p.is_file() else b""
        for p in base.rglob("*")
        if p.relative_to(base).parts[0] != "out"
    }


def secret(base):
    """A file outside --out that no probe may read or change."""
    path = base / "secret.txt"
    path.write_text("API_KEY=do-not-leak")
    os.utime(path, (1_000_000_000, 1_000_000_000))
    return path


def untouched(path):
    assert path.read_text() == "API_KEY=do-not-leak" and path.stat().st_mtime == 1_000_000_000


def test_paths_outside_out_are_refused(app):
    client, service, run_dir, base = app
    s = secret(base)
    # a copy of a real run, outside --out
    outside = base / "elsewhere"
    shutil.copytree(run_dir, outside)
    before = (outside / "run.json").read_text()
    for probe in (str(outside), "../elsewhere", str(run_dir / ".." / ".." / "elsewhere"), "/etc"):
        for args, api in (((), "/open"), ((0,), "/show"), ((1, 0), "/accept"), ((1, 0), "/reject")):
            with pytest.raises(Exception, match="is not a run of this app"):
                client.predict(probe, *args, api_name=api)
        with pytest.raises(Exception, match="no run to download yet"):
            client.predict(probe, api_name="/download")
    assert (outside / "run.json").read_text() == before  # accept/reject wrote nothing
    untouched(s)
    # a run id alone works
    assert client.predict(run_dir.name, api_name="/open")[0].startswith("run ")


def test_a_crafted_record_cannot_name_files_outside_its_folder(app):
    client, service, run_dir, base = app
    s = secret(base)
    record = json.loads((run_dir / "run.json").read_text())
    record["rounds"][0]["candidates"][0]["image"] = "../../secret.txt"
    crafted = run_dir.parent / "crafted"
    shutil.copytree(run_dir, crafted)
    (crafted / "run.json").write_text(json.dumps(record))
    with pytest.raises(Exception, match="not a file name inside the run folder"):
        client.predict("crafted", api_name="/open")  # nothing is served
    untouched(s)


def test_links_inside_a_run_folder_are_not_followed(app):
    client, service, run_dir, base = app
    s = secret(base)
    linked = run_dir.parent / "linked"
    shutil.copytree(run_dir, linked)
    run = service.open(linked)
    first = run.rounds[0].best.image
    (linked / first).unlink()
    (linked / first).symlink_to(s)  # an image that is really the secret
    (linked / "notes.txt").symlink_to(s)
    with pytest.raises(Exception, match="is a link, not an image of the run"):
        client.predict("linked", api_name="/open")
    with pytest.raises(Exception, match="no run to download yet"):
        client.predict("linked", api_name="/download")
    # a link to a run folder is refused as well
    (run_dir.parent / "alias").symlink_to(run_dir)
    with pytest.raises(Exception, match="is not a run of this app"):
        client.predict("alias", api_name="/open")
    # a good run's zip holds only its own regular files (a copy of the module's run)
    good = run_dir.parent / "good"
    shutil.copytree(run_dir, good, symlinks=True)
    (good / "notes.txt").symlink_to(s)
    archive, _ = client.predict("good", api_name="/download")
    names = zipfile.ZipFile(archive).namelist()
    assert "notes.txt" not in names and "run.json" in names
    assert all(b"do-not-leak" not in zipfile.ZipFile(archive).read(n) for n in names)
    untouched(s)


def test_start_reads_knowledge_bases_banks_and_images_from_inside_only(app, kb_dir):
    client, service, run_dir, base = app
    # kb_dir is a real knowledge base, but outside --out: refused before anything runs
    with pytest.raises(Exception, match="is not a CAIRE knowledge base inside this app"):
        start(client, rounds=1, caire_labels="Turkey", caire_kb=str(kb_dir)).result()
    for bank in ("/etc", "../elsewhere", str(base)):
        with pytest.raises(Exception, match="is not a SoS bank inside this app"):
            start(client, rounds=1, prompt_languages="fr", sos_bank=bank).result()
    assert service.job.run_dir == run_dir  # no new run began
    # an image path the client did not upload is refused by Gradio itself (raw HTTP)
    import httpx
    from PIL import Image

    s = base / "not-uploaded.png"
    Image.new("RGB", (8, 8)).save(s)
    image = {"path": str(s), "meta": {"_type": "gradio.FileData"}}
    data = positional(client, "/start", start_values(rounds=1, image=image))
    url = client.src.rstrip("/") + "/"
    event = httpx.post(url + "gradio_api/call/start", json={"data": data}).json()["event_id"]
    answer = httpx.get(url + f"gradio_api/call/start/{event}", timeout=60).text
    assert "event: error" in answer and service.job.run_dir == run_dir


def test_round_and_candidate_numbers_must_be_numbers(app):
    client, service, run_dir, base = app
    before = (run_dir / "run.json").read_text()
    for bad in ("1; rm -rf /", "nan", 1e300):
        # refused by the box itself, in one line naming it (Gradio's own conversion gave
        # "type str doesn't define __round__ method" and a server traceback)
        with pytest.raises(Exception, match=r"round: .* is (not a number|past the largest)"):
            client.predict(run_dir.name, bad, api_name="/show")
        with pytest.raises(Exception, match=r"candidate: .* is (not a number|past the large)"):
            client.predict(run_dir.name, 1, bad, api_name="/reject")
    with pytest.raises(Exception):  # noqa: B017 - no round given
        client.predict(run_dir.name, 1, None, api_name="/reject")
    assert (run_dir / "run.json").read_text() == before  # nothing was decided


def test_an_instruction_and_a_set_path_have_bounds(app):
    """The service takes an instruction of 2,000 characters and refuses one more, whoever
    calls it (the app's /apply: test_app); a 5,000-character set path is one line, not an
    OSError."""
    import queue

    from refine.service.jobs import MAX_INSTRUCTION, Job

    client, service, run_dir, base = app
    job = types.SimpleNamespace(waiting=(1, "x"), applied=None, _answers=queue.Queue())
    Job.submit_instruction(job, "y" * MAX_INSTRUCTION)
    assert job._answers.get_nowait() == "y" * MAX_INSTRUCTION
    with pytest.raises(ValueError, match=f"is {MAX_INSTRUCTION + 1:,} characters; at most 2,000"):
        Job.submit_instruction(job, "y" * (MAX_INSTRUCTION + 1))
    assert job._answers.empty()
    with pytest.raises(Exception, match="not a rating set inside this app's folder"):
        rate_begin(client, "a" * 5000, "ana")


def test_references_named_to_climb_out_stay_inside(app):
    """/save_references and /build_references with hostile activity and country names:
    what is written stays in --out/references; control characters, over-long names and
    an over-long text are refused; the form's reference line refuses them the same way."""
    from gradio_client.exceptions import AppError

    from ui.app import references_note

    client, service, _, base = app
    s = secret(base)
    beside = beside_out(base)
    body = {"headers": ["dimension", "phrase"], "data": [["objects", "Sabzeh sprouts"]]}
    note = client.predict("../../../secret", "../..", body, api_name="/save_references")
    assert "references saved" in note
    written = [p for p in (base / "out" / "references").rglob("*") if p.is_file()]
    assert len(written) == 1 and ".." not in written[0].name
    assert beside_out(base) == beside  # nothing written beside --out
    for act, ctry in (("tea\x00time", "Iran"), ("x" * 121, "Iran"), ("tea", "Ir\x07an")):
        with pytest.raises(AppError, match="printable text of at most 120 characters"):
            client.predict(act, ctry, body, api_name="/save_references")
        with pytest.raises(AppError, match="printable text of at most 120 characters"):
            client.predict(act, ctry, api_name="/build_references")
        note, missing = references_note(service, act, ctry)
        assert "printable text of at most 120" in note and missing is False
    # a hostile table: too many rows, a row of three cells, a phrase with a control
    # character; nothing is written
    before = sorted(p.name for p in (base / "out" / "references").rglob("*"))
    for table, match in (
        ([["objects", "x" * 100]] * 501, "a table of at most 500 rows"),
        ([["objects", "tea", "pot"]], "a dimension and a phrase|columns|header"),
        ([["objects", "tea\x07pot"]], "row 1: the phrase must be printable"),
    ):
        with pytest.raises(AppError, match=match):
            body = {"headers": ["dimension", "phrase"], "data": table}
            client.predict("tea", "Iran", body, api_name="/save_references")
    after = sorted(p.name for p in (base / "out" / "references").rglob("*"))
    assert after == before
    # markup in a name is shown as text, never as HTML
    note, _ = references_note(service, "<img src=x onerror=alert(1)>", "Iran")
    assert "<img" not in note and "&lt;img" in note
    untouched(s)


def test_rating_probes_stay_inside_out(app):
    """The Rate view: sets outside --out, images not in the set, bad raters and answers
    are refused, write nothing, and a run of the app can be rated."""
    client, service, run_dir, base = app
    s = secret(base)
    (base / "pics").mkdir()
    from PIL import Image

    Image.new("RGB", (8, 8), (1, 2, 3)).save(base / "pics" / "a.png")
    for where in (str(base / "pics"), "../pics", "/etc", str(s)):
        with pytest.raises(Exception, match="not a rating set inside this app's folder"):
            rate_begin(client, where, "ana")
    assert not (base / "pics" / "ratings.jsonl").exists()
    run_id = run_dir.name
    with pytest.raises(Exception, match="unknown protocol|not in the list of choices"):
        rate_begin(client, run_id, "ana", "../../secret")
    first = rate_begin(client, run_id, "ana")
    assert "give your profile and consent to begin" in first[0]
    with pytest.raises(Exception, match="consent"):
        rate_profile(client, run_id, "ana", PROFILE[:-1] + (False,))
    shown = rate_profile(client, run_id, "ana")
    assert shown[0].startswith("Thank you. 0 of 3 rated by ana")  # round 0, round 1 two candidates
    item = shown[-2]
    nothing = [None, [], "", ""] * 8
    for bad_item in ("../../secret.txt", "/etc/passwd", "nothing.png"):
        with pytest.raises(Exception, match="is not the image you are shown now"):
            client.predict(run_id, "ana", bad_item, "rate", *nothing, api_name="/rate_save")
    with pytest.raises(Exception, match="is not the image you are shown now"):
        client.predict(run_id, "ana", item, "attention", *nothing, api_name="/rate_save")
    with pytest.raises(Exception, match="rater name must be printable"):
        client.predict(run_id, "a\x00b", item, "rate", *nothing, api_name="/rate_save")
    with pytest.raises(Exception, match="is not one of 1, 2, 3, 4, 5|not in the list of choices"):
        rate_save(client, run_id, "ana", shown, {0: "9", 2: "4"})
    with pytest.raises(Exception, match="is not among the choices|not in the list of choices"):
        rate_save(client, run_id, "ana", shown, {0: "3", 1: (None, ["<script>"], "", ""), 2: "4"})
    with pytest.raises(Exception, match="answer: How culturally faithful"):
        rate_save(client, run_id, "ana", shown, {0: "3"})
    assert not (run_dir / "ratings.jsonl").exists()
    done = rate_save(client, run_id, "ana", shown, {0: "3", 2: ("4", [], "", "fine")})
    assert done[0].startswith("Saved. 1 of 3 rated by ana")
    (row,) = [json.loads(x) for x in (run_dir / "ratings.jsonl").read_text().splitlines()]
    assert row["image"] == item and row["answers"] == {"alignment": "3", "faithfulness": "4"}
    assert row["reasons"] == {"faithfulness": "fine"} and row["protocol"] == "quick"
    # the page's condition handler is no endpoint of the API
    endpoints = client.view_api(print_info=False, return_format="dict")["named_endpoints"]
    assert not [e for e in endpoints if e.startswith("/answer")], sorted(endpoints)
    assert {"/rate_begin", "/rate_profile", "/rate_save"} <= set(endpoints)
    untouched(s)


def test_a_set_holding_another_visitors_run_is_refused_at_any_depth(app):
    """Another visitor cannot rate (and so see) a run of someone else's by naming a folder
    that holds it, at any depth, the app's folder itself included; its owner can. No
    refusal names the server's path."""
    from tests.ui.clients import app_client

    client, service, run_dir, base = app
    deep = service.out / "deep"
    shutil.copytree(run_dir, deep / "er" / "copied")  # with its owner: the first client
    try:
        other = app_client(client.src)  # another visitor
        for where in (".", "deep", "deep/er", "deep/er/copied", str(deep), run_dir.name):
            with pytest.raises(Exception, match="another visitor") as refused:
                rate_begin(other, where, "bo")
            assert str(base) not in str(refused.value) and str(base.resolve()) not in str(
                refused.value
            )
        assert not [p for p in service.out.rglob(".raters.json") if "bo" in p.read_text()]
        assert "give your profile" in rate_begin(client, "deep/er", "ana")[0]
        # the SoS protocol on a folder that is no SoS bank: refused at Begin, before the
        # rater's profile (it was after the rater filled it in)
        (deep / "pics").mkdir()
        from PIL import Image

        Image.new("RGB", (8, 8), (1, 2, 3)).save(deep / "pics" / "a.png")
        with pytest.raises(Exception, match="the sos protocol rates images of an SoS bank"):
            rate_begin(other, "deep/pics", "bo", "sos")
        with pytest.raises(Exception, match="not a rating set") as refused:
            rate_begin(other, str(base / "nowhere" / "at-all"), "bo")
        assert str(base) not in str(refused.value) and "'at-all'" in str(refused.value)
    finally:
        shutil.rmtree(deep)
