"""A stand-in file server on 127.0.0.1 (a repository's raw files, a mirror): it serves a
folder's files by path, answers 404 for what it does not hold, can answer 503 a given
number of times first, so that retries are seen, and redirects the paths it is told to
(to another of its paths, or to any address: ``file:///...``). As a hostile mirror it
can also, for the paths it is told: send zeros without end and no length (``endless``),
declare twice the body's length and close after the body (``cut``), send one byte every
so many seconds (``drip``), or drip a few bytes and then close (``drip_cut``: a slow try
that is worth another). Every request is recorded."""

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
        endless: set[str] | None = None,
        cut: set[str] | None = None,
        drip: dict[str, float] | None = None,
        drip_cut: dict[str, tuple[float, int]] | None = None,
    ) -> None:
        super().__init__()
        self.root = Path(root)
        self.busy = dict(busy or {})  # path -> 503 answers before the file
        self.moved = dict(moved or {})  # path -> the path (or address) it redirects to (302)
        self.endless = set(endless or ())
        self.cut = set(cut or ())
        self.drip = dict(drip or {})  # path -> seconds between bytes
        self.drip_cut = dict(drip_cut or {})  # path -> (seconds between bytes, bytes sent)
        self.sent: dict[str, int] = {}  # bytes sent of each hostile path

    def answer(self, handler: BaseHTTPRequestHandler, body: bool = True) -> None:
        path = unquote(urlparse(handler.path).path).lstrip("/")
        self.requests.append(path)
        if path in self.moved:
            to = self.moved[path]
            handler.send_response(302)
            handler.send_header("Location", to if "://" in to else f"{self.url}/{to}")
            handler.end_headers()
            return
        if path in self.endless or path in self.cut or path in self.drip or path in self.drip_cut:
            self._hostile(handler, path)
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

    def _hostile(self, handler: BaseHTTPRequestHandler, path: str) -> None:
        import time

        handler.send_response(200)
        if path in self.cut:
            handler.send_header("Content-Length", "2000")
        elif path in self.drip or path in self.drip_cut:
            handler.send_header("Content-Length", "1000")
        handler.end_headers()
        self.sent[path] = 0
        try:
            if path in self.cut:
                handler.wfile.write(b"\x89PNG" + b"\0" * 996)
                self.sent[path] = 1000
            elif path in self.drip_cut:
                every, n = self.drip_cut[path]
                for _ in range(n):
                    handler.wfile.write(b"\0")
                    handler.wfile.flush()
                    self.sent[path] += 1
                    time.sleep(every)
            elif path in self.drip:
                for _ in range(1000):
                    handler.wfile.write(b"\0")
                    handler.wfile.flush()
                    self.sent[path] += 1
                    time.sleep(self.drip[path])
            else:
                block = b"\0" * (1 << 16)
                while self.sent[path] < 4_000_000_000:  # until the client hangs up
                    handler.wfile.write(block)
                    self.sent[path] += len(block)
        except (BrokenPipeError, ConnectionResetError, OSError):
            pass  # the client gave up, as it should
        handler.close_connection = True
