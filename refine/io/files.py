"""Files, written and read one way everywhere.

* Atomic writes: the content goes to a unique temp file beside the target (``.NAME.*.tmp``),
  is synced, takes the user's umask (not mkstemp's 0600) and replaces the target by
  rename, so a reader sees the old file or the new one, never half of one, and a kill
  leaves at most a temp file (a run's lock holder removes them).
* Appended JSON lines, synced; a line a kill cut short is closed first.
* Names, not paths: ``slug`` makes a safe file name from any text.
* Confined paths (the app's rules for anything a client names): inside the root, no
  ``..`` out of it, no link on the way.
* Image folders: the plain image files of a folder, sorted.
* Content hashes of files, read in blocks.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp")


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


FILE_MODE = 0o666 & ~_umask()


# -- atomic writes -----------------------------------------------------------------------
def atomic_write(path: str | Path, write: Callable[[Path], None]) -> None:
    """``write(tmp)`` fills a temp file beside ``path`` (same suffix, so writers that go
    by it, such as PIL, numpy and FAISS, keep their format), which then replaces ``path``."""
    path = Path(path)
    fd, name = tempfile.mkstemp(
        dir=path.parent, prefix=f".{path.name}.", suffix=f".tmp{path.suffix}"
    )
    os.close(fd)
    tmp = Path(name)
    try:
        write(tmp)
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.chmod(tmp, FILE_MODE)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    atomic_write(path, lambda tmp: tmp.write_bytes(data))


def atomic_write_text(path: str | Path, text: str) -> None:
    atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def atomic_write_json(path: str | Path, data: Any, indent: int | None = 1) -> None:
    atomic_write_text(path, json.dumps(data, indent=indent, ensure_ascii=False))


def is_temp(path: Path) -> bool:
    """A temp file an atomic write left behind (a kill during the write)."""
    return path.name.startswith(".") and ".tmp" in path.name


def append_jsonl(path: str | Path, row: Any) -> None:
    """Append one JSON line and sync it (:func:`append_jsonl_rows`)."""
    append_jsonl_rows(path, [row])


def append_jsonl_rows(path: str | Path, rows: Sequence[Any]) -> None:
    """Append JSON lines and sync them once (a sync a line made 20,000 lines take 87 s); a
    line a kill left unfinished is closed first, so the new ones start on a line of their
    own (readers skip the cut one). Text keeps its characters (U+2028 too: readers split
    on ``\n`` alone)."""
    if not rows:
        return
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    cut = False
    if path.is_file() and path.stat().st_size:
        with open(path, "rb") as f:
            f.seek(-1, os.SEEK_END)
            cut = f.read(1) != b"\n"
    text = "".join(json.dumps(r, ensure_ascii=False, allow_nan=False) + "\n" for r in rows)
    with open(path, "a", encoding="utf-8") as f:
        f.write(("\n" if cut else "") + text)
        f.flush()
        os.fsync(f.fileno())


MAX_LINE_BYTES = 16 * 2**20  # a JSON line of a project file: records, never images


def json_lines(text: str) -> list[str]:
    """The lines of a JSON-lines text, split on ``\n`` alone (a ``\r`` before it dropped):
    ``str.splitlines`` also splits on U+2028, U+2029, U+0085 and others, which JSON keeps
    raw inside a string, and so cut a record in two."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


# -- names and confined paths --------------------------------------------------------------
def read_jsonl(path: str | Path) -> list[tuple[int, Any]]:
    """(line number, value) of each whole line of a JSON-lines file (none where there is no
    file); a line a kill cut short is left out, to be written again, and so is a line
    :func:`json_value` refuses (NaN, Infinity, nested past reading). Lines are split on
    ``\n`` alone (:func:`json_lines`); a line that is not UTF-8 (but the last, which a
    kill may have cut within a character) or is over :data:`MAX_LINE_BYTES` is a
    ValueError naming the file and the line."""
    path = Path(path)
    if not path.is_file():
        return []
    out = []
    data = path.read_bytes()
    lines = data.split(b"\n")
    for n, raw in enumerate(lines, 1):
        last = n == len(lines)  # no newline after it: a kill may have cut it
        try:
            line = raw.decode("utf-8").removesuffix("\r")
        except UnicodeDecodeError as err:
            if last:
                continue
            raise ValueError(f"{path}: line {n} is not UTF-8 text ({err.reason})") from None
        if len(line) > MAX_LINE_BYTES:
            raise ValueError(f"{path}: line {n} is over {MAX_LINE_BYTES // 2**20} MiB")
        if line.strip():
            try:
                out.append((n, json_value(line)))
            except json.JSONDecodeError:  # a line cut by a kill (or NaN, or nested past
                continue  # reading: json_value's refusals)
    return out


