"""Where the bundled data lives, and loading prompt templates from it."""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path


def assets_dir() -> Path:
    """The ``assets/`` folder (override with the REFINE_ASSETS environment variable)."""
    override = os.environ.get("REFINE_ASSETS")
    path = Path(override) if override else Path(__file__).resolve().parents[1] / "assets"
    if not path.is_dir():
        raise FileNotFoundError(
            f"assets folder not found at {path}; install the project from its repository "
            "(pip install -e .) or set REFINE_ASSETS to the assets folder"
        )
    return path


@cache
def prompt_template(name: str) -> str:
    """The text of ``assets/prompts/<name>.txt``."""
    path = assets_dir() / "prompts" / f"{name}.txt"
    if not path.is_file():
        raise FileNotFoundError(f"prompt template {name!r} not found at {path}")
    return path.read_text(encoding="utf-8")
