"""How a batch's plan is read: its spec file, one refinement run per line (JSONL or CSV),
every line checked before anything runs, and the batch directory it opens or resumes (see
:mod:`refine.harness.tasks.batch.task`)."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from refine import settings
from refine.evaluate.reference_source import ReferenceSource
from refine.harness.tasks.batch.record import BATCH_FILE, Batch, BatchEntry, BatchStore
from refine.io.files import json_lines, json_value, slug
from refine.records import DEFAULT_PROFILE, ReferencePack, RunSpec

BATCH_WIDE = ("profile", "backends", "backend_options")


class BatchSpecError(ValueError):
    """A spec file that cannot be run; the message names every bad line."""


def _rows(path: Path, text: str) -> list[tuple[int, dict[str, Any] | BatchSpecError]]:
    """(line number, its settings, or what is wrong with the line) per line that holds one."""
    if path.suffix.lower() == ".csv":
        reader = csv.DictReader(io.StringIO(text))
        if not reader.fieldnames or not {"activity", "country"} <= set(reader.fieldnames):
            raise BatchSpecError(f"{path}: the CSV header must name 'activity' and 'country'")
        rows = []
        for row in reader:
            values = {k.strip(): v.strip() for k, v in row.items() if k and v and v.strip()}
            if values:
                rows.append((reader.line_num, values))
        return rows
    if path.suffix.lower() not in (".jsonl", ".ndjson", ".json"):
        raise BatchSpecError(f"{path}: a batch file is .jsonl (one JSON object a line) or .csv")
    rows = []
    for n, line in enumerate(json_lines(text), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            obj = json_value(line)
        except json.JSONDecodeError as err:  # said with every other bad line
            rows.append((n, BatchSpecError(f"{path.name} line {n}: not JSON ({err.msg})")))
            continue
        if not isinstance(obj, dict):
            obj = BatchSpecError(f"{path.name} line {n}: each line must be a JSON object")
        rows.append((n, obj))
    return rows


def _entry(
    path: Path,
    n: int,
    row: dict[str, Any],
    profile: str,
    find: Callable[..., ReferencePack],
    spec_type: type[RunSpec] = RunSpec,
) -> BatchEntry:

    where = f"{path.name} line {n}"
    wide = [k for k in BATCH_WIDE if k in row]
    if wide:
        raise BatchSpecError(
            f"{where}: {', '.join(wide)} is set for the whole batch (--profile, --backend)"
        )
    row = dict(row)
    name = row.pop("name", None)
    try:
        spec, refs = settings.load(row, base_dir=path.parent, find=find, spec=spec_type)
    except settings.SettingsError as err:
        hint = f" (set {err.related})" if err.related else ""
        raise BatchSpecError(f"{where}: {err.field}: {err.message}{hint}") from err
    spec = spec.model_copy(update={"profile": profile})
    return BatchEntry(
        line=n, name=str(name or f"{spec.activity} ({refs.country})"), spec=spec, references=refs
    )


def _find(activity: str, country: str) -> ReferencePack:
    """A batch line's references when it names no file: the first found in the one order
    (:mod:`refine.evaluate.reference_source`)."""
    return ReferenceSource.default().find(activity, country).pack


def read_specs(
    path: str | Path,
    profile: str = DEFAULT_PROFILE,
    find: Callable[..., ReferencePack] | None = None,
    spec: type[RunSpec] = RunSpec,
) -> list[BatchEntry]:
    """Every line checked before anything runs (as a ``spec``, RunSpec or one with more
    fields); all bad lines are reported together."""

    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise BatchSpecError(f"{path}: cannot read the batch file ({err.strerror})") from err
    entries, problems = [], []
    for n, row in _rows(path, text):
        try:
            if isinstance(row, BatchSpecError):
                raise row
            entries.append(_entry(path, n, row, profile, find or _find, spec))
        except BatchSpecError as err:
            problems.append(str(err))
    if problems:
        raise BatchSpecError("\n".join(problems))
    if not entries:
        raise BatchSpecError(f"{path}: no runs in the batch file")
    return entries


def batch_dir_for(path: str | Path, out: str | Path) -> tuple[Path, str]:
    data = Path(path).read_bytes()
    sha = hashlib.sha256(data).hexdigest()
    return Path(out).resolve() / f"batch-{slug(Path(path).stem, 30)}-{sha[:8]}", sha


def open_batch(
    specs: str | Path,
    out: str | Path,
    profile: str,
    backends: dict[str, str] | None = None,
    resume: bool = False,
    find: Callable[..., ReferencePack] | None = None,
) -> tuple[Batch, BatchStore]:
    """The batch of a spec file: a new directory, or with ``resume`` the existing one."""
    specs = Path(specs)
    if not specs.is_file():
        raise BatchSpecError(f"{specs}: no such batch file")
    directory, sha = batch_dir_for(specs, out)
    store = BatchStore(directory)
    if (directory / BATCH_FILE).is_file():
        if not resume:
            raise BatchSpecError(
                f"{directory} already holds this batch; add --resume to finish it, "
                "or remove the directory to start again"
            )
        batch = store.load()
        if batch.profile != profile or (backends and batch.backends != backends):
            raise BatchSpecError(
                f"{directory} was started with profile {batch.profile!r} and backends "
                f"{batch.backends or '{}'}; resume it with the same --profile and --backend"
            )
        return batch, store
    entries = read_specs(specs, profile, find)
    directory.mkdir(parents=True, exist_ok=True)
    batch = Batch(
        id=directory.name,
        source=str(specs.resolve()),
        source_sha256=sha,
        profile=profile,
        backends=dict(backends or {}),
        created=time.strftime("%Y-%m-%dT%H:%M:%S"),
        entries=entries,
    )
    store.save(batch)
    return batch, store