def slug(text: str, limit: int = 40) -> str:
    """A safe file name made of ``text``: lower-case letters, digits and dashes."""
    s = re.sub(r"[^a-z0-9]+", "-", text.casefold()).strip("-")
    return s[:limit].strip("-") or "run"


MAX_PATH_CHARS = 1000  # a path a client names


def confined(root: str | Path, value: str | Path | None, what: str = "folder") -> Path:
    """A path named by a client (relative to ``root``, or absolute inside it), confined to
    ``root``: no ``..`` out of it, no link on the way, and it must exist. Else a
    ValueError naming what was refused."""
    text = str(value or "").strip()
    if not text or "\x00" in text:
        raise ValueError(f"no {what} given")
    if len(text) > MAX_PATH_CHARS:
        raise ValueError(
            f"{text[:40]!r}...: not a {what} inside this app's folder (at most "
            f"{MAX_PATH_CHARS} characters)"
        )
    refused = ValueError(f"{text[:200]!r} is not a {what} inside this app's folder")
    base = Path(os.path.abspath(root))
    given = Path(text)
    path = Path(os.path.abspath(given if given.is_absolute() else base / given))
    try:
        rel = path.relative_to(base)
    except ValueError:
        raise refused from None
    try:  # a part longer than the file system allows is no folder of it either
        here = base
        for part in rel.parts:
            here = here / part
            if here.is_symlink():
                raise refused
        if not path.exists():
            raise refused
    except OSError:
        raise refused from None
    return path


def plain_file_inside(
    root: Path, path: Path, suffixes: tuple[str, ...] = IMAGE_SUFFIXES
) -> str | None:
    """``path`` relative to ``root`` (POSIX) when it is a plain file inside it (not a link)
    with one of ``suffixes``; else None."""
    try:
        rel = path.resolve().relative_to(root.resolve())
    except ValueError:
        return None
    if path.is_symlink() or not path.is_file() or path.suffix.lower() not in suffixes:
        return None
    return rel.as_posix()


# -- image folders and hashes --------------------------------------------------------------
def image_files(folder: str | Path, suffixes: tuple[str, ...] = IMAGE_SUFFIXES) -> list[Path]:
    """The image files directly in ``folder`` (by suffix, any case), sorted by name."""
    return sorted(p for p in Path(folder).iterdir() if p.is_file() and p.suffix.lower() in suffixes)


def file_digest(path: str | Path, algorithm: str = "sha256") -> str:
    """The hex digest of a file's bytes, read in blocks of 1 MiB."""
    h = hashlib.new(algorithm)
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def file_sha256(path: str | Path) -> str:
    return file_digest(path, "sha256")


def toml_model(text: str, where: str, model: Any, prepare: Any = None) -> Any:
    """``text`` (TOML) validated as the pydantic ``model``; a ValueError names ``where``,
    and the first problem's field (recipes, rating protocols). ``prepare``: what the parsed
    table goes through first (a protocol's ``base``)."""
    import tomllib

    from pydantic import ValidationError

    if len(text) > MAX_SETTINGS_CHARS:
        raise ValueError(f"{where}: over {MAX_SETTINGS_CHARS:,} characters, not a settings file")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise ValueError(f"{where}: not TOML ({err})") from None
    except RecursionError:
        raise ValueError(f"{where}: nested too deeply to be a settings file") from None
    if prepare is not None:
        data = prepare(data)
    try:
        return model.model_validate(data)
    except ValidationError as err:
        first = err.errors()[0]
        loc = ".".join(str(x) for x in first["loc"])
        raise ValueError(f"{where}: {loc + ': ' if loc else ''}{first['msg']}") from None


MAX_SETTINGS_CHARS = 1_000_000  # a recipe or protocol file


def json_value(text: str | bytes) -> Any:
    """``json.loads`` for files from outside (rating files, batch and concept lines): a
    value nested too deeply, or NaN or Infinity (which JSON does not have), is a
    ``json.JSONDecodeError`` like any other bad JSON, never a RecursionError or a NaN."""

    def no_constant(name: str) -> Any:
        raise json.JSONDecodeError(f"{name} is not a JSON number", str(text)[:40], 0)

    try:
        return json.loads(text, parse_constant=no_constant)
    except RecursionError:
        raise json.JSONDecodeError("nested too deeply", str(text)[:40], 0) from None


def cache_dir() -> Path:
    """The toolkit's cache folder: ``$REFINE_CACHE_DIR``, else ``~/.cache/cultural-refine``."""
    env = os.environ.get("REFINE_CACHE_DIR")
    return Path(env) if env else Path.home() / ".cache" / "cultural-refine"
