"""Old command forms read as their new commands' arguments, for one release."""

from __future__ import annotations

import pytest

from refine.cli.legacy import forwarded


@pytest.mark.parametrize(
    ("old", "new", "said"),
    [
        (
            ["bench", "--strategies", "edit", "--generator", "gemini:g", "--budget-calls=4"],
            ["strategies", "--strategies", "edit", "--backend", "generator=gemini:g",
             "--budget-calls=4"],
            "refine bench --budget-calls/--strategies is now refine strategies",
        ),
        (
            ["bench", "--generator=diffusers:x", "--budget-seconds", "9"],
            ["strategies", "--backend", "generator=diffusers:x", "--budget-seconds", "9"],
            "refine bench --budget-seconds is now refine strategies",
        ),
        (
            ["bench", "--editor", "gemini:e", "--loops", "2", "--generator", "gemini:g"],
            ["editor-loops", "--editor", "gemini:e", "--loops", "2", "--generator", "gemini:g"],
            "refine bench --editor/--loops is now refine editor-loops",
        ),
        (["bench", "--recipe", "x", "--localize"], None, ""),  # a recipe: the bench's own
        (["bench", "--countries", "Iran"], None, ""),
        (["run", "--loops", "2"], None, ""),
    ],
)  # fmt: skip
def test_an_old_form_is_its_new_command_and_says_so(old, new, said):
    args, line = forwarded(old)
    assert args == (new or old)
    assert line.startswith(said) and (not said or "goes in the next release: refine " in line)
