"""Importing a backend's package, with an error that says what to install."""

from __future__ import annotations

import importlib
from types import ModuleType


def require(module: str, package: str, purpose: str, extra: str | None = None) -> ModuleType:
    """``import module``; if missing, ``ImportError`` naming ``package``, ``purpose`` and the
    optional extra of cultural-refine that brings it."""
    try:
        return importlib.import_module(module)
    except ImportError as err:
        how = (
            f"the cultural-refine[{extra}] extra: pip install '.[{extra}]' in a clone"
            if extra
            else f"pip install {package}"
        )
        raise ImportError(f"{purpose} needs the package '{package}' ({how})") from err
