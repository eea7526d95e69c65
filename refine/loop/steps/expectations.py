"""Cultural expectations per round: the judge checks each of the run's expectations on the
chosen image (met iff its yes-probability is above 0.5); the missed ones are asked for in
the next edit (see :func:`refine.evaluate.expectations.missed_changes`)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from refine.evaluate.assess import judge_calls
from refine.evaluate.expectations import check_images
from refine.events import StageStarted

if TYPE_CHECKING:
    from refine.backends.selection import Backends
    from refine.loop.steps.base import StepContext
    from refine.records import Round, Run, RunSpec


class ExpectationsStep:
    name = "expectations"

    def check(self, spec: RunSpec, country: str, backends: Backends) -> None:
        if spec.expectations and not callable(
            getattr(backends.get("judge"), "yes_probability", None)
        ):
            raise ValueError("the judge cannot answer yes/no questions: expectations need one")

    def after_round(self, run: Run, r: Round, ctx: StepContext) -> None:
        if not run.spec.expectations:
            return

        ctx.emit(StageStarted(round=r.index, stage="expectations"))
        t = time.perf_counter()
        image = ctx.store.load_image(r.best.image)
        with ctx.backends.using("judge") as judge:
            (r.expectations,) = check_images([image], run.spec.expectations, judge)
            ctx.calls.add(judge_calls(judge, len(run.spec.expectations)))
        r.timings["expectations"] = time.perf_counter() - t
