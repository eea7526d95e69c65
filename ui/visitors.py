"""Who a visitor of the app is.

* With ``--auth`` or a Hugging Face login (on a Space) the visitor is the user name.
* Otherwise a random token made on the first visit and kept in the browser (gradio's
  ``BrowserState``, encrypted with a secret kept in ``--out``, so it holds across reloads
  and restarts): the page's load event reads it into the session's state.
* A client with no browser storage (``gradio_client``) is one visitor for the life of its
  client session (gradio's ``session_hash``).

Ids are ``user:NAME``, ``browser:TOKEN`` or ``session:HASH``; a run folder keeps only a
hash of one (:func:`refine.service.visitor_hash`), and no endpoint returns either.
"""

from __future__ import annotations

import re
import secrets
from pathlib import Path
from typing import Any

TOKEN = re.compile(r"[0-9a-f]{32}")
SECRET_FILE = ".app-secret"  # in --out: the browser tokens' encryption key


def browser_secret(out: str | Path) -> str:
    """The key the browser's token is encrypted with, made once and kept in ``out`` (a
    restart keeps every visitor's token readable)."""
    import os

    path = Path(out) / SECRET_FILE
    for _ in range(2):
        if path.is_file() and not path.is_symlink():
            text = path.read_text(encoding="utf-8").strip()
            if len(text) >= 32:
                return text
            path.unlink()  # cut short by a kill: made again
        Path(out).mkdir(parents=True, exist_ok=True)
        text = secrets.token_hex(32)
        try:  # readable by the operator only, from the first byte
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:  # another process made it first: theirs is read
            continue
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text + "\n")
        return text
    raise ValueError(f"{path}: not a readable key file; remove it and start again")


def new_token(kept: Any) -> str:
    """The browser's token: the one it keeps when it is one of ours, else a new one."""
    if isinstance(kept, str) and TOKEN.fullmatch(kept):
        return kept
    return secrets.token_hex(16)


def _hf_user(request: Any) -> str | None:
    """The Hugging Face user name of a Space visitor who logged in (gradio's OAuth keeps it
    in the session), or None."""
    try:
        info = request.session.get("oauth_info")
    except Exception:  # no session middleware: no Hugging Face login on this app
        return None
    if not isinstance(info, dict):
        return None
    name = (info.get("userinfo") or {}).get("preferred_username")
    return str(name) if name else None


def visitor_id(request: Any, token: Any = None) -> str | None:
    """The visitor a request comes from (see the module docstring); None when the request
    names nobody (no request at all)."""
    if request is None:
        return None
    user = getattr(request, "username", None) or _hf_user(request)
    if user:
        return f"user:{user}"
    if isinstance(token, str) and TOKEN.fullmatch(token):
        return f"browser:{token}"
    session = getattr(request, "session_hash", None)
    return f"session:{session}" if session else None
