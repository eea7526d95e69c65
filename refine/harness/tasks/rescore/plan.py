"""What a rescore is asked for (the task: :mod:`refine.harness.tasks.rescore.task`): the
source bench and what changes of its scoring, and the source's own plan with those changes."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from refine.harness.plan import BACKENDS, Backends, Plan, option
from refine.harness.results import Results
from refine.harness.tasks.bench.plan import BenchPlan

SCORING_ROLES = ("observer", "judge", "text_embedder", "image_embedder")


class RescorePlan(Plan):
    """What a rescore changes of its source bench; a role that is no scorer's, a variant
    or observer prompts that do not exist are refused here, for every front."""

    positional = ("source",)

    source: str  # the bench folder scored again
    # None: the source's (or the profile's, with a new observer)
    tau: float | None = option(None, "The match threshold to score at.", gt=0, le=1)
    backends: Backends = BACKENDS  # roles replaced (observer=...)
    baselines: tuple[str, ...] = Field((), json_schema_extra={"flag": "--baselines"})  # added
    profile: str | None = Field(None, json_schema_extra={"flag": "--profile"})  # None: source's
    tau_source: str | None = None  # where a given tau comes from (a quantile of photos')
    # a new observer's prompts (None: the source's)
    observer_prompts: Literal["toolkit", "ahead"] | None = None
    # under a new judge, the kept baselines it reads again (None: every one the judge reads)
    rejudge: tuple[str, ...] | None = None
    references: str | None = None  # another reference set, a pack file (AHEaD Tab. 4)
    # EXAG read again by this variant (AHEaD Tab. 9); FAITH follows
    exag: Literal["exag:ita", "exag:mllm"] | None = None

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
            raise ValueError(f"{self.source}: its results record names no seeds")
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
            profile=self.profile or c.get("profile") or "gemini",
            backends={
                **{r: n for r, n in scorer.items() if r in SCORING_ROLES},
                **self.backends,
            },
            expectations=bool(c.get("expectations")),
            observer_prompts=self.observer_prompts or scorer.get("observer_prompts", "toolkit"),
            baselines=tuple(dict.fromkeys([*(c.get("baselines") or ()), *self.baselines])),
        )
        if list(range(plan.seed, plan.seed + plan.images_per_prompt)) != list(c["seeds"]):
            raise ValueError(f"{self.source}: its seeds are not consecutive")
        return plan, c
