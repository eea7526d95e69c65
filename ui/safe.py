"""Text from a visitor or a model, made safe for the app's HTML and Markdown.

Every place the app renders such text as HTML (messages and error toasts, which gradio
renders as HTML; the references note, rater names, prompts, the progress bar) goes
through here. Client text is only ever put in element text, never in an attribute.
"""

from __future__ import annotations

import html
import logging
import re
import threading
import weakref
from collections import OrderedDict
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

_MARKDOWN = re.compile(r"([\\`*_{}\[\]()#+\-.!|>~])")


def html_text(value: Any) -> str:
    """``value`` as HTML element text: ``&``, ``<`` and ``>`` escaped."""
    return html.escape(str(value), quote=False)


def md_text(value: Any, limit: int = 120) -> str:
    """``value`` on one line, at most ``limit`` characters, safe inside Markdown: no
    markup and no HTML."""
    text = html_text(" ".join(str(value if value is not None else "").split())[:limit])
    return _MARKDOWN.sub(r"\\\1", text)


def error(message: Any) -> Exception:
    """A refusal: a gradio error (an API client's exception, the page's toast) whose message
    (HTML to gradio) shows ``message`` as text. The server logs it in one line, never a
    traceback, and keeps it for the page's message box (:func:`take_refusal`)."""
    import gradio as gr

    text = no_server_paths(message)
    # at WARNING: `refine app` logs warnings without -v, and the docs promise the line
    log.warning("refused: %s", " ".join(text.split())[:300])
    session = _session_hash()
    if session:
        with _refused_lock:
            _refused[session] = text
            _refused.move_to_end(session)
            while len(_refused) > _REFUSALS_KEPT:
                _refused.popitem(last=False)
    return gr.Error(html_text(text), print_exception=False)


# the services whose --out the app's messages name by relative paths (weakly held: tests
# build many apps in one process; an app lives as long as its service)
_SERVICES: weakref.WeakValueDictionary[int, Any] = weakref.WeakValueDictionary()
# an absolute path, not inside a URL or a word ("km/h", "1/5", "a/b"
# and "https://host/a" are left alone)
_ABSOLUTE = re.compile(r"(?<![\w.:/~-])/(?:[^\s'\"/<>|]+/)*[^\s'\"/<>|,;)]+")


def hide_paths_of(service: Any) -> None:
    """Name paths under ``service.out`` relative to it in the app's messages and boxes."""
    _SERVICES[id(service)] = service


def shown_path(path: Any) -> str:
    """A server path as a message or box shows it: relative to the app's folder when it
    lies there (a run is named by its folder), else by its last part; never absolute."""
    text = str(path)
    if not text.startswith("/"):
        return text
    for service in list(_SERVICES.values()):
        out = Path(service.out)
        for root in {str(out), str(out.resolve())}:
            if text == root:
                return "."
            if text.startswith(root.rstrip("/") + "/"):
                return text[len(root.rstrip("/")) + 1 :]
    return Path(text).name or "."


def no_server_paths(message: Any) -> str:
    """``message`` with every absolute server path in it shown by :func:`shown_path`: a
    visitor never learns where the server keeps its files."""

    def one(match: re.Match) -> str:
        path = match.group(0)
        tail = len(path) - len(path.rstrip("."))  # a sentence's full stop
        return shown_path(path[: len(path) - tail]) + path[len(path) - tail :]

    return _ABSOLUTE.sub(one, str(message))


def take_refusal(session_hash: str | None) -> str | None:
    """The last refusal of the page session ``session_hash`` not yet shown, once."""
    if not session_hash:
        return None
    with _refused_lock:
        return _refused.pop(session_hash, None)


def _session_hash() -> str | None:
    """The page session of the request being handled (None outside one)."""
    from gradio.context import LocalContext

    request = LocalContext.request.get(None)
    return getattr(request, "session_hash", None) if request is not None else None


# the pages' refusals not yet shown in their message box, newest last (a page shows its own
# at once: the bound only stops a crowd of API clients, which never ask, from filling memory)
_REFUSALS_KEPT = 2000
_refused: OrderedDict[str, str] = OrderedDict()
_refused_lock = threading.Lock()


MAX_NUMBER = 1e15  # no box of the app takes a number this large (a seed is under 2**32)


def number_box(*args: Any, **kwargs: Any) -> Any:
    """A ``gr.Number`` whose value from a client is checked before Gradio's own conversion:
    text, NaN, infinity or a number past :data:`MAX_NUMBER` is refused in one line naming
    the box (Gradio's own gives a generic error and a server traceback). The check wraps
    this box's ``preprocess``: a subclass of a Gradio component would have Gradio write a
    type stub beside this module."""
    import math

    import gradio as gr

    box = gr.Number(*args, **kwargs)
    convert = box.preprocess

    def preprocess(payload: Any) -> Any:
        ok = isinstance(payload, int | float)  # a bool is an int: Gradio's own takes it
        name = box.label or "a number box"
        if payload is not None and not (
            ok and math.isfinite(payload) and abs(payload) <= MAX_NUMBER
        ):
            if ok and math.isfinite(payload):  # a number, past what any box takes
                raise error(f"{name}: {payload:g} is past the largest number this app takes, 1e15")
            raise error(f"{name}: {str(payload)[:40]!r} is not a number")
        return convert(payload)

    box.preprocess = preprocess
    return box
