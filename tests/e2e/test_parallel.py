"""A round's candidates at the same time (API models) or in one batch (local models): the
same record as one after the other, only faster. Through the fake Gemini world."""

from __future__ import annotations

import json

import pytest

from refine.loop.refiner import Refiner
from tests.runs import begin

ACT, COUNTRY = "people eating food at home", "Iran"


def record(run_dir) -> dict:
    """run.json without what depends on timing or on the run's folder name."""
    doc = json.loads((run_dir / "run.json").read_text())
    for key in ("id", "created", "updated", "elapsed_s"):
        doc.pop(key)
    for r in doc["rounds"]:
        r.pop("timings")
    return doc


def images(run_dir) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(run_dir.glob("*.png"))}


def run_twice(world, backends, options, tmp_path, delay_s=(0.0, 0.0), held=None, **settings):
    """The run one candidate after the other, then at once; each API answer delayed by
    ``delay_s[parallel]``; ``held``: the world's ``hold_after_first`` for the run at once
    (the world's ``held_peak`` then says how many were held together)."""
    import os

    out = {}
    for parallel in (False, True):
        world.busy[:] = [0, 0]
        world.delay_s = delay_s[parallel]
        world.hold_after_first = held if parallel else None
        refiner = Refiner("gemini", backends, options, parallel=parallel)
        # each run starts from an empty answer cache: the instruction writer is asked alike
        before = os.environ["REFINE_CACHE_DIR"]
        os.environ["REFINE_CACHE_DIR"] = str(tmp_path / f"cache-{parallel}")
        try:
            run = begin(refiner, ACT, COUNTRY, out=tmp_path / f"parallel-{parallel}", **settings)
        finally:
            os.environ["REFINE_CACHE_DIR"] = before
        run_dir = tmp_path / f"parallel-{parallel}" / run.id
        out[parallel] = (run, run_dir, world.busy[1])
    return out


@pytest.mark.slow
def test_candidates_at_once_make_the_same_record(world, backends, options, tmp_path):
    # every API answer takes a while, so calls overlap when they can: 0.1 s at once; 0.02 s
    # one after the other, where any overlap would still be seen (its 40-odd calls at 0.1 s
    # were 3.5 s of this test's 4.7 s). At once, the world answers the first edit and holds
    # the others until two are held together: the 3 chains overlap, a state, not a time
    runs = run_twice(
        world,
        backends,
        options,
        tmp_path,
        delay_s=(0.02, 0.1),
        held=("edit", 3),
        rounds=2,
        candidates=3,
        target=1.0,
        max_drift=2.0,
    )
    (seq, seq_dir, seq_busy), (par, par_dir, par_busy) = runs[False], runs[True]
    assert seq.status == par.status == "finished" and len(par.rounds) == 3
    assert record(seq_dir) == record(par_dir)  # scores, decisions, instructions, usage, calls
    assert images(seq_dir) == images(par_dir)
    # one after the other, one request at a time; at once, the 3 candidates' chains overlap
    # (their edits were held together)
    assert seq_busy == 1 and world.held_peak == 2 and par_busy > 1
    r = par.rounds[1]
    assert r.timings["wall"] > 0 and r.timings["edit"] > 0 and r.failures == []


@pytest.mark.parametrize("parallel", [False, True], ids=["one-by-one", "at-once"])
def test_a_candidate_whose_edit_fails_is_left_out(world, backends, options, tmp_path, parallel):
    world.fail_edit_seeds = {42 + 1000 + 1}  # round 1, candidate 1
    run = begin(
        Refiner("gemini", backends, options, parallel=parallel),
        ACT,
        COUNTRY,
        out=tmp_path,
        rounds=1,
        candidates=3,
        target=1.0,
        max_drift=2.0,
    )
    assert run.status == "finished", run.error
    r = run.rounds[1]
    assert [c.seed for c in r.candidates] == [1042, 1044]
    assert [c.image for c in r.candidates] == ["round_01_c0.png", "round_01_c2.png"]
    assert len(r.failures) == 1
    assert r.failures[0].startswith("candidate 1 (seed 1043): ") and "HTTP 500" in r.failures[0]
    assert r.decision in ("accepted", "rejected") and 0 <= r.chosen < 2
    assert not (tmp_path / run.id / "round_01_c1.png").exists()


