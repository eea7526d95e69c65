"""A stand-in Hugging Face model hub on 127.0.0.1, for ``HF_ENDPOINT``: it serves folders
as model repositories to ``huggingface_hub``'s real downloads (repo info, the file tree,
each file's metadata and bytes), slowly when asked, so that download progress can be
watched. Only what ``snapshot_download`` and ``hf_hub_download`` ask is answered."""

from __future__ import annotations

import hashlib
import json
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from urllib.parse import unquote, urlparse

from tests.fakes.serving import StandIn

COMMIT = "0" * 39 + "1"


class FakeHub(StandIn):
    """``repos``: repo id -> folder. ``chunk_delay_s``: a pause after every 64 KiB sent."""

    def __init__(self, repos: dict[str, Path], chunk_delay_s: float = 0.0):
        super().__init__()
        self.repos = {k: Path(v) for k, v in repos.items()}
        self.chunk_delay_s = chunk_delay_s

    def files(self, repo: str) -> list[Path]:
        root = self.repos[repo]
        return sorted(p for p in root.rglob("*") if p.is_file())

    def answer(self, handler: BaseHTTPRequestHandler, body: bool) -> None:
        path = unquote(urlparse(handler.path).path)
        self.requests.append(f"{handler.command} {path}")
        for repo, root in self.repos.items():
            api = f"/api/models/{repo}"
            if path in (api, f"{api}/revision/main", f"{api}/revision/{COMMIT}"):
                siblings = [{"rfilename": p.relative_to(root).as_posix()} for p in self.files(repo)]
                return self.json(handler, {"id": repo, "sha": COMMIT, "siblings": siblings})
            if path.startswith(f"{api}/tree/"):
                tree = [
                    {
                        "type": "file",
                        "path": p.relative_to(root).as_posix(),
                        "size": p.stat().st_size,
                        "oid": hashlib.sha1(p.read_bytes()).hexdigest(),
                    }
                    for p in self.files(repo)
                ]
                return self.json(handler, tree)
            for rev in ("main", COMMIT):
                prefix = f"/{repo}/resolve/{rev}/"
                if path.startswith(prefix):
                    file = root / path.removeprefix(prefix)
                    if file.is_file():
                        return self.send_file(handler, file, body)
        handler.send_response(404)
        handler.send_header("Content-Length", "0")
        handler.end_headers()

    def json(self, handler: BaseHTTPRequestHandler, doc) -> None:
        data = json.dumps(doc).encode()
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)

    def send_file(self, handler: BaseHTTPRequestHandler, file: Path, body: bool) -> None:
        data = file.read_bytes()
        handler.send_response(200)
        handler.send_header("Content-Type", "application/octet-stream")
        handler.send_header("Content-Length", str(len(data)))
        handler.send_header("X-Repo-Commit", COMMIT)
        handler.send_header("ETag", f'"{hashlib.sha256(data).hexdigest()}"')
        handler.end_headers()
        if not body:
            return
        for at in range(0, len(data), 65536):
            handler.wfile.write(data[at : at + 65536])
            if self.chunk_delay_s:
                time.sleep(self.chunk_delay_s)
