"""The strategies bench in the stand-in world: best-of-N against the loop at equal calls.

The world's editor improves the scene a step each edit on even seeds (RED, AMBER, OLIVE,
GREEN: ``STEPWISE``); its generator draws RED, BLUE and AMBER by seed. Every request
reaches the stand-in's log, so each strategy's calls are counted there, not from the
toolkit's own bookkeeping."""

from __future__ import annotations

import pytest

from refine import usage
from refine.harness.results import Results
from refine.harness.tasks.strategies.plan import StrategyPlan
from refine.harness.tasks.strategies.task import run_strategies
from refine.present.report.strategies import write_strategies_page
from tests.e2e.test_cli_run import cli
from tests.e2e.test_loop import ACT, COUNTRY, refiner
from tests.fakes.gemini_world import AMBER, BLUE, RED, STEPWISE
from tests.runs import begin

GENERATOR = "gemini-3.1-flash-lite-image"
PROMPTS = [("people eating food at home", "Iran"), ("people eating food at home", "India")]
N = 40


@pytest.mark.slow
def test_each_strategy_spends_at_most_its_budget_and_best_of_n_keeps_its_best(
    world, backends, options, tmp_path, monkeypatch
):
    monkeypatch.setenv("REFINE_CACHE_DIR", str(tmp_path / "cache"))
    world.edits = dict(STEPWISE)
    world.generate_by_seed = {GENERATOR: [RED, BLUE, AMBER]}
    ends: list[int] = []  # the stand-in's log length as each cell ends

    def heard(line: str) -> None:
        if line.startswith("["):
            ends.append(len(world.log))

    plan = StrategyPlan(
        ["best-of-n", "edit", "regenerate", "auto"], PROMPTS, budget_calls=N, target=0.99
    )
    results = run_strategies(
        plan, tmp_path / "bench", instances=refiner(backends, options), on_event=heard
    )
    cells = results.cells
    assert [(c["strategy"], c["country"]) for c in cells] == [
        (s, c) for _, c in PROMPTS for s in plan.strategies
    ]
    # the calls each cell sent, from the stand-in's own log: at most N, and as recorded
    sent = [b - a for a, b in zip([0, *ends], ends, strict=False)]
    assert len(sent) == 8 and max(sent) <= N
    # what a cell counts is what it sent, and the language model's answers kept in the
    # cache from an earlier cell, which count as calls (nothing comes free to a later one)
    assert all(n <= c["calls"] <= N for n, c in zip(sent, cells, strict=True))
    assert sent[:2] == [c["calls"] for c in cells[:2]]  # the first two: nothing kept yet
    assert all(c["calls"] > N - 12 for c in cells)  # no strategy left a round's worth unspent
    for c in cells:
        steps = c["images"]
        if c["strategy"] == "best-of-n":
            # candidates one seed after the other; the pick is the first with the top FAITH
            assert [s["seed"] for s in steps] == [42 + j for j in range(len(steps))]
            top = max(s["faith"] for s in steps)
            assert c["faith"] == top
            assert c["picked"] == next(s["step"] for s in steps if s["faith"] == top)
            assert steps[c["picked"]]["seed"] % 3 == 44 % 3  # AMBER, the generator's best
        else:  # the loop's final FAITH is its best round's
            best = max(s["faith"] for s in steps if s["decision"] in ("initial", "accepted"))
            assert c["faith"] == pytest.approx(best)
        # each step's calls grow, and never pass the budget
        marks = [s["calls"] for s in steps if s["calls"] is not None]
        assert marks == sorted(marks) and marks[-1] <= c["calls"] <= N
        assert c["stop_reason"].startswith("budget: ")
    # edit follows the world's steps: RED, AMBER, OLIVE, GREEN, each FAITH above the last
    edit = next(c for c in cells if c["strategy"] == "edit" and c["country"] == "Iran")
    accepted = [s["faith"] for s in edit["images"] if s["decision"] in ("initial", "accepted")]
    assert len(accepted) == 4 and accepted == sorted(accepted)
    bon = next(c for c in cells if c["strategy"] == "best-of-n" and c["country"] == "Iran")
    assert edit["faith"] > bon["faith"]
    # the paired difference against best-of-N, from the cells by hand
    summary = results.summary
    for p in summary["paired"]:
        by = {(c["strategy"], c["country"]): c["faith"] for c in cells}
        diffs = [by[(p["other"], k)] - by[("best-of-n", k)] for _, k in PROMPTS]
        assert p["mean_difference"] == pytest.approx(sum(diffs) / 2, abs=1e-12)
        # two prompts: a resample's mean is the one difference (1 in 4), the other (1 in
        # 4) or their mean; of 1,000 resamples about 250 are each, so the 2.5th and 97.5th
        # percentiles are the two differences themselves
        assert p["interval"] == pytest.approx(sorted(diffs), abs=1e-12)
    # the record and its page; the chart's lines end at each strategy's mean final FAITH
    assert Results.read(tmp_path / "bench", "strategies").summary == summary
    curve = summary["curve"]
    assert curve["calls"][-1] == N
    for s, line in curve["faith"].items():
        assert line[-1] == pytest.approx(summary["strategies"][s]["faith"]["mean"])
    # the loops' forgetting over their kept rounds; best-of-N edits nothing
    assert summary["strategies"]["best-of-n"]["forgetting"] is None
    f = summary["strategies"]["edit"]["forgetting"]
    assert f["prompts"] == 2 and f["fixed"] > 0 and f["forgotten"] == 0  # the steps keep fixes
    assert f["fixed"] == sum(c["forgetting"]["fixed"] for c in cells if c["strategy"] == "edit")
    page = write_strategies_page(tmp_path / "bench").read_text()
    assert "FAITH against calls spent" in page and page.count("<h2>India</h2>") == 1
    assert f'data-name="edit" data-forgotten="0" data-fixed="{f["fixed"]}"' in page
    # a second run keeps every cell
    world.log.clear()
    run_strategies(plan, tmp_path / "bench", instances=refiner(backends, options))
    assert world.log == []


