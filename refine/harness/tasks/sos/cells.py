"""How an SoS bank's cell is made: the images of one culture in one language, generated
(or reused after an interruption) and embedded, and the bank's combined files from every
finished cell, and the bank's results record (see :mod:`refine.harness.tasks.sos.bank`)."""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from refine.backends.selection import Backends
from refine.evaluate.sos import Bank
from refine.harness.results import Results
from refine.harness.tasks.sos.prompts import cell_prompts, slug
from refine.io.files import atomic_write, atomic_write_text
from refine.profiles import load_profile


def _atomic_npy(path: Path, array: np.ndarray) -> None:
    atomic_write(path, lambda tmp: np.save(tmp, array))


class BankMaker:
    """The bank's generator, image embedder and (when prompts are translated) language
    model in one process: the models given here (local), or the profile's (a Ray worker)."""

    def __init__(
        self,
        profile: str,
        overrides: dict[str, str],
        needs_llm: bool,
        root: str,
        params: dict[str, Any],
        instances: dict[str, Any] | None = None,
    ) -> None:
        if instances is None:
            backends = Backends(load_profile(profile), overrides)
            instances = {
                "generator": backends.get("generator"),
                "image_embedder": backends.get("image_embedder"),
                "llm": backends.get("llm") if needs_llm else None,
            }
        self.generator, self.embedder = instances["generator"], instances["image_embedder"]
        self.llm, self.llm_cache = instances.get("llm"), instances.get("llm_cache")
        self.root, self.params = Path(root), params

    def describe(self) -> tuple[str, str]:
        return self.generator.id, self.embedder.id

    def make(self, job: tuple[str, dict[str, Any]], tell: Any = None) -> dict[str, Any]:
        key, cell = job
        return make_cell(
            self.root, key, cell, self.params, self.generator, self.embedder, self.llm,
            self.llm_cache,
            on_prompts=None if tell is None else (lambda k, update: tell(update)),
        )  # fmt: skip


def make_cell(
    out: Path,
    key: str,
    cell: dict[str, Any],
    params: dict[str, Any],
    generator: Any,
    embedder: Any,
    llm: Any = None,
    llm_cache: Any = None,
    on_prompts: Callable[[str, dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Generate (or reuse, after an interruption) and embed one cell's images under
    ``out``; returns what the manifest keeps of it. ``on_prompts`` hears the prompts as
    soon as they are chosen, then the finished cell."""
    from PIL import Image

    culture, lang = cell["culture"], cell["language"]
    seed, per_prompt = params["seed"], params["images_per_prompt"]
    prompts = cell.get("prompts")
    if prompts is None:
        prompts = cell_prompts(params["concept"], culture, lang, llm, llm_cache)
        if params["prompts_per_cell"]:
            prompts = prompts[: params["prompts_per_cell"]]
        if on_prompts is not None:
            on_prompts(key, {"prompts": prompts})
    folder = out / "images" / slug(culture) / slug(lang)
    folder.mkdir(parents=True, exist_ok=True)
    pictures, names = [], []
    for p, prompt in enumerate(prompts):
        seeds = [seed + j for j in range(per_prompt)]
        paths = [folder / f"p{p}_s{s}.png" for s in seeds]
        if all(path.is_file() for path in paths):  # saved before an interruption
            made = []
            for path in paths:
                with Image.open(path) as im:
                    made.append(im.convert("RGB"))
        else:
            made = generator.generate(prompt, seeds)
            for path, image in zip(paths, made, strict=True):
                atomic_write(path, image.save)
        pictures += made
        names += [str(path.relative_to(out)) for path in paths]
    vectors = embedder.encode_images(pictures)
    if hasattr(vectors, "detach"):
        vectors = vectors.detach().float().cpu().numpy()
    (out / "cells").mkdir(exist_ok=True)
    target = out / "cells" / f"{slug(culture)}__{slug(lang)}.npy"
    _atomic_npy(target, np.asarray(vectors, dtype=np.float32))
    update = {
        "prompts": prompts,
        "images": names,
        "embeddings": str(target.relative_to(out)),
        "done": True,
    }
    if on_prompts is not None:
        on_prompts(key, update)
    return update


def write_combined(out: Path, manifest: dict[str, Any], sos_bank: Any) -> None:
    """embeddings.npy, labels.csv and centroids.npz from every finished cell."""
    bank = Bank.__new__(Bank)
    bank.path, bank.manifest = out, manifest
    e, cultures, languages, _ = bank.data()
    _atomic_npy(out / "embeddings.npy", e)
    rows = io.StringIO(newline="")
    writer = csv.writer(rows)
    writer.writerow(["culture", "language"])
    writer.writerows(zip(cultures, languages, strict=True))
    atomic_write_text(out / "labels.csv", rows.getvalue())
    centroids = sos_bank.build(e, cultures, languages, embedder=manifest["settings"]["embedder"])
    atomic_write(out / "centroids.npz", centroids.save)


BANK_FIELDS = ("culture", "language", "done", "prompts", "images", "embeddings")


def bank_results(manifest: dict[str, Any]) -> tuple[Results, tuple[str, ...], list[dict]]:
    """The bank's results record (its settings and grid; per cell its prompts, images and
    embeddings file), the CSV's columns and its rows (one per cell, counts of prompts and
    images)."""

    cells = [
        {
            "culture": c["culture"],
            "language": c["language"],
            "done": c["done"],
            "prompts": c.get("prompts"),
            "images": c.get("images"),
            "embeddings": c.get("embeddings"),
        }
        for c in manifest["cells"].values()
    ]
    done = [c for c in cells if c["done"]]
    summary = {
        "cells": len(cells),
        "done": len(done),
        "images": sum(len(c["images"] or []) for c in done),
        "cultures": manifest["cultures"],
        "languages": manifest["languages"],
    }
    config = {**manifest["settings"], "version": manifest.get("version")}
    rows = [
        {
            **c,
            "prompts": None if c["prompts"] is None else len(c["prompts"]),
            "images": None if c["images"] is None else len(c["images"]),
        }
        for c in cells
    ]
    return Results.made("sos-bank", config, summary, cells, "bank_cells.csv"), BANK_FIELDS, rows
