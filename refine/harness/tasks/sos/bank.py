"""SoS reference banks: images of each culture prompted in each language, embedded.

A bank folder holds::

    bank.json           settings, the grid, and per cell its prompts, images and state
    images/<culture>/<language>/<k>.png
    cells/<culture>__<language>.npy   the cell's image embeddings (written when it is done)
    embeddings.npy, labels.csv         every finished cell's embeddings and (culture, language)
    centroids.npz                      the SosBank (semantic and surface centroids)

Prompts: for the concept ``person``, the SoS authors' native-speaker translations
(``assets/sos/multilingual_person_prompts.csv``; ``en`` uses their English prompts); for
an activity, the round-0 prompt template in English, translated by the language model
(answers cached). Building is resumable: finished cells are kept, a half-done cell reuses
the images it already saved, and a bank can be grown by naming more cultures or languages.

The grid and prompts are read in :mod:`refine.harness.tasks.sos.prompts`, a cell made in
:mod:`refine.harness.tasks.sos.cells`. A bank ends, like every task, with its results
record (``results.json``: the settings, per cell its prompts and images) and
``bank_cells.csv``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from metrics.sos import SosBank
from refine.evaluate.sos import MANIFEST, Bank, BankError
from refine.harness.engine import LOCAL, EngineOptions, MakerSpec
from refine.harness.results import publish
from refine.harness.task import Task, run_task
from refine.harness.tasks.sos.cells import BankMaker, bank_results, write_combined
from refine.harness.tasks.sos.prompts import check_grid
from refine.io.files import atomic_write_json
from refine.io.store import held


def build_bank(
    out: str | Path,
    concept: str,
    cultures: Sequence[str],
    languages: Sequence[str],
    generator: Any,
    embedder: Any,
    llm: Any = None,
    images_per_prompt: int = 1,
    prompts_per_cell: int | None = None,
    seed: int = 0,
    on_progress: Callable[[int, int, str], None] | None = None,
    llm_cache: Any = None,
    *,
    engine: EngineOptions = LOCAL,
    models: tuple[str, dict[str, str]] | None = None,
    emit: Callable[[str], None] | None = None,
) -> Bank:
    """Build (or go on building, or grow) the bank at ``out``. Each cell generates
    ``images_per_prompt`` images for each of its first ``prompts_per_cell`` prompts, one
    cell at a time with ``generator``, ``embedder`` and ``llm`` here, or on
    ``engine.workers`` Ray actors (``engine.kind`` ``ray``), each building its own from
    ``models`` (profile, backend overrides): the bank folder must be on storage every node
    sees."""
    if engine.kind == "ray" and models is None:
        raise ValueError("the Ray engine needs models=(profile, backend overrides)")

    check_grid(concept, cultures, languages)
    out = Path(out)
    if (out / MANIFEST).is_file() or not (out.exists() and any(out.iterdir())):
        # held before its manifest is written: a second process writes nothing (run_task
        # holds it again, within this process)
        with held(out):
            return _build(out, concept, cultures, languages, generator, embedder, llm,
                          llm_cache, images_per_prompt, prompts_per_cell, seed, on_progress,
                          models, emit, engine)  # fmt: skip
    raise BankError(f"{out}: exists and is not an SoS bank; choose an empty folder")


def _build(
    out, concept, cultures, languages, generator, embedder, llm, llm_cache,
    images_per_prompt, prompts_per_cell, seed, on_progress, models, emit, engine,
) -> Any:  # fmt: skip
    settings = {
        "concept": concept,
        "generator": generator.id,
        "embedder": embedder.id,
        "images_per_prompt": images_per_prompt,
        "prompts_per_cell": prompts_per_cell,
        "seed": seed,
    }
    if (out / MANIFEST).is_file():
        manifest = Bank(out).manifest
        changed = [k for k, v in settings.items() if manifest["settings"].get(k) != v]
        if changed:
            was = ", ".join(f"{k}={manifest['settings'].get(k)!r}" for k in changed)
            raise BankError(
                f"{out} was built with {was}; a bank keeps one setting for all its cells. "
                "Use the same settings to go on, or a new --out folder"
            )
    else:  # an empty folder (build_bank checked it), held by this process
        out.mkdir(parents=True, exist_ok=True)
        manifest = {"version": 1, "settings": settings, "cells": {}}
    for c in cultures:
        for lang in languages:
            manifest["cells"].setdefault(
                f"{c}|{lang}", {"culture": c, "language": lang, "done": False}
            )
    manifest["cultures"] = sorted({cell["culture"] for cell in manifest["cells"].values()})
    manifest["languages"] = sorted({cell["language"] for cell in manifest["cells"].values()})
    atomic_write_json(out / MANIFEST, manifest)
    (out / "cells").mkdir(exist_ok=True)
    params = {
        "concept": concept,
        "images_per_prompt": images_per_prompt,
        "prompts_per_cell": prompts_per_cell,
        "seed": seed,
    }

    task = BankTask(out, manifest, params, on_progress)
    profile, overrides = models or ("", {})
    try:
        run_task(
            task.with_models(profile, overrides, llm is not None),
            # local models: one cell at a time
            engine=engine if engine.kind == "ray" else replace(engine, workers=1),
            instances={
                "generator": generator,
                "image_embedder": embedder,
                "llm": llm,
                "llm_cache": llm_cache,
            },
            on_event=emit,
        )
    finally:  # the combined files and the record follow every finished cell, even after a
        # failure
        if any(cell["done"] for cell in manifest["cells"].values()):
            write_combined(out, manifest, SosBank)
        publish(out, *bank_results(manifest))
    return Bank(out)


class BankTask(Task):
    """A bank on the harness: one job per cell (culture and language) not done; the
    manifest is written here alone, as each cell's prompts are chosen and as it ends."""

    name = "sos-bank"
    what = "the bank folder (--out)"

    def __init__(
        self,
        out: Path,
        manifest: dict[str, Any],
        params: dict[str, Any],
        on_progress: Callable[[int, int, str], None] | None,
    ) -> None:
        self.folder, self.manifest, self.params = out, manifest, params
        self.on_progress = on_progress
        self.total = len(manifest["cells"])
        self.finished = 0
        self.lock = threading.Lock()
        self.todo: list[tuple[str, dict[str, Any]]] = []
        self.failures: list[str] = []  # the cells that failed on their own, in words
        self.models: tuple[str, dict[str, str], bool] = ("", {}, False)

    def with_models(self, profile: str, overrides: dict[str, str], needs_llm: bool) -> BankTask:
        """How a Ray worker builds its models."""
        self.models = (profile, overrides, needs_llm)
        return self

    def maker(self) -> MakerSpec:
        profile, overrides, needs_llm = self.models
        return MakerSpec(
            BankMaker,
            {
                "profile": profile,
                "overrides": overrides,
                "needs_llm": needs_llm,
                "root": str(self.folder),
                "params": self.params,
            },
        )

    def begin(self, made_with: Any, workers: list[str]) -> list[tuple[str, dict[str, Any]]]:
        cells = self.manifest["cells"]
        self.todo = [(key, dict(cell)) for key, cell in cells.items() if not cell["done"]]
        self.finished = self.total - len(self.todo)
        return self.todo

    def label(self, job: tuple[str, dict[str, Any]]) -> str:
        return f"{job[1]['culture']} x {job[1]['language']}"

    def heard(self, job: tuple[str, dict[str, Any]], update: dict[str, Any]) -> None:
        if not update.get("done"):  # the prompts, chosen: a cell made again reuses them
            self.record(job[0], update, "")

    def done(self, job: tuple[str, dict[str, Any]], update: dict[str, Any], worker: str) -> None:
        self.record(job[0], update, worker)

    def record(self, key: str, update: dict[str, Any], worker: str) -> None:
        """A made cell (or its prompts) into the manifest."""
        with self.lock:
            cell = self.manifest["cells"][key]
            cell.update(update)
            atomic_write_json(self.folder / MANIFEST, self.manifest)
            if not cell["done"]:
                return
            self.finished += 1
            n = self.finished
        if self.on_progress is not None:
            where = f" [{worker}]" if worker else ""
            what = f"{cell['culture']} x {cell['language']} ({len(cell['images'])} images)"
            self.on_progress(n, self.total, what + where)

    def failed(self, job: tuple[str, dict[str, Any]], err: Exception, worker: str) -> bool:
        """A cell's own failure (a prompt the generator refuses: ``JobFailure``) is said and
        the cell left to do, and the others go on: the bank ends with the failures listed
        (:class:`refine.harness.task.CellsFailed`), and the same command makes only those.
        Any other failure (a model that fell over) stops the bank, as it would every cell."""
        from refine.backends.loading import JobFailure, describe_error

        if not isinstance(err, JobFailure):
            return False
        with self.lock:
            self.failures.append(f"{self.label(job)}: {describe_error(err)}")
            self.finished += 1
            n = self.finished
        if self.on_progress is not None:
            where = f" [{worker}]" if worker else ""
            self.on_progress(
                n, self.total, f"{self.label(job)}: failed: {describe_error(err)}{where}"
            )
        return True

    def end(self, made_with: Any) -> None:
        return None
