"""A stand-in OpenAI-compatible server (``/v1/chat/completions``, ``/v1/models``) driven by
the real ``openai`` client, answering as the Gemini stand-in world does.

Each chat request is put into the Gemini request the world reads (image parts from the
data URLs, log-probabilities asked for, a JSON schema with an ``answer`` enum for a
sampled judgement) and the world's answer is put back into the chat-completions shape:
its text as the message, its log-probabilities as ``logprobs.content`` (each position's
chosen token and ``top_logprobs``), its token counts as ``usage``. ``logprobs=False``
drops the log-probabilities from every answer, as a server that gives none does.
``too_many`` answers that many requests with HTTP 429 and ``Retry-After: retry_after_s``
first. Every request's path, body and arrival time are kept.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.fakes.gemini_server import StandInServer


class FakeOpenAI:
    def __init__(self, world: Any = None, models: tuple[str, ...] = ("qwen3-vl",)) -> None:
        self.world = world
        self.models = list(models)
        self.logprobs = True
        self.too_many = 0
        self.retry_after_s = 1
        self.requests: list[dict] = []  # {"path", "body", "at"}
        self.key_seen: list[str | None] = []
        self.answers: list[dict] = []  # the chat completions sent back, in order
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> FakeOpenAI:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def _send(self, status: int, body: dict, headers: dict | None = None) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                try:
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def do_GET(self):
                fake.key_seen.append(self.headers.get("Authorization"))
                if self.path.rstrip("/") != "/v1/models":
                    return self._send(404, {"error": {"message": f"no route {self.path}"}})
                data = [{"id": m, "object": "model", "owned_by": "stand-in"} for m in fake.models]
                return self._send(200, {"object": "list", "data": data})

            def do_POST(self):
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                fake.key_seen.append(self.headers.get("Authorization"))
                with fake._lock:
                    fake.requests.append({"path": self.path, "body": body, "at": time.monotonic()})
                    limited = fake.too_many > 0
                    if limited:
                        fake.too_many -= 1
                if self.path.rstrip("/") != "/v1/chat/completions":
                    return self._send(404, {"error": {"message": f"no route {self.path}"}})
                if limited:
                    error = {"message": "rate limit reached, slow down", "type": "rate_limit"}
                    return self._send(
                        429, {"error": error}, {"Retry-After": str(fake.retry_after_s)}
                    )
                model = body.get("model")
                if model not in fake.models:
                    error = {"message": f"The model `{model}` does not exist.", "code": 404}
                    return self._send(404, {"error": error})
                status, answer = fake.answer(body)
                return self._send(status, answer)

        self._server = StandInServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        ).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    # -- the chat request as the Gemini world reads it, and back --------------------------

    def answer(self, body: dict) -> tuple[int, dict]:
        if body.get("prompt_logprobs") is not None:
            return 200, self.prompt_logprobs(body)
        status, answer = self.world(f"/v1beta/models/{body['model']}:generateContent", gemini(body))
        if status != 200:
            message = (answer.get("error") or {}).get("message", "error")
            return status, {"error": {"message": message, "type": "invalid_request_error"}}
        completion = self.completion(body, answer)
        with self._lock:
            self.answers.append(completion)
        return 200, completion

    prompt_logprobs_served = True  # as vLLM; False: a server that ignores the parameter

    @staticmethod
    def word_logprob(word: str) -> float:
        """The stand-in's log-probability of a prompt "token" (a word): -0.1 per letter."""
        return -0.1 * len(word)

    def prompt_logprobs(self, body: dict) -> dict:
        """vLLM's prompt log-probabilities, a "token" per word of the messages' texts (the
        final assistant message continued, as ``continue_final_message`` asks); the first
        is None, as vLLM's is."""
        words = []
        for m in body["messages"]:
            content = m["content"]
            texts = [content] if isinstance(content, str) else [
                c.get("text", "") for c in content if c.get("type") == "text"
            ]  # fmt: skip
            for t in texts:
                words += t.split()
        entries: list[Any] = [None] + [
            {str(k): {"logprob": self.word_logprob(w), "rank": 1, "decoded_token": w}}
            for k, w in enumerate(words[1:])
        ]
        choice = {
            "index": 0,
            "message": {"role": "assistant", "content": "."},
            "finish_reason": "length",
            "logprobs": None,
        }
        out = {
            "id": f"chatcmpl-{len(self.requests)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body["model"],
            "choices": [choice],
            "usage": {
                "prompt_tokens": len(words),
                "completion_tokens": 1,
                "total_tokens": len(words) + 1,
            },
        }
        if self.prompt_logprobs_served:
            out["prompt_logprobs"] = entries
        return out

    def completion(self, body: dict, answer: dict) -> dict:
        cand = answer["candidates"][0]
        text = "".join(p.get("text", "") for p in cand["content"]["parts"])
        choice: dict[str, Any] = {
            "index": 0,
            "message": {"role": "assistant", "content": text},
            "finish_reason": "stop",
            "logprobs": None,
        }
        result = cand.get("logprobsResult")
        if self.logprobs and body.get("logprobs") and result:
            content = []
            for top, chosen in zip(
                result["topCandidates"], result["chosenCandidates"], strict=True
            ):
                alternatives = [
                    {"token": c["token"], "logprob": c["logProbability"], "bytes": None}
                    for c in top["candidates"][: body.get("top_logprobs") or 0]
                ]
                content.append(
                    {
                        "token": chosen["token"],
                        "logprob": chosen["logProbability"],
                        "bytes": None,
                        "top_logprobs": alternatives,
                    }
                )
            choice["logprobs"] = {"content": content}
        counts = answer.get("usageMetadata") or {}
        return {
            "id": f"chatcmpl-{len(self.requests)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body["model"],
            "choices": [choice],
            "usage": {
                "prompt_tokens": counts.get("promptTokenCount", 0),
                "completion_tokens": counts.get("candidatesTokenCount", 0),
                "total_tokens": counts.get("totalTokenCount", 0),
            },
        }


def gemini(body: dict) -> dict:
    """The Gemini request the world reads for a chat-completions request."""
    parts = []
    for message in body["messages"]:
        content = message["content"]
        if isinstance(content, str):
            parts.append({"text": content})
            continue
        for part in content:
            if part["type"] == "text":
                parts.append({"text": part["text"]})
            elif part["type"] == "image_url":
                url = part["image_url"]["url"]
                head, _, data = url.partition(",")
                mime = head.removeprefix("data:").split(";")[0]
                parts.append({"inlineData": {"mimeType": mime, "data": data}})
    config: dict[str, Any] = {}
    if body.get("logprobs"):
        config["responseLogprobs"] = True
        config["logprobs"] = body.get("top_logprobs")
    schema = ((body.get("response_format") or {}).get("json_schema") or {}).get("schema") or {}
    if "answer" in (schema.get("properties") or {}):
        config["responseJsonSchema"] = schema
    if "seed" in body:
        config["seed"] = body["seed"]
    return {"contents": [{"role": "user", "parts": parts}], "generationConfig": config}
