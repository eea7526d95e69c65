"""The one results record every task on the harness writes, and the only thing its reports
read.

``results.json`` in a task's folder is a :class:`Results`: which task wrote it and the
layout version (``schema``), what the task was asked for and made its cells with
(``config``), the versions of the packages that decide the numbers (``packages``), the
task's figures (``summary``: per group, each metric's mean and 95% interval, under the
catalog's names), and its cells' lines in the plan's order (``cells``, without the bulky
data a cells file keeps, such as image embeddings). Beside it the task writes one CSV, one
row per image, for pandas or ``datasets``. A missing value is ``null`` in the record, blank
in the CSV and a dash on screen, never a number.

A record of a newer layout than this code knows is refused with a message that says to
upgrade, never guessed at.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

RESULTS = "results.json"
SCHEMA = 2  # 1: task, config, packages, summary, cells, csv; 2: toolkit, models


class ResultsError(ValueError):
    """A results record that cannot be read: absent, not a record, or of a newer layout."""


@dataclass
class Results:
    """A task's results record (see the module docstring)."""

    task: str
    config: dict[str, Any]
    summary: dict[str, Any]
    cells: list[dict[str, Any]] = field(default_factory=list)
    packages: dict[str, str] = field(default_factory=dict)
    csv: str | None = None  # the CSV beside it, by file name
    schema: int = SCHEMA
    toolkit: str = ""  # the cultural-refine version that wrote it ("" before layout 2)
    # each model the cells were made with and the weights it resolved to: a local model's
    # hub commit, an API model's modelVersion, or no_revision_available; {} where the task
    # names none (and before layout 2)
    models: dict[str, str] = field(default_factory=dict)

    @classmethod
    def made(
        cls,
        task: str,
        config: dict[str, Any],
        summary: dict[str, Any],
        cells: list[dict[str, Any]],
        csv: str,
        models: dict[str, str] | None = None,
    ) -> Results:
        """A task's record as it ends, with the versions of the toolkit and the packages
        installed here."""
        from refine.usage import package_versions, toolkit_version

        return cls(
            task,
            config,
            summary,
            cells,
            package_versions(),
            csv,
            toolkit=toolkit_version(),
            models=dict(models or {}),
        )

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def write(self, folder: str | Path) -> Path:
        """``results.json`` in ``folder``, replaced atomically; returns its path."""
        from refine.io.files import atomic_write_json

        path = Path(folder) / RESULTS
        atomic_write_json(path, self.to_json())
        return path

    @classmethod
    def from_json(cls, doc: Any, where: str = RESULTS) -> Results:
        if not isinstance(doc, dict) or not isinstance(doc.get("task"), str):
            raise ResultsError(f"{where}: not a results record (no task named)")
        schema = doc.get("schema")
        if not isinstance(schema, int) or schema > SCHEMA:
            raise ResultsError(
                f"{where}: a results record of layout version {schema!r}; this toolkit reads "
                f"versions up to {SCHEMA}; upgrade it to open this folder"
            )
        return cls(
            task=doc["task"],
            config=dict(doc.get("config") or {}),
            summary=dict(doc.get("summary") or {}),
            cells=list(doc.get("cells") or []),
            packages=dict(doc.get("packages") or {}),
            csv=doc.get("csv"),
            schema=schema,
            toolkit=doc.get("toolkit", ""),
            models=dict(doc.get("models") or {}),
        )

    @classmethod
    def read(cls, folder: str | Path, task: str | None = None) -> Results:
        """The record in ``folder``; with ``task``, one that task wrote. Raises
        ResultsError naming the file and what to do."""
        path = Path(folder) / RESULTS
        if not path.is_file():
            raise ResultsError(f"{path}: no results record here; run the task into this folder")
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as err:
            raise ResultsError(f"{path}: unreadable ({err})") from None
        results = cls.from_json(doc, str(path))
        if task is not None and results.task != task:
            raise ResultsError(f"{path}: the results of a {results.task}, not of a {task}")
        return results


def cell_mean(cell: dict[str, Any], metric: str) -> float | None:
    """A cell's value of a metric, from its line: the cell's own (a prompt-level metric
    such as Vendi), else the mean over its images of theirs (None when none has it)."""
    if metric in cell:
        return cell[metric]
    values = [im[metric] for im in cell.get("images", []) if im.get(metric) is not None]
    return sum(values) / len(values) if values else None


def write_csv(path: str | Path, fields: tuple[str, ...], rows: list[dict[str, Any]]) -> None:
    """A CSV of ``rows`` with the columns ``fields``, replaced atomically; a missing value
    (None) is a blank cell."""
    import csv
    import io

    from refine.io.files import atomic_write_text

    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: "" if v is None else v for k, v in row.items()})
    atomic_write_text(path, buf.getvalue())


def publish(
    folder: str | Path, results: Results, fields: tuple[str, ...], rows: list[dict[str, Any]]
) -> Results:
    """Write ``results.json`` and its CSV (``results.csv``, columns ``fields``) in
    ``folder``; returns the record as every reader sees it (read back: lists, not tuples)."""
    results.write(folder)
    if results.csv:
        write_csv(Path(folder) / results.csv, fields, rows)
    return Results.read(folder, results.task)


def headline(stat: dict[str, Any]) -> tuple[float | None, Any, str | None]:
    """A summary entry's (mean, interval, variant) to rank and draw by: its mean, or where
    the variants were kept apart, the mean of the variant with the most prompts (named)."""
    by = stat.get("by_variant")
    if not by:
        return stat.get("mean"), stat.get("interval"), stat.get("variant")
    v, top = max(by.items(), key=lambda kv: (kv[1]["prompts"], kv[0]))
    return top["mean"], top["interval"], v
