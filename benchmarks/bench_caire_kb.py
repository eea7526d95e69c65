"""How fast a CAIRE knowledge base opens and answers, memory-mapped or read whole.

Writes a KB of random unit vectors in the on-disk layout `refine caire kb build` produces
(no model is needed for the timing), then measures opening it with memory mapping (what
`refine caire score` does) against reading every file into memory, and the top-20 search
time per query. Figures are printed as ratios against the read-whole baseline measured in
the same run.

    .venv/bin/python benchmarks/bench_caire_kb.py [--images 200000] [--dim 768] [--entities 20000]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np


def write_kb(path: Path, images: int, dim: int, entities: int) -> None:
    import faiss

    from refine.evaluate.caire.kb import KB_VERSION, _npy_bytes, _write

    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((images, dim), dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    index = faiss.IndexFlatIP(dim)
    index.add(vectors)
    faiss.write_index(index, str(path / "images.faiss"))
    owner = rng.integers(0, entities, size=images).astype(np.int32)
    names = rng.standard_normal((entities, dim), dtype=np.float32)
    names /= np.linalg.norm(names, axis=1, keepdims=True)
    _write(path / "names.npy", _npy_bytes(names))
    _write(path / "image_entities.npy", _npy_bytes(owner))
    (path / "texts.txt").write_bytes(b"")
    rows = [
        {"id": str(k), "name": f"entity {k}", "gloss": "", "text_offset": 0, "text_length": 0}
        for k in range(entities)
    ]
    counts = np.bincount(owner, minlength=entities)
    for row, n in zip(rows, counts, strict=True):
        row["images"] = int(n)
    (path / "entities.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (path / "images.jsonl").write_text(
        "".join(
            json.dumps({"entity": int(e), "source": f"{k}.jpg", "sha1": f"{k:040x}"}) + "\n"
            for k, e in enumerate(owner)
        )
    )
    manifest = {
        "version": KB_VERSION,
        "embedder": "bench",
        "dim": dim,
        "entities": entities,
        "images": images,
    }
    (path / "kb.json").write_text(json.dumps(manifest))


def best_of(fn, repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    from refine.evaluate.caire.kb import KnowledgeBase

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=200_000)
    parser.add_argument("--dim", type=int, default=768)
    parser.add_argument("--entities", type=int, default=20_000)
    parser.add_argument("--queries", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp)
        write_kb(path, args.images, args.dim, args.entities)
        size = sum(f.stat().st_size for f in path.iterdir()) / 1e6
        whole = best_of(lambda: KnowledgeBase.load(path, mmap=False))
        mapped = best_of(lambda: KnowledgeBase.load(path, mmap=True))
        kb = KnowledgeBase.load(path)
        q = np.random.default_rng(1).standard_normal((args.queries, args.dim)).astype(np.float32)
        q /= np.linalg.norm(q, axis=1, keepdims=True)
        kb.search(q[:1], 20)  # the first touch pages the index in
        search = best_of(lambda: kb.search(q, 20)) / args.queries
        print(
            f"KB: {args.images} images x {args.dim} dims, {args.entities} entities, {size:.0f} MB"
        )
        print(f"open, read whole (baseline): {whole * 1000:8.1f} ms  = 1.00")
        print(f"open, memory-mapped:         {mapped * 1000:8.1f} ms  = {mapped / whole:.2f}")
        print(f"top-20 search per query:     {search * 1000:8.2f} ms  = {search / whole:.4f}")


if __name__ == "__main__":
    main()
