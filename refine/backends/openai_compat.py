"""Backends on any server that speaks OpenAI's chat-completions protocol, through the
official ``openai`` client: ``vllm serve``, SGLang, Ollama, LM Studio, the Hugging Face
router, or OpenAI itself.

* ``openai:MODEL`` (the name the server gives the model) observes with structured output,
  judges, answers JSON for the loop and builds references.
* The server is the role's ``base_url`` option, else the client's ``OPENAI_BASE_URL``, else
  OpenAI's API; the key is in the variable the ``api_key_env`` option names
  (``OPENAI_API_KEY`` by default). Two roles may so use two servers. A server other than
  OpenAI's that asks for no key (vLLM without ``--api-key``, Ollama, LM Studio) is sent a
  placeholder.
* Images go as PNG data URLs; a structured answer is asked for with a JSON schema
  (``response_format`` ``json_schema``).
* The judge asks for the answer tokens' ``logprobs`` and ``top_logprobs``; where the server
  returns none (or refuses them) it samples instead (:mod:`refine.backends.judging`).
* Retries are the client's own (``max_retries``): connection errors, 408, 409, 429 and 5xx
  answers, waiting as the server's ``Retry-After`` says; under a call budget they are made
  here instead, each a request taken from the budget, and a refusal says how many were
  sent. An error names the server's
  address and quotes its answer.
* Before a run spends anything, the server's model list (``GET /models``) must hold the
  model; else one line names what it serves.
"""

from __future__ import annotations

import base64
import io
import json
import os
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlparse

from refine import usage
from refine.backends.imports import require
from refine.backends.judging import (
    LogprobsUnavailable,
    ProbabilityJudge,
    answer_schema,
    answer_tokens,
    check_judge_options,
    pooled,
)
from refine.backends.structured import ApiObserver, ask_with_repair, check_observer_prompts
from refine.usage import BudgetExhausted, abandonable, check_stop, sent, time_left
from refine.usage import record as record_usage

if TYPE_CHECKING:
    from PIL import Image
    from pydantic import BaseModel

T = TypeVar("T", bound="BaseModel")

OPENAI_URL = "https://api.openai.com/v1"
KEY_VARIABLE = "OPENAI_API_KEY"
NO_KEY = "EMPTY"  # sent to a server that asks for no key (the client wants one)


class OpenAIServerError(RuntimeError):
    """A call to an OpenAI-compatible server that failed for good; the message names the
    server and quotes its answer. ``code`` is the HTTP status when it answered."""

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.code = code


