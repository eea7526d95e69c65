"""Whether the profile's models answer, said as the app opens and again at Start: a missing
key or a model that cannot load is one line with what to do, before anything is spent
(the run's own check would say it only after loading every other model)."""

from __future__ import annotations

import re
import threading
from typing import Any

from refine.backends.loading import describe_error
from refine.backends.selection import ModelsUnavailable
from refine.service import RunService

# what a run of the form's defaults calls (refine.loop.refiner.roles_needed)
ROLES = ("generator", "observer", "judge", "text_embedder", "editor", "image_embedder")
CHECKING = "checking the profile's models ..."
READY = "\u2713 the profile's models answer"


class Readiness:
    """The check of one service's models: made once (the app's first visitor waits for
    it, the others read it) and made again while it finds a problem."""

    def __init__(self, service: RunService):
        self.service = service
        self._lock = threading.Lock()
        self._problems: list[str] | None = None  # None: not checked yet
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
                (r for r in ROLES if r in names), key=lambda r: not names[r].startswith("gemini")
            )
            self._fetch({r: names[r] for r in roles})
            self.status = "loading the profile's models ..."
            backends.preflight(roles)
        except ModelsUnavailable as err:
            return [_short(line) for line in err.problems]
        except Exception as err:  # a profile that cannot even be read
            return [_short(describe_error(err))]
        return []

    def _fetch(self, names: dict[str, str]) -> None:
        """Download the hub models not in the cache yet, saying how far each is (a model
        that cannot be fetched is then named by the check that loads it)."""
        from refine.backends.download import cached, download, plan
        from refine.backends.registry import split_name

        options = self.service.refiner().backends.options
        missing = {}
        for role, name in names.items():
            try:  # a ready-made backend, or a name the load check will explain
                ((_, _, what),) = plan({role: name})
                repo = split_name(role, name)[1].split("@", 1)[0]
            except ValueError:
                continue
            if what == "hub" and not cached(repo, options.get(role, {}).get("revision")):
                missing[role] = name

        def follow(name: str, done: int, total: int) -> None:
            far = f"{100 * done / total:.0f}% of {size_text(total)}" if total else size_text(done)
            self.status = f"downloading {name}: {far}"

        if missing:
            download(missing, options, lambda text: None, on_bytes=follow)

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
        """One line for the page: ready, or the first problem and how many more."""
        problems = self.problems(again)
        return f"\u26a0 **Not ready:** {summary(problems)}" if problems else READY


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
    """The first problem, and how many more."""
    more = len(problems) - 1
    return problems[0] + (f" (and {more} more problem{'s' if more > 1 else ''})" if more else "")


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
