"""Gemini backends for every role, through the google-genai client.

* ``gemini:gemini-nano-banana-2.1`` (Nano Banana 2.1) generates images and edits an input
  image;
* ``gemini:gemini-3.8-flash`` (or another text model) observes (structured output), judges
  and answers JSON for the loop.

Gemini 3.6 Flash, 3.5 Flash-Lite and later models fix their own sampling: the API documents
``temperature``, ``top_p`` and ``top_k`` as deprecated and ignored for them
(:func:`fixed_sampling`), so no request to them carries one, and the backend's
:meth:`info` says so (a protocol's temperature, such as the reference builder's 0.2, is
then not applied). The judge's sampled answers are still drawn at the model's own
temperature (1.0), one seed each; :mod:`refine.backends.judging` says how such a reading
behaves where the model ignores the seed too.

Every request is sent with ``store`` false (the API's opt-out of request logging, which
paid projects created on or after 2026-10-26 have on by default); ``store=True`` on the
client (the role's ``store`` option) opts back in. The ``modelVersion`` each answer names is
kept per model and recorded beside the model asked for (:meth:`info`).

Before a run spends anything, :meth:`GeminiClient.check_model` asks the API whether each named
model exists and can generate content; an unknown or retired model is reported with the
models the API offers for that role.

The judge reads answer probabilities from the first answer tokens' log-probabilities, or
from k sampled answers when the model gives none: :mod:`refine.backends.judging`, shared
with the other API judges. Gemini models that give none answer such a request with HTTP
400 "Logprobs is not enabled".

The API key comes from ``GEMINI_API_KEY`` or ``GOOGLE_API_KEY``; ``GOOGLE_GEMINI_BASE_URL``
points the client at another endpoint. Calls time out, and 408/429/5xx answers and
timeouts are retried with jittered exponential backoff (a loop of ours rather than the
SDK's ``HttpRetryOptions``, because each wait and timeout must also fit the run's budget);
a blocked or image-less answer raises :class:`GeminiError` with the finish reason. Token
usage is recorded per call.

A 429 is read as the API words it (:func:`quota_of`, the error's ``QuotaFailure`` and
``RetryInfo`` details): where it gives a ``retryDelay``, no request goes to that model from
any thread of the client until the delay has passed, and then the call is retried; where
its quota is per day, or its limit is 0 (no quota on the account's tier), nothing is
retried: :class:`refine.usage.QuotaSpent` says which model and when the quota comes back.
"""

from __future__ import annotations

import contextlib
import functools
import io
import logging
import os
import random
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from refine import usage
from refine.backends.imports import require
from refine.backends.judging import (
    RETRY_SEED,
    LogprobsUnavailable,
    ProbabilityJudge,
    answer_schema,
    answer_tokens,
    check_judge_options,
    pooled,
)
from refine.backends.loading import JobFailure, Refused
from refine.backends.structured import ApiObserver, ask_with_repair, check_observer_prompts
from refine.usage import BudgetExhausted, QuotaSpent, abandonable, check_stop, sent, time_left
from refine.usage import answered as count_answer
from refine.usage import record as record_usage

if TYPE_CHECKING:
    from PIL import Image
    from pydantic import BaseModel

log = logging.getLogger(__name__)
T = TypeVar("T", bound="BaseModel")

KEY_VARIABLES = ("GEMINI_API_KEY", "GOOGLE_API_KEY")
RETRY_STATUS = frozenset({408, 429, 500, 502, 503, 504})
# Nano Banana 2.1, GA 2026-10-06 and served by generateContent (the profile gives the
# sources); it replaces gemini-3.1-flash-image (Nano Banana 2), deprecated 2026-10-06
# (assets/gemini_models.toml: each model's status, shutdown and source)
DEFAULT_IMAGE_MODEL = "gemini-nano-banana-2.1"
DEFAULT_TEXT_MODEL = "gemini-3.8-flash"  # GA 2026-09-02 (the API changelog)

# "gemini-<major>.<minor>-<tier>" (a bare "gemini-3-flash" is 3.0)
_VERSIONED = re.compile(r"gemini-(\d+)(?:\.(\d+))?-([a-z-]+)")
# an alias that follows the newest model of its kind ("gemini-flash-latest")
_LATEST = re.compile(r"gemini-[a-z-]*latest")


@dataclass(frozen=True)
class ModelStatus:
    """One Gemini model's entry of ``assets/gemini_models.toml``."""

    id: str
    status: str  # stable, preview, deprecated or shut down
    released: str
    shutdown: str  # YYYY-MM-DD, or "" where none is announced
    replacement: str
    source: str
    read: str
    note: str = ""

    def shut_down_by(self, day: str) -> bool:
        """Whether the model is shut down on ``day`` (YYYY-MM-DD)."""
        return bool(self.shutdown) and self.shutdown <= day

    def words(self) -> str:
        """``shut down on 2026-10-02 (source, read ...); use gemini-nano-banana-2.1``."""
        when = f" on {self.shutdown}" if self.shutdown else ""
        said = f"{self.status}{when} ({self.source}, read {self.read})"
        return f"{said}; use {self.replacement}" if self.replacement else said


def gemini_models() -> dict[str, ModelStatus]:
    """Every entry of ``assets/gemini_models.toml``, by model id."""
    return dict(_gemini_models())


@functools.cache
def _gemini_models() -> tuple[tuple[str, ModelStatus], ...]:
    import tomllib

    from refine.assets import assets_dir

    raw = tomllib.loads((assets_dir() / "gemini_models.toml").read_text(encoding="utf-8"))
    return tuple((m["id"], ModelStatus(**m)) for m in raw.get("model", []))


def model_status(model: str) -> ModelStatus | None:
    """``model``'s entry in the list (a ``models/`` or ``gemini:`` prefix aside), or None."""
    name = model.removeprefix("gemini:").rsplit("/", 1)[-1]
    return gemini_models().get(name)


THINKING_LEVELS = ("minimal", "low", "medium", "high", "xhigh")  # google-genai's ThinkingLevel


