"""``refine data fetch ahead``, ``refine data fetch culturalframes`` and ``refine photos
search``: their options as plans whose fields carry their flag, help and bounds (the
commands are made from them), and what each fetch does with them
(:mod:`refine.evaluate.paper_data`, :mod:`refine.evaluate.culturalframes_data`,
:mod:`refine.evaluate.commons`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator

from refine.evaluate.commons import API, KEEP, PER_QUERY
from refine.evaluate.paper_data import SOURCE
from refine.io.download import MAX_MB, TIMEOUT_S
from refine.records import DEFAULT_PROFILE, option

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


class PhotoSearch(BaseModel):
    """``refine photos search``: real photos of an activity in a country from Wikimedia
    Commons (:func:`refine.evaluate.commons.search_photos`)."""

    model_config = ConfigDict(extra="forbid")

    activity: str = option(
        help='An activity, e.g. "people eating food".', flag="ACTIVITY", given="text"
    )
    country: str = option(help="A country, e.g. Brazil.")
    source: str = option(
        API, "Wikimedia Commons' API address (a mirror's, or a stand-in).", flag="--from"
    )
    language: str | None = option(
        None,
        "The language of the second query (default: the country's most widely spoken, and the "
        "paper's own translated query where the fetched AHEaD manifest has one; English: one "
        "query only).",
    )
    query: str | None = option(None, 'The English query (default: "ACTIVITY COUNTRY").')
    keep: int = option(KEEP, "Photos kept.", ge=1, le=50)
    per_query: int = option(PER_QUERY, "Results taken per query.", ge=1, le=50)
    profile: str = option(DEFAULT_PROFILE, "Backend profile (name or .toml).")
    backends: list[str] = option(
        help="Override a role: ROLE=NAME.", flag="--backend", given="repeat", default_factory=list
    )
    data_dir: Path | None = option(
        None,
        "The data directory (default: $REFINE_DATA_DIR, else data in the cache folder).",
        given="path",
    )
    max_file_mb: float = option(MAX_MB, "The size cap of one downloaded photo, in MB.", ge=0.001)
    file_timeout: float = option(TIMEOUT_S, "Seconds one photo's whole download may take.", ge=0.1)

    @field_validator("activity", "country")
    @classmethod
    def _named(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("give an ACTIVITY and a --country")
        return value.strip()

    def search(self, emit: Callable[[str], None] | None = None) -> Any:
        """The photo set found and kept (:class:`refine.evaluate.photo_sets.PhotoSet`); a
        ValueError names a profile or backend that cannot be made."""
        from refine.backends.registry import parse_overrides
        from refine.backends.selection import Backends
        from refine.evaluate.commons import search_photos
        from refine.io.download import DownloadLimits
        from refine.profiles import load_profile

        try:
            backends = Backends(load_profile(self.profile), parse_overrides(self.backends))
        except ValueError as err:
            raise ValueError(f"--profile/--backend: {err}") from err

        class LazyLanguageModel:  # loaded only when a translation is asked for
            def complete_json(self, prompt: str, schema: Any) -> Any:
                return backends.get("llm").complete_json(prompt, schema)

        return search_photos(
            self.activity, self.country, LazyLanguageModel(), backends.get("image_embedder"),
            api=self.source, data=self.data_dir, language=self.language,
            english_query=self.query, keep=self.keep, per_query=self.per_query, emit=emit,
            limits=DownloadLimits(self.max_file_mb, self.file_timeout),
        )  # fmt: skip


class ModelsFetch(BaseModel):
    """``refine models download``: a profile's local models and the baselines' checkpoints
    fetched into the Hugging Face cache ahead of time."""

    model_config = ConfigDict(extra="forbid")

    profile: str = option(DEFAULT_PROFILE, "Profile whose models to fetch.")
    backends: list[str] = option(
        help="Override a role: ROLE=NAME.", flag="--backend", given="repeat", default_factory=list
    )
    baselines: str = option(
        "none",
        "Also the checkpoints of these baselines (pickscore, hpsv2, cure, caire_probe, "
        "imagereward; all; none): the others need none of their own.",
    )
    baseline_models: list[str] = option(
        help="NAME=WHERE: a local folder or file, another hub checkpoint or an embedder "
        "(clip:ARCH/PATH, hfclip:ID, siglip:ID) in place of a baseline's own (pickscore, "
        "hpsv2, cure, caire_probe, imagereward; hpsv2=v2.1 for HPS v2.1). Repeatable.",
        flag="--baseline-model",
        given="repeat",
        default_factory=list,
    )

    @field_validator("baselines")
    @classmethod
    def _baselines(cls, text: str) -> str:
        from refine.evaluate.baselines import parse_baselines

        parse_baselines(text)  # a ValueError names the unknown one
        return text

    @field_validator("baseline_models")
    @classmethod
    def _checkpoints(cls, values: list[str]) -> list[str]:
        from refine.evaluate.baseline_models import parse_baseline_models

        parse_baseline_models(values)
        return values

    def fetch(self, emit: Callable[[str], None] | None = None) -> list[Any]:
        """What was fetched, found or could not be, one result a model or checkpoint
        (:class:`refine.backends.download.Fetched`); a ValueError names a profile or
        backend that cannot be made."""
        from refine.backends.download import download
        from refine.backends.registry import parse_overrides
        from refine.backends.selection import Backends
        from refine.evaluate.baseline_models import (
            CHECKPOINTS,
            fetch_reported,
            parse_baseline_models,
        )
        from refine.evaluate.baselines import parse_baselines
        from refine.profiles import load_profile

        try:
            backends = Backends(load_profile(self.profile), parse_overrides(self.backends))
        except ValueError as err:
            raise ValueError(f"--profile/--backend: {err}") from err
        wanted = [b for b in parse_baselines(self.baselines) if b in CHECKPOINTS]
        results = download(backends.names, backends.options, progress=emit)
        return results + fetch_reported(wanted, parse_baseline_models(self.baseline_models), emit)
