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
"""

from __future__ import annotations

import csv
import io
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from metrics.sos import SosBank
from refine.assets import assets_dir, prompt_template
from refine.backends.selection import Backends
from refine.evaluate.refs_build import LLMCache
from refine.evaluate.sos import LANGUAGES, MANIFEST, Bank, BankError, Translation
from refine.harness.engine import LOCAL, EngineOptions, MakerSpec
from refine.harness.task import Task, run_task
from refine.io.files import atomic_write, atomic_write_json, atomic_write_text
from refine.profiles import load_profile


@cache
def person_prompts() -> dict[tuple[str, str], list[str]]:
    """(culture, language) -> the nine person prompts, ``en`` from ``prompt_en``."""
    path = assets_dir() / "sos" / "multilingual_person_prompts.csv"
    out: dict[tuple[str, str], list[str]] = {}
    with open(path, encoding="utf-8", newline="") as fh:
        for row in csv.DictReader(fh):
            culture = row["Culture"].strip()
            out.setdefault((culture, row["Language"].strip()), []).append(
                row["prompt_translated"].strip()
            )
            english = out.setdefault((culture, "en"), [])
            if row["prompt_en"].strip() not in english:
                english.append(row["prompt_en"].strip())
    return out


def person_cultures() -> list[str]:
    return sorted({c for c, _ in person_prompts()})


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", text).strip("_") or "x"


def _suggest(name: str, known: Sequence[str]) -> str:
    import difflib

    close = difflib.get_close_matches(name, list(known), n=3, cutoff=0.6)
    return f" (did you mean {', '.join(close)}?)" if close else ""


def check_grid(concept: str, cultures: Sequence[str], languages: Sequence[str]) -> None:
    """Every culture and language known for the concept; all problems together."""
    problems = []
    if not cultures:
        problems.append("no cultures given")
    if not languages:
        problems.append("no languages given")
    for lang in languages:
        if lang not in LANGUAGES:
            problems.append(
                f"unknown language {lang!r}; known: {', '.join(sorted(LANGUAGES))}"
                + _suggest(lang, list(LANGUAGES))
            )
    if concept == "person":
        known = set(person_cultures())
        for c in cultures:
            if c not in known:
                problems.append(
                    f"culture {c!r} has no person prompts (identities such as 'Japanese')"
                    + _suggest(c, sorted(known))
                )
        have = {lang for _, lang in person_prompts()}
        for lang in languages:
            if lang in LANGUAGES and lang not in have:
                problems.append(
                    f"language {lang!r} has no native-speaker person prompts; "
                    f"use one of {', '.join(sorted(have))}"
                )
    for name, items in (("culture", cultures), ("language", languages)):
        dup = sorted({x for x in items if list(items).count(x) > 1})
        if dup:
            problems.append(f"{name}s given twice: {', '.join(dup)}")
    if problems:
        raise BankError("; ".join(problems))


def cell_prompts(
    concept: str, culture: str, language: str, llm: Any = None, cache_: Any = None
) -> list[str]:
    """The prompts of one cell: the person prompts, or the activity prompt translated."""
    if concept == "person":
        return list(person_prompts()[(culture, language)])
    english = prompt_template("generate").strip().format(activity=concept, country=culture)
    if language == "en":
        return [english]
    if llm is None:
        raise BankError(
            f"translating {concept!r} prompts needs a language model (the profile's llm role)"
        )

    ask = (cache_ or LLMCache()).ask
    request = prompt_template("translate").format(language=LANGUAGES[language], text=english)
    text = ask(llm, request, Translation).translation.strip()
    if not text:
        raise BankError(f"the language model gave an empty {LANGUAGES[language]} translation")
    return [text]


def _atomic_npy(path: Path, array: np.ndarray) -> None:
    atomic_write(path, lambda tmp: np.save(tmp, array))


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
    else:
        if out.exists() and any(out.iterdir()):
            raise BankError(f"{out}: exists and is not an SoS bank; choose an empty folder")
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
    finally:  # the combined files follow every finished cell, even after a failure
        if any(cell["done"] for cell in manifest["cells"].values()):
            _write_combined(out, manifest, SosBank)
    return Bank(out)


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
        todo = [(key, dict(cell)) for key, cell in cells.items() if not cell["done"]]
        self.finished = self.total - len(todo)
        return todo

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

    def end(self, made_with: Any) -> None:
        return None


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


def _write_combined(out: Path, manifest: dict[str, Any], sos_bank: Any) -> None:
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
