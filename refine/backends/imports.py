"""Importing a backend's package, with an error that says what to install."""

from __future__ import annotations

import importlib
from types import ModuleType


def require(module: str, package: str, purpose: str) -> ModuleType:
    """``import module``; if missing, ``ImportError`` naming ``package`` and ``purpose``."""
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise ImportError(
            f"{purpose} needs the package '{package}' (pip install {package})"
        ) from err
