"""Gemini requests as batch jobs: the real google-genai client against the stand-in's Batch
API (POST models/M:batchGenerateContent, GET batches/N)."""

from __future__ import annotations

import threading
import time

import pytest

from refine.backends.gemini import GeminiClient, GeminiError
from refine.backends.gemini_batch import JOURNAL, Batcher, BatchJobError, batching
from tests.fakes.gemini_server import FakeGemini, text_answer


def echo(path: str, body: dict):
    """Each request answered with its own text, or refused where it asks for "refuse"."""
    text = body["contents"][0]["parts"][0]["text"]
    if text == "refuse":
        return 400, {"error": {"code": 400, "message": "bad request", "status": "INVALID"}}
    return 200, text_answer(f"answer to {text}")


@pytest.fixture
def fake():
    server = FakeGemini().start()
    server.handler = echo
    yield server
    server.stop()


@pytest.fixture
def client(fake):
    return GeminiClient(api_key="test-key", base_url=fake.url, max_retries=0)


def ask_all(client: GeminiClient, texts: list[str], model: str = "gemini-3.8-flash"):
    """Each text asked on a thread of its own: (answers or errors) in order."""
    from google.genai import types

    out: list = [None] * len(texts)

    def one(k: int) -> None:
        config = types.GenerateContentConfig(response_mime_type="text/plain")
        try:
            response = client.generate(model, [texts[k]], config, "ask")
            out[k] = response.candidates[0].content.parts[0].text
        except Exception as err:
            out[k] = err

    threads = [threading.Thread(target=one, args=(k,)) for k in range(len(texts))]
    for t in threads:
        t.start()
    return threads, out


def until(condition, give_up_s: float = 20.0) -> None:
    end = time.monotonic() + give_up_s
    while not condition():
        assert time.monotonic() < end, "gave up waiting"
        time.sleep(0.01)


def test_requests_that_come_together_are_one_job(fake, client, tmp_path, monkeypatch):
    """Four threads' requests (one asked twice) make one job of three keyed requests, each
    thread gets its own answer, and nothing went out live; the request keeps its store."""
    monkeypatch.setenv("REFINE_GEMINI_BATCH_POLL_S", "0.02")
    monkeypatch.setenv("REFINE_GEMINI_BATCH_GATHER_S", "0.15")
    with batching(tmp_path) as batcher:
        threads, out = ask_all(client, ["a", "b", "c", "a"])
        for t in threads:
            t.join(30)
    assert out == ["answer to a", "answer to b", "answer to c", "answer to a"]
    assert len(fake.batches) == 1 and batcher.created == list(fake.batches)
    (job,) = fake.batches.values()
    assert len(job["requests"]) == 3 and job["model"] == "gemini-3.8-flash"
    assert {r["request"]["store"] for r in job["requests"]} == {False}
    assert all(p.endswith(":batchGenerateContent") for p in fake.paths)  # none live
    assert len(fake.batch_gets) >= 2  # polled while it ran, then read
    assert [c.purpose for c in client.calls] == ["ask"] * 4
    assert client.model_version("gemini-3.8-flash") == "gemini-3.8-flash"


def test_a_rerun_reads_the_job_it_sent_instead_of_sending_it_again(
    fake, client, tmp_path, monkeypatch
):
    """A task killed while its job waits: the journal holds the job's name and keys, so the
    same requests asked again wait on that job; one new request goes in a job of its own."""
    monkeypatch.setenv("REFINE_GEMINI_BATCH_POLL_S", "0.02")
    monkeypatch.setenv("REFINE_GEMINI_BATCH_GATHER_S", "0.15")
    fake.batch_hold = True
    with batching(tmp_path):
        threads, out = ask_all(client, ["a", "b"])
        until(lambda: len(fake.batch_gets) >= 2)  # sent, and polled while it runs
    for t in threads:  # the task ends: its threads stop waiting
        t.join(30)
    assert all(isinstance(e, GeminiError) for e in out)
    assert (tmp_path / JOURNAL).is_file() and len(fake.batches) == 1
    fake.batch_hold = False
    with batching(tmp_path) as again:
        threads, out = ask_all(client, ["a", "b", "c"])
        for t in threads:
            t.join(30)
    assert out == ["answer to a", "answer to b", "answer to c"]
    first = next(iter(fake.batches))
    assert again.resumed == [first] and len(again.created) == 1 and len(fake.batches) == 2
    assert len(fake.batches[again.created[0]]["requests"]) == 1  # "c" alone


