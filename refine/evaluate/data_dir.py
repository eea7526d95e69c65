"""The data directory: where data fetched or collected at the user's request is kept
(the papers' data, photo sets, descriptor packs)."""

from __future__ import annotations

import os
from pathlib import Path


def data_dir() -> Path:
    """``$REFINE_DATA_DIR``, else ``data`` in the cache folder (``$REFINE_CACHE_DIR``, else
    ``~/.cache/cultural-refine``)."""
    from refine.io.files import cache_dir

    env = os.environ.get("REFINE_DATA_DIR")
    return Path(env) if env else cache_dir() / "data"