def test_a_call_budget_ends_a_run_before_its_calls_pass_it(
    world, backends, options, tmp_path, monkeypatch
):
    """Under a call budget no request leaves past it: the round it cuts short is dropped,
    the rounds done are kept and the stop reason says so."""
    monkeypatch.setenv("REFINE_CACHE_DIR", str(tmp_path / "cache"))  # nothing kept before
    world.edits = dict(STEPWISE)
    budget = usage.CallBudget(12)
    with usage.call_budget(budget):
        run = begin(
            refiner(backends, options), ACT, COUNTRY, out=tmp_path, rounds=5, target=0.99,
            patience=5,
        )  # fmt: skip
    assert len(world.log) == budget.spent <= 12
    assert run.stop_reason.startswith("budget: ") and "12 model calls" in run.stop_reason
    assert [r.decision for r in run.rounds][0] == "initial" and run.best_round is not None
    with pytest.raises(usage.CallBudgetSpent, match="has 0 left, 1 needed"):
        with usage.call_budget(budget):
            usage.spend("a local model")


@pytest.mark.slow
def test_the_command_line_runs_strategies_and_refuses_what_cannot_be(
    world, siglip_path, tmp_path, monkeypatch
):
    monkeypatch.setenv("REFINE_CACHE_DIR", str(tmp_path / "cache"))
    world.edits = dict(STEPWISE)
    out = tmp_path / "s"
    args = ["strategies", "--countries", "Iran", "--activity", ACT, "--out", out]
    args += ["--backend", f"image_embedder=siglip:{siglip_path}", "--target", "0.99"]
    done = cli(*args, "--strategies", "best-of-n,edit", "--budget-calls", "30")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0].startswith("strategy ")
    assert "edit - best-of-n: FAITH +" in done.stdout and (out / "strategies.html").is_file()
    assert len(world.log) <= 2 * 30
    # the old form is the same command, said on stderr; its cells are the ones made
    old = ["bench", *args[1:], "--strategies", "best-of-n,edit", "--budget-calls", "30"]
    again = cli(*old)
    assert again.returncode == 0, again.stderr
    assert again.stderr.startswith(
        "refine bench --budget-calls/--strategies is now refine strategies; this form goes "
        "in the next release: refine strategies --countries Iran"
    )
    assert "0 of 2 cell(s) to do" in again.stderr and again.stdout == done.stdout
    for wrong, said in (
        (["--strategies", "best-of-n,sideways", "--budget-calls", "5"], "sideways unknown"),
        (["--strategies", "edit"], "needs a budget"),
        (["--budget-calls", "5"], "--strategies: Field required"),
        (["--strategies", "edit", "--budget-calls", "0"],
         "--budget-calls '0': Input should be greater"),
        (["--strategies", "edit", "--budget-calls", "5", "--images-per-prompt", "3"],
         "No such option: --images-per-prompt"),
        (["--strategies", "edit", "--budget-calls", "5", "--countries", "Atlantis"],
         "--countries/--activity/--category: the pack has no country 'Atlantis'"),
    ):  # fmt: skip
        bad = cli(*args, *wrong)
        assert bad.returncode == 2 and said in bad.stderr, bad.stderr
    bench = tmp_path / "b"
    bench.mkdir()
    (bench / "results.json").write_text('{"task": "bench", "schema": 1}')
    elsewhere = [bench if a == out else a for a in args]
    bad = cli(*elsewhere, "--strategies", "edit", "--budget-calls", "5")
    assert bad.returncode == 2 and "holds the results of a bench" in bad.stderr


