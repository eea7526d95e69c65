"""refine app's options are ServePlan's fields: each bad value is refused by the plan, in one
line naming its flag, before anything is served."""

from __future__ import annotations

import pytest

from tests.e2e.test_cli_run import cli


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--auth", "nopassword"], "--auth: use USER:PASS"),
        (["--auth", ":pass"], "--auth: use USER:PASS"),
        (["--admin", " "], "--admin: give a user name"),
        (["--admin", "a\x07b"], "--admin: give a user name"),
        (["--profile", "nope"], "--profile: unknown profile 'nope'"),
        (["--backend", "x"], "--backend: 'x': use ROLE=NAME"),
        (["--max-rounds", "101"], "--max-rounds '101': Input should be less than or equal to 100"),
        (["--port", "0"], "--port '0': Input should be greater than or equal to 1"),
        (["--daily-calls", "0"], "--daily-calls '0': Input should be greater than or equal to 1"),
    ],
)
def test_a_bad_option_is_refused_in_one_line(args, said, tmp_path):
    done = cli("app", *args, "--out", str(tmp_path / "runs"))
    assert done.returncode == 2
    lines = [x for x in done.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"error: {said}"), done.stderr
    assert not (tmp_path / "runs").exists()


def test_the_plan_keeps_what_it_was_given():
    from ui.serve_plan import ServePlan

    plan = ServePlan(auth="ann:pw", admin=[" ann "], backends=["judge=gemini:gemini-3-flash"])
    assert plan.admin == ["ann"] and plan.auth == "ann:pw" and plan.max_rounds == 10
