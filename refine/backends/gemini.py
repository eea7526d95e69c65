"""Gemini backends for every role, through the google-genai client.

* ``gemini:gemini-2.5-flash-image`` generates images and edits an input image;
* ``gemini:gemini-2.5-flash`` (or another text model) observes (structured output), judges
  (next-token log-probabilities of the answer tokens) and answers JSON for the loop.

The API key comes from ``GEMINI_API_KEY`` or ``GOOGLE_API_KEY``; ``GOOGLE_GEMINI_BASE_URL``
points the client at another endpoint. Calls time out, and 408/429/5xx answers and
timeouts are retried with exponential backoff; a blocked or image-less answer raises
:class:`GeminiError` with the finish reason. Token usage is recorded per call.
"""

from __future__ import annotations

import io
import logging
import math
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from refine.backends.imports import require
from refine.backends.protocols import Rating
from refine.backends.structured import (
    ask_with_repair,
    clean_descriptors,
    descriptor_schema,
    observation_prompt,
)

if TYPE_CHECKING:
    from PIL import Image
    from pydantic import BaseModel

log = logging.getLogger(__name__)
T = TypeVar("T", bound="BaseModel")

KEY_VARIABLES = ("GEMINI_API_KEY", "GOOGLE_API_KEY")
RETRY_STATUS = frozenset({408, 429, 500, 502, 503, 504})
DEFAULT_IMAGE_MODEL = "gemini-2.5-flash-image"
DEFAULT_TEXT_MODEL = "gemini-2.5-flash"


class GeminiError(RuntimeError):
    """A Gemini call that failed for good; the message says what to do."""


@dataclass
class CallRecord:
    model: str
    purpose: str
    prompt_tokens: int
    output_tokens: int
    total_tokens: int
    seconds: float
    attempts: int


@dataclass
class GeminiClient:
    """A google-genai client with timeouts, retries and a usage log, shared by the roles."""

    api_key: str | None = None
    base_url: str | None = None
    timeout_s: float = 120.0
    max_retries: int = 4
    initial_delay_s: float = 1.0
    max_delay_s: float = 32.0
    sleep: Callable[[float], None] = time.sleep
    calls: list[CallRecord] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._client: Any = None
        self._lock = threading.Lock()

    def _resolve_key(self) -> str:
        if self.api_key:
            return self.api_key
        for name in KEY_VARIABLES:
            if os.environ.get(name):
                return os.environ[name]
        raise GeminiError(
            "no Gemini API key: set GEMINI_API_KEY (or GOOGLE_API_KEY) to a key from "
            "Google AI Studio, or pick a local profile such as 'local-gpu'"
        )

    def client(self) -> Any:
        with self._lock:
            if self._client is None:
                genai = require("google.genai", "google-genai", "the gemini: backends")
                types = genai.types
                base_url = self.base_url or os.environ.get("GOOGLE_GEMINI_BASE_URL") or None
                options = types.HttpOptions(
                    base_url=base_url,
                    timeout=int(self.timeout_s * 1000),
                    retry_options=types.HttpRetryOptions(attempts=1),  # retries are ours
                )
                self._client = genai.Client(api_key=self._resolve_key(), http_options=options)
            return self._client

    def generate(self, model: str, contents: list[Any], config: Any, purpose: str) -> Any:
        """``generate_content`` with retries; returns the response of the first candidate."""
        from google.genai import errors

        client = self.client()
        start = time.perf_counter()
        for attempt in range(self.max_retries + 1):
            try:
                response = client.models.generate_content(
                    model=model, contents=contents, config=config
                )
                break
            except errors.APIError as err:
                retry = err.code in RETRY_STATUS and attempt < self.max_retries
                if not retry:
                    raise GeminiError(_explain(model, err, attempt + 1)) from err
                reason = f"HTTP {err.code}"
            except Exception as err:  # timeouts and dropped connections
                if not _is_transient(err):
                    raise
                if attempt >= self.max_retries:
                    raise GeminiError(
                        f"{model}: no answer after {attempt + 1} attempt(s) "
                        f"({type(err).__name__}); the timeout is {self.timeout_s:g} s"
                    ) from err
                reason = type(err).__name__
            delay = min(self.max_delay_s, self.initial_delay_s * 2**attempt)
            log.warning("%s: %s, retrying in %.1f s", model, reason, delay)
            self.sleep(delay)
        usage = getattr(response, "usage_metadata", None)
        self.calls.append(
            CallRecord(
                model,
                purpose,
                int(getattr(usage, "prompt_token_count", 0) or 0),
                int(getattr(usage, "candidates_token_count", 0) or 0),
                int(getattr(usage, "total_token_count", 0) or 0),
                time.perf_counter() - start,
                attempt + 1,
            )
        )
        _check_not_blocked(model, response)
        return response


_TRANSIENT = frozenset(
    {"TimeoutException", "NetworkError", "RemoteProtocolError", "TimeoutError", "ConnectionError"}
)


def _is_transient(err: Exception) -> bool:
    """Timeouts and dropped connections (httpx, httpx2 and the standard library)."""
    return any(cls.__name__ in _TRANSIENT for cls in type(err).__mro__)


