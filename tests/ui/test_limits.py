"""Bounded work: the operator's limits on each visitor's run (refused above them, a budget
of time and calls on every app run), below the CLI's bounds, below RunSpec's."""

from __future__ import annotations

import pytest

from refine import settings
from refine.service import RunService
from tests.ui.clients import served, start, start_values
from ui.app import build_app
from ui.limits import Limits


@pytest.fixture(scope="module")
def launched_limited(gemini_env, siglip_path, tmp_path_factory):
    """One limited app for the module's tests (a test that refuses a start checks that no
    run was added to those of the tests before it)."""
    from tests.conftest import loop_backends, loop_options

    out = tmp_path_factory.mktemp("limited")
    service = RunService(
        "gemini", out=out, backends=loop_backends(siglip_path), backend_options=loop_options()
    )
    demo = build_app(service, "limited", Limits(rounds=3, candidates=2, run_calls=12))
    with served(demo) as url:
        yield url, service, demo


@pytest.fixture
def limited(launched_limited, world):
    assert not launched_limited[1].busy
    return launched_limited


def runs_in(service) -> set:
    return set(service.out.rglob("run.json"))


@pytest.mark.slow
def test_a_start_above_a_limit_is_refused_and_nothing_is_written(limited):
    from gradio_client.exceptions import AppError

    from tests.ui.clients import app_client

    url, service, demo = limited
    client = app_client(url)
    runs = runs_in(service)
    for values, match in (
        ({"rounds": 100_000}, "rounds|maximum"),
        ({"rounds": 4}, "rounds|maximum"),
        ({"rounds": 1, "candidates": 5000}, "candidates|maximum"),
        ({"rounds": 1, "candidates": 3}, "candidates|maximum"),
    ):
        with pytest.raises(AppError, match=match):
            start(client, **values).result()
    # above the settings' own bound (64 candidates) too, the app's limit is the one named
    with pytest.raises(AppError, match=r"candidates: 100 is above this app's limit of 2 cand"):
        start(client, rounds=1, candidates=100).result()
    assert not service.busy and runs_in(service) == runs
    # the handler itself refuses too (a client that gets past the form's maximum)
    handler = next(fn.fn for fn in demo.fns.values() if getattr(fn, "api_name", None) == "start")
    with pytest.raises(Exception, match=r"rounds: 4 is above this app's limit of 3 editing"):
        next(handler(tok=None, **start_values(rounds=4)))
    with pytest.raises(Exception, match=r"--max-candidates"):
        next(handler(tok=None, **start_values(rounds=1, candidates=3)))
    with pytest.raises(Exception, match="names no visitor"):  # nobody to own the run
        next(handler(tok=None, **start_values(rounds=1)))
    assert not service.busy
    # the page's number fields say the same maxima (the handler checks them, naming the
    # field: Gradio's own check of a box's maximum names none)
    fields = {c["props"].get("elem_id"): c["props"] for c in demo.config["components"]}
    assert fields["rounds"]["label"] == "rounds (at most 3)"
    assert fields["candidates"]["label"] == "candidates (at most 2)"
    assert fields["rounds"].get("maximum") is None
    assert fields["rounds"]["value"] == 3  # the run default (5) capped to the limit


@pytest.mark.slow
def test_every_app_run_has_the_budget_and_says_which_limit_ended_it(limited):
    from tests.ui.clients import app_client

    url, service, _ = limited
    client = app_client(url)
    # each round of two candidates takes several calls: the call limit ends the run early
    out = start(client, rounds=3, candidates=2).result()
    run = service.open(out[7])
    assert run.spec.budget_calls == 12 and run.spec.budget_seconds == 30 * 60
    assert run.stop_reason.startswith("budget: ") and "model calls used (limit 12)" in (
        run.stop_reason
    )
    assert len(run.rounds) < 4


def test_the_order_of_bounds_holds():
    """app limit <= CLI bound <= RunSpec bound, and each is one clear line."""
    assert settings.upper("rounds") == 100 and settings.upper("candidates") == 64
    with pytest.raises(settings.SettingsError, match="less than or equal to 100"):
        settings.run_spec({"activity": "a", "country": "Iran", "rounds": 101})
    with pytest.raises(settings.SettingsError, match="less than or equal to 64"):
        settings.run_spec({"activity": "a", "country": "Iran", "candidates": 65})
    for bad, match in (
        (Limits(rounds=101), "--max-rounds: a whole number from 0 to 100"),
        (Limits(candidates=65), "--max-candidates: a whole number from 1 to 64"),
        (Limits(run_minutes=0), "--max-run-minutes"),
        (Limits(run_calls=0), "--max-run-calls"),
    ):
        with pytest.raises(ValueError, match=match):
            bad.check()
    assert Limits().check().describe().startswith("at most 10 editing rounds, 8 candidates")


def test_the_cli_refuses_a_run_above_a_bound(tmp_path):
    from tests.e2e.test_cli_run import cli

    for option, value, bound in (("--rounds", "101", "100"), ("--candidates", "65", "64")):
        args = ("--country", "Iran", option, value, "--out", str(tmp_path / "runs"))
        done = cli("run", "people eating food at home", *args)
        assert done.returncode != 0
        lines = [x for x in done.stderr.splitlines() if x.strip()]
        said = f"error: {option} '{value}': Input should be less than or equal to {bound}"
        assert lines[-1] == said
    assert not (tmp_path / "runs").exists()
    done = cli("app", "--max-rounds", "101", "--out", str(tmp_path / "app"))
    assert done.returncode != 0 and "--max-rounds" in done.stderr and "100" in done.stderr


