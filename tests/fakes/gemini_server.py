"""A local HTTP server that answers like the Gemini API, for the real google-genai client.

Tests queue answers (JSON bodies, HTTP errors, delays) and read back the requests the
client sent. The server listens on 127.0.0.1 only.
"""

from __future__ import annotations

import base64
import io
import json
import re
import socket
import threading
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.fakes.serving import json_reply


def png_bytes(color=(200, 30, 30), size=(16, 12)) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", size, color).save(buf, format="PNG")
    return buf.getvalue()


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def usage(prompt=11, out=7, thoughts=0) -> dict:
    """An answer's usageMetadata: a thinking model's thoughts are counted apart from its
    answer's tokens, and in the total (google-genai's GenerateContentResponseUsageMetadata)."""
    said = {
        "promptTokenCount": prompt,
        "candidatesTokenCount": out,
        "totalTokenCount": prompt + out + thoughts,
    }
    if thoughts:
        said["thoughtsTokenCount"] = thoughts
    return said


THOUGHTS = 12  # the thought tokens of every text answer (billed as output)


def text_answer(
    text: str,
    finish="STOP",
    logprobs: dict[str, float] | None = None,
    positions: list[tuple[str, dict[str, float]]] | None = None,
) -> dict:
    """A text answer; ``logprobs`` gives its one token's most likely alternatives, or
    ``positions`` (chosen token, alternatives) for each token of a longer answer."""
    cand: dict[str, Any] = {
        "content": {"role": "model", "parts": [{"text": text}]},
        "finishReason": finish,
    }
    if logprobs is not None:
        positions = [(text, logprobs)]
    if positions is not None:
        cand["logprobsResult"] = {
            "topCandidates": [
                {"candidates": [{"token": t, "logProbability": lp} for t, lp in top.items()]}
                for _, top in positions
            ],
            "chosenCandidates": [
                {"token": chosen, "logProbability": top.get(chosen, max(top.values()))}
                for chosen, top in positions
            ],
        }
    return {"candidates": [cand], "usageMetadata": usage(thoughts=THOUGHTS)}


def bare_answer(finish: str) -> dict:
    """An answer that ends with ``finish`` and no content, as the API sends a block or an
    empty answer of any finish reason (the candidate has no ``content``)."""
    return {"candidates": [{"finishReason": finish, "index": 0}], "usageMetadata": usage(11, 0)}


def image_answer(data: bytes, text: str | None = None) -> dict:
    parts: list[dict] = []
    if text:
        parts.append({"text": text})
    parts.append({"inlineData": {"mimeType": "image/png", "data": b64(data)}})
    return {
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP"}],
        "usageMetadata": usage(20, 1290),
    }


def error_answer(code: int, status: str, message: str) -> tuple[int, dict]:
    return code, {"error": {"code": code, "message": message, "status": status}}


PER_DAY = "GenerateRequestsPerDayPerProjectPerModel-FreeTier"
PER_MINUTE = "GenerateRequestsPerMinutePerProjectPerModel-FreeTier"