def _explain(model: str, err: Any, attempts: int) -> str:
    code, message = err.code, (err.message or str(err)).strip()
    hint = {
        400: "check the request (model name, image size)",
        401: "the API key was rejected: check GEMINI_API_KEY",
        403: "the API key has no access to this model: check GEMINI_API_KEY and its project",
        404: "no such model: check the model name in the backend or profile",
        429: "rate limit or quota exhausted: wait, or lower the request rate",
    }.get(code, "the service failed: try again later")
    return f"{model}: HTTP {code} after {attempts} attempt(s): {message} ({hint})"


def _finish_reason(response: Any) -> str:
    candidates = getattr(response, "candidates", None) or []
    if not candidates:
        return "no candidates"
    reason = candidates[0].finish_reason
    return getattr(reason, "name", str(reason))


def _check_not_blocked(model: str, response: Any) -> None:
    feedback = getattr(response, "prompt_feedback", None)
    block = getattr(feedback, "block_reason", None) if feedback else None
    if block:
        name = getattr(block, "name", str(block))
        raise GeminiError(f"{model}: the prompt was blocked ({name}); rephrase the request")
    if not getattr(response, "candidates", None):
        raise GeminiError(f"{model}: the answer has no candidates")
    reason = _finish_reason(response)
    if reason in {"SAFETY", "PROHIBITED_CONTENT", "BLOCKLIST", "SPII", "IMAGE_SAFETY"}:
        raise GeminiError(f"{model}: the answer was blocked (finish reason {reason})")


def _image_part(image: Image.Image) -> Any:
    from google.genai import types

    buf = io.BytesIO()
    image.convert("RGB").save(buf, format="PNG")
    return types.Part.from_bytes(data=buf.getvalue(), mime_type="image/png")


def _first_image(model: str, response: Any) -> Image.Image:
    from PIL import Image

    texts = []
    for part in response.candidates[0].content.parts or []:
        if part.inline_data is not None and part.inline_data.data:
            return Image.open(io.BytesIO(part.inline_data.data)).convert("RGB")
        if part.text:
            texts.append(part.text)
    said = f"; it said: {' '.join(texts)[:300]}" if texts else ""
    raise GeminiError(
        f"{model}: the answer has no image (finish reason {_finish_reason(response)}){said}"
    )


def _text(response: Any) -> str:
    parts = response.candidates[0].content.parts or []
    return "".join(p.text for p in parts if p.text)


_SHARED: dict[tuple, GeminiClient] = {}


def shared_client(**options: Any) -> GeminiClient:
    key = tuple(sorted(options.items()))
    if key not in _SHARED:
        _SHARED[key] = GeminiClient(**options)
    return _SHARED[key]


class _GeminiBackend:
    default_model = DEFAULT_TEXT_MODEL
    thread_safe = True  # HTTP calls: batch workers may call at the same time

    def __init__(self, model: str = "", client: GeminiClient | None = None, **client_options):
        self.model = model or self.default_model
        self.gemini = client or shared_client(**client_options)

    @property
    def id(self) -> str:
        return f"gemini:{self.model}"

    def load(self):
        self.gemini.client()
        return self

    def info(self) -> dict[str, str]:
        return {"id": self.id, "device": "api", "dtype": "n/a"}


class GeminiGenerator(_GeminiBackend):
    """Text-to-image with a Gemini image model; the seed is sent with each request."""

    role = "generator"
    default_model = DEFAULT_IMAGE_MODEL

    def generate(self, prompt: str, seeds: Sequence[int]) -> list[Image.Image]:
        from google.genai import types

        out = []
        for seed in seeds:
            config = types.GenerateContentConfig(response_modalities=["IMAGE", "TEXT"], seed=seed)
            response = self.gemini.generate(self.model, [prompt], config, "generate")
            out.append(_first_image(self.model, response))
        return out


class GeminiEditor(_GeminiBackend):
    """Instruction-based editing of an input image with a Gemini image model."""

    role = "editor"
    default_model = DEFAULT_IMAGE_MODEL

    def edit(self, image: Image.Image, instruction: str, seeds: Sequence[int]) -> list[Image.Image]:
        from google.genai import types
        from PIL import Image as PILImage

        out = []
        for seed in seeds:
            config = types.GenerateContentConfig(response_modalities=["IMAGE", "TEXT"], seed=seed)
            response = self.gemini.generate(
                self.model, [_image_part(image), instruction], config, "edit"
            )
            edited = _first_image(self.model, response)
            if edited.size != image.size:
                edited = edited.resize(image.size, PILImage.Resampling.LANCZOS)
            out.append(edited)
        return out


