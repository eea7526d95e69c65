"""What a rescore is asked for (the task: :mod:`refine.harness.tasks.rescore.task`): the
source bench and what changes of its scoring, and the source's own plan with those changes."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from refine.harness.plan import Backends, Baselines, Plan, option
from refine.harness.results import Results
from refine.harness.tasks.bench.plan import BenchPlan
from refine.records import DEFAULT_PROFILE

SCORING_ROLES = ("observer", "judge", "text_embedder", "image_embedder")


class RescoreError(ValueError):
    """A source that cannot be scored again as asked; the message says why and what to do."""


class RescorePlan(Plan):
    """What a rescore changes of its source bench; a role that is no scorer's, a variant
    or observer prompts that do not exist are refused here, for every front."""

    positional = ("source",)

    source: str = option(help="The bench folder to score again.", flag="BENCH", given="argument")
    # None: the source's (or the profile's, with a new observer)
    tau: float | None = option(
        None, "The match threshold, in (0, 1] (no model call: the stored observations).", gt=0, le=1
    )
    backends: Backends = Field(
        default_factory=dict,
        description="Replace a scoring role: observer=M observes the stored images again; "
        "judge=M reads the judge's baselines again (MLLM-as-a-judge, VQAScore, VIEScore, TIFA; "
        "EXAG and quality are kept); text_embedder=...",
        json_schema_extra={"flag": "--backend", "surfaces": ("cli",), "given": "repeat"},
    )
    baselines: Baselines = option(
        (), "Baselines to add, comma-separated (as refine bench takes them).", given="list"
    )
    profile: str | None = option(None, "The profile its models come from (default: the bench's).")
    tau_source: str | None = None  # where a given tau comes from (a quantile of photos')
    # a new observer's prompts (None: the source's)
    observer_prompts: Literal["toolkit", "ahead"] | None = option(
        None,
        "toolkit or ahead (AHEaD's per-dimension prompts, Tab. 22-27): observe the stored "
        "images again with these.",
    )
    # under a new judge, the kept baselines it reads again (None: every one the judge reads)
    rejudge: tuple[str, ...] | None = None
    # another reference set, a pack file (AHEaD Tab. 4)
    references: str | None = option(
        None,
        "Match the stored observations against another reference set, a pack file (AHEaD "
        "Tab. 4's proposer-only sets: refine data fetch ahead --proposers).",
        given="path",
    )
    # EXAG read again by this variant (AHEaD Tab. 9); FAITH follows
    exag: Literal["exag:ita", "exag:mllm"] | None = option(
        None,
        "ita or mllm: read EXAG again by this variant on the same images (AHEaD Tab. 9; ita "
        "needs the prompts' real photos); FAITH follows.",
    )

    @field_validator("exag", mode="before")
    @classmethod
    def _variant(cls, value: Any) -> Any:
        if value is None:
            return None
        name = value if str(value).startswith("exag:") else f"exag:{value}"  # ita, exag:ita
        if name not in ("exag:ita", "exag:mllm"):
            raise ValueError(f"ita or mllm, not {value!r}")
        return name

    @field_validator("references")
    @classmethod
    def _pack(cls, value: str | None) -> str | None:
        if value is None:
            return None
        from pathlib import Path

        from refine.evaluate.references import load_pack

        path = Path(value)
        if not path.is_file():
            raise ValueError(
                f"no file {path} (the proposer-only packs: refine data fetch ahead --proposers)"
            )
        try:
            load_pack(str(path))
        except (ValueError, KeyError, TypeError, AttributeError) as err:
            raise ValueError(f"{path} is not a references pack ({err})") from err
        return str(path.resolve())

    def changes(self) -> bool:
        """Whether it asks for anything to be recomputed."""
        given = (self.tau, self.references, self.observer_prompts, self.exag)
        return given != (None, None, None, None) or bool(self.backends) or bool(self.baselines)

    @field_validator("backends")
    @classmethod
    def _scorer_roles(cls, value: dict[str, str]) -> dict[str, str]:
        unknown = sorted(set(value) - set(SCORING_ROLES))
        if unknown:
            raise ValueError(
                f"{unknown[0]}: a rescore replaces the scorer's roles "
                f"({', '.join(SCORING_ROLES)}), never the generators"
            )
        return value

    def bench_plan(self) -> tuple[BenchPlan, dict[str, Any]]:
        """The source's plan with this one's changes, and the source's config. A
        ValueError says why the source cannot be rescored."""
        src = Results.read(self.source, "bench")
        c = src.config
        if not c.get("seeds"):
            raise RescoreError(f"{self.source}: its results record names no seeds")
        scorer = dict(c.get("scorer") or {})
        changed = {r: n for r, n in self.backends.items() if scorer.get(r) != n}
        tau = self.tau
        if tau is None and "observer" not in changed:
            tau = c.get("tau")
        plan = BenchPlan(
            generators=list(c["generators"]),
            prompts=[tuple(p) for p in c["prompts"]],
            images_per_prompt=len(c["seeds"]),
            seed=c["seeds"][0],
            tau=tau,
            profile=self.profile or c.get("profile") or DEFAULT_PROFILE,
            backends={
                **{r: n for r, n in scorer.items() if r in SCORING_ROLES},
                **self.backends,
            },
            expectations=bool(c.get("expectations")),
            observer_prompts=self.observer_prompts or scorer.get("observer_prompts", "toolkit"),
            baselines=tuple(dict.fromkeys([*(c.get("baselines") or ()), *self.baselines])),
        )
        if list(range(plan.seed, plan.seed + plan.images_per_prompt)) != list(c["seeds"]):
            raise RescoreError(f"{self.source}: its seeds are not consecutive")
        return plan, c