@pytest.mark.slow
def test_a_failed_job_and_a_refused_request_fail_their_requests(fake, client, tmp_path):
    batcher = Batcher(tmp_path / JOURNAL, poll_s=0.02, gather_s=0.2)
    try:
        from refine.backends import gemini_batch

        gemini_batch._ACTIVE.append(batcher)
        threads, out = ask_all(client, ["fine", "refuse"])
        for t in threads:
            t.join(30)
        assert out[0] == "answer to fine"
        assert isinstance(out[1], GeminiError) and out[1].code == 400
        assert "bad request" in str(out[1])
        fake.batch_fail = "EXPIRED"
        threads, out = ask_all(client, ["late"])
        for t in threads:
            t.join(30)
        # one GeminiError, as a live call's failure is (it was a traceback in a bench)
        assert isinstance(out[0], GeminiError) and "ended expired" in str(out[0])
        assert isinstance(out[0].__cause__, BatchJobError)
    finally:
        gemini_batch._ACTIVE.remove(batcher)
        batcher.close()


@pytest.fixture
def installed(tmp_path):
    """A batcher of this test's own (fast polls, a short quiet window), installed."""
    from refine.backends import gemini_batch

    batchers = []

    def make(gather_s: float = 0.15) -> Batcher:
        batcher = Batcher(tmp_path / JOURNAL, poll_s=0.02, gather_s=gather_s)
        gemini_batch._ACTIVE.append(batcher)
        batchers.append(batcher)
        return batcher

    yield make
    for batcher in batchers:
        gemini_batch._ACTIVE.remove(batcher)
        batcher.close()


def asked(client: GeminiClient, texts: list[str]) -> list:
    threads, out = ask_all(client, texts)
    for t in threads:
        t.join(30)
    return out


@pytest.mark.slow
def test_a_rerun_sends_again_what_a_failed_job_held(fake, client, installed):
    """An expired job fails its requests; the next run sends them again in a new job (with
    the run's other requests), and never reads the expired one again."""
    fake.batch_fail = "EXPIRED"
    first = installed()
    assert isinstance(asked(client, ["a"])[0], GeminiError)
    first.close()
    fake.batch_fail = None
    again = installed()
    assert asked(client, ["a", "b"]) == ["answer to a", "answer to b"]
    assert again.resumed == [] and len(again.created) == 1
    assert len(fake.batches[again.created[0]]["requests"]) == 2


def test_a_job_stays_under_the_apis_size_limit(fake, client, installed):
    batcher = installed(gather_s=0.15)
    batcher.max_bytes = 2_100  # two requests a job (about 1 kB each, as weighed)
    assert asked(client, ["a", "b", "c"]) == ["answer to a", "answer to b", "answer to c"]
    assert sorted(len(fake.batches[n]["requests"]) for n in batcher.created) == [1, 2]


@pytest.mark.slow
def test_a_failed_poll_is_polled_again_and_a_spent_quota_is_said(fake, client, installed):
    from refine.usage import QuotaSpent
    from tests.fakes.gemini_server import PER_DAY, quota_answer

    installed()
    fake.batch_get_errors = 2  # two polls answered 503: polled again
    assert asked(client, ["a"]) == ["answer to a"]
    fake.batch_refusal = quota_answer("gemini-3.8-flash", PER_DAY, "250", None)
    (said,) = asked(client, ["b"])
    assert isinstance(said, QuotaSpent) and "its daily request quota is spent" in str(said)


