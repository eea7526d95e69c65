"""Input files read and checked: descriptor maps, EXAG tables, ``.npy`` arrays, label
CSVs and images.

Every problem with a user's file raises :class:`InputError` with one line that names the
file, the field and what is wrong; the command line prints it and exits with code 2.
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from metrics.descriptors import DIMENSIONS


class InputError(Exception):
    """A bad input file or argument; the message is shown to the user as is."""


def _read_text(path: Path) -> str:
    if not path.exists():
        raise InputError(f"{path}: file not found")
    if path.is_dir():
        raise InputError(f"{path}: is a directory, expected a file")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise InputError(f"{path}: not UTF-8 text ({err.reason} at byte {err.start})") from err


def load_json(path: Path) -> Any:
    text = _read_text(path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise InputError(
            f"{path}: invalid JSON at line {err.lineno} column {err.colno}: {err.msg}"
        ) from err


def check_descriptor_map(data: Any, path: Path, where: str) -> dict[str, list[str]]:
    """Validate ``{dimension: [phrase, ...]}``; ``where`` names the object in messages."""
    if not isinstance(data, dict):
        raise InputError(
            f"{path}: {where} must be an object {{dimension: [phrase, ...]}}, "
            f"got {type(data).__name__}"
        )
    out: dict[str, list[str]] = {}
    for dim, phrases in data.items():
        if dim not in DIMENSIONS:
            raise InputError(
                f"{path}: {where}: unknown dimension {dim!r} "
                f"(expected one of {', '.join(DIMENSIONS)})"
            )
        if not isinstance(phrases, list):
            raise InputError(
                f"{path}: {where}.{dim} must be a list of phrases, got {type(phrases).__name__}"
            )
        for k, phrase in enumerate(phrases):
            if not isinstance(phrase, str):
                raise InputError(
                    f"{path}: {where}.{dim}[{k}] must be a string, got {json.dumps(phrase)}"
                )
        out[dim] = phrases
    return out


def load_refs(path: Path) -> dict[str, list[str]]:
    refs = check_descriptor_map(load_json(path), path, "references")
    if not any(p.strip() for phrases in refs.values() for p in phrases):
        raise InputError(f"{path}: the reference set is empty (no phrase in any dimension)")
    return refs


def load_preds(path: Path) -> list[dict[str, list[str]]]:
    data = load_json(path)
    if isinstance(data, dict):
        raise InputError(
            f"{path}: predictions must be a list with one {{dimension: [phrase, ...]}} "
            "object per image (wrap a single image's object in [ ])"
        )
    if not isinstance(data, list):
        raise InputError(f"{path}: predictions must be a list, got {type(data).__name__}")
    if not data:
        raise InputError(f"{path}: predictions list is empty (need one object per image)")
    return [check_descriptor_map(item, path, f"image[{i}]") for i, item in enumerate(data)]


def _finite_number(value: Any, path: Path, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InputError(f"{path}: {where} must be a number, got {json.dumps(value)}")
    if not math.isfinite(value):
        raise InputError(f"{path}: {where} must be finite, got {value}")
    return float(value)


def load_exag(path: Path, n_images: int) -> tuple[list[str], list[list[float]], list[float]]:
    """Validate ``{"candidates": [...], "scores": [[...] per image], "baseline": [...]}``."""
    data = load_json(path)
    if not isinstance(data, dict):
        raise InputError(f"{path}: must be an object with candidates, scores and baseline")
    for key in ("candidates", "scores", "baseline"):
        if key not in data:
            raise InputError(f"{path}: missing field {key!r}")
    candidates, scores, baseline = data["candidates"], data["scores"], data["baseline"]
    if not isinstance(candidates, list) or not candidates:
        raise InputError(f"{path}: candidates must be a non-empty list of strings")
    for k, c in enumerate(candidates):
        if not isinstance(c, str):
            raise InputError(f"{path}: candidates[{k}] must be a string, got {json.dumps(c)}")
    n_cand = len(candidates)
    if not isinstance(baseline, list) or len(baseline) != n_cand:
        got = len(baseline) if isinstance(baseline, list) else type(baseline).__name__
        raise InputError(
            f"{path}: baseline must have {n_cand} numbers (one per candidate), got {got}"
        )
    base = [_finite_number(v, path, f"baseline[{k}]") for k, v in enumerate(baseline)]
    if not isinstance(scores, list):
        raise InputError(f"{path}: scores must be a list with one row per image")
    if len(scores) != n_images:
        raise InputError(
            f"{path}: scores has {len(scores)} rows but the predictions have {n_images} images"
        )
    rows: list[list[float]] = []
    for i, row in enumerate(scores):
        if not isinstance(row, list) or len(row) != n_cand:
            got = len(row) if isinstance(row, list) else type(row).__name__
            raise InputError(
                f"{path}: scores[{i}] must have {n_cand} numbers (one per candidate), got {got}"
            )
        rows.append([_finite_number(v, path, f"scores[{i}][{j}]") for j, v in enumerate(row)])
    return candidates, rows, base


def load_matrix(path: Path, what: str) -> np.ndarray:
    """A 2-D finite float array from a ``.npy`` file."""
    arr = _load_npy(path)
    if arr.ndim != 2:
        raise InputError(f"{path}: {what} must be a 2-D array, got shape {arr.shape}")
    if arr.shape[0] == 0:
        raise InputError(f"{path}: {what} has no rows")
    _check_finite(arr, path, what)
    return arr


def load_vector(path: Path, what: str) -> np.ndarray:
    arr = _load_npy(path)
    if arr.ndim != 1:
        raise InputError(f"{path}: {what} must be a 1-D array, got shape {arr.shape}")
    _check_finite(arr, path, what)
    return arr


def _load_npy(path: Path) -> np.ndarray:
    if not path.exists():
        raise InputError(f"{path}: file not found")
    try:
        arr = np.load(path, allow_pickle=False)
    except (ValueError, OSError, EOFError) as err:
        raise InputError(f"{path}: not a readable .npy array ({err})") from err
    if not isinstance(arr, np.ndarray):
        raise InputError(f"{path}: expected a single .npy array, not an archive")
    if not np.issubdtype(arr.dtype, np.number) or np.issubdtype(arr.dtype, np.complexfloating):
        raise InputError(f"{path}: array must hold real numbers, got dtype {arr.dtype}")
    return arr.astype(np.float64)


def _check_finite(arr: np.ndarray, path: Path, what: str) -> None:
    bad = ~np.isfinite(arr)
    if bad.any():
        where = tuple(int(i) for i in np.argwhere(bad)[0])
        raise InputError(f"{path}: {what} contains NaN or inf (first at index {list(where)})")


def load_labels(path: Path, n_rows: int) -> tuple[list[str], list[str]]:
    """Culture and language per embedding row from a CSV with columns culture,language."""
    text = _read_text(path)
    reader = csv.DictReader(text.splitlines())
    fields = reader.fieldnames or []
    for column in ("culture", "language"):
        if column not in fields:
            raise InputError(
                f"{path}: missing column {column!r} (header must name culture,language; "
                f"got {','.join(fields) or 'no header'})"
            )
    cultures: list[str] = []
    languages: list[str] = []
    for line, row in enumerate(reader, start=2):
        culture = (row.get("culture") or "").strip()
        language = (row.get("language") or "").strip()
        if not culture or not language:
            empty = "culture" if not culture else "language"
            raise InputError(f"{path}: line {line}: empty {empty}")
        cultures.append(culture)
        languages.append(language)
    if len(cultures) != n_rows:
        raise InputError(
            f"{path}: {len(cultures)} label rows but the embeddings have {n_rows} rows"
        )
    return cultures, languages


def parse_order(value: str) -> float:
    """The Vendi order q: a non-negative number or ``inf``."""
    try:
        q = float(value)
    except ValueError as err:
        raise InputError(f"--q: expected a number or 'inf', got {value!r}") from err
    if math.isnan(q) or q < 0:
        raise InputError(f"--q: the order must be >= 0 or 'inf', got {value!r}")
    return q


def load_images(paths: list[Path]) -> list[Any]:
    """Each file as an RGB PIL image; a missing or unreadable one names the file."""
    from PIL import Image, UnidentifiedImageError

    loaded = []
    for path in paths:
        if not path.is_file():
            raise InputError(f"{path}: image not found")
        try:
            with Image.open(path) as im:
                loaded.append(im.convert("RGB"))
        except Image.DecompressionBombError as err:
            raise InputError(f"{path}: too large to open safely ({err})") from err
        except (UnidentifiedImageError, OSError) as err:
            raise InputError(f"{path}: not an image PIL can read ({err})") from err
    return loaded