def test_the_same_failure_gives_the_same_record_either_way(world, backends, options, tmp_path):
    world.fail_edit_seeds = {2043}  # round 2, candidate 1
    runs = run_twice(
        world, backends, options, tmp_path, rounds=2, candidates=2, target=1.0, max_drift=2.0
    )
    assert record(runs[False][1]) == record(runs[True][1])
    assert runs[True][0].rounds[2].failures[0].startswith("candidate 1 (seed 2043)")


@pytest.mark.slow
def test_an_api_generator_asks_for_several_seeds_at_once(world):
    """generate(prompt, seeds) (a SoS bank cell, several first drafts): up to the backend's
    concurrency requests at once; the usage is the caller's, the images in seed order."""
    from refine import usage
    from refine.backends import create

    world.delay_s = 0.1
    world.generate_for = {"blue please": (0, 0, 255)}
    model = "gemini:gemini-3.1-flash-image"
    for concurrency, most in ((4, 4), (2, 2), (1, 1)):
        world.busy[:] = [0, 0]
        # the first `most` requests are held until they are all in (a loaded machine can
        # start the threads more than the delay apart: 3 of 4 were seen at once under
        # -n 3); a request beyond the concurrency would then meet them in flight
        world.hold_together, world.hold_give_up_s, world.held_peak = most, 10.0, 0
        world._held[:] = [0, 0, False]
        gen = create("generator", model, max_retries=0, concurrency=concurrency)
        with usage.collecting() as spent:
            images = gen.generate("a picture, blue please", [1, 2, 3, 4])
        assert len(images) == 4 and world.busy[1] == most
        assert spent[model]["calls"] == spent[model]["sent"] == 4
        assert all(im.getpixel((5, 5)) == (0, 0, 255) for im in images)
    with pytest.raises(ValueError, match="concurrency must be at least 1"):
        create("generator", model, concurrency=0)


@pytest.mark.slow
def test_a_judge_without_log_probabilities_is_found_out_once(
    world, backends, options, tmp_path, monkeypatch
):
    """Candidates judged at once ask a model without log-probabilities once, as one by one
    would: the same record, usage (requests sent) included."""
    from refine.backends import judging

    world.no_logprobs = True
    # the request that finds out is slow, so that judgements at once would all be sent
    # before its answer if nothing held them back
    world.delay_by_kind = {"judge": 0.3}
    try:
        docs = {}
        for parallel in (False, True):
            judging._NO_LOGPROBS.clear()
            judging._HAS_LOGPROBS.clear()
            # each run starts from an empty answer cache: the instruction writer is asked
            # alike (in a fresh process the first run alone asked it)
            monkeypatch.setenv("REFINE_CACHE_DIR", str(tmp_path / f"cache-{parallel}"))
            run = begin(
                Refiner("gemini", backends, options, parallel=parallel),
                ACT,
                COUNTRY,
                out=tmp_path / str(parallel),
                rounds=1,
                candidates=3,
                initial_candidates=3,  # round 0: three first judgements at once
                target=1.0,
                max_drift=2.0,
            )
            docs[parallel] = record(tmp_path / str(parallel) / run.id)
        assert docs[False] == docs[True]
        assert (
            docs[True]["rounds"][1]["candidates"][0]["scores"]["readings"]["exag"]["method"]
            == "sampled"
        )
    finally:
        judging._NO_LOGPROBS.clear()


def test_an_images_observation_and_readings_go_out_together(world, backends, options):
    """API models: the observation, exag:mllm's rating and both quality questions of one
    image are sent at once. The world holds every request until 4 are held together (a
    state: sent one after another, they never are, and the hold gives up)."""
    from PIL import Image

    from refine.backends import judging
    from tests.fakes.gemini_world import RED
    from tests.runs import prepared

    refiner = Refiner("gemini", backends, options)
    _, refs = prepared(ACT, COUNTRY)
    judging.forget()  # the judge's model known to give log-probabilities: no probe first
    judging._HAS_LOGPROBS.add(refiner.backends.get("judge").probe_key)
    world.hold_together, world.hold_give_up_s = 4, 10.0
    try:
        assessed = refiner.assessor().assess(Image.new("RGB", (64, 48), RED), refs)
    finally:
        judging.forget()
    assert world.held_peak == 4
    assert world.log.count("observe") == 1 and world.log.count("judge") == 3
    assert assessed.scores.quality is not None and assessed.scores.exag is not None
