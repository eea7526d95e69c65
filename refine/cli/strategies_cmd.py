"""The loop's own benches: ``refine bench --strategies ...`` (best-of-N against the loop's
strategies at one budget per prompt, :mod:`refine.harness.tasks.strategies.task`) and
``refine bench --editor M --loops K`` (editors over many edits,
:mod:`refine.harness.tasks.editor_loops.task`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from refine.cli.inputs import UserInputError, made_plan
from refine.cli.run_cmd import parse_backends
from refine.cli.task_cmd import run_plan
from refine.harness import registry
from refine.harness.tasks.bench.plan import plan_prompts
from refine.harness.tasks.strategies.plan import StrategyPlan
from refine.settings import split_list

# the generator bench's options that mean nothing here
NOT_HERE = {
    "images": "--images-per-prompt",
    "concepts": "--concepts",
    "recipe": "--recipe",
    "expectations": "--expectations",
    "baselines": "--baselines",
    "baseline_model": "--baseline-model",
}


def _prompts(given: dict[str, Any]) -> list[tuple[str, str]]:
    try:
        return plan_prompts(
            split_list(given["countries"]),
            given["activity"],
            given["sample"],
            given["seed"],
            given["category"],
        )
    except ValueError as err:
        raise UserInputError(f"--countries/--activity/--category: {err}") from err


def _refuse(given: dict[str, Any], mode: str, extra: dict[str, str]) -> None:
    wrong = [flag for name, flag in {**NOT_HERE, **extra}.items() if given.get(name)]
    if wrong:
        raise UserInputError(f"{mode}: leave out {', '.join(wrong)}")


def loop_bench(given: dict[str, Any]) -> None:
    """``--editor`` or ``--strategies``, from the bench command's options."""
    if given["engine"].batch:
        raise UserInputError(
            "--batch: a loop's every round waits on the one before, so its requests cannot "
            "wait in a batch job; leave out --batch"
        )
    if given["editor"]:
        from refine.settings import default

        asked = [f for f in ("target", "candidates") if given[f] != default(f)]
        if asked:  # an editor's chain is one candidate an edit, made whatever it scores
            flags = "/".join(f"--{f}" for f in asked)
            raise UserInputError(f"{flags}: with --strategies, not with --editor")
        return editor_bench(given)
    if given["localize"] or given["loops"] is not None:
        raise UserInputError("--loops/--localize go with --editor (the editors' bench)")
    return strategies_bench(given)


def strategies_bench(given: dict[str, Any]) -> None:
    """The command, from the bench command's options."""
    if given["strategies"] is None:
        raise UserInputError("--budget-calls/--budget-seconds go with --strategies")
    _refuse(given, "--strategies", {})
    prompts = _prompts(given)
    plan = made_plan(
        StrategyPlan,
        strategies=split_list(given["strategies"]),
        prompts=prompts,
        budget_calls=given["budget_calls"],
        budget_seconds=given["budget_seconds"],
        seed=given["seed"],
        target=given["target"],
        candidates=given["candidates"],
        tau=given["tau"],
        profile=given["profile"],
        backends=_backends(given),
    )
    _run(given, plan, "strategies")


def _run(given: dict[str, Any], plan: Any, task: str) -> Any:
    return run_plan(
        registry.task(task), plan, Path(given["out"]), given["as_json"], given["engine"]
    )


def _backends(given: dict[str, Any]) -> dict[str, str]:
    """The roles' overrides; one ``--generator`` is every strategy's generator."""
    backends = parse_backends(given["backend"])
    if len(given["generator"]) > 1:
        raise UserInputError("--strategies: one --generator draws for every strategy")
    if given["generator"]:
        backends["generator"] = given["generator"][0]
    return backends


def editor_bench(given: dict[str, Any]) -> None:
    """``refine bench --editor M [--editor M2 ...] --loops K``, from the bench command's
    options."""
    from refine.harness.tasks.editor_loops.plan import EditorLoopPlan

    extra = {"strategies": "--strategies", "budget_calls": "--budget-calls"}
    extra["budget_seconds"] = "--budget-seconds"
    _refuse(given, "--editor", extra)
    for name in given["editor"]:  # a name no backend answers to, said before anything runs
        try:
            parse_backends([f"editor={name}"])
        except UserInputError as err:
            raise UserInputError(str(err).replace("--backend: 'editor=", "--editor: '")) from err
    plan = made_plan(
        EditorLoopPlan,
        editors=list(given["editor"]),
        prompts=_prompts(given),
        loops=3 if given["loops"] is None else given["loops"],
        seed=given["seed"],
        localize=given["localize"],
        tau=given["tau"],
        profile=given["profile"],
        backends=_backends(given),
    )
    results = _run(given, plan, "editor-loops")
    failed = [c for c in results.cells if c.get("failed")]
    for c in failed:  # an editor that cannot load fails every chain it is given
        typer.echo(
            f"{c['editor']}: {c['activity']} ({c['country']}): failed after "
            f"{max(0, len(c['images']) - 1)} of {c['loops']} edit(s): {c['failed']}",
            err=True,
        )
    if failed:
        typer.echo(
            f"{len(failed)} of {len(results.cells)} chain(s) failed; they are made again when "
            "the same command runs again",
            err=True,
        )
        raise typer.Exit(1)
