"""Whether the profile's models answer, said as the app opens and again at Start: a missing
key or a model that cannot load is one line with what to do, before anything is spent
(the run's own check would say it only after loading every other model)."""

from __future__ import annotations

import re
import threading
import time
from typing import Any

from refine.backends.loading import describe_error
from refine.backends.registry import is_remote
from refine.backends.selection import ModelsUnavailable
from refine.service import RunService

# what a run of the form's defaults calls (refine.loop.refiner.roles_needed)
ROLES = ("generator", "observer", "judge", "text_embedder", "editor", "image_embedder")
CHECKING = "checking the profile's models ..."
# the hub is asked once, briefly, per page and the Start that follows it: when it does not
# answer, every model missing from the cache is a problem at once (each fetch would retry
# for about 23 s a file), and Start refuses in well under 2 s
HUB_TIMEOUT_S = 3.0
HUB_ASKED_S = 300.0
OFFLINE_ADVICE = (
    "fetch it where there is internet (refine models download), or copy the Hugging Face cache here"
)
READY = "\u2713 the profile's models answer"


class Readiness:
    """The check of one service's models: made once (the app's first visitor waits for
    it, the others read it) and made again while it finds a problem."""

    def __init__(self, service: RunService):
        self.service = service
        self._lock = threading.Lock()
        self._problems: list[str] | None = None  # None: not checked yet
        self._hub: tuple[float, str | None] | None = None  # (when asked, why unreachable)
        self.status = CHECKING  # what the check is doing now (a download and how far)

    def problems(self, again: bool = False) -> list[str]:
        """The problems found, one line each (empty: ready); checked again with ``again``
        while there were problems."""
        with self._lock:
            if self._problems is None or (again and self._problems):
                self._problems = self._check()
            return list(self._problems)

    def _check(self) -> list[str]:
        try:
            backends = self.service.refiner().backends
            names = backends.names
            # API models first: a missing key is found at once, before local models load
            roles = sorted(
                (r for r in ROLES if r in names), key=lambda r: not is_remote(r, names[r])
            )
            cut_off = self._fetch({r: names[r] for r in roles})
            self.status = "loading the profile's models ..."
            found: list[str] = []
            try:  # a model that could not be fetched is not loaded (its load would retry)
                backends.preflight([r for r in roles if r not in cut_off])
            except ModelsUnavailable as err:
                found = [_short(line) for line in err.problems]
            return found + _joined(cut_off)
        except Exception as err:  # a profile that cannot even be read
            return [_short(describe_error(err))]

    def _fetch(self, names: dict[str, str]) -> dict[str, str]:
        """Download the models not in the cache yet, saying how far each is; returns the
        roles whose models cannot be fetched, with why: all of them at once, without
        trying, when the hub does not answer a first short question (asked once per
        :data:`HUB_ASKED_S`)."""
        from refine.backends import download as fetching

        options = self.service.refiner().backends.options
        try:  # a ready-made backend, or a name the load check will explain
            wanted = fetching.missing(names, options)
        except ValueError:
            wanted = {}
        if not wanted:
            return {}
        now = time.monotonic()
        if self._hub is None or now - self._hub[0] > HUB_ASKED_S:
            self.status = "asking the model hub ..."
            self._hub = (now, fetching.hub_unreachable(HUB_TIMEOUT_S))
        if self._hub[1] is not None:
            return {
                r: f"{n} is not in the cache, and {self._hub[1]}; {OFFLINE_ADVICE}"
                for r, n in wanted.items()
            }

        def follow(name: str, done: int, total: int) -> None:
            far = f"{100 * done / total:.0f}% of {size_text(total)}" if total else size_text(done)
            self.status = f"downloading {name}: {far}"

        fetched = fetching.download(wanted, options, lambda text: None, on_bytes=follow)
        failed = {f.name: f.detail for f in fetched if f.status == "failed"}
        return {r: f"could not be fetched: {failed[n]}" for r, n in wanted.items() if n in failed}

    def stream(self):
        """The line as the check goes (each download and how far it is), then its
        result: what the page's load event shows."""
        result: dict[str, str] = {}
        finished = threading.Event()

        def work() -> None:
            try:
                result["line"] = self.line()
            finally:
                finished.set()

        threading.Thread(target=work, daemon=True).start()
        shown = None
        while not finished.wait(0.2):
            if self.status != shown:
                shown = self.status
                yield shown
        yield result.get("line", "\u26a0 **Not ready:** the check of the models failed")

    def line(self, again: bool = False) -> str:
        """The page's line: ready, or every problem (one line, or a list of them)."""
        problems = self.problems(again)
        if not problems:
            return READY
        if len(problems) == 1:
            return f"\u26a0 **Not ready:** {problems[0]}"
        listed = "\n".join(f"- {p}" for p in problems)
        return f"\u26a0 **Not ready**, {len(problems)} problems:\n{listed}"


def _joined(cut_off: dict[str, str]) -> list[str]:
    """One line per reason, naming every role it holds for."""
    by_why: dict[str, list[str]] = {}
    for role, why in cut_off.items():
        by_why.setdefault(why, []).append(role)
    return [_short(f"{', '.join(f'{r} (-)' for r in who)}: {why}") for why, who in by_why.items()]


def _short(line: str) -> str:
    """A problem line without the model ids after each role and the error's class name:
    ``generator, editor and judge: no Gemini API key: set GEMINI_API_KEY ...``."""
    who, _, why = line.partition(": ")
    roles = re.findall(r"(\w+) \([^)]*\)", who) or [who]
    joined = ", ".join(roles[:-1]) + f" and {roles[-1]}" if len(roles) > 1 else roles[0]
    why = re.sub(r"^[A-Za-z]*Error: ", "", why.strip())
    return f"{joined}: {why}"


def size_text(n: float) -> str:
    """``960 B``, ``126 kB``, ``1.4 GB``."""
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit in ("B", "kB") else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} GB"


def summary(problems: list[str]) -> str:
    """Every problem, in one line: ``1) ...; 2) ...`` when there are several."""
    if len(problems) == 1:
        return problems[0]
    return "; ".join(f"{k}) {p}" for k, p in enumerate(problems, 1))


def check_before_start(ready: Readiness) -> None:
    """Raise a ValueError with the one line when the models are not ready."""
    problems = ready.problems(again=True)
    if problems:
        raise ValueError(summary(problems))


def add_ready_line(gr: Any, demo: Any, ready: Readiness) -> Any:
    """The line under the status, filled as the page opens."""
    box = gr.Markdown(CHECKING, elem_id="ready")
    demo.load(ready.stream, None, box, api_name="ready")
    return box