def thinking_level_of(value: str | None) -> str | None:
    """A thinking level as the API takes it (upper case), None for the model's default; a
    ValueError naming the levels for any other value."""
    if value is None or value == "":
        return None
    if str(value).casefold() not in THINKING_LEVELS:
        raise ValueError(
            f"thinking_level must be one of {', '.join(THINKING_LEVELS)}, got {value!r}"
        )
    return str(value).upper()


def vertex_ai() -> str:
    """The variable that sends google-genai's requests to Vertex AI (as the SDK chooses:
    GOOGLE_GENAI_USE_VERTEXAI or GOOGLE_GENAI_USE_ENTERPRISE true or 1), or ""."""
    for name in ("GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_GENAI_USE_ENTERPRISE"):
        if os.environ.get(name, "").lower() in ("true", "1"):
            return name
    return ""


def gemini_3_or_later(model: str) -> bool:
    """Whether ``model`` is a Gemini 3 model or later (a ``-latest`` alias counts), for
    which Google advises keeping the default temperature of 1.0: "setting it below 1.0 may
    lead to unexpected behavior, such as looping or degraded performance" (the Gemini 3
    developer guide, ai.google.dev/gemini-api/docs/gemini-3, read 2026-12-06)."""
    name = model.rsplit("/", 1)[-1].casefold()
    match = _VERSIONED.match(name)
    if not match:
        return bool(_LATEST.fullmatch(name))
    return int(match.group(1)) >= 3


def fixed_sampling(model: str) -> bool:
    """Whether ``model`` fixes its own sampling, so that ``temperature``, ``top_p`` and
    ``top_k`` are deprecated and ignored: Gemini 3.6 Flash and 3.5 Flash-Lite, and the
    models after them (Google's Gemini 3.6 Flash and 3.5 Flash-Lite developer guide,
    2026-07-21, and ai.google.dev/gemini-api/docs/latest-model as cited in opencode PR
    #38924, read 2026-11-28: later models keep the same contract). The ``-latest`` aliases,
    which follow the newest model, count as later models; the versioned names before those,
    and names of other kinds (Gemma, experimental and tuned models), take the parameters."""
    name = model.rsplit("/", 1)[-1].casefold()
    match = _VERSIONED.match(name)
    if not match:
        return bool(_LATEST.fullmatch(name))
    version = (int(match.group(1)), int(match.group(2) or 0))
    lite = "lite" in match.group(3)
    return version >= (3, 6) or (version >= (3, 5) and lite)


