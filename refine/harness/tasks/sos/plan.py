"""What an SoS bank is asked for (the task: :mod:`refine.harness.tasks.sos.bank`): the
grid of cultures and prompt languages, the concept, the images of each cell, and the models
that draw and embed them; and the run of a plan."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import model_validator

from refine.harness.engine import LOCAL, EngineOptions
from refine.harness.plan import (
    BACKENDS,
    MAX_IMAGES_PER_PROMPT,
    PROFILE,
    Backends,
    Plan,
    Profile,
    option,
)
from refine.harness.results import Results
from refine.harness.tasks.sos.prompts import check_grid


class BankPlan(Plan):
    """Every (culture, language) cell of the grid; a culture or language with no prompts
    is refused here, each named."""

    cultures: list[str] = option(
        help='Comma-separated, e.g. "Japanese,Nigerian" (person) or countries.',
        given="list",
        min_length=1,
    )
    languages: list[str] = option(
        help='Language codes, e.g. "en,fr,ja".', given="list", min_length=1
    )
    concept: str = option("person", "'person' (native-speaker prompts) or an activity.")
    profile: Profile = PROFILE
    backends: Backends = BACKENDS
    images_per_prompt: int = option(1, "Seeds each.", ge=1, le=MAX_IMAGES_PER_PROMPT)
    prompts_per_cell: int | None = option(None, "Use only the first N prompts of each cell.", ge=1)
    seed: int = option(42, "First seed (42, as SoS draws its images).", ge=0, le=2**32 - 1)

    @model_validator(mode="after")
    def _grid(self) -> BankPlan:
        return grid_checked(self)


def grid_checked(plan: Any) -> Any:
    """A plan whose grid of cultures and languages has prompts (a bank's, the SoS
    recipes'); a ValueError names the options otherwise."""
    try:
        check_grid(plan.concept, plan.cultures, plan.languages)
    except ValueError as err:
        raise ValueError(f"--cultures/--languages: {err}") from None
    return plan


def run_bank(
    plan: BankPlan,
    out: str | Path,
    on_event: Callable[[str], None] | None = None,
    engine: EngineOptions = LOCAL,
) -> Results:
    """Build (or go on building) the bank of ``plan`` at ``out`` with the plan's profile's
    models, each cell said as it ends; its results record."""
    from refine.backends.selection import Backends
    from refine.harness.task import CellsFailed
    from refine.harness.tasks.sos.bank import build_bank
    from refine.profiles import load_profile

    emit = on_event or (lambda line: None)
    backends = Backends(load_profile(plan.profile), plan.backends)
    needs_llm = plan.concept != "person" and any(x != "en" for x in plan.languages)
    try:
        _build(build_bank, plan, out, backends, needs_llm, emit, engine)
    except CellsFailed as err:  # the other cells were made: the record says what they hold
        err.results = Results.read(out, "sos-bank")
        raise
    return Results.read(out, "sos-bank")


def _build(build_bank: Any, plan: BankPlan, out: Any, backends: Any, needs_llm: bool,
           emit: Callable[[str], None], engine: EngineOptions) -> None:  # fmt: skip
    build_bank(
        out,
        plan.concept,
        plan.cultures,
        plan.languages,
        backends.get("generator"),
        backends.get("image_embedder"),
        llm=backends.get("llm") if needs_llm else None,
        images_per_prompt=plan.images_per_prompt,
        prompts_per_cell=plan.prompts_per_cell,
        seed=plan.seed,
        on_progress=lambda done, total, what: emit(f"cell {done}/{total}: {what}"),
        engine=engine,
        models=(plan.profile, plan.backends),
        emit=emit,
    )


def bank_lines(results: Results) -> list[str]:
    """The bank on the terminal: its cells and images, and how to see it."""
    s = results.summary
    return [
        f"{s['done']}/{s['cells']} cells, {s['images']} images ({results.config['embedder']}); "
        "refine sos report BANK shows it"
    ]
