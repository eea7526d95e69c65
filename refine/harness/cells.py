"""The cells of a many-cell job, kept in one folder: a JSON-lines file appended one cell at
a time (synced; a line a kill cut short is skipped on reading and its cell made again), and
the images under ``images/``. Bench folders keep theirs in ``cells.jsonl``, CUBE concepts
folders in ``concepts.jsonl``."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from refine.io.files import append_jsonl, slug


class CellStore:
    """A folder of cells: ``cells()`` reads what is done, ``append`` adds one."""

    def __init__(self, folder: str | Path, file: str = "cells.jsonl") -> None:
        self.dir = Path(folder)
        self.cells_path = self.dir / file

    def cells(self) -> list[dict[str, Any]]:
        if not self.cells_path.is_file():
            return []
        out = []
        for line in self.cells_path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError:  # a line cut by a kill: done again
                    continue
        return out

    def append(self, cell: dict[str, Any]) -> None:
        append_jsonl(self.cells_path, cell)

    def image_path(self, generator: str, activity: str, country: str, seed: int) -> Path:
        """Where a generator's image of a prompt and seed goes: ``images/GENERATOR/...``."""
        name = f"{slug(country, 30)}--{slug(activity, 60)}--s{seed}.png"
        folder = slug(generator, 80)
        if folder != slug(generator, 10_000) or "+lora=" in generator:
            # long names or adapters: slugs alone could clash
            folder = f"{slug(generator, 60)}-{hashlib.sha1(generator.encode()).hexdigest()[:8]}"
        return self.dir / "images" / folder / name


def cell_key(cell: dict[str, Any]) -> tuple[str, str, str, tuple[int, ...]]:
    """A bench cell's identity: generator, activity, country and seeds."""
    return cell["generator"], cell["activity"], cell["country"], tuple(cell["seeds"])
