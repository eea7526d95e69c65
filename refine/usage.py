"""What a run spends: API token usage collected per round, the wall-time budget API calls
must fit in, and the package versions a run record names.

Backends report each API answer's token usage with :func:`record`; whoever drives the work
collects it with ``with collecting() as usage:`` on the same thread (each run drives its
rounds on one thread, so batch workers never mix their usage). In the same way
``with deadline(t):`` makes every API call on the thread check the time left before it is
sent, and cap its timeout (and any retry wait) to it: :class:`BudgetExhausted` when none is.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

PACKAGES = (
    "cultural-refine",
    "torch",
    "diffusers",
    "transformers",
    "google-genai",
    "open_clip_torch",
    "sentence-transformers",
    "peft",
    "numpy",
)
# calls: answers received; sent: requests sent (retries and failures included)
FIELDS = ("calls", "sent", "prompt_tokens", "output_tokens", "total_tokens")

_local = threading.local()
_lock = threading.Lock()  # collections may be shared by a round's worker threads


class BudgetExhausted(RuntimeError):
    """The wall-time budget ran out before or during a model call."""


@contextmanager
def deadline(at: float | None) -> Iterator[None]:
    """API calls on this thread must end by ``at`` (``time.monotonic()``; None: no limit)."""
    saved = getattr(_local, "deadline", None)
    _local.deadline = at
    try:
        yield
    finally:
        _local.deadline = saved


def time_left() -> float | None:
    """Seconds left before this thread's deadline, or None without one."""
    import time

    at = getattr(_local, "deadline", None)
    return None if at is None else at - time.monotonic()


def package_versions() -> dict[str, str]:
    """Installed versions of :data:`PACKAGES` (read from metadata, nothing imported)."""
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for name in PACKAGES:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            continue
    return out


@contextmanager
def collecting() -> Iterator[dict[str, dict[str, int]]]:
    """Collect the usage :func:`record` reports on this thread, per model."""
    usage: dict[str, dict[str, int]] = {}
    stack = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    stack.append(usage)
    try:
        yield usage
    finally:
        stack.pop()


def record(model: str, prompt_tokens: int, output_tokens: int, total_tokens: int) -> None:
    """One API answer's tokens, added to every collection open on this thread."""
    with _lock:
        for usage in getattr(_local, "stack", None) or []:
            row = usage.setdefault(model, dict.fromkeys(FIELDS, 0))
            row["calls"] += 1
            row["prompt_tokens"] += prompt_tokens
            row["output_tokens"] += output_tokens
            row["total_tokens"] += total_tokens


def sent(model: str) -> None:
    """One request about to be sent (counted before it leaves, so a crash cannot lose it)."""
    with _lock:
        for usage in getattr(_local, "stack", None) or []:
            usage.setdefault(model, dict.fromkeys(FIELDS, 0))["sent"] += 1


def context() -> tuple[list[dict[str, dict[str, int]]], float | None]:
    """This thread's open collections and deadline, for :func:`inherited` on a worker."""
    return list(getattr(_local, "stack", None) or []), getattr(_local, "deadline", None)


@contextmanager
def inherited(ctx: tuple[list[dict[str, dict[str, int]]], float | None]) -> Iterator[None]:
    """Run a worker thread's calls under the :func:`context` of the thread that started it:
    their usage goes to the same collections, and the same deadline holds."""
    saved = getattr(_local, "stack", None), getattr(_local, "deadline", None)
    _local.stack, _local.deadline = list(ctx[0]), ctx[1]
    try:
        yield
    finally:
        _local.stack, _local.deadline = saved


def add(total: dict[str, dict[str, int]], part: dict[str, dict[str, int]]) -> None:
    """``total += part``, per model and field."""
    for model, row in part.items():
        into = total.setdefault(model, dict.fromkeys(FIELDS, 0))
        for k in FIELDS:
            into[k] += row.get(k, 0)


def tokens_text(usage: dict[str, dict[str, int]]) -> str:
    """``1,234 tokens in, 567 out (9 calls)``; empty without API usage."""
    if not usage:
        return ""
    p = sum(r["prompt_tokens"] for r in usage.values())
    o = sum(r["output_tokens"] for r in usage.values())
    c = sum(r["calls"] for r in usage.values())
    n = sum(r.get("sent", 0) for r in usage.values())
    tried = f", {n} sent" if n != c else ""
    return f"{p:,} tokens in, {o:,} out ({c} API calls{tried})"
