"""A stand-in of Wikimedia Commons' API on 127.0.0.1: ``/w/api.php`` answers a file search
(``generator=search`` with ``prop=imageinfo``, formatversion 2) from the files it holds,
each found by the exact queries it is given, with its licence and author (the author as
HTML, as Commons gives it); ``/files/NAME`` serves the files. Every request is recorded."""

from __future__ import annotations

import json
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qs, unquote, urlparse

from tests.fakes.serving import StandIn


@dataclass
class CommonsFile:
    name: str  # File:<name>
    data: bytes
    queries: tuple[str, ...]  # the searches that find it, in the order given
    licence: str = "CC BY-SA 4.0"
    author: str = '<a href="//commons.wikimedia.org/wiki/User:Ana">Ana &amp; Co</a>'
    mime: str = "image/jpeg"


class CommonsServer(StandIn):
    def __init__(self, files: list[CommonsFile]) -> None:
        super().__init__()
        self.files = list(files)
        self.searches: list[str] = []
        self.raw: bytes | None = None  # a hostile API: this body answers every search

    @property
    def api(self) -> str:
        return f"{self.url}/w/api.php"

    def answer(self, handler: BaseHTTPRequestHandler, body: bool = True) -> None:
        parsed = urlparse(handler.path)
        self.requests.append(handler.path)
        if parsed.path == "/w/api.php":
            q = {k: v[0] for k, v in parse_qs(parsed.query).items()}
            self.searches.append(q.get("gsrsearch", ""))
            if self.raw is not None:
                self._send(handler, self.raw, "application/json", body)
                return
            assert q.get("generator") == "search" and q.get("gsrnamespace") == "6", q
            limit = int(q.get("gsrlimit", "10"))
            hits = [f for f in self.files if q.get("gsrsearch") in f.queries][:limit]
            pages = [
                {
                    "pageid": 100 + i,
                    "ns": 6,
                    "title": f"File:{f.name}",
                    "index": i + 1,
                    "imageinfo": [
                        {
                            "url": f"{self.url}/files/original/{f.name}",
                            "thumburl": f"{self.url}/files/{f.name}",
                            "descriptionurl": f"{self.url}/wiki/File:{f.name}",
                            "mime": f.mime,
                            "extmetadata": {
                                "LicenseShortName": {"value": f.licence, "source": "commons"},
                                "LicenseUrl": {"value": "https://creativecommons.org/"},
                                "Artist": {"value": f.author},
                            },
                        }
                    ],
                }
                for i, f in enumerate(hits)
            ]
            doc = {"batchcomplete": True, "query": {"pages": pages[::-1]}} if pages else {}
            self._send(handler, json.dumps(doc).encode(), "application/json", body)
            return
        name = unquote(parsed.path).removeprefix("/files/")
        match = next((f for f in self.files if f.name == name), None)
        if match is None:
            handler.send_error(404, "Not Found")
            return
        self._send(handler, match.data, match.mime, body)

    @staticmethod
    def _send(handler: BaseHTTPRequestHandler, data: bytes, kind: str, body: bool) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", kind)
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        if body:
            handler.wfile.write(data)
