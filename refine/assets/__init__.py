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
