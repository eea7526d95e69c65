"""What a run spends: API token usage collected per round, the wall-time budget API calls
must fit in, and the package versions a run record names.

Backends report each API answer's token usage with :func:`record`; whoever drives the work
collects it with ``with collecting() as usage:`` on the same thread (each run drives its
rounds on one thread, so batch workers never mix their usage). In the same way
``with deadline(t):`` makes every API call on the thread check the time left before it is
sent, and cap its timeout (and any retry wait) to it: :class:`BudgetExhausted` when none is.
``with call_budget(CallBudget(n)):`` is a hard limit on model calls: an API request takes
one call in :func:`sent` before it leaves, a local model one an input in :func:`spend`
before its forward pass, and :class:`CallBudgetSpent` is raised instead of a call past it
(a bench gives every strategy the same budget so).
``with stop_on(event):`` makes a stop asked for (the event set) end the work on the thread
within moments: :func:`check_stop` raises :class:`StopRequested` between candidates, before
every model call and between denoising steps, and an API call in flight is abandoned
(:func:`abandonable`: its answer is discarded, nothing is recorded from it).
"""

from __future__ import annotations

import contextvars
import functools
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

T = TypeVar("T")

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


class QuotaSpent(RuntimeError):
    """A model's API quota that does not come back within a run (a daily quota, or none on
    the account's tier): nothing more is sent to it; a run ends there, its rounds kept, to
    be resumed once the quota is back. The message says which model and when."""


class CallBudgetSpent(BudgetExhausted):
    """The model-call budget (:func:`call_budget`) has no room for the next call."""


