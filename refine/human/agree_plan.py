"""``refine agree``'s options as a plan whose fields carry their flag, help and bounds
(the command is made from it, :func:`refine.cli.task_cmd.plan_command`), checked before
any rating is read."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, field_validator

from metrics.catalog import agree_metrics
from refine.human.agree import DEFAULT_METRICS
from refine.records import DEFAULT_PROFILE, option
from refine.settings import split_list


class AgreePlan(BaseModel):
    model_config = ConfigDict(extra="forbid")

    ratings: Path = option(help="A ratings file (CSV or JSONL).", given="path")
    source: list[Path] = option(
        help="A bench or run folder (or a folder of them) holding metrics.",
        given="repeat",
        default_factory=list,
    )
    metrics: str = option(
        ",".join(DEFAULT_METRICS),
        f"Metrics to compare with the ratings, of: {', '.join(agree_metrics())}; none: the "
        "raters' own agreement alone.",
    )
    compute: bool = option(False, "Score rated images that have no stored metrics.")
    activity: str | None = option(None, "With --compute: what images show.")
    country: str | None = option(None, "With --compute: where.")
    profile: str = option(DEFAULT_PROFILE, "With --compute: the scorer.")
    backend: list[str] = option(
        help="Override a role: ROLE=NAME.", given="repeat", default_factory=list
    )
    seed: int = option(0, "Seed of the bootstrap intervals.")
    out: Path | None = option(None, "Folder for agree.json and agree.html.", given="path")
    by: list[str] = option(
        help="Also every correlation and alpha per group: country, region (Global North or "
        "South), generator, category or rater-country. Repeatable.",
        given="repeat",
        default_factory=list,
    )
    regions: Path | None = option(
        None, "A JSON table of country -> region in place of the bundled one.", given="path"
    )
    figures: str | None = option(
        None,
        "Also write the charts as files (png,svg,pdf): correlations per group, the "
        "metric-metric matrix, the scatters.",
    )
    latex: bool = option(False, "Also write booktabs tables (metrics by questions and groups).")
    exclude_flagged: bool = option(
        False, "Leave out raters flagged by the study's attention checks and repeated items."
    )

    @field_validator("metrics")
    @classmethod
    def _known(cls, value: str) -> str:
        if value.strip().lower() == "none":  # the raters' own agreement alone
            return "none"
        known = agree_metrics()
        wanted = split_list(value)
        unknown = [m for m in wanted if m not in known]
        if unknown or not wanted:
            shown = unknown[0] if unknown else ""
            raise ValueError(f"unknown metric {shown!r} (metrics: {', '.join(known)})")
        return value

    def wanted(self) -> list[str]:
        """The metrics set against the ratings; empty: the raters' own agreement alone."""
        return [] if self.metrics == "none" else split_list(self.metrics)

    def folder(self) -> Path:
        """Where agree.json and agree.html go: ``--out``, else beside the ratings."""
        return self.out or self.ratings.parent