@pytest.mark.slow
def test_a_stop_during_a_round_of_many_candidates_ends_the_run_at_once(
    world, backends, options, tmp_path
):
    """A round of 60 slow edits (about 12 s at the editor's 4 requests at once) is cut
    short by the owner's stop: the job ends within moments, the finished candidates are
    kept as a stopped round, nothing is asked of the models afterwards."""
    import time

    from tests.ui.clients import app_client

    service = RunService("gemini", out=tmp_path, backends=backends, backend_options=options)
    demo = build_app(service, "many candidates", Limits(candidates=60))
    with served(demo) as url:
        client = app_client(url)
        world.edit_delay_s = 0.75
        job = start(client, rounds=3, candidates=60)
        deadline = time.monotonic() + 120
        # round 1 under way with the first four candidates finished: four chains run at
        # once, so a fifth observation comes only once one of the first four is done
        while not (
            "edit" in world.log and world.log[world.log.index("edit") :].count("observe") >= 5
        ):
            assert time.monotonic() < deadline, "round 1 never got going"
            time.sleep(0.05)
        assert client.predict(api_name="/stop").startswith("stopping now")
        asked = time.monotonic()
        while service.busy:
            assert time.monotonic() - asked < 15, "the run went on after the stop"
            time.sleep(0.05)
        took = time.monotonic() - asked
        sent = len(world.log)
        job.result(timeout=60)
        # abandoned calls may still be answered (within an edit's 0.75 s), never followed up
        time.sleep(1.0)
        assert world.log[sent:].count("edit") == 0
        run = service.open(service.job.run_dir)
        assert run.status == "finished" and run.stop_reason == "stopped by the user during round 1"
        assert [r.decision for r in run.rounds] == ["initial", "stopped"]
        stopped = run.rounds[1]
        assert 1 <= len(stopped.candidates) < 60 and stopped.reason.startswith(
            "stopped by the user"
        )
        assert run.best_round == 0
        for c in stopped.candidates:
            assert (service.job.run_dir / c.image).is_file() and c.scores.faith is not None
        assert took < 10, f"the stop took {took:.1f} s"


@pytest.mark.slow
def test_a_hostile_max_quality_drop_is_refused_and_nothing_is_written(limited):
    """Each hostile value (one app for them all: building and launching one per value was
    most of this test's time), refused by the handler and through the API."""
    from gradio_client.exceptions import AppError

    from tests.ui.clients import app_client

    url, service, demo = limited
    client = app_client(url)
    runs = runs_in(service)
    handler = next(fn.fn for fn in demo.fns.values() if getattr(fn, "api_name", None) == "start")

    class Request:
        username, session_hash, headers, client = "ann", "s1", {}, None

    for value in (5, -1, "nan", "inf", "0.2; rm -rf /"):
        # the largest quality drop (0 to 1), the last of the run settings
        values = start_values(rounds=1, max_quality_drop=value)
        with pytest.raises(Exception, match="max quality drop|max_quality_drop"):
            next(handler(tok=None, request=Request(), **values))
        # through the API, the box or the handler refuses them, naming the field
        refusal = r"max quality drop(: | \(1: off\): .* is not a number)"
        with pytest.raises(AppError, match=refusal):
            start(client, **values).result()
        assert not service.busy and runs_in(service) == runs, value
    # a number past 10^15 in any box, a seed of 1e16 say, is refused naming the box
    with pytest.raises(AppError, match=r"seed: 1e\+16 is past the largest number this app"):
        start(client, rounds=1, seed=1e16).result()
    assert not service.busy and runs_in(service) == runs
    # the strategy, a choice: any other value is refused naming it, through the API too
    for value in ("sideways", "edit; rm -rf /", "x" * 600, 3):
        values = start_values(rounds=1, strategy=value)
        with pytest.raises(Exception, match="strategy: "):
            next(handler(tok=None, request=Request(), **values))
        with pytest.raises(AppError, match="strategy: |has raised an exception"):
            start(client, **values).result()
        assert not service.busy and runs_in(service) == runs, value


@pytest.mark.slow
def test_hostile_text_and_checkbox_settings_are_refused_by_name(limited):
    """The run settings the form shows as texts and checkboxes (from the settings table)
    refuse what no form box sends, naming the field, before anything runs."""
    url, service, demo = limited
    runs = runs_in(service)
    handler = next(fn.fn for fn in demo.fns.values() if getattr(fn, "api_name", None) == "start")

    class Request:
        username, session_hash, headers, client = "ann", "s1", {}, None

    for name, value, said in (
        ("caire_labels", "x" * 5000, "CAIRE cultures: a text of at most 500 characters"),
        ("caire_labels", ["Turkey"], "CAIRE cultures: a text of at most"),
        ("prompt_languages", "xx, ../../etc", "prompt languages: unknown language 'xx'"),
        ("sos_bank", "/etc", "is not a SoS bank inside this app's folder"),
        ("language_scores", "false", "language scores: 'false' is not true or false"),
        # keep fixes: a text box (a number box cannot be empty), read as a whole number
        ("keep_fixes", "x" * 5000, "keep fixes: 'xxxxxxxx"),
        ("keep_fixes", "9" * 4000, "keep fixes: '9999"),
        ("keep_fixes", "1" + "0" * 16, "keep fixes: 1e\\+16 is past the largest number"),
        ("keep_fixes", "-1", "keep fixes: -1 is below the least allowed, 0"),
        ("keep_fixes", "nan", "keep fixes: 'nan' is not a number"),
        ("memory", "true", "memory: 'true' is not true or false"),
    ):
        values = start_values(rounds=1, **{name: value})
        with pytest.raises(Exception, match=said):
            next(handler(tok=None, request=Request(), **values))
    assert not service.busy and runs_in(service) == runs