class GeminiError(RuntimeError):
    """A Gemini call that failed for good; the message says what to do. ``code`` is the
    HTTP status when the API answered, ``detail`` its own message."""

    def __init__(self, message: str, code: int | None = None, detail: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.detail = detail


class GeminiBlocked(GeminiError, Refused):
    """An answer the model refused, or ended without content: ``reason`` is its finish
    reason (or the prompt's block reason). Another request may be answered."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason

    def __reduce__(self) -> Any:  # whole across processes (a Ray worker's cell)
        return (type(self), (str(self), self.reason))


class GeminiJobFailed(GeminiError, JobFailure):
    """A request of a batch job that failed, expired or could not be read, or that the job
    answered with an error: that request's own failure (its cell fails, the others go on)."""

    def __reduce__(self) -> Any:
        return (type(self), (str(self), self.code, self.detail))


# google-genai's FinishReason values an answer may end with, without content, and what the
# user can do about each (any other value, a new one included, gets the last line)
_REFUSED = frozenset(
    {"SAFETY", "PROHIBITED_CONTENT", "BLOCKLIST", "SPII", "IMAGE_SAFETY",
     "IMAGE_PROHIBITED_CONTENT", "MODEL_ARMOR"}
)  # fmt: skip
_RECITED = frozenset({"RECITATION", "IMAGE_RECITATION"})
_ENDED = {
    "MAX_TOKENS": "the answer was cut at its output limit: lower the thinking level or "
    "raise max_output_tokens",
    "LANGUAGE": "the request's language is not one the model answers in",
    "NO_IMAGE": "the model made no image: rephrase the instruction as a change to the picture",
}
_NO_ANSWER = "the model gave no answer: try again, or another model"


def finish_hint(reason: str) -> str:
    """What to do about an answer that ended with ``reason`` and no content."""
    if reason in _REFUSED:
        return "the model's safety filters refused it: rephrase the request"
    if reason in _RECITED:
        return "it would repeat protected material: rephrase the request"
    return _ENDED.get(reason, _NO_ANSWER)


@dataclass(frozen=True)
class Quota:
    """What a 429 says about the quota it hit: the ``QuotaFailure`` violation's quota id,
    metric and limit, and the ``RetryInfo`` delay in seconds (None where not given)."""

    quota_id: str = ""
    metric: str = ""
    limit: str = ""
    retry_s: float | None = None

    @property
    def daily(self) -> bool:
        return "perday" in self.quota_id.casefold()

    @property
    def none_on_tier(self) -> bool:
        return self.limit.strip() == "0"

    @property
    def spend(self) -> bool:
        """A spend-based limit (the rate-limits page lists them beside request limits):
        told by a quota id that names spending, as ``daily`` by one that names a day. No
        such answer has been seen; the shape is the SDK's QuotaFailure, as for the others."""
        return "spend" in self.quota_id.casefold()

    @property
    def final(self) -> bool:
        """Whether waiting within a run cannot bring it back: no retry."""
        return self.daily or self.none_on_tier or self.spend


def _seconds(text: Any) -> float | None:
    """A protobuf duration as JSON writes it ("23s", "23.017255505s") in seconds."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d*)?)s\s*", str(text or ""))
    return float(match.group(1)) if match else None


def quota_of(err: Any) -> Quota | None:
    """The quota a 429 answer names (None: the answer names none). A per-day violation is
    preferred over others in the same answer; the delay falls back to the message's
    "Please retry in 23.0s"."""
    body = getattr(err, "details", None)
    error = body.get("error", body) if isinstance(body, dict) else {}
    details = error.get("details") if isinstance(error, dict) else None
    violations: list[dict] = []
    retry = None
    for item in details if isinstance(details, list) else []:
        if not isinstance(item, dict):
            continue
        kind = str(item.get("@type", ""))
        if kind.endswith("QuotaFailure"):
            violations += [v for v in item.get("violations") or [] if isinstance(v, dict)]
        elif kind.endswith("RetryInfo"):
            retry = _seconds(item.get("retryDelay"))
    if retry is None:
        said = re.search(r"retry in (\d+(?:\.\d+)?)\s*s", str(getattr(err, "message", "")))
        retry = float(said.group(1)) if said else None
    if not violations and retry is None:
        return None
    violations.sort(
        key=lambda v: (
            not any(w in str(v.get("quotaId", "")).casefold() for w in ("perday", "spend"))
        )
    )
    first = violations[0] if violations else {}
    return Quota(
        str(first.get("quotaId", "")),
        str(first.get("quotaMetric", "")),
        str(first.get("quotaValue", "")),
        retry,
    )


def quota_words(model: str, quota: Quota) -> str:
    """One line on a quota that does not come back within a run."""
    named = f" ({quota.quota_id}, limit {quota.limit})" if quota.quota_id else ""
    if quota.spend:
        return (
            f"{model}: the project's spend cap is reached{named}; raise it where the "
            "project's spending is set (Google AI Studio's usage and billing; "
            "ai.google.dev/gemini-api/docs/rate-limits), or wait for its period to end"
        )
    if quota.none_on_tier:
        return (
            f"{model}: this model has no quota on the account's tier{named}; enable billing "
            "for the project, or pick another model"
        )
    return (
        f"{model}: its daily request quota is spent{named}; daily quotas reset at midnight "
        "Pacific time (ai.google.dev/gemini-api/docs/rate-limits)"
    )


def logprobs_unavailable(err: GeminiError) -> bool:
    """The API's answer to a log-probability request on a model that has none."""
    text = err.detail.casefold()
    return (
        err.code == 400 and "logprob" in text and ("not enabled" in text or "not support" in text)
    )


@dataclass
class CallRecord:
    model: str
    purpose: str
    prompt_tokens: int
    output_tokens: int  # billed output: the answer's tokens and its thoughts'
    total_tokens: int
    seconds: float
    attempts: int
    thought_tokens: int = 0  # of output_tokens, the thoughts' (billed as output)


def _streams_files(client: Any) -> bool:
    """Whether the SDK ``client`` streams a download to a file and has the request
    converter a batch job's file is written with."""
    import inspect

    try:
        from google.genai.batches import _InlinedRequest_to_mldev  # noqa: F401

        return "destination" in inspect.signature(client.files.download).parameters
    except (ImportError, AttributeError, TypeError, ValueError):
        return False


@dataclass
class GeminiClient:
    """A google-genai client with timeouts, retries and a usage log, shared by the roles."""

    api_key: str | None = None
    base_url: str | None = None
    timeout_s: float = 120.0
    max_retries: int = 4
    initial_delay_s: float = 1.0
    max_delay_s: float = 32.0
    # each wait is scaled by a random factor in [1 - jitter, 1 + jitter], so workers that hit
    # a rate limit together do not retry in step
    jitter: float = 0.2
    sleep: Callable[[float], None] = time.sleep
    calls: list[CallRecord] = field(default_factory=list)
    # the request's ``store``: False opts out of the API's request logging (on by default
    # for paid projects created on or after 2026-10-26); None or "project" sends none (the
    # project's setting); ai.google.dev/gemini-api/docs/logs-datasets, read 2026-11-28.
    # Vertex AI takes no ``store`` (its logging is the Cloud project's): none is sent there
    store: bool | str | None = False

    def __post_init__(self) -> None:
        if self.store == "project":
            self.store = None
        if self.store is not None and not isinstance(self.store, bool):
            raise ValueError(
                f'store: true, false or "project" (the project\'s setting), got {self.store!r}'
            )
        self._client: Any = None
        self._lock = threading.Lock()
        self._checked: set[str] = set()
        # per model asked for: each ``modelVersion`` its answers named -> the number of the
        # last answer that named it (refine.usage.answered: counted across the process), so
        # that a record names the versions of the answers since its own work began
        self._versions: dict[str, dict[str, int]] = {}
        # per model: no request before this time.monotonic() (a 429's retryDelay)
        self._resume_at: dict[str, float] = {}

    def _hold(self, model: str) -> None:
        """Wait until ``model``'s retry delay has passed (a stop ends the wait; a budget
        that ends first is spent now)."""
        while True:
            with self._lock:
                wait = self._resume_at.get(model, 0.0) - time.monotonic()
            if wait <= 0:
                return
            left = time_left()
            if left is not None and left <= wait:
                raise BudgetExhausted(
                    f"{model}: the wall-time budget ends before the API's retry delay "
                    f"({wait:.0f} s) has passed"
                )
            log.warning("%s: the API asked to wait; the next request in %.1f s", model, wait)
            self.sleep(wait)
            check_stop()

    def model_version(self, model: str, since: int = 0) -> str:
        """The ``modelVersion`` values the answers for ``model`` named after answer number
        ``since`` ("" before the first), comma-separated where the API served more than
        one."""
        with self._lock:
            seen = self._versions.get(model, {})
            return ", ".join(sorted(v for v, last in seen.items() if last > since))

    def batch_create(self, model: str, inlined: list[Any] | str, display: str) -> str:
        """A batch job of ``inlined`` requests to ``model`` (or of the requests in an
        uploaded file, by its name "files/..."): the job's name; a spent daily quota
        raises :class:`refine.usage.QuotaSpent`, another refusal a :class:`GeminiError`."""
        from google.genai import errors, types

        try:
            job = self.client().batches.create(
                model=model, src=inlined, config=types.CreateBatchJobConfig(display_name=display)
            )
        except errors.APIError as err:
            quota = quota_of(err) if err.code == 429 else None
            if quota is not None and quota.final:
                raise QuotaSpent(quota_words(model, quota)) from err
            detail = (err.message or str(err)).strip()
            raise GeminiError(_explain(model, err, 1), err.code, detail) from err
        return str(job.name)

    def batch_files(self) -> bool:
        """Whether batch jobs can send and answer their requests as files (the developer
        API's Files API; Vertex AI, which reads them from Cloud Storage, is refused before).
        A google-genai too old to stream a download, or without the request converter the
        files are written with, is a :class:`GeminiError` naming the upgrade, before any job
        is sent (its answers could not be read once paid for)."""
        client = self.client()
        if getattr(client, "vertexai", False):
            return False
        if not _streams_files(client):
            from google.genai import __version__

            raise GeminiError(
                f"google-genai {__version__} cannot send image batch jobs as files (it has no "
                "streamed download or request converter); upgrade it: pip install -U "
                "google-genai"
            )
        return True

    def batch_create_by_file(
        self, model: str, inlined: list[Any], display: str, folder: Path
    ) -> tuple[str, str]:
        """A batch job of ``inlined`` requests sent as a JSON Lines file (the Files API), its
        answers a file too (:meth:`batch_download`): the job's name and the file's (deleted,
        :meth:`batch_forget`, once the job is done, or at once if the job is refused)."""
        import uuid

        from google.genai import errors, types

        from refine.backends.gemini_batch import request_lines

        client = self.client()
        lines = folder / f".gemini-batch-{uuid.uuid4().hex[:12]}.jsonl"
        try:
            request_lines(client._api_client, inlined, lines)
            try:
                uploaded = client.files.upload(
                    file=str(lines),
                    config=types.UploadFileConfig(display_name=display, mime_type="jsonl"),
                )
            except errors.APIError as err:
                detail = (err.message or str(err)).strip()
                raise GeminiError(_explain(model, err, 1), err.code, detail) from err
        finally:
            lines.unlink(missing_ok=True)
        try:
            return self.batch_create(model, str(uploaded.name), display), str(uploaded.name)
        except (GeminiError, QuotaSpent) as err:
            from refine.backends.gemini_batch import _refused

            if _refused(err):  # no job was made: its file would stay 48 hours for nothing
                with contextlib.suppress(Exception):
                    self.batch_forget(str(uploaded.name))
            raise

    def batch_forget(self, name: str) -> None:
        """Delete the uploaded file ``name`` (the Files API keeps 20 GB for 48 hours)."""
        from google.genai import errors

        try:
            self.client().files.delete(name=name)
        except errors.APIError as err:
            detail = (err.message or str(err)).strip()
            raise GeminiError(f"file {name}: HTTP {err.code}: {detail}", err.code, detail) from err

    def batch_download(self, name: str, destination: Path, timeout_s: float) -> None:
        """The file ``name`` (a job's answers) written to ``destination`` as it streams in,
        a part at a time (never whole in memory), each read given ``timeout_s``."""
        from google.genai import errors, types

        limit = types.HttpOptions(timeout=max(1, int(timeout_s * 1000)))
        try:
            self.client().files.download(
                file=name,
                destination=str(destination),
                config=types.DownloadFileConfig(http_options=limit),
            )
        except errors.APIError as err:
            detail = (err.message or str(err)).strip()
            raise GeminiError(f"file {name}: HTTP {err.code}: {detail}", err.code, detail) from err

    def batch_named(self, display: str) -> str | None:
        """The name of the batch job whose display name is ``display`` (the newest, where
        several are), or None: how a job created just before a kill is found again."""
        from google.genai import errors

        try:
            for job in self.client().batches.list(config={"page_size": 100}):
                if getattr(job, "display_name", None) == display:
                    return str(job.name)
        except errors.APIError as err:
            detail = (err.message or str(err)).strip()
            raise GeminiError(f"batch jobs: HTTP {err.code}: {detail}", err.code, detail) from err
        return None

    def batch_get(self, name: str) -> Any:
        """The batch job ``name`` as the API has it now (a :class:`GeminiError` with the
        HTTP status where it answers with an error)."""
        from google.genai import errors

        try:
            return self.client().batches.get(name=name)
        except errors.APIError as err:
            detail = (err.message or str(err)).strip()
            raise GeminiError(
                f"batch job {name}: HTTP {err.code}: {detail}", err.code, detail
            ) from err

    def _wait_from_now(self, model: str, seconds: float) -> None:
        with self._lock:
            at = time.monotonic() + seconds
            self._resume_at[model] = max(self._resume_at.get(model, 0.0), at)

    def check_model(self, model: str, image: bool) -> None:
        """The API knows ``model`` and it can generate content; else a GeminiError naming
        the models offered for the role (image models when ``image``). Checked once."""
        from google.genai import errors

        if model in self._checked:
            return
        client = self.client()
        try:
            info = client.models.get(model=model)
        except errors.APIError as err:
            detail = (err.message or str(err)).strip()
            if err.code == 404:
                offered = ", ".join(self.offered(image)) or "none"
                kind = "image" if image else "text"
                known = model_status(model)
                why = known.words() if known is not None else "unknown or retired"
                raise GeminiError(
                    f"{model}: no such Gemini model ({why}); {kind} models the API offers: "
                    f"{offered}",
                    404,
                    detail,
                ) from err
            raise GeminiError(_explain(model, err, 1), err.code, detail) from err
        actions = list(getattr(info, "supported_actions", None) or [])
        if actions and "generateContent" not in actions:
            raise GeminiError(
                f"{model}: this model cannot generate content (it offers {', '.join(actions)})"
            )
        self._checked.add(model)

    def offered(self, image: bool) -> list[str]:
        """Models the API offers that generate content: image models, or text models."""
        try:
            models = list(self.client().models.list())
        except Exception:  # only for a message
            log.debug("could not list the Gemini models", exc_info=True)
            return []
        names = []
        for m in models:
            name = str(getattr(m, "name", "") or "").removeprefix("models/")
            actions = list(getattr(m, "supported_actions", None) or [])
            draws = "image" in name or "banana" in name  # (Nano Banana 2.1: no "image")
            if name and "generateContent" in actions and draws == image:
                names.append(name)
        return sorted(names)

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
        """``generate_content`` with retries; returns the response of the first candidate.

        Under a wall-time budget (:func:`refine.usage.deadline`) each attempt first checks
        the time left, its timeout and retry waits are capped to it, and
        :class:`refine.usage.BudgetExhausted` is raised when it is spent. Under a stop
        (:func:`refine.usage.stop_on`) a call in flight is abandoned when the stop comes
        (:class:`refine.usage.StopRequested`; its answer is never used)."""
        from google.genai import errors

        from refine.backends.gemini_batch import BatchAnswerError, BatchJobError, active

        client = self.client()
        if self.store is not None and not getattr(client, "vertexai", False):
            config = config.model_copy(update={"store": self.store})
        start = time.perf_counter()
        batcher = active()
        if batcher is not None:  # one request of a batch job, answered when the job is
            check_stop()
            sent(f"gemini:{model}")
            try:
                response = batcher.submit(self, model, contents, config)
            except BatchAnswerError as err:  # the job answered this request with an error
                raise GeminiJobFailed(str(err), err.code, err.message) from err
            except BatchJobError as err:  # the job failed, expired or could not be read
                raise GeminiJobFailed(str(err)) from err
            return self._answered(model, purpose, response, start, 1)
        for attempt in range(self.max_retries + 1):
            check_stop()
            self._hold(model)
            left = time_left()
            if left is not None and left <= 0:
                raise BudgetExhausted(f"{model}: the wall-time budget is spent ({purpose})")
            capped = left is not None and left < self.timeout_s
            if capped:
                from google.genai import types

                limit = types.HttpOptions(timeout=max(1, int(left * 1000)))
                config = config.model_copy(update={"http_options": limit})
            sent(f"gemini:{model}")
            try:
                response = abandonable(
                    lambda config=config: client.models.generate_content(
                        model=model, contents=contents, config=config
                    )
                )
                _check_images(response)
                break
            except errors.APIError as err:
                quota = quota_of(err) if err.code == 429 else None
                if quota is not None and quota.final:
                    raise QuotaSpent(quota_words(model, quota)) from err  # no retry
                retry = err.code in RETRY_STATUS and attempt < self.max_retries
                if not retry:
                    detail = (err.message or str(err)).strip()
                    raise GeminiError(_explain(model, err, attempt + 1), err.code, detail) from err
                reason = f"HTTP {err.code}"
                if quota is not None and quota.retry_s is not None:
                    # every thread waits the delay the API gave, then this call is retried
                    self._wait_from_now(model, quota.retry_s)
                    log.warning(
                        "%s: HTTP 429 (%s), retrying once %.1f s have passed",
                        model,
                        quota.quota_id or "rate limit",
                        quota.retry_s,
                    )
                    continue
            except ValueError as err:  # garbage: HTML, JSON cut short, bad base64, no image
                said = " ".join(str(err).split())[:160]
                if attempt >= self.max_retries:
                    raise GeminiError(
                        f"{model}: the API's answer could not be read after {attempt + 1} "
                        f"attempt(s) ({type(err).__name__}: {said}); a proxy or the service "
                        "may be failing: try again later"
                    ) from err
                reason = f"an answer that could not be read ({type(err).__name__})"
            except Exception as err:  # timeouts and dropped connections
                if not _is_transient(err):
                    raise
                if capped:  # the timeout was the budget's
                    raise BudgetExhausted(
                        f"{model}: the wall-time budget ran out waiting for an answer ({purpose})"
                    ) from err
                if attempt >= self.max_retries:
                    raise GeminiError(
                        f"{model}: no answer after {attempt + 1} attempt(s) "
                        f"({type(err).__name__}); the timeout is {self.timeout_s:g} s"
                    ) from err
                reason = type(err).__name__
            delay = min(self.max_delay_s, self.initial_delay_s * 2**attempt)
            if self.jitter:
                delay *= 1.0 + random.uniform(-self.jitter, self.jitter)
            left = time_left()
            if left is not None:
                if left <= delay:
                    raise BudgetExhausted(
                        f"{model}: {reason}, and the wall-time budget ends before a retry"
                    )
            log.warning("%s: %s, retrying in %.1f s", model, reason, delay)
            self.sleep(delay)
            check_stop()
        return self._answered(model, purpose, response, start, attempt + 1)

    def _answered(
        self, model: str, purpose: str, response: Any, start: float, attempts: int
    ) -> Any:
        """``response`` recorded (its tokens, model version and time) and checked."""
        usage = getattr(response, "usage_metadata", None)
        # a thinking model's thoughts are billed as output tokens (the pricing page:
        # "output price (including thinking tokens)"), counted apart from the answer's
        thoughts = int(getattr(usage, "thoughts_token_count", 0) or 0)
        record = CallRecord(
            model,
            purpose,
            int(getattr(usage, "prompt_token_count", 0) or 0),
            int(getattr(usage, "candidates_token_count", 0) or 0) + thoughts,
            int(getattr(usage, "total_token_count", 0) or 0),
            time.perf_counter() - start,
            attempts,
            thoughts,
        )
        self.calls.append(record)
        version = getattr(response, "model_version", None)
        number = count_answer()
        if version:
            with self._lock:
                self._versions.setdefault(model, {})[str(version)] = number

        record_usage(
            f"gemini:{model}", record.prompt_tokens, record.output_tokens, record.total_tokens
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
    if code == 400 and "location is not supported" in message.lower():
        return (
            f"{model}: HTTP 400: {message} (the Gemini API is not offered in the region "
            "the request came from: see ai.google.dev/gemini-api/docs/available-regions, "
            "or use Vertex AI or a local profile)"
        )
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
    """:class:`GeminiBlocked` for a blocked prompt, an answer the model refused, and an
    answer of any finish reason that came without content (its parts)."""
    feedback = getattr(response, "prompt_feedback", None)
    block = getattr(feedback, "block_reason", None) if feedback else None
    if block:
        name = getattr(block, "name", str(block))
        raise GeminiBlocked(f"{model}: the prompt was blocked ({name}); rephrase the request", name)
    if not getattr(response, "candidates", None):
        raise GeminiBlocked(f"{model}: the answer has no candidates ({_NO_ANSWER})", "none")
    reason = _finish_reason(response)
    if reason in _REFUSED:
        raise GeminiBlocked(
            f"{model}: the answer was blocked (finish reason {reason}): {finish_hint(reason)}",
            reason,
        )
    if not _parts(response):
        raise GeminiBlocked(
            f"{model}: the answer has no content (finish reason {reason}): {finish_hint(reason)}",
            reason,
        )


def _parts(response: Any) -> list[Any]:
    """The first candidate's parts ([] where it has no content)."""
    content = getattr(response.candidates[0], "content", None)
    return list(getattr(content, "parts", None) or [])


# A reference photo's longest side when sent. The image models make at most 2K images
# here, and a Gemini 3 model reads an image in at most 1,120 tokens at its highest media
# resolution (ai.google.dev/gemini-api/docs/media-resolution), so pixels past 2,048 add
# bytes and no detail it reads. A 12 MP photo sent whole as PNG is 15-25 MB: three of them
# near the inline request's limit; resized and sent as JPEG, one is well under 1 MB.
PHOTO_SIDE = 2048
PHOTO_QUALITY = 90  # JPEG quality for photos: no artefact a model reads at that size


def _image_part(image: Image.Image, photo: bool = False) -> Any:
    """An image as a request part: PNG, the image as it is (an image to edit or judge:
    its every pixel is the point); a ``photo`` (a user's reference photo) resized to
    :data:`PHOTO_SIDE` on its longest side where it is larger, and sent as JPEG."""
    from google.genai import types
    from PIL import Image as PILImage

    image = image.convert("RGB")
    buf = io.BytesIO()
    if not photo:
        image.save(buf, format="PNG")
        return types.Part.from_bytes(data=buf.getvalue(), mime_type="image/png")
    if max(image.size) > PHOTO_SIDE:
        scale = PHOTO_SIDE / max(image.size)
        size = (max(1, round(image.width * scale)), max(1, round(image.height * scale)))
        image = image.resize(size, PILImage.Resampling.LANCZOS)
    image.save(buf, format="JPEG", quality=PHOTO_QUALITY)
    return types.Part.from_bytes(data=buf.getvalue(), mime_type="image/jpeg")


class NotAnImage(ValueError):
    """An answer's image part whose bytes are no image (a garbage answer: retried)."""


def _decoded(data: bytes) -> Image.Image:
    """An image part's bytes as an RGB image; :class:`NotAnImage` for bytes PIL cannot
    read as one (HTML, text, an image cut short)."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data)) as image:
            return image.convert("RGB")
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError) as err:
        head = data[:16]
        raise NotAnImage(
            f"an image part of {len(data)} bytes that is no image ({type(err).__name__}; "
            f"it begins {head!r})"
        ) from err


def _check_images(response: Any) -> None:
    """Every image part of ``response`` is an image (:class:`NotAnImage` otherwise), so that
    bytes that are no image are retried like the other garbage answers. PIL reads its
    header and checks its structure (``verify``: a PNG's chunks and their checksums)
    without decoding its pixels, which :func:`_first_image` does once."""
    from PIL import Image, UnidentifiedImageError

    candidates = getattr(response, "candidates", None) or []
    if not candidates:
        return
    for part in _parts(response):
        data = getattr(part.inline_data, "data", None) if part.inline_data is not None else None
        kind = str(getattr(part.inline_data, "mime_type", "") or "") if data else ""
        if data and (kind.startswith("image/") or not kind):
            try:
                with Image.open(io.BytesIO(data)) as image:
                    image.verify()
            except (UnidentifiedImageError, OSError, ValueError, SyntaxError) as err:
                raise NotAnImage(
                    f"an image part of {len(data)} bytes that is no image "
                    f"({type(err).__name__}; it begins {data[:16]!r})"
                ) from err


def _first_image(model: str, response: Any) -> Image.Image:
    texts = []
    for part in _parts(response):
        if part.inline_data is not None and part.inline_data.data:
            try:
                return _decoded(part.inline_data.data)
            except NotAnImage as err:  # a batch job's answer, which is not retried:
                # that request's own failure (its cell fails, a bench goes on)
                raise GeminiJobFailed(f"{model}: the answer's {err}") from err
        if part.text:
            texts.append(part.text)
    said = f"; it said: {' '.join(texts)[:300]}" if texts else ""
    reason = _finish_reason(response)
    raise GeminiBlocked(f"{model}: the answer has no image (finish reason {reason}){said}", reason)


def _text(response: Any) -> str:
    return "".join(p.text for p in _parts(response) if p.text)


_SHARED: dict[tuple, GeminiClient] = {}


def shared_client(**options: Any) -> GeminiClient:
    key = tuple(sorted(options.items()))
    if key not in _SHARED:
        _SHARED[key] = GeminiClient(**options)
    return _SHARED[key]


class _GeminiBackend:
    default_model = DEFAULT_TEXT_MODEL
    thread_safe = True  # HTTP calls: batch workers may call at the same time
    # where its other options go: the shared client's (registry.constructor_options)
    options_go_to = ("refine.backends.gemini:GeminiClient",)

    def __init__(
        self,
        model: str = "",
        client: GeminiClient | None = None,
        concurrency: int = 4,
        **client_options,
    ):
        self.model = model or self.default_model
        self.gemini = client or shared_client(**client_options)
        if int(concurrency) < 1:
            raise ValueError(f"concurrency must be at least 1, got {concurrency}")
        # how many of a round's candidates may call this model at the same time
        self.concurrency = int(concurrency)

    @property
    def id(self) -> str:
        return f"gemini:{self.model}"

    def load(self):
        self.gemini.client()
        return self

    @property
    def sets_temperature(self) -> bool:
        """Whether a request's temperature reaches the model (:func:`fixed_sampling`)."""
        return not fixed_sampling(self.model)

    takes_since = True  # info(since=N): the versions of answers after answer N

    def info(self, since: int = 0) -> dict[str, str]:
        info = {"id": self.id, "device": "api", "dtype": "n/a"}
        version = self.gemini.model_version(self.model, since)
        if version:  # what served the requests, beside the model asked for
            info["model_version"] = version
        if not self.sets_temperature and self.role not in ("generator", "editor"):
            info["sampling"] = (
                "the model's own: it ignores temperature, top_p and top_k, so none is sent"
            )
        if self.gemini.store is not None:
            info["store"] = str(self.gemini.store).lower()
        return info

    def _each(self, seeds: Sequence[int], one: Any) -> list[Any]:
        """``one(seed)`` for every seed, in seed order: up to ``concurrency`` requests at
        once (each on a worker thread that keeps the caller's usage and deadline)."""
        from refine.backends.gemini_batch import MAX_AT_ONCE

        width = min(len(seeds), MAX_AT_ONCE) if self.batched else self.concurrency
        return usage.at_once(one, seeds, width)

    @property
    def batched(self) -> bool:
        """Whether requests go out as batch jobs now (:mod:`refine.backends.gemini_batch`):
        then a call sends all its requests at once, to wait on the job together."""
        from refine.backends.gemini_batch import active

        return active() is not None

    def verify(self) -> None:
        """The key is set and the API offers this model for this role (no paid call)."""
        self.gemini.check_model(self.model, image=self.role in ("generator", "editor"))


class GeminiGenerator(_GeminiBackend):
    """Text-to-image with a Gemini image model; the seed is sent with each request."""

    role = "generator"
    default_model = DEFAULT_IMAGE_MODEL
    # real photos a request may carry beside the prompt (the Gemini image models take
    # several input images; Gemini 2.5 Flash Image works best with up to 3)
    reference_images = 3

    def generate(
        self, prompt: str, seeds: Sequence[int], references: Sequence[Image.Image] = ()
    ) -> list[Image.Image]:
        """One image per seed; ``references``: photos sent before the prompt (the scene's
        real look), at most :attr:`reference_images`."""
        from google.genai import types

        shown = [_image_part(r, photo=True) for r in list(references)[: self.reference_images]]

        def one(seed: int) -> Image.Image:
            config = types.GenerateContentConfig(response_modalities=["IMAGE", "TEXT"], seed=seed)
            response = self.gemini.generate(self.model, [*shown, prompt], config, "generate")
            return _first_image(self.model, response)

        return self._each(seeds, one)


class GeminiEditor(_GeminiBackend):
    """Instruction-based editing of an input image with a Gemini image model."""

    role = "editor"
    default_model = DEFAULT_IMAGE_MODEL
    reference_images = 3  # real photos a request may carry after the image (as above)
    # a region is said in the instruction (the API takes no mask), and the original's pixels
    # are pasted back outside it
    localizes = "instruction"

    def edit(
        self,
        image: Image.Image,
        instruction: str,
        seeds: Sequence[int],
        references: Sequence[Image.Image] = (),
        regions: Sequence[Sequence[float]] = (),
        mask: Image.Image | None = None,
    ) -> list[Image.Image]:
        """One edit of ``image`` per seed; ``references``: real photos sent after it (what
        the edit should look like), at most :attr:`reference_images`; ``regions``: boxes
        the edit is restricted to, and ``mask``: a region drawn (one channel, the image's
        size), each said in the instruction (a drawn region by its bounding box), and the
        original's pixels pasted back outside them (beyond a feathered band:
        ``regions.paste_back``), so that the outside cannot drift whatever the model
        repaints."""
        from google.genai import types
        from PIL import Image as PILImage

        from refine.backends.regions import mask_array, mask_box, paste_back, region_words

        said = list(regions)
        if mask is not None:  # checked before any request: its size, its one channel
            said.append(mask_box(mask_array(mask, image.size)))
        if said:
            instruction = f"{instruction}\n\n{region_words(said)}"
        shown = [_image_part(r, photo=True) for r in list(references)[: self.reference_images]]
        if shown:  # the first image is the one edited; the photos are named as such
            instruction = (
                f"{instruction}\n\nThe first image is the one to edit; the other "
                f"{len(shown)} are real photos of the scene, for reference only."
            )

        def one(seed: int) -> Image.Image:
            config = types.GenerateContentConfig(response_modalities=["IMAGE", "TEXT"], seed=seed)
            response = self.gemini.generate(
                self.model, [_image_part(image), *shown, instruction], config, "edit"
            )
            edited = _first_image(self.model, response)
            if edited.size != image.size:
                edited = edited.resize(image.size, PILImage.Resampling.LANCZOS)
            if said:
                edited = paste_back(image, edited, regions, mask)
            return edited

        return self._each(seeds, one)


class GeminiLanguageModel(_GeminiBackend):
    """JSON answers validated against a pydantic schema (structured output)."""

    role = "llm"

    def __init__(
        self,
        model: str = "",
        temperature: float | None = None,
        max_repairs: int = 2,
        prompts: str = "toolkit",
        thinking_level: str | None = None,
        **kw,
    ):
        """``temperature``: what every request sends, where the model takes one (None:
        the model's own, 1.0, for Gemini 3 and later, as Google advises for them; 0.0
        for earlier models). A call's own temperature (a paper's protocol, such as the
        reference builder's) is sent as it is. ``thinking_level`` (minimal, low, medium,
        high): a Gemini 3 model's thinking, whose tokens are billed as output (None: the
        model's default)."""
        super().__init__(model, **kw)
        if temperature is None and not gemini_3_or_later(self.model):
            temperature = 0.0
        self.temperature = temperature
        self.thinking_level = thinking_level_of(thinking_level)
        self.max_repairs = max_repairs
        # an observer's prompts: the toolkit's, or AHEaD's per dimension (Tab. 22-27)
        self.prompts = check_observer_prompts(prompts)

    def _ask_json(
        self,
        contents_prefix: list[Any],
        schema: type[T],
        purpose: str,
        temperature: float | None = None,
    ):
        from google.genai import types

        heat = self.temperature if temperature is None else temperature
        level = self.thinking_level
        thinking = types.ThinkingConfig(thinking_level=level) if level else None

        def ask(prompt: str) -> str:
            config = types.GenerateContentConfig(
                temperature=heat if self.sets_temperature else None,
                response_mime_type="application/json",
                response_schema=schema,
                thinking_config=thinking,
            )
            contents = [*contents_prefix, prompt]
            try:
                response = self.gemini.generate(self.model, contents, config, purpose)
            except GeminiBlocked as blocked:  # asked once more, from a seed of its own
                log.warning("%s; asking once more", blocked)
                config = config.model_copy(update={"seed": RETRY_SEED})
                response = self.gemini.generate(self.model, contents, config, purpose)
            return _text(response)

        return ask

    def complete_json(self, prompt: str, schema: type[T], temperature: float | None = None) -> T:
        ask = self._ask_json([], schema, "complete_json", temperature)
        return ask_with_repair(ask, prompt, schema, self.id, self.max_repairs)


class GeminiObserver(ApiObserver, GeminiLanguageModel):
    """Lists the descriptors visible in an image, per dimension (:class:`ApiObserver`)."""

    role = "observer"

    def _ask_about(self, image: Image.Image, schema: type[T], purpose: str):
        return self._ask_json([_image_part(image)], schema, purpose)


class GeminiJudge(ProbabilityJudge, _GeminiBackend):
    """Answer probabilities: from the first answer token's log-probabilities, or from k
    sampled answers when the model gives none (see :mod:`refine.backends.judging`)."""

    role = "judge"
    top_logprobs = 20

    def __init__(
        self,
        model: str = "",
        thinking_budget: int | None = 0,
        judge_mode: str = "auto",
        samples: int = 8,
        thinking_level: str | None = None,
        agree: int = 0,
        **kw: Any,
    ) -> None:
        """``thinking_budget=0`` turns thinking off so the first token is the answer and the
        short output limit is not spent on thoughts; use ``None`` for models that cannot
        turn it off (then the limit is lifted and the first answer token is read). Gemini 3
        models take ``thinking_level`` (minimal, low, ...) instead, which replaces the
        budget. ``judge_mode`` is auto, logprobs or sampled; ``samples`` is k,
        the most answers a sampled reading takes, and ``agree`` its first answers, which
        end the reading when they are all the same (0: always k)."""
        check_judge_options(judge_mode, samples, agree)
        super().__init__(model, **kw)
        self.thinking_level = thinking_level_of(thinking_level)
        self.thinking_budget = None if self.thinking_level else thinking_budget
        self.judge_mode = judge_mode
        self.samples = samples
        self.agree = agree

    @property
    def probe_key(self) -> str:
        # the developer API by default; Vertex AI (as google-genai chooses it:
        # GOOGLE_GENAI_USE_VERTEXAI or _ENTERPRISE true or 1) and another endpoint serving
        # the model (a proxy, a stand-in) are remembered apart: one may give
        # log-probabilities where another does not
        url = self.gemini.base_url or os.environ.get("GOOGLE_GEMINI_BASE_URL")
        if url:
            return f"{self.model}@{url}"
        return f"{self.model}@vertex-ai" if vertex_ai() else self.model

    def _thinking(self) -> Any:
        from google.genai import types

        if self.thinking_level:
            return types.ThinkingConfig(thinking_level=self.thinking_level)
        if self.thinking_budget is not None:
            return types.ThinkingConfig(thinking_budget=self.thinking_budget)
        return None

    def info(self, since: int = 0) -> dict[str, str]:
        agree = str(self.agree)
        if self.batched and self.agree:
            agree += (
                f" (a batch job sends all {self.samples} answers at once and reads them as a "
                "live reading does)"
            )
        info = {"judge_mode": self.judge_mode, "method": self.method, "agree": agree}
        return {**super().info(since), **info}

    @property
    def sampling(self) -> bool:
        # a batch job cannot wait for the probe's answer: the developer API gives no
        # log-probabilities, so "auto" samples there (judge_mode "logprobs" still asks)
        if self.batched and self.judge_mode == "auto":
            return True
        return ProbabilityJudge.sampling.fget(self)

    def _width(self) -> int:
        from refine.backends.gemini_batch import MAX_AT_ONCE

        return MAX_AT_ONCE if self.batched else self.concurrency

    def _prefetched(self) -> bool:
        # a batch job cannot wait for a reading's first answers: it sends all k at once
        return self.batched

    def _error(self, message: str) -> Exception:
        return GeminiError(message)

    def _answer_logprobs(
        self, image: Image.Image, text: str, purpose: str
    ) -> tuple[list[dict[str, float]], list[str]]:
        """The most likely tokens at each position of the answer (their log-probabilities)
        and the tokens chosen."""
        from google.genai import types

        config = types.GenerateContentConfig(
            temperature=0.0 if self.sets_temperature else None,
            max_output_tokens=answer_tokens(4, purpose) if self.thinking_budget == 0 else None,
            response_logprobs=True,
            logprobs=self.top_logprobs,
            thinking_config=self._thinking(),
        )
        try:
            response = self.gemini.generate(self.model, [_image_part(image), text], config, purpose)
        except GeminiError as err:
            if logprobs_unavailable(err):
                raise LogprobsUnavailable(str(err), err) from err
            raise
        result = response.candidates[0].logprobs_result
        if result is None or not result.top_candidates:
            raise GeminiError(
                f"{self.model}: the answer has no log-probabilities; this model cannot judge "
                'by log-probabilities (set judge_mode = "sampled" in [options.judge])'
            )
        positions = []
        for top in result.top_candidates:
            seen: dict[str, float] = {}  # by the token as the model names it
            for cand in top.candidates or []:
                seen.setdefault(cand.token or "", float(cand.log_probability))
            positions.append(pooled(seen))
        chosen = [(c.token or "").strip() for c in result.chosen_candidates or []]
        return positions, chosen

    def _sample_answer(
        self, image: Image.Image, text: str, answers: Sequence[str], seed: int, purpose: str
    ) -> str:
        import json

        from google.genai import types

        schema = answer_schema(answers)
        config = types.GenerateContentConfig(
            # a model that fixes its sampling draws at its own temperature, 1.0 for Gemini 3
            temperature=1.0 if self.sets_temperature else None,
            seed=seed,
            response_mime_type="application/json",
            response_json_schema=schema,
            thinking_config=self._thinking(),
        )
        try:  # a blocked, cut or empty answer is none: asked again, or left out (judging)
            response = self.gemini.generate(self.model, [_image_part(image), text], config, purpose)
            return str(json.loads(_text(response))["answer"]).strip()
        except (GeminiBlocked, ValueError, KeyError, TypeError):
            return ""
