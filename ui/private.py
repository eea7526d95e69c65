"""What Gradio's file route never serves from ``--out``, whoever asks.

The app lets Gradio serve files from ``--out`` (``allowed_paths``), so that the run images,
thumbnails and rating images a page shows can be fetched. Anyone can ask that route for any
path, with no cookie, so the private files kept beside those images are refused by name
before Gradio sees the request (:class:`PrivateFiles`, an ASGI middleware of the app):

* every file whose name starts with a dot: the raters' profiles (``.profiles.json``) and
  claims (``.raters.json``), the usage ledger (``.usage.jsonl``), each run's owner
  (``.owner``), the browser tokens' key (``.app-secret``), a study's state (``.study.json``),
  locks and partial writes;
* every file inside a folder whose name starts with a dot, but for the attention checks'
  images (``.attention``), which the Rate view shows;
* the raters' answers and reasons (``ratings.jsonl``).

Files outside ``--out`` (Gradio's own cache of what it was given) are Gradio's to judge.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any
from urllib.parse import unquote

PRIVATE_NAMES = frozenset({"ratings.jsonl"})  # besides every name that starts with a dot
SHOWN_HIDDEN_FOLDERS = frozenset({".attention"})  # hidden folders whose images pages show
# Gradio's file routes: /gradio_api/file=PATH and /gradio_api/file/PATH (also without the
# /gradio_api prefix, and under a root path)
_FILE_ROUTE = re.compile(r"/file[=/](.+)$")


def private(out: Path, path: str) -> bool:
    """Whether ``path`` (as the file route is asked for it) names a private file under
    ``out`` (resolved)."""
    try:
        asked = Path(path)
        if not asked.is_absolute():
            asked = Path(os.getcwd()) / asked
        rel = asked.resolve().relative_to(out)
    except (ValueError, OSError):
        return False  # not under --out
    *folders, name = rel.parts or ("",)
    return (
        name.startswith(".")
        or name in PRIVATE_NAMES
        or any(f.startswith(".") and f not in SHOWN_HIDDEN_FOLDERS for f in folders)
    )


class PrivateFiles:
    """Answers 404 to a file route request for a private file under ``out``."""

    def __init__(self, app: Any, out: str | Path) -> None:
        self.app = app
        self.out = Path(out).resolve()

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope.get("type") == "http":
            match = _FILE_ROUTE.search(unquote(scope.get("path", "")))
            if match and private(self.out, match.group(1)):
                body = b'{"detail":"Not Found"}'
                await send(
                    {
                        "type": "http.response.start",
                        "status": 404,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def private_files_middleware(out: str | Path) -> Any:
    """The middleware entry for the app's FastAPI (``app_kwargs={"middleware": [...]}``)."""
    from starlette.middleware import Middleware

    return Middleware(PrivateFiles, out=out)
