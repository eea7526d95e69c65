"""What the stand-in servers share: a threaded HTTP server on 127.0.0.1 (a free port),
quiet, serving on a daemon thread, with every request (GET, HEAD, POST, PUT) answered by a
function."""

from __future__ import annotations

import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Answer = Callable[[BaseHTTPRequestHandler, bool], None]  # (request, send the body?)


def serve(answer: Answer) -> ThreadingHTTPServer:
    """A started server whose GET and HEAD requests ``answer`` answers."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):  # quiet
            pass

        def do_HEAD(self):
            answer(self, False)

        def do_GET(self):
            answer(self, True)

        def do_POST(self):  # a stand-in that takes no writes answers them 404
            answer(self, True)

        def do_PUT(self):
            answer(self, True)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    # shutdown() waits for the serving loop's next look: 0.5 s by default, 0.5 s of every
    # test's teardown
    threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
    ).start()
    return server


def json_reply(handler: BaseHTTPRequestHandler, status: int, doc: Any) -> None:
    """``doc`` as a JSON answer of ``status``, with its length (the stand-ins' one way)."""
    import json

    data = json.dumps(doc).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


def close(server: ThreadingHTTPServer | None) -> None:
    if server is not None:
        server.shutdown()
        server.server_close()


class StandIn:
    """A stand-in server's life: ``start()``/``stop()`` or ``with``, ``url``, and the
    ``requests`` it saw; a subclass answers each request in ``answer(handler, body)``."""

    def __init__(self) -> None:
        self.requests: list[str] = []
        self.server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def answer(self, handler: BaseHTTPRequestHandler, body: bool = True) -> None:
        raise NotImplementedError

    def start(self):
        self.server = serve(lambda handler, body: self.answer(handler, body))
        return self

    def stop(self) -> None:
        close(self.server)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