class GeminiLanguageModel(_GeminiBackend):
    """JSON answers validated against a pydantic schema (structured output)."""

    role = "llm"

    def __init__(self, model: str = "", temperature: float = 0.0, max_repairs: int = 2, **kw):
        super().__init__(model, **kw)
        self.temperature = temperature
        self.max_repairs = max_repairs

    def _ask_json(self, contents_prefix: list[Any], schema: type[T], purpose: str):
        from google.genai import types

        def ask(prompt: str) -> str:
            config = types.GenerateContentConfig(
                temperature=self.temperature,
                response_mime_type="application/json",
                response_schema=schema,
            )
            response = self.gemini.generate(self.model, [*contents_prefix, prompt], config, purpose)
            return _text(response)

        return ask

    def complete_json(self, prompt: str, schema: type[T]) -> T:
        ask = self._ask_json([], schema, "complete_json")
        return ask_with_repair(ask, prompt, schema, self.id, self.max_repairs)


class GeminiObserver(GeminiLanguageModel):
    """Lists the descriptors visible in an image, per dimension."""

    role = "observer"

    def describe(
        self, image: Image.Image, dimensions: Sequence[str], max_per_dimension: int = 10
    ) -> dict[str, list[str]]:
        schema = descriptor_schema(dimensions, max_per_dimension)
        ask = self._ask_json([_image_part(image)], schema, "observe")
        prompt = observation_prompt(dimensions, max_per_dimension)
        answer = ask_with_repair(ask, prompt, schema, self.id, self.max_repairs)
        return clean_descriptors(answer, dimensions, max_per_dimension)


class GeminiJudge(_GeminiBackend):
    """Answer-token probabilities from the log-probabilities of the first answer token."""

    role = "judge"
    top_logprobs = 20

    def __init__(self, model: str = "", thinking_budget: int | None = 0, **kw: Any) -> None:
        """``thinking_budget=0`` turns thinking off so the first token is the answer and the
        short output limit is not spent on thoughts; use ``None`` for models that cannot
        turn it off (then the limit is lifted and the first answer token is read)."""
        super().__init__(model, **kw)
        self.thinking_budget = thinking_budget

    def _first_token_logprobs(
        self, image: Image.Image, text: str, purpose: str
    ) -> dict[str, float]:
        from google.genai import types

        thinking = (
            types.ThinkingConfig(thinking_budget=self.thinking_budget)
            if self.thinking_budget is not None
            else None
        )
        config = types.GenerateContentConfig(
            temperature=0.0,
            max_output_tokens=4 if self.thinking_budget == 0 else None,
            response_logprobs=True,
            logprobs=self.top_logprobs,
            thinking_config=thinking,
        )
        response = self.gemini.generate(self.model, [_image_part(image), text], config, purpose)
        result = response.candidates[0].logprobs_result
        if result is None or not result.top_candidates:
            raise GeminiError(
                f"{self.model}: the answer has no log-probabilities; this model cannot judge "
                "(use a model that supports response_logprobs, such as gemini-2.5-flash)"
            )
        out: dict[str, float] = {}
        for cand in result.top_candidates[0].candidates or []:
            token = (cand.token or "").strip()
            if token and token not in out:
                out[token] = float(cand.log_probability)
        return out

    def _distribution(self, logprobs: dict[str, float], answers: Sequence[str]) -> list[float]:
        found = {a: logprobs[a] for a in answers if a in logprobs}
        if not found:
            top = ", ".join(list(logprobs)[:8]) or "none"
            raise GeminiError(
                f"{self.model}: none of the answer tokens {list(answers)} is among the most "
                f"likely first tokens ({top})"
            )
        peak = max(found.values())
        weights = [math.exp(found[a] - peak) if a in found else 0.0 for a in answers]
        total = sum(weights)
        return [w / total for w in weights]

    def yes_probability(
        self, images: Sequence[Image.Image], questions: Sequence[str]
    ) -> list[float]:
        _check_pairs(images, questions)
        out = []
        for image, question in zip(images, questions, strict=True):
            prompt = f'{question} Please answer "Yes" or "No".'
            lp = self._first_token_logprobs(image, prompt, "judge_yes")
            merged = _merge_case(lp, ("Yes", "No"))
            out.append(self._distribution(merged, ("Yes", "No"))[0])
        return out

    def rate(self, images: Sequence[Image.Image], prompts: Sequence[str]) -> list[Rating]:
        _check_pairs(images, prompts)
        out = []
        for image, prompt in zip(images, prompts, strict=True):
            lp = self._first_token_logprobs(image, prompt, "judge_rate")
            dist = self._distribution(lp, ("1", "2", "3", "4", "5"))
            out.append(Rating(tuple(dist)))
        return out


def _merge_case(logprobs: dict[str, float], answers: Sequence[str]) -> dict[str, float]:
    """Pool "yes"/"Yes"/"YES" into "Yes" (log-sum-exp of their log-probabilities)."""
    merged: dict[str, float] = {}
    for token, lp in logprobs.items():
        for answer in answers:
            if token.lower() == answer.lower():
                prev = merged.get(answer)
                merged[answer] = (
                    lp if prev is None else max(prev, lp) + math.log1p(math.exp(-abs(prev - lp)))
                )
    return merged


def _check_pairs(images: Sequence[Any], texts: Sequence[str]) -> None:
    if len(images) != len(texts):
        raise ValueError(f"{len(images)} images but {len(texts)} questions")