def test_a_budget_too_small_for_one_image_leaves_no_image_and_says_why(
    world, backends, options, tmp_path, monkeypatch
):
    monkeypatch.setenv("REFINE_CACHE_DIR", str(tmp_path / "cache"))
    plan = StrategyPlan(["best-of-n", "edit"], PROMPTS[:1], budget_calls=3, target=0.99)
    results = run_strategies(plan, tmp_path / "bench", instances=refiner(backends, options))
    assert len(world.log) <= 2 * 3
    for c in results.cells:
        assert c["faith"] is None and c["images"] == [] and c["calls"] <= 3
        assert c["errors"][0].startswith("no image within the budget (budget: ")
    summary = results.summary
    assert summary["strategies"]["edit"]["faith"]["mean"] is None
    assert summary["paired"][0]["prompts"] == 0 and summary["paired"][0]["interval"] is None
    assert "FAITH against calls spent" in write_strategies_page(tmp_path / "bench").read_text()


@pytest.mark.slow
def test_seconds_alone_count_the_calls_and_a_failing_generator_ends_only_its_cells(
    world, backends, options, tmp_path, monkeypatch
):
    monkeypatch.setenv("REFINE_CACHE_DIR", str(tmp_path / "cache"))
    world.edits = dict(STEPWISE)
    # best-of-N cannot reach 0.75 in this world: a few seconds of wall time end it. No
    # time is asserted, only who stopped it and that its calls were counted (each before
    # it leaves: one cut short by the deadline may not reach the log); the models are
    # loaded first, so that the seconds go to candidates on a busy machine too
    warm = refiner(backends, options)
    run_strategies(StrategyPlan(["best-of-n"], PROMPTS[1:], budget_calls=6), tmp_path / "w",
                   instances=warm)  # fmt: skip
    world.log.clear()
    plan = StrategyPlan(["best-of-n"], PROMPTS[:1], budget_seconds=3.0, target=0.75)
    results = run_strategies(plan, tmp_path / "bench", instances=warm)
    (bon,) = results.cells
    assert bon["stop_reason"].startswith("budget: ")
    assert len(world.log) <= bon["calls"] <= len(world.log) + 1
    if bon["images"]:  # drawn against FAITH up to the calls it used
        assert results.summary["curve"]["calls"][-1] == bon["calls"]
    # the loop reaches the target long before a generous budget ends
    world.log.clear()
    plan = StrategyPlan(["edit"], PROMPTS[:1], budget_seconds=300.0, target=0.75)
    (edit,) = run_strategies(plan, tmp_path / "b1", instances=refiner(backends, options)).cells
    assert edit["faith"] >= 0.75 and edit["stop_reason"].startswith("target: ")
    assert edit["calls"] == len(world.log)
    # every generation answers HTTP 500: best-of-N gives up after three candidates in a
    # row, the loop's run fails in round 0; each cell says so, the bench goes on
    world.fail_on = "generate"
    failing = StrategyPlan(["best-of-n", "edit"], PROMPTS[1:], budget_calls=40, target=0.99)
    results = run_strategies(failing, tmp_path / "b2", instances=refiner(backends, options))
    bon, edit = results.cells
    assert [s["decision"] for s in bon["images"]] == ["failed"] * 3
    assert bon["stop_reason"].startswith("failed: 3 candidates in a row; the last: ")
    assert edit["images"] == [] and edit["stop_reason"].startswith("failed: ")
    assert bon["faith"] is None and edit["faith"] is None
    # both are made again on the next run, once the generator answers
    world.fail_on = None
    world.log.clear()
    again = run_strategies(failing, tmp_path / "b2", instances=refiner(backends, options)).cells
    assert "generate" in world.log and all(c["faith"] is not None for c in again)


