"""Answers that end without content, as the Gemini API sends a block or an empty answer of
any finish reason: a run whose edits, judge answers or observations are all answered so
ends in one line naming the reason, never a traceback."""

from __future__ import annotations

import json

import pytest

from tests.e2e.test_cli_run import cli, run_args

pytestmark = pytest.mark.slow  # a run through the stand-in per reason


@pytest.mark.parametrize(
    ("kind", "reason"),
    [("edit", "IMAGE_OTHER"), ("edit", "IMAGE_RECITATION"), ("judge", "MALFORMED_RESPONSE"),
     ("observe", "OTHER")],
)  # fmt: skip
def test_a_run_answered_without_content_ends_in_one_line(
    world, siglip_path, tmp_path, kind, reason
):
    world.bare = {kind: reason}
    done = cli(*run_args(tmp_path, 1, siglip_path))
    assert "Traceback" not in done.stderr and "AttributeError" not in done.stderr, done.stderr
    assert f"finish reason {reason}" in done.stderr, done.stderr
    assert done.returncode == 1
    (run,) = [json.loads(p.read_text()) for p in tmp_path.glob("*/run.json")]
    assert run["status"] == "failed" and f"finish reason {reason}" in run["error"]
