"""The cells of a many-cell job and the folder that keeps them.

A :class:`Cell` is one unit of work of a job (a bench's generator and prompt, a concepts
run's generator and concept): its ``key``, the ``inputs`` that made it, its ``outputs`` by
metric name (names from :mod:`metrics.catalog`, checked), its per-image records, what else
it keeps (``data``: embeddings, tag counts), its ``timings`` and ``errors``.

A :class:`CellStore` keeps a job's cells in one folder: a JSON-lines file appended one cell
at a time (synced; a line a kill cut short is skipped on reading and its cell made again),
and the images under ``images/``. A line is the cell flattened, as pandas or ``datasets``
read it: the inputs, the outputs, ``images``, the data, ``timings``, ``errors`` and
``schema``, the version of this layout. Lines without ``schema`` (folders written before
it) are version 0 and read the same; a line of a newer version than this code knows is an
error that says to upgrade, never a guess.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from metrics.catalog import known
from refine.io.files import append_jsonl, slug

SCHEMA = 1  # 1: schema, timings and errors added to each line; 0: lines before them
OWN = ("images", "timings", "errors", "schema")  # the fields every cell line has


class CellSchemaError(ValueError):
    """A cells file written by a newer version of the toolkit."""


@dataclass(frozen=True)
class CellFormat:
    """How one job keeps its cells: the file's name, the fields that are inputs, those of
    them that identify a cell (its key, in order), and the fields kept as data; every other
    field of a line is an output, named as a catalog metric."""

    file: str
    inputs: tuple[str, ...]
    key: tuple[str, ...]
    data: tuple[str, ...] = ()
    bulky: tuple[str, ...] = ()  # data left out of the results record (embeddings)
    # (old name, new name) of outputs and image fields an older layout named otherwise:
    # read under their new names, so that older folders still open
    renamed: tuple[tuple[str, str], ...] = ()

    def key_of(self, fields: dict[str, Any]) -> tuple[Any, ...]:
        return tuple(_frozen(fields[k]) for k in self.key)


def _renamed(line: dict[str, Any], names: dict[str, str]) -> dict[str, Any]:
    """``line`` with its fields, and its images' fields, under their new ``names``."""
    images = [{names.get(k, k): v for k, v in im.items()} for im in line.get("images") or []]
    out = {names.get(k, k): v for k, v in line.items()}
    return {**out, "images": images} if "images" in line else out


def _frozen(value: Any) -> Any:
    return tuple(_frozen(v) for v in value) if isinstance(value, list | tuple) else value


@dataclass
class Cell:
    """One cell: what made it, what it measured (by catalog metric name) and how long it
    took. ``record()`` is its line in the cells file; ``Cell.read`` reads one back."""

    key: tuple[Any, ...]
    inputs: dict[str, Any]
    outputs: dict[str, float | None]
    images: list[dict[str, Any]] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    schema: int = SCHEMA

    def __post_init__(self) -> None:
        unknown = [m for m in self.outputs if not known(m)]
        if unknown:
            raise ValueError(f"cell outputs {unknown} are not metrics of metrics.catalog")
        clash = (set(self.inputs) & set(self.outputs)) | (set(self.inputs) & set(self.data))
        clash |= (set(self.inputs) | set(self.data) | set(self.outputs)) & set(OWN)
        if clash:
            raise ValueError(f"cell fields {sorted(clash)} are given twice")

    def mean(self, metric: str) -> float | None:
        """The cell's value of a metric: its output, or the mean over its images of a
        per-image metric (None when no image has it)."""
        if metric in self.outputs:
            return self.outputs[metric]
        values = [im[metric] for im in self.images if im.get(metric) is not None]
        return sum(values) / len(values) if values else None

    def record(self) -> dict[str, Any]:
        """The cell's line: one flat object (inputs, outputs, images, data, timings,
        errors, schema)."""
        return {
            **self.inputs,
            **self.outputs,
            "images": self.images,
            **self.data,
            "timings": self.timings,
            "errors": self.errors,
            "schema": self.schema,
        }

    @classmethod
    def read(cls, line: dict[str, Any], form: CellFormat) -> Cell:
        """A cell from its line (any schema up to :data:`SCHEMA`)."""
        schema = line.get("schema", 0)
        if not isinstance(schema, int) or schema > SCHEMA:
            raise CellSchemaError(
                f"a cell of layout version {schema!r}: this toolkit reads versions up to "
                f"{SCHEMA}; upgrade it to open this folder"
            )
        outputs, data, inputs = {}, {}, {}
        if form.renamed:
            line = _renamed(line, dict(form.renamed))
        for name, value in line.items():
            if name in OWN:
                continue
            if name in form.inputs:
                inputs[name] = value
            elif name in form.data or not known(name):  # a field of an older layout
                data[name] = value
            else:
                outputs[name] = value
        return cls(
            key=form.key_of(line),
            inputs=inputs,
            outputs=outputs,
            images=list(line.get("images") or []),
            data=data,
            timings=dict(line.get("timings") or {}),
            errors=list(line.get("errors") or []),
            schema=schema,
        )


class CellStore:
    """A folder of cells: ``cells()`` reads what is done, ``append`` adds one."""

    def __init__(self, folder: str | Path, form: CellFormat) -> None:
        self.dir = Path(folder)
        self.form = form
        self.cells_path = self.dir / form.file

    def records(self) -> list[dict[str, Any]]:
        """Every whole line of the cells file, as written."""
        return [line for _, line in self._lines()]

    def _lines(self) -> list[tuple[int, dict[str, Any]]]:
        from refine.io.files import read_jsonl

        return read_jsonl(self.cells_path)  # a line cut by a kill: its cell made again

    def cells(self) -> list[Cell]:
        """Every cell on record, in the order made; raises CellSchemaError naming the file
        and line of a cell this version cannot read."""
        out = []
        for n, line in self._lines():
            try:
                out.append(Cell.read(line, self.form))
            except CellSchemaError as err:
                raise CellSchemaError(f"{self.cells_path} line {n}: {err}") from None
        return out

    def append(self, cell: Cell) -> None:
        append_jsonl(self.cells_path, cell.record())

    def image_path(self, generator: str, activity: str, country: str, seed: int) -> Path:
        """Where a generator's image of a prompt and seed goes: ``images/GENERATOR/...``."""
        name = f"{slug(country, 30)}--{slug(activity, 60)}--s{seed}.png"
        folder = slug(generator, 80)
        if folder != slug(generator, 10_000) or "+lora=" in generator:
            # long names or adapters: slugs alone could clash
            folder = f"{slug(generator, 60)}-{hashlib.sha1(generator.encode()).hexdigest()[:8]}"
        return self.dir / "images" / folder / name


def latest(cells: Iterable[Cell]) -> dict[tuple[Any, ...], Cell]:
    """Each key's last cell (a cell made again after a change of plan replaces the old)."""
    return {cell.key: cell for cell in cells}
