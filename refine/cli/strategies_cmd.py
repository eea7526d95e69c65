"""The loop's own benches: ``refine bench --strategies ...`` (best-of-N against the loop's
strategies at one budget per prompt, :mod:`refine.harness.tasks.strategies.task`) and
``refine bench --editor M --loops K`` (editors over many edits,
:mod:`refine.harness.tasks.editor_loops.task`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from refine.cli.inputs import UserInputError, made_plan
from refine.cli.run_cmd import parse_backends
from refine.harness.cells import CellSchemaError
from refine.harness.ray import RayEngineError
from refine.harness.tasks.bench.plan import plan_prompts
from refine.harness.tasks.strategies.plan import StrategyPlan
from refine.harness.tasks.strategies.task import run_strategies
from refine.numbers import shown
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
    from refine.present.report.strategies import write_strategies_page

    _run(given, plan, "strategies", run_strategies, write_strategies_page, summary_lines)


def _run(given: dict[str, Any], plan: Any, task: str, run: Any, page: Any, lines: Any) -> Any:
    """Run ``plan`` into ``--out`` (a folder of its own) with progress on stderr,
    write its page, and print its summary (or its results record with ``--json``)."""
    out = Path(given["out"])
    _own_folder(out, task)

    def progress(line: str) -> None:
        if not given["as_json"]:
            typer.echo(line, err=True)

    try:
        results = run(plan, out, on_event=progress, engine=given["engine"])
    except (RayEngineError, CellSchemaError) as err:
        raise UserInputError(str(err)) from err
    written = page(out, results)
    if given["as_json"]:
        typer.echo(json.dumps(results.to_json(), indent=2))
        return results
    for line in lines(results.summary):
        typer.echo(line)
    typer.echo(f"page: {written}")
    return results


def _backends(given: dict[str, Any]) -> dict[str, str]:
    """The roles' overrides; one ``--generator`` is every strategy's generator."""
    backends = parse_backends(given["backend"])
    if len(given["generator"]) > 1:
        raise UserInputError("--strategies: one --generator draws for every strategy")
    if given["generator"]:
        backends["generator"] = given["generator"][0]
    return backends


def _own_folder(out: Path, mine: str) -> None:
    """A folder holding another task's results record is refused: one record a folder."""
    from refine.harness.results import RESULTS, Results, ResultsError

    if not (out / RESULTS).is_file():
        return
    try:
        task = Results.read(out).task
    except ResultsError as err:
        raise UserInputError(f"--out: {err}") from err
    if task != mine:
        raise UserInputError(
            f"--out {out}: it holds the results of a {task}; give this bench a folder of "
            f"its own (for example --out bench-{mine})"
        )


def _iv(stat: dict[str, Any], digits: str = ".3f") -> str:
    iv = stat.get("interval")
    span = f" [{format(iv[0], digits)}, {format(iv[1], digits)}]" if iv else ""
    return shown(stat.get("mean"), digits) + span


def summary_lines(summary: dict[str, Any]) -> list[str]:
    """The table of strategies on the terminal, then the paired differences."""
    lines = ["strategy      prompts  FAITH                  quality                reached"
             "   calls    seconds"]  # fmt: skip
    for s, st in summary["strategies"].items():
        reached = shown(st["reached"]["mean"], ".0%")
        lines.append(
            f"{s:<13} {st['prompts']:>7}  {_iv(st['faith']):<22} {_iv(st['quality']):<22} "
            f"{reached:>7}   {shown(st['calls']['mean'], '.0f'):>5}  "
            f"{shown(st['seconds']['mean'], '.1f'):>8}"
        )
    for p in summary.get("paired") or []:
        iv = p["interval"]
        span = f" [{iv[0]:+.4f}, {iv[1]:+.4f}]" if iv else ""
        share = shown(p["share_improved"], ".0%")
        lines.append(
            f"{p['other']} - {p['base']}: FAITH {shown(p['mean_difference'], '+.4f')}{span} "
            f"on {p['prompts']} prompt(s), better on {share}"
        )
    return lines


def editor_bench(given: dict[str, Any]) -> None:
    """``refine bench --editor M [--editor M2 ...] --loops K``, from the bench command's
    options."""
    from refine.harness.tasks.editor_loops.plan import EditorLoopPlan
    from refine.harness.tasks.editor_loops.task import run_editor_loops
    from refine.present.report.editor_loops import write_editor_loops_page

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
    results = _run(given, plan, "editor-loops", run_editor_loops, write_editor_loops_page,
                   loop_lines)  # fmt: skip
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


def loop_lines(summary: dict[str, Any]) -> list[str]:
    """Each editor's loops on the terminal: FAITH, quality and drift, the guard marked."""
    lines = []
    for e, s in summary["editors"].items():
        guard = shown(s["guard"], ".3f")
        lines.append(f"{e} ({s['prompts']} prompt(s); quality guard {guard})")
        lines.append("  loop  FAITH                  quality                drift")
        for row in s["loops"]:
            mark = "  below the guard" if s["first_below_guard"] == row["loop"] else ""
            lines.append(
                f"  {row['loop']:>4}  {_iv(row['faith']):<22} {_iv(row['quality']):<22} "
                f"{_iv(row['drift'])}{mark}"
            )
    return lines