def test_what_was_not_sent_ends_with_the_task(fake, client, installed):
    batcher = installed(gather_s=30.0)  # nothing is sent before the task ends
    threads, out = ask_all(client, ["a"])
    until(lambda: bool(batcher._queue))
    batcher.close()
    threads[0].join(30)
    assert isinstance(out[0], GeminiError) and "before its batch was sent" in str(out[0])
    assert asked(client, ["b"])[0].args[0].endswith("nothing more is sent")
    assert not fake.batches


@pytest.mark.parametrize("state", ["FAILED", "EXPIRED"])
def test_a_job_that_fails_or_expires_fails_its_requests_in_one_line(fake, client, installed, state):
    """A job that ends FAILED or EXPIRED: each of its requests a GeminiError naming the
    job and its state (a bench said it as a traceback), none waiting after it."""
    installed()
    fake.batch_fail = state
    out = asked(client, ["a", "b"])
    for err in out:
        assert isinstance(err, GeminiError) and f"ended {state.lower()}" in str(err)
        assert "\n" not in str(err)


def test_a_garbage_answer_fails_its_requests_and_never_hangs(fake, client, installed):
    """A finished job whose answers are of the wrong shape (strings where the API gives
    objects, a metadata that is no object): every request fails with one line naming the
    job and that the same command reads it again; no request waits on (it hung when the
    gathering thread died)."""
    batcher = installed()
    batcher.poll_failures = 2
    fake.batch_garbage = ["not an answer", 7]
    out = asked(client, ["a"])
    assert isinstance(out[0], GeminiError) and "could not be read" in str(out[0])
    assert "the same command reads the job again" in str(out[0])
    fake.batch_garbage = [{"metadata": "no object", "response": {"candidates": "x"}}]
    out = asked(client, ["b"])
    assert isinstance(out[0], GeminiError) and "\n" not in str(out[0])


def test_a_journal_not_of_its_shape_is_refused_in_one_line(tmp_path):
    """A journal that is JSON but not of its shape, a folder, or nested past reading: a
    ValueError naming the file and what to do, before anything is sent (a wrong shape hung
    a bench with 0 requests sent; a folder gave a traceback)."""
    journal = tmp_path / JOURNAL
    bad = {
        '{"jobs": []}': 'no "jobs" object',
        '{"jobs": {"batches/1": "x"}}': "job 'batches/1' is not an object",
        '{"jobs": {"batches/1": {"keys": ["k"]}}}': "job 'batches/1' names no \"model\"",
        '{"jobs": {"batches/1": {"model": "m", "keys": "k"}}}': '"keys" is not a list',
        '{"jobs": {"batches/1": {"model": "m", "keys": [], "failed": [null]}}}': '"failed"',
        "[1, 2]": 'no "jobs" object',
        "[" * 100_000 + "]" * 100_000: "not a batch journal (",
    }
    for text, said in bad.items():
        journal.write_text(text)
        with pytest.raises(ValueError) as err:
            Batcher(journal)
        assert str(err.value).startswith(f"{journal}: not a batch journal")
        assert said in str(err.value) and "move it away" in str(err.value)
        assert "\n" not in str(err.value)
    journal.unlink()
    journal.mkdir()
    with pytest.raises(ValueError, match="not a batch journal .*Is a directory"):
        Batcher(journal)
    journal.rmdir()
    journal.write_text('{"jobs": {"batches/1": {"model": "m", "keys": ["k"], "state": "X"}}}')
    batcher = Batcher(journal)  # of its shape: read
    try:
        assert batcher._jobs == {"batches/1": {"model": "m", "keys": ["k"], "state": "X"}}
    finally:
        batcher.close()


