"""A stand-in Hugging Face hub on 127.0.0.1, for ``HF_ENDPOINT``: it serves folders as
model repositories, and as dataset repositories at a pinned revision, to
``huggingface_hub``'s real downloads (repo info, the file tree with each large file's
LFS sha256, each file's metadata and bytes), slowly when asked, so that download progress
can be watched; a dataset file named in ``cut`` is cut short once. Only what
``snapshot_download``, ``hf_hub_download`` and ``list_repo_tree`` ask is answered.

It also takes pushes as the hub does (``whoami``, ``create_repo`` and ``repo_info`` of
the repositories pushed to, then ``upload_folder``'s
preupload, LFS batch, the basic LFS upload and the NDJSON commit), into ``pushed``: each
write must carry ``token`` (401 otherwise, as the hub answers a missing or wrong token),
binary files must come through LFS with the sha256 they were announced with, and a commit
naming an LFS object never uploaded is refused (422). Xet uploads are not spoken: set
``HF_HUB_DISABLE_XET=1`` so that ``huggingface_hub`` uses LFS."""

from __future__ import annotations

import base64
import hashlib
import json
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from urllib.parse import unquote, urlparse

import yaml

from tests.fakes.serving import StandIn, json_reply

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
        self.token = "hf_standin_token"
        self.token_role = "write"  # what whoami says the token may do
        self.whoami_drip_s = 0.0  # whoami's answer a byte at a time, this far apart
        self.conflicts: set[str] = set()  # repository ids whose creation answers a bare 409
        # (repo type, repo id) -> {"private": bool, "files": {path: bytes}, "commits": [...]}
        self.pushed: dict[tuple[str, str], dict] = {}
        self.lfs: dict[str, bytes] = {}  # sha256 -> the bytes uploaded

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

    def write(self, handler: BaseHTTPRequestHandler, path: str) -> None:
        """A push's request (POST or PUT), answered as the hub answers it."""
        size = int(handler.headers.get("Content-Length") or 0)
        data = handler.rfile.read(size) if size else b""
        query = urlparse(handler.path).query
        if path.startswith("/lfs-upload/"):  # a signed address, as the storage's are
            if query != f"sig={hashlib.sha256((path + self.token).encode()).hexdigest()}":
                return self.json(handler, {"error": "Request has expired"}, 403)
        elif handler.headers.get("Authorization") != f"Bearer {self.token}":
            return self.json(handler, {"error": "Invalid credentials in Authorization header"}, 401)
        if path == "/api/validate-yaml":  # the card's metadata, as upload_folder checks it
            content = json.loads(data)["content"]
            errors = []
            try:
                meta = yaml.safe_load(content.split("---")[1]) if content.startswith("---") else {}
            except yaml.YAMLError as err:
                meta, errors = None, [{"message": f"YAML does not parse: {err}"}]
            if meta is not None and not isinstance(meta, dict):
                errors.append({"message": "metadata must be a mapping"})
            elif meta and not isinstance(meta.get("license", ""), str):
                errors.append({"message": '"license" must be a string'})
            return self.json(handler, {"errors": errors, "warnings": []}, 400 if errors else 200)
        if path == "/api/repos/create":
            doc = json.loads(data)
            kind = doc.get("type") or "model"
            repo = (
                f"{doc['organization']}/{doc['name']}" if doc.get("organization") else doc["name"]
            )
            if repo in self.conflicts:  # a conflict the hub names no repository in
                if repo.endswith("-bare"):  # not even an answer in JSON
                    handler.send_response(409)
                    handler.send_header("Content-Length", "8")
                    handler.end_headers()
                    handler.wfile.write(b"Conflict")
                    return None
                return self.json(handler, {"error": "Conflict"}, 409)
            if (kind, repo) in self.pushed:
                # the hub names the repository in its refusal; the client reads it
                doc = {"error": "You already created this repo", "url": f"{self.url}/{repo}"}
                return self.json(handler, doc, 409)
            private = doc.get("visibility") == "private" or doc.get("private") is True
            self.pushed[(kind, repo)] = {"private": private, "files": {},
                                         "commits": []}  # fmt: skip
            return self.json(handler, {"url": f"{self.url}/{repo}", "name": repo})
        if path.startswith("/lfs-upload/"):
            oid = path.rsplit("/", 1)[1]
            if hashlib.sha256(data).hexdigest() != oid:
                return self.json(handler, {"error": "sha256 does not match"}, 400)
            self.lfs[oid] = data
            return self.json(handler, {})
        if path.endswith(".git/info/lfs/objects/batch"):
            doc = json.loads(data)
            objects = [
                {"oid": o["oid"], "size": o["size"], "authenticated": True,
                 "actions": {"upload": {"href": self.signed(f"/lfs-upload/{o['oid']}")}}}
                for o in doc["objects"]
            ]  # fmt: skip
            return self.json(handler, {"transfer": "basic", "objects": objects})
        parts = path.split("/")  # /api/{type}s/{owner}/{name}/{preupload|commit}/{revision}
        if len(parts) >= 7 and parts[1] == "api":
            kind, repo, verb = parts[2].removesuffix("s"), f"{parts[3]}/{parts[4]}", parts[5]
            store = self.pushed.get((kind, repo))
            if store is None:
                return self.json(handler, {"error": "Repository not found"}, 404)
            if verb == "preupload":
                files = [
                    {"path": f["path"], "shouldIgnore": False,
                     "uploadMode": "lfs" if _binary(f["path"], base64.b64decode(f["sample"]))
                     else "regular"}
                    for f in json.loads(data)["files"]
                ]  # fmt: skip
                return self.json(handler, {"files": files})
            if verb == "commit":
                lines = [json.loads(x) for x in data.splitlines() if x.strip()]
                header = next(x["value"] for x in lines if x["key"] == "header")
                files = {}
                for x in lines:
                    v = x["value"]
                    if x["key"] == "file":
                        if _binary(v["path"], base64.b64decode(v["content"])[:512]):
                            return self.json(handler, {"error": f"{v['path']}: use LFS"}, 400)
                        files[v["path"]] = base64.b64decode(v["content"])
                    elif x["key"] == "lfsFile":
                        if v["oid"] not in self.lfs:
                            return self.json(handler, {"error": f"{v['path']}: not uploaded"}, 422)
                        files[v["path"]] = self.lfs[v["oid"]]
                store["files"].update(files)
                oid = hashlib.sha1(data).hexdigest()
                store["commits"].append({"summary": header["summary"], "oid": oid,
                                         "files": sorted(files)})  # fmt: skip
                url = f"{self.url}/{repo}/commit/{oid}"
                return self.json(handler, {"commitUrl": url, "commitOid": oid})
        return self.json(handler, {"error": "not found"}, 404)

    def signed(self, path: str) -> str:
        return f"{self.url}{path}?sig={hashlib.sha256((path + self.token).encode()).hexdigest()}"

    def answer(self, handler: BaseHTTPRequestHandler, body: bool) -> None:
        path = unquote(urlparse(handler.path).path)
        self.requests.append(f"{handler.command} {path}")
        if handler.command in ("POST", "PUT"):
            return self.write(handler, path)
        if path == "/api/whoami-v2":  # the token's owner and what it may do
            if handler.headers.get("Authorization") != f"Bearer {self.token}":
                return self.json(handler, {"error": "Invalid credentials"}, 401)
            role = self.token_role
            doc = {"name": "me", "auth": {"accessToken": {"role": role}}}
            if self.whoami_drip_s:
                return self.drip(handler, doc, self.whoami_drip_s)
            return self.json(handler, doc)
        for (kind, repo), store in self.pushed.items():  # a pushed repository's info
            if path in (f"/api/{kind}s/{repo}", f"/api/{kind}s/{repo}/revision/main"):
                sha = store["commits"][-1]["oid"] if store["commits"] else "0" * 40
                files = [{"rfilename": f} for f in sorted(store["files"])]
                doc = {"id": repo, "private": store["private"], "sha": sha, "siblings": files}
                return self.json(handler, doc)
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

    def drip(self, handler: BaseHTTPRequestHandler, doc, every: float) -> None:
        """``doc`` as JSON, a byte every ``every`` seconds (until the client hangs up)."""
        import time

        data = json.dumps(doc).encode()
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        try:
            for k in range(len(data)):
                handler.wfile.write(data[k : k + 1])
                handler.wfile.flush()
                time.sleep(every)
        except OSError:
            pass  # the client gave up, as it should

    def json(self, handler: BaseHTTPRequestHandler, doc, status: int = 200) -> None:
        json_reply(handler, status, doc)

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


def _binary(path: str, sample: bytes) -> bool:
    """Whether the hub would keep the file in LFS: a binary suffix, or a NUL in its start."""
    suffixes = (".png", ".jpg", ".parquet", ".safetensors", ".bin", ".arrow")
    return path.endswith(suffixes) or b"\0" in sample