class CallBudget:
    """A hard limit on model calls: every request to a model takes its calls before it is
    sent (an API request, a retry included, is one; a local model's forward pass is one an
    input), and none is sent past ``limit``. ``spent`` counts what was taken."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"a call budget is at least 1 call, got {limit}")
        self.limit = limit
        self.spent = 0
        self._lock = threading.Lock()

    @property
    def left(self) -> int:
        return self.limit - self.spent

    def take(self, n: int, what: str) -> None:
        """Take ``n`` calls for ``what``, or :class:`CallBudgetSpent` when they do not fit
        (nothing is taken then)."""
        with self._lock:
            if self.spent + n > self.limit:
                raise CallBudgetSpent(
                    f"{what}: the budget of {self.limit} model calls has {self.left} left, "
                    f"{n} needed"
                )
            self.spent += n


class StopRequested(RuntimeError):
    """A stop was asked for while the work was in progress. ``made`` may carry what was
    finished before it (a round's candidates), for the round to be kept as stopped."""

    def __init__(self, message: str = "stopped by the user", made: Any = None) -> None:
        super().__init__(message)
        self.made = made


@contextmanager
def stop_on(event: threading.Event | None) -> Iterator[None]:
    """Work on this thread (and on workers started under :func:`inherited`) ends with
    :class:`StopRequested` soon after ``event`` is set."""
    with _thread_setting("stop", event):
        yield


def stop_event() -> threading.Event | None:
    return getattr(_local, "stop", None)


def check_stop() -> None:
    """:class:`StopRequested` when a stop was asked for on this thread's work."""
    event = getattr(_local, "stop", None)
    if event is not None and event.is_set():
        raise StopRequested()


def abandonable(call: Callable[[], T], poll_s: float = 0.1) -> T:
    """``call()``, given up as soon as a stop is asked for: it runs on a helper thread
    while this one waits; on a stop :class:`StopRequested` is raised at once and the call's
    answer, when it comes, is dropped. Without a stop event it runs here."""
    event = getattr(_local, "stop", None)
    if event is None:
        return call()
    check_stop()
    box: dict[str, Any] = {}
    done = threading.Event()

    def work() -> None:
        try:
            box["value"] = call()
        except BaseException as err:  # handed to the waiting thread
            box["error"] = err
        finally:
            done.set()

    # in the caller's context (its Gradio request, which ZeroGPU's leases read)
    context = contextvars.copy_context()
    threading.Thread(target=context.run, args=(work,), name="abandonable-call", daemon=True).start()
    while not done.wait(poll_s):
        if event.is_set():
            raise StopRequested()
    if "error" in box:
        raise box["error"]
    return box["value"]


def pause(seconds: float) -> None:
    """Sleep ``seconds``, cut short by a stop (then :class:`StopRequested`)."""
    import time

    event = getattr(_local, "stop", None)
    if event is None:
        time.sleep(seconds)
        return
    if event.wait(seconds):
        raise StopRequested()


@contextmanager
def deadline(at: float | None) -> Iterator[None]:
    """API calls on this thread must end by ``at`` (``time.monotonic()``; None: no limit)."""
    with _thread_setting("deadline", at):
        yield


@contextmanager
def _thread_setting(name: str, value: Any) -> Iterator[None]:
    """This thread's ``name`` setting is ``value`` inside the block, as before after it."""
    saved = getattr(_local, name, None)
    setattr(_local, name, value)
    try:
        yield
    finally:
        setattr(_local, name, saved)


@contextmanager
def call_budget(budget: CallBudget | None) -> Iterator[None]:
    """Model calls on this thread (and on workers started under :func:`inherited`) take
    from ``budget``; None: no limit."""
    with _thread_setting("calls", budget):
        yield


def current_budget() -> CallBudget | None:
    return getattr(_local, "calls", None)


def current_deadline() -> float | None:
    return getattr(_local, "deadline", None)


def spend(what: str, n: int = 1) -> None:
    """A local model is about to be called on ``n`` inputs: under a call budget they are
    taken from it, and past this thread's deadline :class:`BudgetExhausted` is raised (an
    API backend checks both in :func:`sent` and its own wait)."""
    left = time_left()
    if left is not None and left <= 0:
        raise BudgetExhausted(f"{what}: the wall-time budget is spent")
    budget = getattr(_local, "calls", None)
    if budget is not None:
        budget.take(n, what)


def kept(what: str) -> None:
    """An answer kept from before (a cache) stands in for a call: under a call budget it
    takes one, so that what ran earlier (another strategy of a bench) gives nothing free."""
    budget = getattr(_local, "calls", None)
    if budget is not None:
        budget.take(1, f"{what} (kept from before)")


def time_left() -> float | None:
    """Seconds left before this thread's deadline, or None without one."""
    import time

    at = getattr(_local, "deadline", None)
    return None if at is None else at - time.monotonic()


def toolkit_version() -> str:
    """The cultural-refine version a record names as the one that wrote it (the installed
    distribution's, read from metadata: importing ``refine`` here would close a circle)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("cultural-refine")
    except PackageNotFoundError:
        return "not installed (a source tree)"


def package_versions() -> dict[str, str]:
    """Installed versions of :data:`PACKAGES` (read from metadata, nothing imported), read
    once a process: what a program has imported keeps its version whatever is installed
    since, and each reading searched every folder of ``sys.path`` (7 ms; every run and
    every task's record asks)."""
    return dict(_package_versions())


@functools.cache
def _package_versions() -> tuple[tuple[str, str], ...]:
    from importlib.metadata import PackageNotFoundError, version

    out = []
    for name in PACKAGES:
        try:
            out.append((name, version(name)))
        except PackageNotFoundError:
            continue
    return tuple(out)


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


_answers = [0]  # API answers had in this process: each answer's number, a record's mark


def answered() -> int:
    """Take the next answer number (an API answer has just come)."""
    with _lock:
        _answers[0] += 1
        return _answers[0]


def answers() -> int:
    """How many API answers this process has had: a mark that later answers pass."""
    with _lock:
        return _answers[0]


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
    """One request about to be sent (counted before it leaves, so a crash cannot lose it);
    under a call budget it takes one call first (:class:`CallBudgetSpent` when none is
    left: the request is not sent)."""
    budget = getattr(_local, "calls", None)
    if budget is not None:
        budget.take(1, model)
    with _lock:
        for usage in getattr(_local, "stack", None) or []:
            usage.setdefault(model, dict.fromkeys(FIELDS, 0))["sent"] += 1


def context() -> tuple[Any, ...]:
    """This thread's open collections, deadline, stop event and call budget, for
    :func:`inherited` on a worker."""
    return (
        list(getattr(_local, "stack", None) or []),
        getattr(_local, "deadline", None),
        getattr(_local, "stop", None),
        getattr(_local, "calls", None),
    )


@contextmanager
def inherited(ctx: tuple[Any, ...]) -> Iterator[None]:
    """Run a worker thread's calls under the :func:`context` of the thread that started it:
    their usage goes to the same collections, the same deadline, stop and call budget
    hold."""
    saved = (
        getattr(_local, "stack", None),
        getattr(_local, "deadline", None),
        getattr(_local, "stop", None),
        getattr(_local, "calls", None),
    )
    _local.stack, _local.deadline, _local.stop = list(ctx[0]), ctx[1], ctx[2]
    _local.calls = ctx[3] if len(ctx) > 3 else None
    try:
        yield
    finally:
        _local.stack, _local.deadline, _local.stop, _local.calls = saved


def at_once(one: Callable[[Any], T], items: Any, workers: int) -> list[T]:
    """``one(item)`` for every item, in order: up to ``workers`` at once, each on a worker
    thread under the caller's :func:`context` (an API backend's several calls)."""
    items = list(items)
    if len(items) < 2 or workers < 2:
        return [one(item) for item in items]
    from concurrent.futures import ThreadPoolExecutor

    ctx = context()

    def call(item: Any) -> T:
        with inherited(ctx):
            return one(item)

    with ThreadPoolExecutor(min(len(items), workers)) as pool:
        return list(pool.map(call, items))


def together(*calls: Callable[[], Any]) -> list[Any]:
    """Each of ``calls`` on a thread of its own under the caller's :func:`context`, their
    results in order (the first error raised after all have ended)."""
    return at_once(lambda call: call(), calls, len(calls))


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
