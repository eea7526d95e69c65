"""Text from a visitor or a model, made safe for the app's HTML and Markdown.

Every place the app renders such text as HTML (messages and error toasts, which gradio
renders as HTML; the references note, rater names, prompts, the progress bar) goes
through here. Client text is only ever put in element text, never in an attribute.
"""

from __future__ import annotations

import html
import re
from typing import Any

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
    """A gradio error toast whose message (HTML to gradio) shows ``message`` as text."""
    import gradio as gr

    return gr.Error(html_text(message))
