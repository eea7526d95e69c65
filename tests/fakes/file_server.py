"""A stand-in file server on 127.0.0.1 (a repository's raw files, a mirror): it serves a
folder's files by path, answers 404 for what it does not hold, can answer 503 a given
number of times first, so that retries are seen, and redirects the paths it is told to.
Every request is recorded."""

from __future__ import annotations

from http.server import BaseHTTPRequestHandler
from pathlib import Path
from urllib.parse import unquote, urlparse

from tests.fakes.serving import StandIn


class FileServer(StandIn):
    def __init__(
        self,
        root: Path,
        busy: dict[str, int] | None = None,
        moved: dict[str, str] | None = None,
    ) -> None:
        super().__init__()
        self.root = Path(root)
        self.busy = dict(busy or {})  # path -> 503 answers before the file
        self.moved = dict(moved or {})  # path -> the path it redirects to (302)

    def answer(self, handler: BaseHTTPRequestHandler, body: bool = True) -> None:
        path = unquote(urlparse(handler.path).path).lstrip("/")
        self.requests.append(path)
        if path in self.moved:
            handler.send_response(302)
            handler.send_header("Location", f"{self.url}/{self.moved[path]}")
            handler.end_headers()
            return
        if self.busy.get(path, 0) > 0:
            self.busy[path] -= 1
            handler.send_error(503, "busy")
            return
        file = (self.root / path).resolve()
        if not file.is_file() or self.root.resolve() not in file.parents:
            handler.send_error(404, "Not Found")
            return
        data = file.read_bytes()
        handler.send_response(200)
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        if body:
            handler.wfile.write(data)
