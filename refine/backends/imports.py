"""Importing a backend's package, with an error that says what to install; the cycle
collector's pace in the toolkit's own processes, which load such packages."""

from __future__ import annotations

import gc
import importlib
from types import ModuleType

# new container objects between two of the cycle collector's youngest passes in the
# toolkit's own processes (Python's default: 700). Loading torch, diffusers, transformers'
# BERT, sentence-transformers and Gradio makes about 500,000 objects that stay to the
# process's end, and the default pace walks them again and again while they load: measured
# here, 8.2 CPU seconds with the default, 6.7 with this, 6.2 with the collector off
YOUNG_OBJECTS = 50_000


def steady_collector() -> None:
    """The cycle collector at :data:`YOUNG_OBJECTS` in a process of the toolkit's own (the
    command line, a Ray worker): set at its start, never by ``import refine`` (a process
    that imports the toolkit keeps its own settings). Garbage in reference cycles waits a
    little longer for its pass; everything else is freed as before."""
    young, middle, old = gc.get_threshold()
    if 0 < young < YOUNG_OBJECTS:
        gc.set_threshold(YOUNG_OBJECTS, middle, old)


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