def quota_answer(
    model: str, quota_id: str = PER_MINUTE, limit: str = "10", retry_delay: str | None = "1s"
) -> tuple[int, dict]:
    """A 429 as the Gemini API words it: RESOURCE_EXHAUSTED with a QuotaFailure violation,
    a Help link and (where given) a RetryInfo delay; the message repeats the delay."""
    metric = "generativelanguage.googleapis.com/generate_content_free_tier_requests"
    message = (
        "You exceeded your current quota, please check your plan and billing details. For "
        "more information on this error, head to: https://ai.google.dev/gemini-api/docs/"
        f"rate-limits.\n* Quota exceeded for metric: {metric}, limit: {limit}, model: {model}"
    )
    details: list[dict] = [
        {
            "@type": "type.googleapis.com/google.rpc.QuotaFailure",
            "violations": [
                {
                    "quotaMetric": metric,
                    "quotaId": quota_id,
                    "quotaDimensions": {"location": "global", "model": model},
                    "quotaValue": limit,
                }
            ],
        },
        {
            "@type": "type.googleapis.com/google.rpc.Help",
            "links": [
                {
                    "description": "Learn more about Gemini API quotas",
                    "url": "https://ai.google.dev/gemini-api/docs/rate-limits",
                }
            ],
        },
    ]
    if retry_delay is not None:
        message += f"\nPlease retry in {retry_delay}."
        details.append(
            {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": retry_delay}
        )
    body = {
        "error": {
            "code": 429,
            "message": message,
            "status": "RESOURCE_EXHAUSTED",
            "details": details,
        }
    }
    return 429, body


@dataclass
class Reply:
    status: int = 200
    body: dict = field(default_factory=dict)
    delay_s: float = 0.0
    raw: bytes | None = None  # a garbage answer: these bytes, not the body as JSON
    kind: str = "application/json"


# the models the fake API offers (GET /models): today's and the 2.5 ones tests name
CATALOG = (
    "gemini-nano-banana-2.1",
    "gemini-3.1-flash-image",
    "gemini-3-pro-image",
    "gemini-3.1-flash-lite-image",
    "gemini-3.8-flash",
    "gemini-3.5-flash",
    "gemini-3.1-flash-lite",
    "gemini-3.1-pro-preview",
    "gemini-2.5-flash",
    "gemini-2.5-flash-image",
    "gemini-2.5-pro",
)


# "gemini-3.6-flash" and later, "gemini-3.5-flash-lite" and later: they fix their own
# sampling. The API documents temperature, top_p and top_k as deprecated and ignored for
# them; the stand-in refuses a request that carries one (HTTP 400, as the API may come
# to), so that no test passes while a request still sends one
FIXED_SAMPLING = re.compile(r"gemini-(?:3\.(?:[6-9]|\d\d)|3\.5-flash-lite|[4-9]\.)")
SAMPLING = ("temperature", "topP", "topK", "top_p", "top_k")


def sampling_refused(path: str, body: dict) -> tuple[int, dict] | None:
    model = path.rsplit("/", 1)[-1].split(":")[0]
    config = body.get("generationConfig") or {}
    sent = [k for k in SAMPLING if k in config]
    if sent and FIXED_SAMPLING.match(model):
        message = f"{', '.join(sent)} is not supported for {model}: it fixes its sampling"
        return error_answer(400, "INVALID_ARGUMENT", message)
    return None


def model_entry(name: str) -> dict:
    return {
        "name": f"models/{name}",
        "displayName": name,
        "supportedGenerationMethods": ["generateContent", "countTokens"],
    }


class StandInServer(ThreadingHTTPServer):
    """A threading HTTP server that takes a burst of connections: with the standard
    library's backlog of 5, a bench's 24 requests at once could find their connections
    reset (seen once as a ReadError in benchmarks/bench_in_flight.py)."""

    request_queue_size = 128
    daemon_threads = True


class FakeGemini:
    def __init__(self) -> None:
        self.replies: deque[Reply] = deque()
        self.requests: list[dict] = []
        self.paths: list[str] = []
        self.models: list[str] = list(CATALOG)
        self.model_gets: list[str] = []  # GET paths (model checks), apart from requests
        # when set, answers every request: handler(path, body) -> (status, body)
        self.handler = None
        self._server: ThreadingHTTPServer | None = None
        # requests being answered now, and the most at once since the last reset
        self.in_flight = 0
        self.peak_in_flight = 0
        self._flight = threading.Lock()
        self._flight_changed = threading.Condition(self._flight)
        self._hold_until = 0  # see held_until_in_flight
        self._hold_give_up_s = 0.0
        # model asked for -> the ``modelVersion`` its answers name (else the model's name)
        self.served_as: dict[str, str] = {}
        # batch jobs (the Batch API): name -> {"model", "requests", "state", "gets", ...}
        self.batches: dict[str, dict] = {}
        self.batch_gets: list[str] = []  # GET paths of batch jobs (polls)
        self.batch_polls = 1  # GETs of a job that answer it is running, before it is done
        self.batch_hold = False  # jobs stay running (a task killed while it waits)
        self.batch_fail: str | None = None  # a state every job ends in instead ("FAILED")
        self.batch_get_errors = 0  # the next GETs of a job answered 503 (a poll that fails)
        self.batch_refusal: tuple[int, dict] | None = None  # the answer to a job's creation
        # a finished job's answers replaced by this (the API's shape, its entries garbage)
        self.batch_garbage: list | None = None
        self._batch_lock = threading.Lock()
        # the Files API (a job's requests and answers as JSON Lines): name -> bytes; uploads
        # under way: id -> {"meta", "data"}; the next downloads answered 503, or cut short
        # after half their bytes (the connection dropped)
        self.files: dict[str, bytes] = {}
        self._uploads: dict[str, dict] = {}
        self.download_errors = 0
        self.download_cuts = 0
        self.downloads: list[str] = []  # names of the files downloaded, in order
        self.deleted: list[str] = []  # names of the files deleted, in order

    def reset_peak(self) -> None:
        with self._flight:
            self.peak_in_flight = self.in_flight

    @contextmanager
    def held_until_in_flight(self, n: int, give_up_s: float = 60.0) -> Iterator[None]:
        """Hold every request until ``n`` are in flight at once, then answer them all: a
        client that keeps ``n`` calls going reaches ``n`` however loaded the machine, with
        no latency to guess. One that never does is released after ``give_up_s`` once, and
        its requests are answered at once from then on (the peak says how many it had)."""
        with self._flight:  # counted from now: an earlier test's peak releases nothing
            self.peak_in_flight = self.in_flight
            self._hold_until, self._hold_give_up_s = n, give_up_s
        try:
            yield
        finally:
            with self._flight:
                self._hold_until = 0
                self._flight_changed.notify_all()

    # queueing
    # -- the Batch API: POST models/M:batchGenerateContent, GET batches/N ------------------

    def answer(self, path: str, body: dict) -> Reply:
        """A generateContent request's answer: refused, queued or the handler's."""
        refused = sampling_refused(path, body)
        if refused is not None:
            return Reply(*refused)
        if self.handler is not None and not self.replies:
            reply = Reply(*self.handler(path, body))
        elif not self.replies:
            return Reply(*error_answer(500, "INTERNAL", "no reply queued"))
        else:
            reply = self.replies.popleft()
        if reply.status == 200 and "candidates" in reply.body:
            model = path.rsplit("/", 1)[-1].split(":")[0]
            version = self.served_as.get(model, model)
            reply = Reply(200, {"modelVersion": version, **reply.body}, reply.delay_s)
        return reply

    def _create_batch(self, path: str, body: dict) -> tuple[int, dict]:
        model = path.rsplit("/", 1)[-1].split(":")[0]
        if self.batch_refusal is not None:
            return self.batch_refusal
        batch = body.get("batch") or {}
        source = batch.get("inputConfig") or {}
        by_file = source.get("fileName")
        if by_file is not None:  # JSON Lines of {"key", "request"}, uploaded before
            if by_file not in self.files:
                return error_answer(400, "INVALID_ARGUMENT", f"{by_file} is not found")
            lines = self.files[by_file].decode("utf-8").splitlines()
            items = [json.loads(line) for line in lines if line.strip()]
        else:
            items = (source.get("requests") or {}).get("requests")
        if not isinstance(items, list) or not items:
            return error_answer(400, "INVALID_ARGUMENT", "batch.input_config: no requests")
        with self._batch_lock:
            name = f"batches/stand-in-{len(self.batches) + 1}"
            self.batches[name] = {
                "model": model, "requests": items, "state": "BATCH_STATE_PENDING", "gets": 0,
                "display": batch.get("displayName", ""), "output": None, "file": by_file,
            }  # fmt: skip
        return 200, self._batch_body(name)

    # -- the Files API: a resumable upload, and a download of a job's answers -------------

    def _start_upload(self, path: str, body: dict) -> tuple[int, dict, dict]:
        """POST upload/v1beta/files (X-Goog-Upload-Command: start): the address the file's
        bytes go to, in the x-goog-upload-url header."""
        with self._batch_lock:
            upload = f"u{len(self._uploads) + 1}"
            self._uploads[upload] = {"meta": body.get("file") or {}, "data": b""}
        where = f"{self.url}{path.split('?', 1)[0]}?upload_id={upload}&upload_protocol=resumable"
        return 200, {}, {"x-goog-upload-url": where, "x-goog-upload-status": "active"}

    def _upload_bytes(self, path: str, command: str, data: bytes) -> tuple[int, dict, dict]:
        """POST to the upload address (X-Goog-Upload-Command: upload[, finalize]): the
        bytes are added; the last part answers the file."""
        from urllib.parse import parse_qs, urlsplit

        upload = (parse_qs(urlsplit(path).query).get("upload_id") or [""])[0]
        with self._batch_lock:
            held = self._uploads.get(upload)
            if held is None:
                return (*error_answer(404, "NOT_FOUND", "no such upload"), {})
            held["data"] += data
            if "finalize" not in command:
                return 200, {}, {"x-goog-upload-status": "active"}
            name = f"files/stand-in-{len(self.files) + 1}"
            self.files[name] = held.pop("data")
        meta = held["meta"]
        file = {
            "name": name, "displayName": meta.get("displayName", ""),
            "mimeType": meta.get("mimeType", ""), "sizeBytes": str(len(self.files[name])),
            "state": "ACTIVE", "source": "UPLOADED",
        }  # fmt: skip
        return 200, {"file": file}, {"x-goog-upload-status": "final"}

    def _download(self, name: str) -> tuple[int, bytes, bool]:
        """GET files/N:download?alt=media: the file's bytes (a job's answers), or a 503, or
        (cut) half of them before the connection drops."""
        with self._batch_lock:
            if self.download_errors:
                self.download_errors -= 1
                code, body = error_answer(503, "UNAVAILABLE", "The service is unavailable.")
                return code, json.dumps(body).encode(), False
            data = self.files.get(name)
            if data is None:
                code, body = error_answer(404, "NOT_FOUND", f"{name} is not found")
                return code, json.dumps(body).encode(), False
            self.downloads.append(name)
            cut = self.download_cuts > 0
            self.download_cuts -= int(cut)
        return 200, data, cut

    def _list_batches(self, path: str) -> tuple[int, dict]:
        """GET batches: the jobs, newest first, ``pageSize`` a page (the API's default 50
        here) with a ``nextPageToken`` while more are left (google-genai's Pager reads it)."""
        from urllib.parse import parse_qs, urlsplit

        query = parse_qs(urlsplit(path).query)
        size = int((query.get("pageSize") or ["50"])[0])
        start = int((query.get("pageToken") or ["0"])[0])
        with self._batch_lock:
            names = list(reversed(self.batches))
            page = [self._batch_body(n) for n in names[start : start + size]]
        body: dict = {"operations": page}
        if start + size < len(names):
            body["nextPageToken"] = str(start + size)
        return 200, body

    def _batch_body(self, name: str) -> dict:
        job = self.batches[name]
        meta = {
            "@type": "type.googleapis.com/google.ai.generativelanguage.v1beta.GenerateContentBatch",
            "model": f"models/{job['model']}", "displayName": job["display"],
            "state": job["state"], "name": name,
        }  # fmt: skip
        if job["output"] is not None and job.get("answers_file"):
            meta["output"] = {"responsesFile": job["answers_file"]}
        elif job["output"] is not None:
            output = job["output"] if self.batch_garbage is None else self.batch_garbage
            meta["output"] = {"inlinedResponses": {"inlinedResponses": output}}
        return {"name": name, "metadata": meta, "done": job["output"] is not None}

    def _get_batch(self, name: str) -> tuple[int, dict]:
        with self._batch_lock:
            job = self.batches.get(name)
            if job is None:
                return error_answer(404, "NOT_FOUND", f"{name} is not found")
            if self.batch_get_errors:
                self.batch_get_errors -= 1
                return error_answer(503, "UNAVAILABLE", "The service is currently unavailable.")
            if job.get("running"):  # another poll is answering it now
                return 200, self._batch_body(name)
            job["gets"] += 1
            if job["output"] is not None or self.batch_hold or job["gets"] <= self.batch_polls:
                if job["output"] is None:
                    job["state"] = "BATCH_STATE_RUNNING"
                return 200, self._batch_body(name)
            if self.batch_fail:
                job["state"], job["output"] = f"BATCH_STATE_{self.batch_fail}", []
                return 200, self._batch_body(name)
            job["running"] = True
        # the job is run: each request answered as a live one would be
        output = []
        path = f"/v1beta/models/{job['model']}:generateContent"
        for item in job["requests"]:
            got = self.answer(path, item.get("request") or {})
            # a file's lines are keyed by "key", inline answers by their metadata
            entry = (
                {"key": item["key"]} if "key" in item else {"metadata": item.get("metadata") or {}}
            )
            if got.status == 200:  # a file's: with a field newer than the SDK, as the API
                # may add (an inline answer goes through the SDK's own reading)
                entry["response"] = {**got.body, "laterField": 1} if "key" in item else got.body
            else:
                entry["error"] = got.body.get("error", {"code": got.status})
            output.append(entry)
        with self._batch_lock:
            if job.get("file"):  # answers by file: JSON Lines, in the requests' order
                lines = output if self.batch_garbage is None else self.batch_garbage
                answers = f"files/batch-answers-{name.rsplit('-', 1)[-1]}"
                self.files[answers] = "".join(
                    (line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines
                ).encode()
                job["answers_file"] = answers
            job["state"], job["output"] = "BATCH_STATE_SUCCEEDED", output
            return 200, self._batch_body(name)

    def reply(self, body: dict, delay_s: float = 0.0) -> None:
        self.replies.append(Reply(200, body, delay_s))

    def garbage(self, raw: bytes, kind: str = "application/json") -> None:
        """The next answer: ``raw`` with status 200 (a proxy's HTML page, JSON cut short)."""
        self.replies.append(Reply(200, {}, 0.0, raw, kind))

    def fail(self, code: int, status: str = "ERROR", message: str = "injected") -> None:
        c, body = error_answer(code, status, message)
        self.replies.append(Reply(c, body))

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> FakeGemini:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_GET(self):
                path = self.path.split("?", 1)[0].rstrip("/")
                name = path.rsplit("/", 1)[-1]
                if path.endswith(":download"):  # files.download: the bytes as they are
                    return self._download("files/" + name.removesuffix(":download"))
                if path.endswith("/batches"):  # batches.list, a page at a time
                    status, body = fake._list_batches(self.path)
                    fake.batch_gets.append(path)
                elif "/batches/" in path:
                    status, body = fake._get_batch(f"batches/{name}")
                    fake.batch_gets.append(path)
                elif fake.model_gets.append(path) or name == "models":
                    status, body = 200, {"models": [model_entry(m) for m in fake.models]}
                elif name in fake.models:
                    status, body = 200, model_entry(name)
                else:
                    message = f"models/{name} is not found for API version v1beta"
                    status, body = error_answer(404, "NOT_FOUND", message)
                self._json(status, body)

            def do_POST(self):
                with fake._flight:
                    fake.in_flight += 1
                    fake.peak_in_flight = max(fake.peak_in_flight, fake.in_flight)
                    fake._flight_changed.notify_all()
                    reached = fake._flight_changed.wait_for(
                        lambda: fake.peak_in_flight >= fake._hold_until,
                        timeout=fake._hold_give_up_s,
                    )
                    if not reached:  # given up: answered at once from now on
                        fake._hold_until = 0
                        fake._flight_changed.notify_all()
                try:
                    self._post()
                finally:
                    with fake._flight:
                        fake.in_flight -= 1

            def do_DELETE(self):  # files.delete: an uploaded file removed
                name = "files/" + self.path.split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1]
                with fake._batch_lock:
                    found = fake.files.pop(name, None) is not None
                fake.deleted.append(name)
                self._json(*((200, {}) if found else error_answer(404, "NOT_FOUND", name)))

            def _json(self, status: int, body: dict) -> None:
                json_reply(self, status, body)

            def _download(self, name: str) -> None:
                status, data, cut = fake._download(name)
                self.send_response(status)
                kind = "application/octet-stream" if status == 200 else "application/json"
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                try:
                    self.wfile.write(data[: len(data) // 2] if cut else data)
                    if cut:  # the connection drops half-way
                        self.wfile.flush()
                        self.connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                self.close_connection = True

            def _upload(self, length: int) -> None:
                data = self.rfile.read(length)
                command = self.headers.get("X-Goog-Upload-Command", "")
                if command == "start":
                    status, body, headers = fake._start_upload(self.path, json.loads(data or b"{}"))
                else:
                    status, body, headers = fake._upload_bytes(self.path, command, data)
                out = json.dumps(body).encode()
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def _post(self):
                length = int(self.headers.get("Content-Length", 0))
                if self.path.startswith("/upload/"):
                    fake.paths.append(self.path.split("?", 1)[0])
                    return self._upload(length)
                body = json.loads(self.rfile.read(length) or b"{}")
                fake.requests.append(body)
                fake.paths.append(self.path)
                if self.path.endswith(":batchGenerateContent"):
                    reply = Reply(*fake._create_batch(self.path, body))
                else:
                    reply = fake.answer(self.path, body)
                if reply.delay_s:
                    time.sleep(reply.delay_s)
                data = reply.raw if reply.raw is not None else json.dumps(reply.body).encode()
                try:
                    self.send_response(reply.status)
                    self.send_header("Content-Type", reply.kind)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self._server = StandInServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        # stop() waits for the serving loop's next look: 0.5 s by default, 0.5 s of every
        # test's teardown
        threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        ).start()
        return self

    def stop(self) -> None:
        if self._server:
            self._server.shutdown()
            self._server.server_close()