def test_image_jobs_hold_at_most_the_cap_of_image_answers(tmp_path):
    """2,560 image requests (256 cells of 10 images; short text each, so the bytes' cap
    let them all into one job) go out through a stub client as jobs of at most 100 image
    answers; text requests are not counted against it."""
    from google.genai import types

    from refine.backends.gemini_batch import MAX_IMAGE_ANSWERS, _Waiting

    class Stub:
        def __init__(self):
            self.jobs: list[int] = []

        def batch_create(self, model, inlined, display):
            self.jobs.append(len(inlined))
            return f"batches/{len(self.jobs)}"

    draw = types.GenerateContentConfig(response_modalities=["IMAGE", "TEXT"], seed=1)
    read = types.GenerateContentConfig(response_mime_type="application/json")
    batcher = Batcher(tmp_path / JOURNAL)
    try:
        images = {f"i{k}": [_Waiting([f"a family dinner {k}"], draw)] for k in range(2560)}
        stub = Stub()
        for chunk in batcher._chunks(list(images), images):
            batcher._create(stub, "gemini-3.1-flash-lite-image", chunk, images)
        assert MAX_IMAGE_ANSWERS == 100 and stub.jobs == [100] * 25 + [60]
        texts = {f"t{k}": [_Waiting([f"describe {k}"], read)] for k in range(2560)}
        assert [len(c) for c in batcher._chunks(list(texts), texts)] == [2560]
    finally:
        batcher.close()


def test_a_kill_right_after_a_jobs_creation_sends_no_second_job(fake, client, installed):
    """The journal names a job by its display name before it is sent: a process killed
    between the API's answer and the job's entry leaves that name, by which the rerun
    finds the job (batches.list) and reads it, sending nothing twice."""
    import json

    from refine.backends.gemini_batch import PENDING

    first = installed()
    made = client.batch_create

    def killed(*args):  # the job is made at the API; its answer never comes back (as
        made(*args)  # for a process killed before the job's entry)
        raise ConnectionResetError("the answer was lost")

    client.batch_create = killed
    out = asked(client, ["a", "b"])
    assert all(isinstance(e, ConnectionResetError) for e in out) and len(fake.batches) == 1
    first.close()
    journal = json.loads(first.journal.read_text())["jobs"]
    ((entry, job),) = journal.items()
    assert entry.startswith(PENDING) and job["display"] == entry.removeprefix(PENDING)
    assert job["display"] == next(iter(fake.batches.values()))["display"]
    client.batch_create = made
    fake.batches["batches/other"] = {**next(iter(fake.batches.values())), "display": "x"}
    again = installed()
    assert asked(client, ["a", "b"]) == ["answer to a", "answer to b"]
    assert again.created == [] and again.resumed == ["batches/stand-in-1"]
    assert len(fake.batches) == 2  # the first job and the stand-in's other: none sent again
    journal = json.loads(again.journal.read_text())["jobs"]
    assert list(journal) == ["batches/stand-in-1"] and journal["batches/stand-in-1"]["keys"]


def test_a_job_whose_reads_fail_is_read_again_by_the_same_command(fake, client, installed):
    """A job whose polls keep failing fails its requests in one line, as the job's own
    failure (a bench's cells fail, and the bench goes on); the journal keeps it, and the
    next run reads it instead of sending a second job."""
    from refine.backends.loading import JobFailure

    batcher = installed()
    batcher.poll_failures = 2
    fake.batch_get_errors = 2
    (err,) = asked(client, ["a"])
    assert isinstance(err, GeminiError) and "HTTP 503" in str(err) and "\n" not in str(err)
    assert isinstance(err, JobFailure) and "could not be read after 2 polls" in str(err)
    assert "the same command reads the job again" in str(err)
    batcher.close()
    again = installed()
    assert asked(client, ["a"]) == ["answer to a"]
    assert again.created == [] and again.resumed == batcher.created and len(fake.batches) == 1


