"""``refine data fetch ahead`` and ``refine data fetch culturalframes``: their options as
plans whose fields carry their flag, help and bounds (the commands are made from them),
and what each fetch does with them (:mod:`refine.evaluate.paper_data`,
:mod:`refine.evaluate.culturalframes_data`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from refine.evaluate.paper_data import SOURCE
from refine.io.download import MAX_MB, TIMEOUT_S
from refine.settings import option

DATA_DIR = "Where the files go (default: $REFINE_DATA_DIR, else data in the cache folder)."


class AheadFetch(BaseModel):
    model_config = ConfigDict(extra="forbid")

    countries: list[str] = option(
        help="Comma-separated CULTIVate countries (default: all 16).",
        given="list",
        default_factory=list,
    )
    source: str = option(
        SOURCE, "The repository's data folder (a mirror's address).", flag="--from"
    )
    data_dir: Path | None = option(None, DATA_DIR, given="path")
    photos: bool = option(
        False,
        "Also download the real photos the manifest lists (third-party addresses; many are "
        "gone, and the report lists them).",
    )
    proposers: bool = option(
        False,
        "Also download each proposer's own descriptors (GPT-4o, Gemini 2.5 Flash) before the "
        "refiner, as packs of their own: AHEaD Tab. 4's proposer-only rows (the ahead-table4 "
        "recipe).",
    )
    max_file_mb: float = option(MAX_MB, "The size cap of one downloaded file, in MB.", ge=0.001)
    file_timeout: float = option(
        TIMEOUT_S,
        "Seconds one file's whole download may take (a slower server is given up).",
        ge=0.1,
    )
    deadline: float = option(
        3600.0,
        "Seconds the whole fetch may take; what is left then is reported, not fetched.",
        ge=1.0,
    )

    def fetch(self, emit: Callable[[str], None] | None = None) -> Any:
        """The fetch (:func:`refine.evaluate.paper_data.fetch_ahead`), ended by the deadline."""
        import time

        from refine.evaluate.data_dir import data_dir
        from refine.evaluate.paper_data import fetch_ahead
        from refine.io.download import DownloadLimits

        limits = DownloadLimits(
            self.max_file_mb, self.file_timeout, time.monotonic() + self.deadline
        )
        return fetch_ahead(
            self.data_dir or data_dir(), self.countries, self.source, emit=emit,
            photos=self.photos, limits=limits, proposers=self.proposers,
        )  # fmt: skip


class CulturalFramesFetch(BaseModel):
    model_config = ConfigDict(extra="forbid")

    countries: list[str] = option(
        help="Comma-separated CulturalFrames countries (default: all 10).",
        given="list",
        default_factory=list,
    )
    source: str | None = option(
        None,
        "A Hugging Face Hub endpoint to download from (a mirror; default: HF_ENDPOINT, else "
        "huggingface.co).",
        flag="--from",
    )
    data_dir: Path | None = option(None, DATA_DIR, given="path")

    def fetch(self, emit: Callable[[str], None] | None = None, progress: bool = True) -> Any:
        """The fetch (:func:`refine.evaluate.culturalframes_data.fetch_culturalframes`)."""
        from refine.evaluate.culturalframes_data import fetch_culturalframes
        from refine.evaluate.data_dir import data_dir

        return fetch_culturalframes(
            self.data_dir or data_dir(), self.countries, self.source, emit=emit, progress=progress
        )