@dataclass
class OpenAIServer:
    """One server and its client, shared by the roles that name the same server."""

    base_url: str | None = None
    api_key_env: str = KEY_VARIABLE
    timeout_s: float = 120.0
    max_retries: int = 4

    def __post_init__(self) -> None:
        self._client: Any = None
        self._lock = threading.Lock()
        self._served: list[str] | None = None

    @property
    def url(self) -> str:
        return (self.base_url or os.environ.get("OPENAI_BASE_URL") or OPENAI_URL).rstrip("/")

    def _key(self) -> str:
        key = os.environ.get(self.api_key_env)
        if key:
            return key
        if urlparse(self.url).hostname == urlparse(OPENAI_URL).hostname:
            raise OpenAIServerError(
                f"no API key for {self.url}: set {self.api_key_env} (or give the role a "
                "base_url of a server of your own)"
            )
        return NO_KEY

    def client(self) -> Any:
        with self._lock:
            if self._client is None:
                openai = require("openai", "openai", "the openai: backends")
                self._client = openai.OpenAI(
                    base_url=self.url,
                    api_key=self._key(),
                    timeout=self.timeout_s,
                    max_retries=self.max_retries,
                )
            return self._client

    def served(self) -> list[str]:
        """The models the server lists (``GET /models``), asked once."""
        if self._served is None:
            client = self.client()
            import openai

            try:
                page = client.models.list()
            except openai.APIStatusError as err:
                said = self._said(err, "listing its models")
                raise OpenAIServerError(said, err.status_code) from None
            except openai.APIConnectionError as err:
                raise OpenAIServerError(self._unreachable(err, "listing its models")) from None
            self._served = sorted(str(m.id) for m in page)
        return self._served

    def check_model(self, model: str) -> None:
        served = self.served()
        if model not in served:
            listed = ", ".join(served[:12]) + (", ..." if len(served) > 12 else "")
            raise OpenAIServerError(
                f"{model}: not served by {self.url} (it serves: {listed or 'no model'})", 404
            )

    def chat(self, model: str, messages: list[dict], purpose: str, **params: Any) -> Any:
        """One chat completion (the client's retries included), its usage recorded.

        Under a wall-time budget (:func:`refine.usage.deadline`) its timeout is capped to
        the time left, and :class:`refine.usage.BudgetExhausted` is raised when none is;
        under a stop the call in flight is abandoned (:func:`refine.usage.abandonable`)."""
        client = self.client()
        import openai

        check_stop()
        left = time_left()
        if left is not None and left <= 0:
            raise BudgetExhausted(f"{model}: the wall-time budget is spent ({purpose})")
        capped = left is not None and left < self.timeout_s
        if capped:  # (the client's own retry waits are not capped: one may pass the budget)
            client = client.with_options(timeout=max(1.0, left))
        # under a call budget the retries are made here, each a request taken from it (the
        # client's own would go uncounted), waiting as the server's Retry-After says
        counted = usage.current_budget() is not None
        if counted:
            client = client.with_options(max_retries=0)
        attempts = 0
        while True:
            sent(f"openai:{model}")
            attempts += 1
            try:
                response = abandonable(
                    lambda: client.chat.completions.create(model=model, messages=messages, **params)
                )
                break
            except openai.APIStatusError as err:
                if counted and err.status_code in RETRIED and attempts <= self.max_retries:
                    self._wait(err, attempts, model, purpose)
                    continue
                said = self._said(err, purpose, attempts if counted else None)
                raise OpenAIServerError(f"{model}: {said}", err.status_code) from None
            except openai.APIConnectionError as err:  # timeouts included
                if capped:  # the timeout was the budget's
                    raise BudgetExhausted(
                        f"{model}: the wall-time budget ran out waiting for an answer ({purpose})"
                    ) from err
                if counted and attempts <= self.max_retries:
                    self._wait(None, attempts, model, purpose)
                    continue
                said = self._unreachable(err, purpose, attempts if counted else None)
                raise OpenAIServerError(f"{model}: {said}") from None
        counted = getattr(response, "usage", None)
        record_usage(
            f"openai:{model}",
            int(getattr(counted, "prompt_tokens", 0) or 0),
            int(getattr(counted, "completion_tokens", 0) or 0),
            int(getattr(counted, "total_tokens", 0) or 0),
        )
        if not response.choices:
            raise OpenAIServerError(f"{model}: {self.url} answered with no choices ({purpose})")
        return response

    def _wait(self, err: Any, attempts: int, model: str, what: str) -> None:
        """Before a retry of ours: the server's Retry-After (seconds, or -ms), else 0.5 s
        doubled each time (at most 8 s); within the wall-time budget, else it is spent."""
        wait = min(0.5 * 2 ** (attempts - 1), 8.0)
        headers = getattr(getattr(err, "response", None), "headers", None) or {}
        for name, scale in (("retry-after-ms", 1e-3), ("retry-after", 1.0)):
            try:
                wait = float(headers.get(name)) * scale
                break
            except (TypeError, ValueError):
                continue
        wait = max(0.0, min(wait, 60.0))
        left = time_left()
        if left is not None and wait >= left:
            raise BudgetExhausted(f"{model}: the wall-time budget ends before a retry ({what})")
        usage.pause(wait)

    def _said(self, err: Any, what: str, attempts: int | None = None) -> str:
        """``attempts``: the requests sent, when known (ours); else the client's own
        retries made them: as many as it makes for that status."""
        try:
            body = err.response.text.strip()
        except Exception:  # only for a message
            body = str(err)
        if attempts is None:
            attempts = self.max_retries + 1 if err.status_code in RETRIED else 1
        return (
            f"{self.url} answered HTTP {err.status_code} to {what} (after {attempts} "
            f"attempt(s)): {body[:300]}"
        )

    def _unreachable(self, err: Exception, what: str, attempts: int | None = None) -> str:
        attempts = self.max_retries + 1 if attempts is None else attempts
        return (
            f"no answer from {self.url} to {what} after {attempts} attempt(s) "
            f"({type(err).__name__}; the timeout is {self.timeout_s:g} s): is the server up?"
        )


# the statuses the openai client retries (with connection errors and timeouts)
RETRIED = frozenset({408, 409, 429, 500, 502, 503, 504})

_SHARED: dict[tuple, OpenAIServer] = {}
_SHARED_GUARD = threading.Lock()


def shared_server(**options: Any) -> OpenAIServer:
    key = tuple(sorted(options.items()))
    with _SHARED_GUARD:
        if key not in _SHARED:
            _SHARED[key] = OpenAIServer(**options)
        return _SHARED[key]


