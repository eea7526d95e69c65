"""Knowledge bases users build themselves for CAIRE: entities with names, texts and images.

A KB folder holds::

    kb.json            manifest: version, embedder id, dimension, counts
    entities.jsonl     one entity per line: id, name, gloss, text offset and length, images
    texts.txt          the entities' texts (UTF-8, appended to, read by offset)
    names.npy          embeddings of the entity names (float32, L2-normalised)
    images.faiss       FAISS inner-product index of the image embeddings (L2-normalised)
    image_entities.npy the entity of each indexed image (int32)
    images.jsonl       each indexed image's source path and SHA-1 (so adding is incremental)

Building adds entities (and new images of known entities) in chunks; each chunk is saved
before the next begins, every file written whole and renamed into place with the manifest
last, so a build stopped half-way keeps what it finished and the next build goes on.
Loading memory-maps the index and the name embeddings.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from refine.backends.imports import require
from refine.io.files import IMAGE_SUFFIXES as FOLDER_IMAGES
from refine.io.files import atomic_write, atomic_write_bytes, file_digest, image_files, json_lines

KB_VERSION = 1
MANIFEST = "kb.json"
IMAGE_SUFFIXES = (*FOLDER_IMAGES, ".bmp", ".gif")  # PIL reads these too


class KBError(ValueError):
    """A bad knowledge base or source; the message says what to do."""


def check_folder(path: str | Path) -> None:
    """A folder that holds a knowledge base (its manifest), without opening it: a
    :class:`KBError` saying how to build one otherwise."""
    path = Path(path)
    if not (path / MANIFEST).is_file():
        raise KBError(
            f"{path}: not a knowledge base (no {MANIFEST}); build one with "
            "`refine caire kb build SOURCE --out KB_DIR`"
        )


@dataclass
class SourceEntity:
    id: str
    name: str
    gloss: str = ""
    text: str = ""
    images: list[Path] = field(default_factory=list)


def read_source(source: str | Path) -> list[SourceEntity]:
    """Entities from a JSONL file or a folder, every problem reported together.

    JSONL: one object per line with ``id``, ``name``, optional ``gloss`` and ``text``, and
    ``images`` (paths relative to the file). A folder holds either ``entities.jsonl`` or one
    sub-folder per entity: its images, an optional ``entity.json`` (``id``, ``name``,
    ``gloss``, ``text``) and an optional ``text.txt``; the folder name is the default id and
    (with underscores as spaces) the default name.
    """
    source = Path(source)
    if not source.exists():
        raise KBError(f"{source}: not found; give a JSONL file or a folder of entities")
    if source.is_dir() and (source / "entities.jsonl").is_file():
        source = source / "entities.jsonl"
    problems: list[str] = []
    entities = _from_jsonl(source, problems) if source.is_file() else _from_folder(source, problems)
    seen: dict[str, str] = {}
    for e in entities:
        if e.id in seen:
            problems.append(f"{seen[e.id]} and {e.id!r}: the id {e.id!r} is used twice")
        seen.setdefault(e.id, repr(e.id))
        for image in e.images:
            if not image.is_file():
                problems.append(f"entity {e.id!r}: image {image} not found")
            elif image.suffix.lower() not in IMAGE_SUFFIXES:
                problems.append(f"entity {e.id!r}: {image} is not an image file")
    if not entities and not problems:
        problems.append(f"{source}: no entities found")
    if problems:
        head = f"{source}: {len(problems)} problem(s), nothing was added:\n  "
        raise KBError(head + "\n  ".join(problems))
    return entities


def _from_jsonl(path: Path, problems: list[str]) -> list[SourceEntity]:
    out = []
    for n, line in enumerate(json_lines(path.read_text(encoding="utf-8")), start=1):
        if not line.strip():
            continue
        where = f"{path.name} line {n}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            problems.append(f"{where}: invalid JSON ({err.msg})")
            continue
        if not isinstance(row, dict):
            problems.append(f"{where}: expected an object")
            continue
        ident, name = row.get("id"), row.get("name")
        if not isinstance(ident, str | int) or not str(ident).strip():
            problems.append(f"{where}: 'id' is missing")
            continue
        if not isinstance(name, str) or not name.strip():
            problems.append(f"{where}: 'name' is missing")
            continue
        images = row.get("images", [])
        if isinstance(images, str):
            images = [images]
        if not isinstance(images, list) or not all(isinstance(i, str) for i in images):
            problems.append(f"{where}: 'images' must be a list of paths")
            continue
        if not images:
            problems.append(f"{where}: entity {ident!r} has no images")
            continue
        out.append(
            SourceEntity(
                str(ident).strip(),
                name.strip(),
                str(row.get("gloss") or "").strip(),
                str(row.get("text") or "").strip(),
                [(path.parent / i).resolve() for i in images],
            )
        )
    return out


def _from_folder(folder: Path, problems: list[str]) -> list[SourceEntity]:
    out = []
    for sub in sorted(p for p in folder.iterdir() if p.is_dir()):
        meta: dict[str, Any] = {}
        if (sub / "entity.json").is_file():
            try:
                meta = json.loads((sub / "entity.json").read_text(encoding="utf-8"))
            except json.JSONDecodeError as err:
                problems.append(f"{sub / 'entity.json'}: invalid JSON ({err.msg})")
                continue
        text = str(meta.get("text") or "")
        if not text and (sub / "text.txt").is_file():
            text = (sub / "text.txt").read_text(encoding="utf-8")
        images = image_files(sub, IMAGE_SUFFIXES)
        if not images:
            problems.append(f"{sub}: no images")
            continue
        out.append(
            SourceEntity(
                str(meta.get("id") or sub.name),
                str(meta.get("name") or sub.name.replace("_", " ")),
                str(meta.get("gloss") or ""),
                text.strip(),
                images,
            )
        )
    return out


class KnowledgeBase:
    """A CAIRE knowledge base on disk. ``KnowledgeBase.load(path)`` opens one (memory-
    mapped); ``KnowledgeBase.open_or_create(path, embedder_id)`` is what a build uses."""

    def __init__(self, path: Path, manifest: dict[str, Any]) -> None:
        self.path = path
        self.manifest = manifest
        self.entities: list[dict[str, Any]] = []
        self._images: list[dict[str, Any]] | None = []
        self.names = np.zeros((0, manifest["dim"] or 0), dtype=np.float32)
        self.image_entities = np.zeros((0,), dtype=np.int32)
        self.index: Any = None

    # opening ---------------------------------------------------------------------------

    @property
    def images(self) -> list[dict[str, Any]]:
        """Each indexed image's entity, source and SHA-1 (read on first use: querying
        needs only the index and ``image_entities``)."""
        if self._images is None:
            lines = json_lines((self.path / "images.jsonl").read_text(encoding="utf-8"))
            self._images = [json.loads(x) for x in lines[: self.manifest["images"]]]
            if len(self._images) != self.manifest["images"]:
                raise KBError(
                    f"{self.path}: images.jsonl disagrees with {MANIFEST}; run the same "
                    "`refine caire kb build` again to repair it"
                )
        return self._images

    @property
    def n_images(self) -> int:
        return int(self.image_entities.shape[0])

    @property
    def embedder(self) -> str:
        return self.manifest["embedder"]

    @classmethod
    def load(cls, path: str | Path, mmap: bool = True) -> KnowledgeBase:
        faiss = require("faiss", "faiss-cpu", "CAIRE knowledge bases", "caire")

        path = Path(path)
        check_folder(path)
        manifest = json.loads((path / MANIFEST).read_text(encoding="utf-8"))
        if manifest.get("version") != KB_VERSION:
            raise KBError(
                f"{path}: knowledge base version {manifest.get('version')} is not "
                f"{KB_VERSION}; build it again"
            )
        kb = cls(path, manifest)
        n_ent, n_img = manifest["entities"], manifest["images"]
        lines = json_lines((path / "entities.jsonl").read_text(encoding="utf-8"))
        kb.entities = [json.loads(x) for x in lines[:n_ent]]
        kb._images = None
        mode = "r" if mmap else None
        kb.names = np.load(path / "names.npy", mmap_mode=mode)[:n_ent]
        kb.image_entities = np.load(path / "image_entities.npy", mmap_mode=mode)[:n_img]
        # IO_FLAG_MMAP_IFC maps a flat index's vectors instead of reading them
        mapped = getattr(faiss, "IO_FLAG_MMAP_IFC", faiss.IO_FLAG_MMAP | faiss.IO_FLAG_READ_ONLY)
        flags = mapped if mmap else 0
        kb.index = faiss.read_index(str(path / "images.faiss"), flags)
        if (
            len(kb.entities) != n_ent
            or not (path / "images.jsonl").is_file()
            or kb.names.shape[0] != n_ent
            or kb.image_entities.shape[0] != n_img
            or kb.index.ntotal < n_img
        ):
            raise KBError(
                f"{path}: the knowledge base's files disagree with {MANIFEST} (a save was "
                "cut short?); run the same `refine caire kb build` again to repair it"
            )
        return kb

    @classmethod
    def open_or_create(cls, path: str | Path, embedder_id: str) -> KnowledgeBase:
        """The KB at ``path`` (checked to use ``embedder_id``), or a new empty one."""
        faiss = require("faiss", "faiss-cpu", "CAIRE knowledge bases", "caire")

        path = Path(path)
        if (path / MANIFEST).is_file():
            kb = cls.load(path, mmap=False)
            kb.check_embedder(embedder_id)
            if kb.index.ntotal > kb.n_images:  # a save cut short after the index
                kept = kb.index.reconstruct_n(0, kb.n_images)
                kb.index = faiss.IndexFlatIP(kb.manifest["dim"])
                kb.index.add(np.ascontiguousarray(kept, dtype=np.float32))
            kb.names = np.array(kb.names)
            kb.image_entities = np.array(kb.image_entities)
            return kb
        ours = {MANIFEST, "entities.jsonl", "texts.txt", "names.npy", "images.faiss"}
        ours |= {"image_entities.npy", "images.jsonl"}
        ours |= {name + ".tmp" for name in ours}
        if path.exists() and any(f.name not in ours for f in path.iterdir()):
            raise KBError(f"{path}: exists and is not a knowledge base; choose an empty folder")
        path.mkdir(parents=True, exist_ok=True)
        for f in path.iterdir():  # what a first save cut short left behind
            f.unlink()
        return cls(path, {"version": KB_VERSION, "embedder": embedder_id, "dim": None})

    def check_embedder(self, embedder_id: str) -> None:
        if embedder_id != self.embedder:
            raise KBError(
                f"{self.path} was built with the image embedder {self.embedder!r}, not "
                f"{embedder_id!r}: its vectors are not comparable. Query it with "
                f"--embedder {self.embedder} (the default), or build a new KB with "
                f"{embedder_id!r}"
            )

    # building --------------------------------------------------------------------------

    def add(
        self,
        entities: Sequence[SourceEntity],
        embedder: Any,
        chunk: int = 64,
        on_progress: Callable[[int, int], None] | None = None,
    ) -> dict[str, int]:
        """Add new entities and new images of known ones (by file content), embedding them
        with ``embedder`` and saving after every ``chunk`` entities. Returns counts."""
        self.check_embedder(embedder.id)
        by_id = {e["id"]: k for k, e in enumerate(self.entities)}
        known = {img["sha1"] for img in self.images}
        counts = {"entities_added": 0, "entities_extended": 0, "images_added": 0, "skipped": 0}
        total = len(entities)
        for start in range(0, total, chunk):
            part = entities[start : start + chunk]
            self._add_chunk(part, embedder, by_id, known, counts)
            self._save()
            if on_progress is not None:
                on_progress(min(start + chunk, total), total)
        if total == 0 and on_progress is not None:
            on_progress(0, 0)
        return counts

    def _add_chunk(self, part, embedder, by_id, known, counts) -> None:
        from PIL import Image

        new_entities, new_names = [], []
        rows: list[tuple[int, Path, str]] = []
        for e in part:
            fresh = []
            for image in e.images:
                digest = file_digest(image, "sha1")
                if digest in known:
                    continue
                known.add(digest)
                fresh.append((image, digest))
            if e.id in by_id:
                if fresh:
                    counts["entities_extended"] += 1
                else:
                    counts["skipped"] += 1
                k = by_id[e.id]
            else:
                if not fresh:  # every image already belongs to another entity
                    counts["skipped"] += 1
                    continue
                k = len(self.entities) + len(new_entities)
                by_id[e.id] = k
                new_entities.append(e)
                new_names.append(e.name)
                counts["entities_added"] += 1
            for image, digest in fresh:
                rows.append((k, image, digest))
        if not rows:
            return
        pictures = []
        for _, image, _ in rows:
            try:
                with Image.open(image) as im:
                    pictures.append(im.convert("RGB"))
            except OSError as err:
                raise KBError(f"{image}: cannot be read as an image ({err})") from err
        vectors = _as_array(embedder.encode_images(pictures))
        names = _as_array(embedder.encode_texts(new_names)) if new_names else None
        self._append(new_entities, names, rows, vectors)
        counts["images_added"] += len(rows)

    def _append(self, new_entities, names, rows, vectors) -> None:
        faiss = require("faiss", "faiss-cpu", "CAIRE knowledge bases", "caire")

        dim = vectors.shape[1]
        if self.manifest["dim"] is None:
            self.manifest["dim"] = dim
            self.names = np.zeros((0, dim), dtype=np.float32)
            self.index = faiss.IndexFlatIP(dim)
        elif dim != self.manifest["dim"]:
            raise KBError(f"embedding size {dim} is not the KB's {self.manifest['dim']}")
        texts = self.path / "texts.txt"
        offset = texts.stat().st_size if texts.exists() else 0
        with open(texts, "ab") as fh:
            for e in new_entities:
                data = e.text.encode("utf-8")
                fh.write(data)
                self.entities.append(
                    {
                        "id": e.id,
                        "name": e.name,
                        "gloss": e.gloss,
                        "text_offset": offset,
                        "text_length": len(data),
                        "images": 0,
                    }
                )
                offset += len(data)
        if names is not None:
            self.names = np.concatenate([self.names, names]).astype(np.float32)
        for k, image, digest in rows:
            self.entities[k]["images"] += 1
            self.images.append({"entity": k, "source": str(image), "sha1": digest})
        self.image_entities = np.concatenate(
            [self.image_entities, np.array([k for k, _, _ in rows], dtype=np.int32)]
        )
        self.index.add(np.ascontiguousarray(vectors, dtype=np.float32))

    def _save(self) -> None:
        faiss = require("faiss", "faiss-cpu", "CAIRE knowledge bases", "caire")

        if self.index is None:
            return
        p = self.path
        atomic_write_bytes(
            p / "entities.jsonl", "".join(json.dumps(e) + "\n" for e in self.entities).encode()
        )
        atomic_write_bytes(
            p / "images.jsonl", "".join(json.dumps(i) + "\n" for i in self.images).encode()
        )
        names = np.asarray(self.names, dtype=np.float32)
        atomic_write(p / "names.npy", lambda tmp: np.save(tmp, names))
        links = np.asarray(self.image_entities, np.int32)
        atomic_write(p / "image_entities.npy", lambda tmp: np.save(tmp, links))
        atomic_write(p / "images.faiss", lambda tmp: faiss.write_index(self.index, str(tmp)))
        self.manifest.update(entities=len(self.entities), images=len(self.images))
        atomic_write_bytes(p / MANIFEST, json.dumps(self.manifest, indent=2).encode())

    # querying --------------------------------------------------------------------------

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Top-``k`` images per query row: (similarities, image rows); -1 rows are absent."""
        q = np.ascontiguousarray(queries, dtype=np.float32)
        if q.ndim != 2 or q.shape[1] != self.manifest["dim"]:
            raise KBError(
                f"query vectors of shape {q.shape} do not match the KB's dimension "
                f"{self.manifest['dim']}"
            )
        sims, rows = self.index.search(q, min(k, max(1, self.n_images)))
        rows = np.where(rows >= self.n_images, -1, rows)
        return sims, rows

    def text(self, entity: int, max_chars: int | None = None) -> str:
        e = self.entities[entity]
        with open(self.path / "texts.txt", "rb") as fh:
            fh.seek(e["text_offset"])
            text = fh.read(e["text_length"]).decode("utf-8")
        if max_chars is not None and len(text) > max_chars:
            cut = text[:max_chars]
            space = cut.rfind(" ")
            text = (cut[:space] if space > max_chars // 2 else cut) + " ..."
        return text

    def info(self) -> dict[str, Any]:
        sizes = {f.name: f.stat().st_size for f in self.path.iterdir() if f.is_file()}
        per = [e["images"] for e in self.entities]
        return {
            "path": str(self.path),
            "embedder": self.embedder,
            "dimension": self.manifest["dim"],
            "entities": len(self.entities),
            "images": self.n_images,
            "images_per_entity": {
                "min": min(per) if per else 0,
                "mean": (sum(per) / len(per)) if per else 0.0,
                "max": max(per) if per else 0,
            },
            "with_text": sum(1 for e in self.entities if e["text_length"] > 0),
            "bytes": sum(sizes.values()),
            "examples": [e["name"] for e in self.entities[:5]],
        }


def _as_array(tensor: Any) -> np.ndarray:
    if hasattr(tensor, "detach"):
        tensor = tensor.detach().float().cpu().numpy()
    array = np.asarray(tensor, dtype=np.float32)
    norms = np.linalg.norm(array, axis=1, keepdims=True)
    return array / np.maximum(norms, 1e-12)


def build(
    source: str | Path,
    out: str | Path,
    embedder: Any,
    chunk: int = 64,
    on_progress: Callable[[int, int], None] | None = None,
) -> tuple[KnowledgeBase, dict[str, int]]:
    """Read ``source`` (all checked first), then add it to the KB at ``out`` (created when
    absent). Returns the KB and the counts of what was added."""
    entities = read_source(source)
    kb = KnowledgeBase.open_or_create(out, embedder.id)
    counts = kb.add(entities, embedder, chunk=chunk, on_progress=on_progress)
    return kb, counts
