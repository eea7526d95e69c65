"""A stand-in Hugging Face hub on 127.0.0.1, for ``HF_ENDPOINT``: it serves folders as
model repositories, and as dataset repositories at a pinned revision, to
``huggingface_hub``'s real downloads (repo info, the file tree with each large file's
LFS sha256, each file's metadata and bytes), slowly when asked, so that download progress
can be watched; a dataset file named in ``cut`` is cut short once. Only what
``snapshot_download``, ``hf_hub_download`` and ``list_repo_tree`` ask is answered."""

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
    """``repos``: model repo id -> folder; ``datasets``: dataset repo id -> (revision,
    folder). ``chunk_delay_s``: a pause after every 64 KiB sent. ``cut``: dataset file
    paths whose first download stops half-way (the connection closed)."""

    def __init__(
        self,
        repos: dict[str, Path],
        chunk_delay_s: float = 0.0,
        datasets: dict[str, tuple[str, Path]] | None = None,
        cut: set[str] | None = None,
    ):
        super().__init__()
        self.repos = {k: Path(v) for k, v in repos.items()}
        self.datasets = {k: (rev, Path(v)) for k, (rev, v) in (datasets or {}).items()}
        self.chunk_delay_s = chunk_delay_s
        self.cut = set(cut or ())

    def files(self, repo: str) -> list[Path]:
        root = self.repos[repo] if repo in self.repos else self.datasets[repo][1]
        return sorted(p for p in root.rglob("*") if p.is_file())

    def dataset(self, handler: BaseHTTPRequestHandler, path: str, body: bool) -> bool:
        """A dataset repository's answer, where the path is one; True when answered."""
        for repo, (rev, root) in self.datasets.items():
            api = f"/api/datasets/{repo}"
            if path in (f"{api}/revision/{rev}", f"{api}/revision/main"):
                siblings = [{"rfilename": p.relative_to(root).as_posix()} for p in self.files(repo)]
                self.json(handler, {"id": repo, "sha": rev, "siblings": siblings})
                return True
            if path.startswith(f"{api}/tree/{rev}"):
                tree = []
                for p in self.files(repo):
                    data = p.read_bytes()
                    row = {"type": "file", "path": p.relative_to(root).as_posix()}
                    blob = hashlib.sha1(f"blob {len(data)}\0".encode() + data).hexdigest()
                    row |= {"size": len(data), "oid": blob}
                    if p.suffix == ".parquet":  # stored in LFS on the hub
                        sha = hashlib.sha256(data).hexdigest()
                        row["lfs"] = {"oid": sha, "size": len(data), "pointerSize": 130}
                    tree.append(row)
                self.json(handler, tree)
                return True
            prefix = f"/datasets/{repo}/resolve/{rev}/"
            if path.startswith(prefix):
                name = path.removeprefix(prefix)
                if (root / name).is_file():
                    self.send_file(handler, root / name, body, commit=rev, cut=name in self.cut)
                    if body and name in self.cut:
                        self.cut.discard(name)
                    return True
        return False

    def answer(self, handler: BaseHTTPRequestHandler, body: bool) -> None:
        path = unquote(urlparse(handler.path).path)
        self.requests.append(f"{handler.command} {path}")
        if self.dataset(handler, path, body):
            return
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

    def send_file(
        self,
        handler: BaseHTTPRequestHandler,
        file: Path,
        body: bool,
        commit: str = COMMIT,
        cut: bool = False,
    ) -> None:
        data = file.read_bytes()
        whole = len(data)
        given = handler.headers.get("Range") or ""
        start = int(given[6:].split("-")[0]) if given.startswith("bytes=") else 0
        data = data[start:]
        handler.send_response(206 if start else 200)
        handler.send_header("Content-Type", "application/octet-stream")
        handler.send_header("Content-Length", str(len(data)))
        if start:
            handler.send_header("Content-Range", f"bytes {start}-{whole - 1}/{whole}")
        handler.send_header("X-Repo-Commit", commit)
        handler.send_header("ETag", f'"{hashlib.sha256(file.read_bytes()).hexdigest()}"')
        handler.end_headers()
        if not body:
            return
        if cut:  # half the bytes, then the connection closes
            handler.wfile.write(data[: len(data) // 2])
            handler.wfile.flush()
            handler.close_connection = True
            return
        for at in range(0, len(data), 65536):
            handler.wfile.write(data[at : at + 65536])
            if self.chunk_delay_s:
                time.sleep(self.chunk_delay_s)
