"""A wall-time budget holds against a hung API: the call in progress is cut at the budget,
the run stops there, and the rounds done are kept."""

from __future__ import annotations

import time

import pytest

from refine.io.store import RunStore
from refine.loop.refiner import Refiner
from tests.runs import begin

ACT, COUNTRY = "people eating food at home", "Iran"


@pytest.mark.slow
def test_a_hung_editor_stops_at_the_budget(world, backends, options, tmp_path):
    world.edit_delay_s = 60.0  # the editor never answers in time
    start = time.monotonic()
    run = begin(
        Refiner("gemini", backends, options),
        ACT,
        COUNTRY,
        out=tmp_path,
        rounds=3,
        target=1.0,
        max_drift=2.0,
        # round 0 against the fake world is about 0.1 CPU-s: a budget of 3 s leaves it ample
        # room on a busy machine, and round 1's edit hangs until the budget cuts it
        budget_seconds=3,
    )
    took = time.monotonic() - start
    assert took < 3 + 3, took  # the budget plus one short timeout at most, not 60 s
    assert run.status == "finished" and len(run.rounds) == 1 and run.best_round == 0
    assert run.stop_reason == "budget: 3 s of wall time used (during round 1)"
    saved = RunStore(tmp_path / run.id).load()
    assert saved.stop_reason == run.stop_reason and len(saved.rounds) == 1
    world.edit_delay_s = 0.0


def test_requests_sent_before_a_crash_are_kept(world, backends, options, tmp_path):
    import pytest

    from refine.backends.gemini import GeminiError

    world.fail_on = "edit"  # every edit answers HTTP 500 (no retries in these tests)
    with pytest.raises(GeminiError, match="HTTP 500"):
        begin(
            Refiner("gemini", backends, options),
            ACT,
            COUNTRY,
            out=tmp_path,
            rounds=2,
            target=1.0,
            max_drift=2.0,
        )
    (run_dir,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    failed = RunStore(run_dir).load()
    assert failed.status == "failed" and len(failed.rounds) == 1
    drawn = failed.usage["gemini:gemini-3.1-flash-lite-image"]  # the profile's generator
    edits = failed.usage["gemini:gemini-nano-banana-2.1"]  # and its editor
    # one generation answered; the two candidates' edits that failed were sent all the same
    assert (drawn["calls"], drawn["sent"]) == (1, 1) == (world.log.count("generate"),) * 2
    assert (edits["calls"], edits["sent"]) == (0, 2) == (0, world.log.count("edit"))


def test_a_call_budget_is_a_hard_limit_and_the_record_counts_every_request(
    world, backends, options, tmp_path
):
    """--budget-calls N: no request past N is sent, in the middle of a round too (it was
    checked between rounds only: 5 let 13 through, 13 let 38), and the record's
    model_calls counts every request sent, failed ones included."""
    for n in (5, 13):
        before = len(world.log)
        run = begin(
            Refiner("gemini", backends, options),
            ACT,
            COUNTRY,
            out=tmp_path / str(n),
            rounds=3,
            target=1.0,
            max_drift=2.0,
            budget_calls=n,
        )
        sent = len(world.log) - before
        assert sent <= n and sent <= run.model_calls <= n, (n, sent, run.model_calls)
        assert run.stop_reason.startswith("budget:"), run.stop_reason
        saved = RunStore(tmp_path / str(n) / run.id).load()
        assert saved.model_calls == run.model_calls
