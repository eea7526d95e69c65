"""The SoS recipes' task (SoS Tab. 2): a bank per generator (``OUT/banks/NAME``, each the
bank task's, so each goes on where a kill stopped it and runs on either engine), their
analysis with the centroids pooled and the caption classifiers, and the labels table
against people's labels, or without them the metric side."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import Field, model_validator

from refine.harness.engine import LOCAL, EngineOptions
from refine.harness.plan import BACKENDS, MAX_IMAGES_PER_PROMPT, PROFILE, Backends, Plan, option
from refine.harness.recipes import chosen_profile
from refine.harness.results import Results
from refine.harness.tasks.sos.prompts import person_prompts


class SosPlan(Plan):
    """A bank of every (culture, language) cell for each generator, analysed together."""

    recipe_reader = "refine.harness.tasks.sos.recipe:sos_plan"
    also_takes = ("baseline_models",)  # the caption classifiers' checkpoints

    generators: list[str] = option(
        help="A generator (once per generator; default: the profile's).",
        flag="--generator",
        given="repeat",
    )
    concept: str = option("person", "'person' (native-speaker prompts) or an activity.")
    # empty: every culture and language of the person prompts
    cultures: list[str] = option(
        help="Cultures (default: the person prompts' all).", given="list", default_factory=list
    )
    languages: list[str] = option(
        help="Language codes (default: the person prompts' all).",
        given="list",
        default_factory=list,
    )
    images_per_prompt: int = option(1, "Seeds each.", ge=1, le=MAX_IMAGES_PER_PROMPT)
    prompts_per_cell: int | None = option(None, "Use only the first N prompts of each cell.", ge=1)
    seed: int = option(42, "First seed (42, as SoS draws its images).", ge=0, le=2**32 - 1)
    profile: str = PROFILE
    backends: Backends = BACKENDS
    # the caption classifiers beside SoS's labels (clipscore, mclip) and their checkpoints
    classifiers: tuple[str, ...] = ()
    caption_models: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _defaults(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        from refine.harness.plan import profile_generator

        data = profile_generator(data)
        if (data.get("concept") or "person") == "person":
            grid = person_prompts()
            data = {
                **data,
                "cultures": data.get("cultures") or sorted({c for c, _ in grid}),
                "languages": data.get("languages") or sorted({g for _, g in grid}),
            }
        return data

    @model_validator(mode="after")
    def _grid(self) -> SosPlan:
        from refine.harness.tasks.sos.plan import grid_checked

        return grid_checked(self)


def run_sos(
    plan: SosPlan,
    out: str | Path,
    on_event: Callable[[str], None] | None = None,
    engine: EngineOptions = LOCAL,
) -> Results:
    """Build (or go on building) a bank per generator under ``out/banks`` and analyse them
    together; the results record holds the analysis (what ``refine sos report --json``
    prints) as its summary and a cell per bank."""
    from refine.evaluate.sos import analyse
    from refine.harness.results import publish
    from refine.harness.task import CellsFailed
    from refine.harness.tasks.sos.plan import BankPlan, run_bank
    from refine.io.files import slug

    emit = on_event or (lambda line: None)
    out = Path(out)
    banks, cells, failures = [], [], []
    for g in plan.generators:
        folder = out / "banks" / slug(g, 60)
        bank = BankPlan(
            cultures=plan.cultures, languages=plan.languages, concept=plan.concept,
            profile=plan.profile, backends={**plan.backends, "generator": g},
            images_per_prompt=plan.images_per_prompt, prompts_per_cell=plan.prompts_per_cell,
            seed=plan.seed,
        )  # fmt: skip
        try:
            made = run_bank(
                bank, folder, on_event=lambda line, g=g: emit(f"{g}: {line}"), engine=engine
            )
        except CellsFailed as err:  # its other cells made: the next generator's bank goes on
            made, failures = err.results, [*failures, *(f"{g}: {x}" for x in err.failures)]
        banks.append(folder)
        cells.append({"generator": g, "bank": str(folder), **made.summary})
    result = analyse(banks, plan.classifiers, plan.caption_models)
    config = {**plan.model_dump(mode="json"), "banks": [str(b) for b in banks]}
    record = Results.made("sos", config, result, cells, "banks.csv")
    fields = ("generator", "bank", "cells", "done", "images")
    record = publish(out, record, fields, [{k: c.get(k) for k in fields} for c in cells])
    if failures:  # named after the analysis of what was made; the same command makes them
        asked = len(plan.generators) * len(plan.cultures) * len(plan.languages)
        raise CellsFailed(failures, asked, out, record)
    return record


def sos_table(recipe: Any, results: Results, out: Path, rated: Any = None) -> Any:
    """SoS Tab. 2 from the analysis: against people's majority labels (the ``sos``
    protocol) where ratings are given, else the caption classifiers against SoS's own."""
    from refine.harness.recipe_tables import labels_table

    humans = None
    if rated is not None:
        from refine.human.sos_labels import human_labels

        humans = human_labels(rated)
    table = labels_table(recipe, results.summary, humans)
    if humans is None:
        table.missing.append(
            "people's labels: rate the banks' images with the sos protocol (refine rate pack, "
            "or the app's Rate view) and give --ratings FILE. Written meanwhile: the caption "
            "classifiers against SoS's own labels"
        )
    return table


def sos_estimate(plan: SosPlan, profile: Any) -> Any:
    """Every bank's images; the embedder and the caption classifiers run here."""
    from refine.harness.estimate import task_estimate

    cells = len(plan.cultures) * len(plan.languages)
    per = plan.prompts_per_cell or 9
    n = len(plan.generators) * cells * per * plan.images_per_prompt
    return task_estimate(
        profile, n, cells * per, len(plan.generators),
        local=["image_embedder", "the caption classifiers' CLIPs"],
        generator_names=plan.generators,
    )  # fmt: skip


def sos_lines(results: Results) -> list[str]:
    """The banks and where language outweighs culture."""
    lines = [
        f"{c['generator']}: {c.get('done')}/{c.get('cells')} cells, {c.get('images')} images"
        for c in results.cells
    ]
    return lines + [f"banks analysed together: {len(results.cells)}"]


def sos_plan(
    recipe: Any,
    generators: list[str] | tuple[str, ...] = (),
    limit: int | None = None,
    *,
    profile: str | None = None,
    backends: dict[str, str] | None = None,
    baseline_models: tuple[str, ...] = (),
) -> SosPlan:
    """The SoS plan of a recipe (:attr:`SosPlan.recipe_reader`): its concept, cultures (the
    first ``limit``), languages and generators, the caption classifiers its table names and
    their checkpoints (``baseline_models``, NAME=WHERE)."""
    s = recipe.select
    cultures = list(s.cultures)
    if not cultures and s.concept == "person":
        cultures = sorted({c for c, _ in person_prompts()})
    methods = tuple(m.metric for m in recipe.table.metrics if m.metric != "sos")
    given = dict(x.split("=", 1) for x in baseline_models if "=" in x)
    return SosPlan(
        generators=list(generators) or list(s.generators),
        concept=s.concept,
        cultures=cultures[:limit] if limit else cultures,
        languages=list(s.languages),
        images_per_prompt=s.images_per_prompt,
        prompts_per_cell=s.prompts_per_cell,
        seed=s.seed,
        **chosen_profile(profile, recipe),
        backends=backends or {},
        classifiers=methods,
        caption_models={k: v for k, v in given.items() if k in methods},
    )
