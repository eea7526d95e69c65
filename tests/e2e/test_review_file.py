"""A run reviewed from a file (--review FILE, refine.loop.review_file): round 1's edit takes
the person's instruction, restricted to their box; round 2 is rejected by hand whatever the
rule said; the run stops before round 3; a file that cannot be is refused in one line
naming its line, before the run begins."""

from __future__ import annotations

import json

import pytest

from refine.backends.regions import region_words
from refine.records import Region
from tests.e2e.test_cli_run import cli
from tests.e2e.test_loop import ACT, COUNTRY, refiner
from tests.runs import begin


@pytest.mark.slow
def test_a_review_file_steers_each_round(world, backends, options, tmp_path):
    review = tmp_path / "review.jsonl"
    lines = [
        {"round": 1, "instruction": "Put a samovar on the table.", "boxes": [[0.1, 0.2, 0.6, 0.7]]},
        {"round": 2, "decision": "reject"},
        {"round": 3, "decision": "stop"},
    ]
    review.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    run = begin(
        refiner(backends, options), ACT, COUNTRY, out=tmp_path, rounds=4, candidates=1,
        target=0.99, max_drift=2.0, writer="template", review_file=str(review),
    )  # fmt: skip
    r1, r2 = run.rounds[1], run.rounds[2]
    assert (r1.text, r1.instruction_source) == ("Put a samovar on the table.", "person")
    assert r1.regions == [Region(box=[0.1, 0.2, 0.6, 0.7], source="by hand")]
    assert world.edited[0].strip().startswith("Put a samovar on the table.")
    assert region_words([[0.1, 0.2, 0.6, 0.7]]) in world.edited[0]
    assert not world.grounded and r2.regions == []  # round 2's edit: not restricted
    assert r2.decision == "rejected" and r2.by_hand
    assert r2.reason.startswith("rejected by hand (the review file; the rule said: ")
    assert run.best_round != 2 and len(run.rounds) == 3
    assert run.stop_reason == "stopped by the review file before round 3"
    # refused in one line, its line named, before anything is made
    for bad, said in (
        ('{"round": 1, "decision": "maybe"}', "line 1: decision: Input should be"),
        ('{"round": 1}\n{"round": 1}', "line 2: round 1 is reviewed twice"),
        ('{"round": 1, "boxes": [[0.1, 0.1, 0.12, 0.12]]}', "box 1 is under 1% of the image"),
        ("not json", "line 1 is not JSON"),
    ):
        review.write_text(bad + "\n")
        done = cli("run", ACT, "--country", COUNTRY, "--review", review, "--out", tmp_path / "no")
        assert done.returncode == 2 and said in done.stderr, (bad, done.stderr)
        assert done.stderr.startswith(f"error: --review: {review}")
        assert not (tmp_path / "no").exists()
