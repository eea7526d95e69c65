"""What ``refine score`` is asked for: the image files, the activity and country they
should show (or a references file), and the scorer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import field_validator, model_validator

from metrics.ahead import TAU_RANGE
from refine.harness.plan import (
    BACKENDS,
    PROFILE,
    Backends,
    Baselines,
    Checkpoints,
    Plan,
    Profile,
    option,
)


class ScorePlan(Plan):
    """Images to observe and score against one activity and country's references; a file
    that is no image, references that cannot be found or a baseline that does not exist
    are refused here, naming the option."""

    positional = ("images",)

    images: list[str] = option(
        help="Image files to score.", flag="IMAGES", given="arguments", min_length=1
    )
    activity: str = option(help="The activity the images show.")
    country: str = option(help="The country they should show.")
    refs: str | None = option(None, "References JSON instead of the pack.", given="path")
    reference_images: str | None = option(
        None,
        "A folder of real photos: EXAG as the paper defines it (exag:ita).",
        given="path",
    )
    profile: Profile = PROFILE
    backends: Backends = BACKENDS
    tau: float | None = option(
        None,
        "Match threshold on cosine similarity (default: the profile's, for its observer).",
        ge=TAU_RANGE[0],
        le=TAU_RANGE[1],
    )
    expectations: str | None = option(
        None, "An expectations file: check each image against it.", given="path"
    )
    baselines: Baselines = option(
        (),
        "Baselines to score beside FAITH, comma-separated (as refine bench takes them; all; none).",
        given="list",
    )
    baseline_models: Checkpoints = option(
        help="NAME=WHERE: a checkpoint in place of a baseline's own (as refine bench "
        "takes them). Repeatable.",
        flag="--baseline-model",
        given="repeat",
        default_factory=tuple,
    )

    @field_validator("images")
    @classmethod
    def _readable(cls, value: list[str]) -> list[str]:
        from refine.settings import SettingsError, _check_image

        for given in value:
            try:
                _check_image(Path(given))
            except SettingsError as err:
                raise ValueError(err.message) from err
        return [str(Path(p).resolve()) for p in value]  # one name a file, for every worker

    @field_validator("expectations")
    @classmethod
    def _expectations(cls, value: str | None) -> str | None:
        if value is None:
            return None
        from refine.evaluate.expectations import load_expectations

        load_expectations(value)
        return str(Path(value).resolve())

    @model_validator(mode="after")
    def _references(self) -> ScorePlan:
        self.pack()  # found now, said naming the option where it cannot be
        return self

    def pack(self) -> Any:
        """The references the images are scored against (a ValueError naming the option
        where they cannot be found)."""
        from refine import settings

        try:
            refs = settings.references(self.activity, self.country, self.refs)
            return settings.with_reference_images(refs, self.reference_images)
        except settings.SettingsError as err:
            where = f"--{err.field.replace('_', '-')}"
            if err.field == "refs" and not self.refs:
                where = "--activity/--country"
            raise ValueError(f"{where}: {err.message}") from err
