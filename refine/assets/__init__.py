"""The bundled data (packs, prompts, profiles, examples, SoS prompts), shipped inside the
package and found with :mod:`importlib.resources`; and loading prompt templates from it.

The repository shows the same folder as ``assets/`` at its top level.
"""

from __future__ import annotations

import os
from functools import cache
from importlib.resources import files
from pathlib import Path


def assets_dir() -> Path:
    """The bundled data folder (override with the REFINE_ASSETS environment variable)."""
    override = os.environ.get("REFINE_ASSETS")
    path = Path(override) if override else Path(str(files("refine.assets")))
    if not path.is_dir():
        raise FileNotFoundError(
            f"assets folder not found at {path}; reinstall the package, or set REFINE_ASSETS "
            "to a folder holding packs/, prompts/ and profiles/"
        )
    return path


@cache
def prompt_template(name: str) -> str:
    """The text of ``assets/prompts/<name>.txt``."""
    path = assets_dir() / "prompts" / f"{name}.txt"
    if not path.is_file():
        raise FileNotFoundError(f"prompt template {name!r} not found at {path}")
    return path.read_text(encoding="utf-8")


def bundled_names(kind: str) -> list[str]:
    """The names of the bundled files of ``kind`` (``assets/<kind>s/*.toml``)."""
    return sorted(p.stem for p in (assets_dir() / f"{kind}s").glob("*.toml"))


def bundled_or_file(name_or_path: str | Path, kind: str) -> tuple[Path, str]:
    """The file a profile, recipe or protocol is read from, and how messages name it: the
    bundled one of that name (``assets/<kind>s/NAME.toml``), else a ``.toml`` file by path;
    a ValueError names the bundled ones (and the closest) otherwise."""
    import difflib

    name = str(name_or_path)
    names = bundled_names(kind)
    if name in names:
        return assets_dir() / f"{kind}s" / f"{name}.toml", f"{kind} {name}"
    path = Path(name_or_path)
    if path.suffix == ".toml" and path.is_file():
        return path, str(path)
    close = difflib.get_close_matches(name, names, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    raise ValueError(
        f"unknown {kind} {name!r} (bundled: {', '.join(names)}; or a {kind} file, .toml){hint}"
    )
