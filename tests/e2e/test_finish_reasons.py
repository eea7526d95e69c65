"""Answers that end without content, as the Gemini API sends a block or an empty answer of
any finish reason: a run whose judge answers or observations are all answered so ends in
one line naming the reason, never a traceback; a round whose every edit is refused so is
recorded as refused, and the run goes on."""

from __future__ import annotations

import json

import pytest

from tests.e2e.test_cli_run import cli, run_args

pytestmark = pytest.mark.slow  # a run through the stand-in per reason


@pytest.mark.parametrize(
    ("kind", "reason"),
    [("judge", "MALFORMED_RESPONSE"), ("observe", "OTHER")],
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


def test_a_round_whose_every_edit_is_refused_is_recorded_and_the_run_goes_on(
    world, siglip_path, tmp_path
):
    """Both candidates of round 1 refused (IMAGE_SAFETY, the editor's safety block): the
    round is recorded as refused, with each candidate's reason, and made again from the
    same image with new seeds; the refused round counts against --rounds. Every edit is
    asked for once: two refused, two made."""
    from refine.loop.refiner import REFUSED_SEEDS

    world.bare, world.bare_seeds = {"edit": "IMAGE_SAFETY"}, {1042, 1043}
    done = cli(*run_args(tmp_path, 2, siglip_path))
    assert done.returncode == 0, done.stderr
    said = done.stdout + done.stderr
    assert "round 1 refused: every candidate (2) was refused by the editor: " in said, said
    (run,) = [json.loads(p.read_text()) for p in tmp_path.glob("*/run.json")]
    assert run["status"] == "finished" and run["error"] is None
    assert run["schema_version"] == 3  # the layout that holds refused rounds
    assert run["stop_reason"] == "max rounds: 2 editing round(s) done, 1 of them refused"
    (refused,) = run["refused"]
    assert (refused["round"], refused["parent"], refused["seeds"]) == (1, 0, [1042, 1043])
    # made again without the change the refused instruction led with, the writer told why
    assert run["rounds"][1]["text"] != refused["text"]
    assert "refused this round 1 time(s)" in run["rounds"][1]["instruction_note"]
    assert len(refused["failures"]) == 2
    assert all("IMAGE_SAFETY" in f for f in refused["failures"]), refused["failures"]
    assert [r["index"] for r in run["rounds"]] == [0, 1]
    seeds = [c["seed"] for c in run["rounds"][1]["candidates"]]
    assert seeds == [1042 + REFUSED_SEEDS, 1043 + REFUSED_SEEDS]
    assert world.log.count("edit") == 4
    # the language model that wrote it again was told what was refused, and why
    told = world.written[-1]
    assert "The image model refused the last instruction for this photo" in told
    assert refused["text"] in told and "IMAGE_SAFETY" in told


@pytest.mark.parametrize("writer", ["template", "ahead"])
def test_a_model_that_refuses_every_edit_ends_the_run_at_its_rounds(
    world, siglip_path, tmp_path, writer
):
    """An editor whose every answer ends bare (IMAGE_OTHER): each round is refused, none
    made, and the run ends when its rounds are spent, round 0 kept: a finished run, not a
    failed one, and no loop. The template writer leaves out the refused instruction's
    first change the next time, and AHEaD's Tab. 32 the first of its HAL and EXAG; the
    rounds table has a row for each refusal."""
    from refine.io.store import RunStore
    from refine.present.views import rounds_table

    world.bare = {"edit": "IMAGE_OTHER"}
    done = cli(*run_args(tmp_path, 2, siglip_path), "--writer", writer)
    assert done.returncode == 0, done.stderr
    (run,) = [json.loads(p.read_text()) for p in tmp_path.glob("*/run.json")]
    assert run["status"] == "finished" and len(run["rounds"]) == 1
    assert [x["round"] for x in run["refused"]] == [1, 1]
    assert run["stop_reason"] == "max rounds: 2 editing round(s) done, 2 of them refused"
    assert all("finish reason IMAGE_OTHER" in f for x in run["refused"] for f in x["failures"])
    if writer == "template":
        first, second = (
            [line for line in x["text"].splitlines() if line.startswith("- ")]
            for x in run["refused"]
        )
    else:  # the items of HAL, then of EXAG
        first, second = (
            [
                item
                for line in x["text"].splitlines()
                if line.startswith(("HAL DESCRIPTORS: ", "EXAG DESCRIPTORS: "))
                for item in line.split(": ", 1)[1].split("; ")
                if item != "(none)"
            ]
            for x in run["refused"]
        )
        assert run["refused"][0]["text"].startswith("Task: Edit the image to correctly show")
    # the next planned change leads: the first is left out, the rest follow in order
    assert len(first) >= 2 and first[0] not in second and second[: len(first) - 1] == first[1:]
    (folder,) = [p.parent for p in tmp_path.glob("*/run.json")]
    rows = rounds_table(RunStore(folder).load())
    assert [(row[0], row[1]) for row in rows] == [(0, "initial"), (1, "refused"), (1, "refused")]
    assert "IMAGE_OTHER" in rows[1][-4]  # the reason column
    assert cli("report", str(folder), "--out", str(tmp_path / "r.html")).returncode == 0
    page = (tmp_path / "r.html").read_text()
    assert page.count('<p class="refused">round 1 refused: every candidate (2) was') == 2


def test_a_bench_cell_whose_prompt_is_refused_fails_alone_and_a_rerun_makes_only_it(
    world, gemini_env, siglip_path, tmp_path
):
    """One generator refuses the bench's prompt (IMAGE_SAFETY): its cell fails with the
    reason, the other generator's cell is made and written with the page and summary, and
    the bench names the failed cell (exit 1); run again, it sends only that cell's
    requests."""
    from tests.e2e.test_bench import ACTS, GENS

    world.bare, world.bare_models = {"generate": "IMAGE_SAFETY"}, {"gemini-3-pro-image"}
    args = ["bench", "--generator", GENS[0], "--generator", GENS[1], "--countries", "Iran"]
    args += ["--activity", ACTS[0], "--images-per-prompt", "2", "--out", str(tmp_path / "b")]
    args += ["--backend", f"image_embedder=siglip:{siglip_path}"]
    done = cli(*args)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert f"failed: {GENS[1]}: {ACTS[0]} (Iran): " in done.stderr and "IMAGE_SAFETY" in done.stderr
    assert "1 of 2 cell(s) failed; they are made again when the same command runs again" in (
        done.stderr
    )
    doc = json.loads((tmp_path / "b" / "results.json").read_text())
    assert [c["generator"] for c in doc["cells"]] == [GENS[0]]
    # the cell made is written whole: its page and summary too
    assert (tmp_path / "b" / "bench.html").is_file() and f"results: {tmp_path / 'b'}" in done.stdout
    world.bare_models = None
    world.bare = {}
    before = list(world.by_model)
    again = cli(*args)
    assert again.returncode == 0, again.stderr
    sent = [m for kind, m in world.by_model[len(before) :] if kind == "generate"]
    assert sent == ["gemini-3-pro-image"] * 2  # only the failed cell's two images
    doc = json.loads((tmp_path / "b" / "results.json").read_text())
    assert [c["generator"] for c in doc["cells"]] == GENS[:2]


def test_a_refused_regeneration_is_made_again_and_its_rewriter_told_why(
    world, siglip_path, tmp_path
):
    """The regenerate move: both new images of round 1 refused by the generator. The
    round is recorded as refused by the generator and made again with new seeds, the
    prompt rewriter told what was refused."""
    from refine.loop.refiner import REFUSED_SEEDS

    world.bare, world.bare_seeds = {"generate": "IMAGE_SAFETY"}, {1042, 1043}
    done = cli(*run_args(tmp_path, 2, siglip_path), "--strategy", "regenerate")
    assert done.returncode == 0, done.stderr
    (run,) = [json.loads(p.read_text()) for p in tmp_path.glob("*/run.json")]
    (refused,) = run["refused"]
    assert refused["kind"] == "regenerate" and refused["seeds"] == [1042, 1043]
    assert "round 1 refused: every candidate (2) was refused by the generator" in (
        done.stdout + done.stderr
    )
    made = run["rounds"][1]
    assert made["kind"] == "regenerate"
    assert [c["seed"] for c in made["candidates"]] == [1042 + REFUSED_SEEDS, 1043 + REFUSED_SEEDS]
    told = world.rewritten[-1]
    assert "The image model refused the last prompt for this scene" in told
    assert refused["text"] in told and "IMAGE_SAFETY" in told