@pytest.mark.slow
def test_memory_against_none_at_the_same_calls(world, backends, options, tmp_path, monkeypatch):
    """edit+memory's runs fill the bench's store as the prompts go: the second prompt's
    writer is given what the first prompt's run fixed; plain edit's never are."""
    from refine.loop.memory import FixStore
    from refine.records import Run
    from tests.fakes.gemini_world import FORGETFUL

    monkeypatch.setenv("REFINE_CACHE_DIR", str(tmp_path / "cache"))
    world.edits = dict(FORGETFUL)
    prompts = [("people eating food at home", "Iran"), ("people eating food", "Iran")]
    plan = StrategyPlan(["edit", "edit+memory"], prompts, budget_calls=N, target=0.99,
                        candidates=1)  # fmt: skip
    results = run_strategies(plan, tmp_path / "bench", instances=refiner(backends, options))
    cells = {(c["strategy"], c["activity"]): c for c in results.cells}
    runs = {k: Run.model_validate_json((tmp_path / "bench" / c["run_dir"] / "run.json")
                                       .read_text()) for k, c in cells.items()}  # fmt: skip
    first, later = runs[("edit+memory", prompts[0][0])], runs[("edit+memory", prompts[1][0])]
    assert all(not r.hints for r in first.rounds)
    assert later.rounds[1].hints and {h.run for h in later.rounds[1].hints} == {first.id}
    assert all(not r.hints for k, run in runs.items() if k[0] == "edit" for r in run.rounds)
    # the store holds the memory runs' fixes alone: words and figures
    stored = FixStore(tmp_path / "bench" / "fixes-edit-memory.jsonl").entries()
    assert stored and {f.run for f in stored} <= {first.id, later.id}
    # the same budget for both, and the comparison with and without memory
    assert all(c["calls"] <= N for c in cells.values())
    (m,) = results.summary["memory"]
    assert (m["base"], m["other"], m["prompts"]) == ("edit", "edit+memory", 2)
    by = {k: c["faith"] for k, c in cells.items()}
    diffs = [by[("edit+memory", a)] - by[("edit", a)] for a, _ in prompts]
    assert m["mean_difference"] == pytest.approx(sum(diffs) / 2, abs=1e-12)
    page = write_strategies_page(tmp_path / "bench").read_text()
    assert "With and without --memory, at the same calls" in page
    # a strategy that is no loop's takes no memory
    with pytest.raises(ValueError, match="best-of-n\\+memory unknown"):
        StrategyPlan(["best-of-n+memory"], prompts, budget_calls=N)