def drawn(client: GeminiClient, seeds: list[int]) -> list:
    """An image asked for each seed, each on a thread of its own: the first bytes of each
    image (or the error)."""
    from google.genai import types

    out: list = [None] * len(seeds)

    def one(k: int) -> None:
        config = types.GenerateContentConfig(response_modalities=["IMAGE", "TEXT"], seed=seeds[k])
        try:
            answer = client.generate("gemini-nano-banana-2.1", [f"draw {seeds[k]}"], config, "d")
            out[k] = answer.candidates[0].content.parts[0].inline_data.data[:8]
        except Exception as err:
            out[k] = err

    threads = [threading.Thread(target=one, args=(k,)) for k in range(len(seeds))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    return out


@pytest.mark.slow  # about 2 s: two image jobs and a text job, each polled and read
def test_image_jobs_go_as_files_under_the_cap_and_are_read_again_when_reads_fail(
    fake, client, installed, tmp_path, monkeypatch
):
    """Through the real client and the stand-in's Batch and Files APIs. With the image cap
    at 2, three image requests make two jobs, and each request gets its own image. On the
    developer API an image job's requests are uploaded as a JSON Lines file (each line the
    request an inline job sends) and its answers are read back from a file, a part at a
    time: a read answered 503 and one cut off half-way are read again. A job whose answers
    cannot be read after its tries fails its requests in one line naming the job; the next
    run reads it without sending a second job. Text jobs stay inline, and nothing is left
    beside the journal."""
    import json

    from tests.fakes.gemini_server import image_answer, png_bytes

    png = b"\x89PNG\r\n\x1a\n"
    fake.handler = lambda path, body: (
        (200, image_answer(png_bytes())) if "responseModalities" in str(body) else echo(path, body)
    )
    first = installed()
    first.max_images = 2
    fake.download_errors, fake.download_cuts = 1, 1
    assert drawn(client, [1, 2, 3]) == [png] * 3
    jobs = [fake.batches[n] for n in first.created]
    assert sorted(len(job["requests"]) for job in jobs) == [1, 2]
    assert all(job["file"] for job in jobs)
    # each job's uploaded requests deleted once it is done; its answers kept to be read again
    assert sorted(fake.deleted) == sorted(job["file"] for job in jobs)
    assert not set(fake.deleted) & set(fake.files)
    assert sum(p.endswith("/files") for p in fake.paths) == 4  # two uploads: start, bytes
    # one read cut off half-way and read again, after one answered 503
    assert sorted(fake.downloads) == sorted([j["answers_file"] for j in jobs] + [fake.downloads[0]])
    assert asked(client, ["a"]) == ["answer to a"]
    assert not fake.batches[first.created[-1]]["file"]  # text: inline
    # a line's request is the request an inline job sends
    client.batch_files = lambda: False
    assert drawn(client, [4]) == [png]
    del client.batch_files
    inline = fake.batches[first.created[-1]]["requests"][0]
    line = next(r for j in jobs for r in j["requests"] if "draw 1" in json.dumps(r))
    assert set(line) == {"key", "request"} and set(inline) == {"request", "metadata"}
    said = json.dumps(line["request"]).replace("draw 1", "draw 4").replace('"seed": 1', '"seed": 4')
    assert inline["request"] == json.loads(said)
    # reads that keep failing: the requests fail in one line, the journal keeps the job
    fake.download_errors = 3
    (err,) = drawn(client, [5])
    assert isinstance(err, GeminiError) and "\n" not in str(err)
    assert "could not be read after 3 tries" in str(err) and "HTTP 503" in str(err)
    assert "the same command reads the job again" in str(err)
    failed = first.created[-1]
    first.close()
    again = installed()
    assert drawn(client, [5]) == [png]
    assert again.created == [] and again.resumed == [failed]
    assert sorted(p.name for p in tmp_path.iterdir()) == [JOURNAL]
    # a job refused at its creation (a spent quota, a 4xx): its uploaded requests deleted
    from tests.fakes.gemini_server import error_answer

    fake.batch_refusal = error_answer(400, "INVALID_ARGUMENT", "bad job")
    (err,) = drawn(client, [7])
    assert isinstance(err, GeminiError) and "bad job" in str(err)
    uploaded = [n for n in fake.files if n.startswith("files/stand-in-")]
    assert not uploaded and fake.deleted[-1].startswith("files/stand-in-")
    fake.batch_refusal = None
    # a google-genai that cannot stream a download: said before any job is sent
    monkeypatch.setattr(client.client().files, "download", lambda *, file, config=None: b"")
    jobs = len(fake.batches)
    (err,) = drawn(client, [6])
    assert "cannot send image batch jobs as files" in str(err) and "pip install -U" in str(err)
    assert len(fake.batches) == jobs
