"""Gradio's file route never serves a file because it sits under ``--out``.

What a page shows (run images, thumbnails, rating images, downloads) reaches it as a
component's value, and Gradio copies each such file into its own cache folder and serves
that copy. The app passes ``--out`` as an allowed path only so that those copies can be
made; Gradio would then also serve any file under ``--out`` to anyone who names it, with
no cookie: the raters' profiles (``.profiles.json``), their answers (``ratings.jsonl``),
the usage ledger, each run's owner, another visitor's run record or references. So every
file route request for a path under ``--out`` is answered 404 before Gradio sees it
(:class:`PrivateFiles`, an ASGI middleware of the app), whatever its name; a path under
Gradio's cache or upload folder (were they inside ``--out``) is Gradio's to judge, as is
every path outside ``--out``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

# Gradio's file routes: /gradio_api/file=PATH and /gradio_api/file/PATH (also without the
# /gradio_api prefix, and under a root path)
_FILE_ROUTE = re.compile(r"/file[=/](.+)$")


def _gradio_folders() -> list[Path]:
    """Gradio's cache of the files it was given, and its upload folder (resolved)."""
    from gradio import utils

    return [Path(utils.get_cache_folder()).resolve(), Path(utils.get_upload_folder()).resolve()]


def _under(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def private(out: Path, path: str, gradio: list[Path] | None = None) -> bool:
    """Whether ``path`` (as the file route is asked for it) lies under ``out`` (resolved),
    and not under one of Gradio's own folders (``gradio``; default: its cache and upload
    folders)."""
    try:
        asked = Path(path)
        if not asked.is_absolute():
            asked = Path(os.getcwd()) / asked
        asked = asked.resolve()
    except (ValueError, OSError):
        return True  # a path that cannot be read is refused
    if not _under(asked, out):
        return False
    folders = _gradio_folders() if gradio is None else gradio
    return not any(_under(asked, g) for g in folders if not _under(out, g))


def _odd(path: str) -> bool:
    """Whether a file route's path (decoded once) holds ``%`` or a ``..`` part."""
    return "%" in path or ".." in Path(path).parts


class PrivateFiles:
    """Answers 404 to a file route request for a path under ``out``."""

    def __init__(self, app: Any, out: str | Path) -> None:
        self.app = app
        self.out = Path(out).resolve()
        self.gradio = _gradio_folders()

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope.get("type") == "http":
            # the ASGI path is decoded once already, as Gradio reads it: decoding it again
            # made a folder named with %2F.. under --out look like a path outside it, which
            # Gradio then served; a path holding % or .. is refused outright
            match = _FILE_ROUTE.search(scope.get("path", ""))
            if match and (_odd(match.group(1)) or private(self.out, match.group(1), self.gradio)):
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