def image_url(image: Image.Image) -> dict[str, Any]:
    """``image`` as a chat message part: a PNG data URL."""
    buf = io.BytesIO()
    image.convert("RGB").save(buf, format="PNG")
    data = base64.b64encode(buf.getvalue()).decode("ascii")
    return {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{data}"}}


def user_message(text: str, image: Image.Image | None = None) -> list[dict]:
    content: list[dict[str, Any]] = [image_url(image)] if image is not None else []
    content.append({"type": "text", "text": text})
    return [{"role": "user", "content": content}]


def json_format(name: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"type": "json_schema", "json_schema": {"name": name, "schema": schema}}


def answer_text(response: Any) -> str:
    return str(response.choices[0].message.content or "")


class _OpenAIBackend:
    thread_safe = True  # HTTP calls: batch workers may call at the same time

    def __init__(
        self,
        model: str = "",
        base_url: str | None = None,
        api_key_env: str = KEY_VARIABLE,
        timeout_s: float = 120.0,
        max_retries: int = 4,
        concurrency: int = 4,
    ) -> None:
        if not model:
            raise ValueError(
                "openai: needs the model's name as the server knows it, such as "
                "openai:Qwen/Qwen3-VL-8B-Instruct"
            )
        if int(concurrency) < 1:
            raise ValueError(f"concurrency must be at least 1, got {concurrency}")
        self.model = model
        self.concurrency = int(concurrency)
        self.server = shared_server(
            base_url=base_url,
            api_key_env=api_key_env,
            timeout_s=float(timeout_s),
            max_retries=int(max_retries),
        )

    @property
    def id(self) -> str:
        return f"openai:{self.model}"

    def load(self):
        self.server.client()
        return self

    def info(self) -> dict[str, str]:
        return {"id": self.id, "device": "api", "dtype": "n/a", "server": self.server.url}

    def verify(self) -> None:
        """The server answers and lists the model (no paid call)."""
        self.server.check_model(self.model)

    def _each(self, items: Sequence[Any], one: Any) -> list[Any]:
        return usage.at_once(one, items, self.concurrency)


class OpenAILanguageModel(_OpenAIBackend):
    """JSON answers validated against a pydantic schema (structured output)."""

    role = "llm"

    def __init__(
        self,
        model: str = "",
        temperature: float = 0.0,
        max_repairs: int = 2,
        prompts: str = "toolkit",
        **kw,
    ):
        super().__init__(model, **kw)
        self.temperature = temperature
        self.max_repairs = max_repairs
        # an observer's prompts: the toolkit's, or AHEaD's per dimension (Tab. 22-27)
        self.prompts = check_observer_prompts(prompts)

    def _ask_json(
        self,
        image: Image.Image | None,
        schema: type[T],
        purpose: str,
        temperature: float | None = None,
    ):
        name = re.sub(r"[^A-Za-z0-9_-]", "_", schema.__name__)[:64] or "answer"
        spec = json_format(name, schema.model_json_schema())

        def ask(prompt: str) -> str:
            response = self.server.chat(
                self.model,
                user_message(prompt, image),
                purpose,
                temperature=self.temperature if temperature is None else temperature,
                response_format=spec,
            )
            return answer_text(response)

        return ask

    def complete_json(self, prompt: str, schema: type[T], temperature: float | None = None) -> T:
        ask = self._ask_json(None, schema, "complete_json", temperature)
        return ask_with_repair(ask, prompt, schema, self.id, self.max_repairs)


class OpenAIObserver(ApiObserver, OpenAILanguageModel):
    """Lists the descriptors visible in an image, per dimension (:class:`ApiObserver`)."""

    role = "observer"

    def _ask_about(self, image: Image.Image, schema: type[T], purpose: str):
        return self._ask_json(image, schema, purpose)


class OpenAIJudge(ProbabilityJudge, _OpenAIBackend):
    """Answer probabilities from the answer tokens' log-probabilities where the server
    returns them (vLLM does), else from k sampled answers (see
    :mod:`refine.backends.judging`)."""

    role = "judge"
    top_logprobs = 20

    def __init__(
        self,
        model: str = "",
        judge_mode: str = "auto",
        samples: int = 8,
        max_tokens: int = 4,
        agree: int = 0,
        **kw: Any,
    ) -> None:
        """``max_tokens`` bounds the answer read for log-probabilities (its first tokens
        are the answer); ``judge_mode`` is auto, logprobs or sampled; ``samples`` is k,
        the most answers a sampled reading takes, and ``agree`` its first answers, which
        end the reading when they are all the same (0: always k)."""
        check_judge_options(judge_mode, samples, agree)
        super().__init__(model, **kw)
        self.judge_mode = judge_mode
        self.samples = samples
        self.agree = agree
        self.max_tokens = int(max_tokens)

    @property
    def probe_key(self) -> str:
        # two servers may serve one model name, one with log-probabilities, one without
        return f"{self.model}@{self.server.url}"

    def info(self) -> dict[str, str]:
        info = {"judge_mode": self.judge_mode, "method": self.method, "agree": str(self.agree)}
        return {**super().info(), **info}

    def _error(self, message: str) -> Exception:
        return OpenAIServerError(message)

    def _answer_logprobs(
        self, image: Image.Image, text: str, purpose: str
    ) -> tuple[list[dict[str, float]], list[str]]:
        try:
            response = self.server.chat(
                self.model,
                user_message(text, image),
                purpose,
                temperature=0.0,
                max_tokens=answer_tokens(self.max_tokens, purpose),
                logprobs=True,
                top_logprobs=self.top_logprobs,
            )
        except OpenAIServerError as err:
            said = str(err).casefold()
            if err.code == 400 and "logprob" in said:
                raise LogprobsUnavailable(str(err), err) from None
            raise
        content = getattr(response.choices[0].logprobs, "content", None) or []
        positions: list[dict[str, float]] = []
        chosen: list[str] = []
        for step in content:
            seen: dict[str, float] = {}  # by the token as the server names it
            for cand in step.top_logprobs or []:
                seen.setdefault(cand.token or "", float(cand.logprob))
            seen.setdefault(step.token or "", float(step.logprob))
            out = pooled(seen)
            token = (step.token or "").strip()
            if not token and not out:
                continue  # a whitespace token before the answer
            positions.append(out)
            chosen.append(token)
        if not positions:
            raise LogprobsUnavailable(
                f"{self.model} at {self.server.url}: the answer has no log-probabilities"
            )
        return positions, chosen

    def completion_nll(
        self,
        images: Sequence[Image.Image | None],
        texts: Sequence[str],
        answer: str,
        completions: Sequence[str],
    ) -> list[float]:
        """-log P(completion | the chat, its answer begun by ``answer``) per pair, from the
        server's prompt log-probabilities (vLLM's ``prompt_logprobs``: the assistant's
        message continued, one token generated): the completion's tokens are those the
        whole prompt has beyond the prompt without it. A server that gives none is an
        error naming the parameter."""
        if not (len(images) == len(texts) == len(completions)):
            raise ValueError("one image (or None), text and completion each")
        extra = {
            "prompt_logprobs": 0,
            "add_generation_prompt": False,
            "continue_final_message": True,
        }
        out = []
        for image, text, completion in zip(images, texts, completions, strict=True):
            got = []
            for said in (answer, answer + completion):
                messages = [*user_message(text, image), {"role": "assistant", "content": said}]
                response = self.server.chat(
                    self.model, messages, "log-likelihood", max_tokens=1, extra_body=extra
                )
                got.append(_prompt_logprobs(response, self.model))
            head, whole = got
            if len(whole) <= len(head):
                raise OpenAIServerError(
                    f"{self.model}: the completion {completion!r} added no prompt tokens"
                )
            out.append(-sum(_chosen_logprob(e, self.model) for e in whole[len(head) :]))
        return out

    def _sample_answer(
        self, image: Image.Image, text: str, answers: Sequence[str], seed: int, purpose: str
    ) -> str:
        schema = {**answer_schema(answers), "additionalProperties": False}
        response = self.server.chat(
            self.model,
            user_message(text, image),
            purpose,
            temperature=1.0,
            seed=seed,
            response_format=json_format("answer", schema),
        )
        try:
            return str(json.loads(answer_text(response))["answer"]).strip()
        except (ValueError, KeyError, TypeError):
            return ""


def _prompt_logprobs(response: Any, model: str) -> list[Any]:
    """The prompt's log-probabilities a vLLM server returns beside a chat completion."""
    found = getattr(response, "prompt_logprobs", None)
    if found is None:
        found = (getattr(response, "model_extra", None) or {}).get("prompt_logprobs")
    if not found:
        raise OpenAIServerError(
            f"{model}: the server returned no prompt log-probabilities (vLLM's prompt_logprobs "
            "parameter); CAIRE's log-likelihood scoring needs them"
        )
    return list(found)


def _chosen_logprob(entry: Any, model: str) -> float:
    """The log-probability of the prompt's own token at one position (asked with
    ``prompt_logprobs`` 0: the entry holds that token alone)."""
    if not isinstance(entry, dict) or len(entry) != 1:
        raise OpenAIServerError(f"{model}: a prompt log-probability entry is not one token")
    (one,) = entry.values()
    return float(one["logprob"] if isinstance(one, dict) else one)
