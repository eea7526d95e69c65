"""The run service front ends use: live updates, pause-and-rewrite, stop, errors, one run
at a time, saved runs (through the real Gemini backends and the fake server)."""

from __future__ import annotations

import pytest

from refine.service import RunService, ServiceBusy
from tests.runs import prepared

ACT, COUNTRY = "people eating food at home", "Iran"


@pytest.fixture
def service(backends, options, tmp_path):
    return RunService("gemini", out=tmp_path, backends=backends, backend_options=options)


@pytest.mark.slow
def test_live_updates_and_one_run_at_a_time(world, service):
    world.edit_delay_s = 0.3
    job = service.start(*prepared(ACT, COUNTRY, rounds=2, target=1.0, max_drift=2.0))
    with pytest.raises(ServiceBusy):
        service.start(*prepared(ACT, COUNTRY))
    updates = list(job.updates())
    stages = [u.stage for u in updates]
    # the models load before the run starts (never inside a round)
    assert stages[0].startswith("loading models: generator, observer, judge")
    assert stages[1].startswith("run ") and "round 0: generate" in stages
    fractions = [u.fraction for u in updates]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0 and fractions[0] == 0.0
    assert updates[-1].progress.startswith("finished: max rounds")
    assert "round 1: edit x2" in stages
    # the decision with the chosen image's FAITH and quality, and why
    decided = next(s for s in stages if s.startswith("round 1: accepted"))
    r1 = updates[-1].run.rounds[1].best.scores
    assert decided.startswith(
        f"round 1: accepted, FAITH {r1.faith:.3f}, quality {r1.quality:.3f} ("
    )
    assert updates[-1].done and updates[-1].error is None
    final = updates[-1].run
    assert final.status == "finished" and len(final.rounds) == 3
    # the record grows round by round while the run is watched
    sizes = [len(u.run.rounds) for u in updates if u.run is not None]
    assert sizes == sorted(sizes) and sizes[0] <= 1 and sizes[-1] == 3
    assert not service.busy
    assert service.open(job.run_dir) == final and service.runs() == [job.run_dir]
    # the app's list of saved runs: a label to read and the run's id to open it by
    faith = final.best().best.scores.faith
    assert service.saved() == [
        (
            f"{ACT} - {COUNTRY} - best FAITH {faith:.3f} - finished - {final.id}",
            job.run_dir.name,
        )
    ]
    assert service.open(job.run_dir.name) == final


def test_a_reader_that_comes_late_gets_the_events_it_missed_as_one_update(world, service):
    """A page shows the run as it stands: the events that came while it was busy (here,
    the whole run) are one update, the latest's; a reader of every event gets each."""
    job = service.start(*prepared(ACT, COUNTRY, rounds=1, target=1.0, max_drift=2.0))
    job.join(60)
    every = list(job.updates())
    late = list(job.updates(latest=True))
    assert len(every) > 5 and every[-1].done
    assert len(late) == 1 and late[0].done and late[0].run == every[-1].run
    assert late[0].stage == every[-1].stage == "finished"


def test_pause_rewrite_then_stop(world, service):
    job = service.start(*prepared(ACT, COUNTRY, rounds=5, target=1.0, max_drift=2.0), pause=True)
    reviews = []
    final = None
    for u in job.updates():
        if u.review is not None and u.review not in reviews:
            reviews.append(u.review)
            if len(reviews) == 1:
                assert u.review[0] == 1 and u.review[1].startswith("Edit this photo")
                with pytest.raises(ValueError, match="empty"):
                    job.submit_instruction("  ")
                job.submit_instruction("Put a sofreh on the floor.")
            else:
                job.stop()
        final = u
    assert [k for k, _ in reviews] == [1, 2]
    run = final.run
    assert final.done and run.stop_reason == "stopped by the user" and len(run.rounds) == 2
    assert run.rounds[1].text == "Put a sofreh on the floor."
    assert run.rounds[1].instruction_source == "person"  # edited in review


def test_a_failing_backend_is_reported_and_the_service_goes_on(world, service):
    world.fail_on = "generate"
    last = service.start(*prepared(ACT, COUNTRY, rounds=1)).wait()
    assert last.done and "500" in last.error and last.stage == "failed"
    assert not service.busy
    world.fail_on = None
    ok = service.start(*prepared(ACT, COUNTRY, rounds=1, target=1.0, max_drift=2.0)).wait()
    assert ok.error is None and ok.run.status == "finished"


def test_a_stop_before_the_loop_begins_still_stops(world, service):
    world.edit_delay_s = 0.0
    job = service.start(*prepared(ACT, COUNTRY, rounds=3, target=1.0, max_drift=2.0))
    job.stop()  # at once, possibly before round 0 has begun
    last = job.wait()
    # before round 0 began, or during it (a stop ends a round at once)
    assert last.run.stop_reason in ("stopped by the user", "stopped by the user during round 0")
    assert len(last.run.rounds) <= 1 and last.run.status == "finished"


class _FullGpu:
    """A generator whose GPU is full, as the diffusers backends report it."""

    id = "full-gpu"

    def generate(self, prompt, seeds):
        import torch

        from refine.backends.loading import oom_guard

        def fail():
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

        return oom_guard("black-forest-labs/FLUX.2-klein-4B", fail)


class _RawOom:
    id = "raw-oom"

    def generate(self, prompt, seeds):
        import torch

        raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 9.00 GiB\nmore")


class _NotDownloaded:
    id = "not-downloaded"

    def generate(self, prompt, seeds):
        from refine.backends.loading import load_or_explain

        def load():
            raise OSError("We couldn't connect to 'https://huggingface.co' to load the files")

        return load_or_explain("Qwen/Qwen-Image", load)


@pytest.mark.parametrize(
    ("generator", "expected"),
    [
        (_FullGpu(), ["out of GPU memory:", "small-gpu", "FLUX.2-klein-4B"]),
        (_RawOom(), ["out of GPU memory:", "small-gpu", "Tried to allocate 9.00 GiB"]),
        (_NotDownloaded(), ["model not available:", "hf download Qwen/Qwen-Image"]),
    ],
)
def test_gpu_and_model_errors_read_as_advice(
    world, backends, options, tmp_path, generator, expected
):
    service = RunService(
        "gemini",
        out=tmp_path,
        backends=backends,
        backend_options=options,
        instances={"generator": generator},
    )
    last = service.start(*prepared(ACT, COUNTRY, rounds=1)).wait()
    assert last.done and last.stage == "failed"
    for part in expected:
        assert part in last.error
    assert "\n" not in last.error and "more" not in last.error
    assert not service.busy


@pytest.mark.slow
def test_a_review_nobody_answers_stops_the_run_and_frees_the_service(
    world, backends, options, tmp_path
):
    service = RunService("gemini", out=tmp_path, backends=backends, backend_options=options)
    job = service.start(
        *prepared(ACT, COUNTRY, rounds=3, target=1.0, max_drift=2.0),
        pause=True,
        review_timeout_s=0.5,
    )
    last = job.wait()
    assert last.done and last.error is None
    # the record says why: not the user's Stop, the review nobody answered
    assert last.run.stop_reason == "stopped: nobody answered the review within 0.5 s"
    assert len(last.run.rounds) == 1
    assert not service.busy
    from refine.service.jobs import _span

    assert (_span(900), _span(0.5), _span(60)) == ("15 min", "0.5 s", "60 s")
