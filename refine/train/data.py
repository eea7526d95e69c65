"""What a tune reads: the rows ``refine export`` wrote (preference pairs for dpo, captioned
images for sft), images as tensors, and each step's batch.

A batch is drawn for the whole of one optimiser step's micro-batch over every process: the
rows, then (from one generator seeded with them) the noise levels and the noise, of which
each process takes its share. One process with a batch of ``n x B`` and ``n`` processes
with ``B`` each therefore train on the same samples, and a tune drawn for step ``k`` is the
same whether it was resumed or not.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from refine.io.files import json_lines

# the columns each method reads besides the prompt, and the export format that writes them
KEYS = {"dpo": ("image_w", "image_l"), "sft": ("file_name",)}
FORMATS = {"dpo": "pairs", "sft": "imagefolder"}


def load_rows(data: str | Path, method: str, split: str = "train") -> list[dict[str, Any]]:
    """The rows a method trains on: pairs (image_w, image_l, prompt) for dpo, images
    (file_name, prompt) for sft, with image paths made absolute; ValueError naming the
    problem (wrong export format, missing images). A pair's images are read from
    ``image_w_file_name``/``image_l_file_name`` (beside the metadata) or, as exports before
    them wrote, ``image_w``/``image_l`` (under ``../images/``)."""
    folder = Path(data) / split
    meta = folder / "metadata.jsonl"
    if not meta.is_file():
        if split == "train":
            raise ValueError(f"{data}: no {split}/metadata.jsonl (make it with refine export)")
        return []
    text = meta.read_text(encoding="utf-8")
    rows = [json.loads(x) for x in json_lines(text) if x.strip()]  # (split on \n alone)
    keys, fmt = KEYS[method], FORMATS[method]
    out = []
    for k, row in enumerate(rows, start=1):
        for key in keys:  # as datasets names an image beside the metadata (NAME_file_name)
            if f"{key}_file_name" in row and key not in row:
                row[key] = row.pop(f"{key}_file_name")
        if not all(key in row for key in keys) or "prompt" not in row:
            raise ValueError(
                f"{meta}:{k}: not a {method} row (export with --format {fmt}: "
                f"{', '.join(keys)}, prompt)"
            )
        for key in keys:
            path = (folder / row[key]).resolve()
            if not path.is_file():
                raise ValueError(f"{meta}:{k}: {row[key]} is missing")
            row[key] = str(path)
        out.append(row)
    if not out and split == "train":
        raise ValueError(f"{meta}: no rows")
    return out


def image_tensor(path: str, resolution: int) -> Any:
    """The image at ``path`` resized to cover a ``resolution`` square, centre-cropped to it,
    as a (3, resolution, resolution) tensor in [-1, 1]."""
    import numpy as np
    import torch
    from PIL import Image

    with Image.open(path) as im:
        im = im.convert("RGB")
        w, h = im.size
        scale = resolution / min(w, h)
        im = im.resize((max(resolution, round(w * scale)), max(resolution, round(h * scale))))
        w, h = im.size
        left, top = (w - resolution) // 2, (h - resolution) // 2
        im = im.crop((left, top, left + resolution, top + resolution))
        x = torch.from_numpy(np.asarray(im, dtype=np.float32) / 127.5 - 1.0)
    return x.permute(2, 0, 1)


@dataclass
class Batch:
    """One micro-batch: this process's rows, and the generator of the whole batch's noise
    levels and noise (drawn for ``size`` samples, of which :meth:`share` keeps this
    process's)."""

    rows: list[dict[str, Any]]
    gen: Any  # a torch.Generator
    size: int  # the samples drawn over every process
    part: slice  # this process's share of them

    def share(self, x: Any) -> Any:
        """This process's part of ``x``, drawn for the whole batch."""
        return x[self.part]


def draw_batch(
    rows: list[dict[str, Any]], per_process: int, seed: int, index: int, rank: int, world: int
) -> Batch:
    """Micro-batch number ``index`` of a tune seeded with ``seed``: ``per_process`` rows for
    process ``rank`` of ``world``, drawn as one batch of ``per_process x world``."""
    import numpy as np
    import torch

    rng = np.random.default_rng(seed * 1_000_003 + index)
    size = per_process * world
    picked = [rows[i] for i in rng.integers(0, len(rows), size=size)]
    gen = torch.Generator().manual_seed(int(rng.integers(0, 2**31 - 1)))
    part = slice(rank * per_process, (rank + 1) * per_process)
    return Batch(picked[part], gen, size, part)
