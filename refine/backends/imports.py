"""Importing a backend's package, with an error that says what to install."""

from __future__ import annotations

import importlib
from types import ModuleType


def require(module: str, package: str, purpose: str, extra: str | None = None) -> ModuleType:
    """``import module``; if it is not installed, ``ImportError`` naming ``package``,
    ``purpose`` and the optional extra of cultural-refine that brings it. An installed
    package that fails to import (a dependency of its own missing, a broken build) raises
    its own error: installing the extra again would not help."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as err:
        missing = err.name or ""
        if missing not in (module, module.split(".")[0]) and not module.startswith(missing + "."):
            raise  # installed, but something it imports is missing: its own message
        how = (
            f"the cultural-refine[{extra}] extra: pip install '.[{extra}]' in a clone"
            if extra
            else f"pip install {package}"
        )
        raise ImportError(f"{purpose} needs the package '{package}' ({how})") from err
