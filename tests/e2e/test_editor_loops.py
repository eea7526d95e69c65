"""The editor bench in the stand-in world: two editors, each edits every prompt's source
image three times in a row. Editor A improves the scene a step each edit (RED, AMBER,
OLIVE, GREEN); editor B takes one step, wanders off to BLUE and comes back to AMBER.
Images of three edits look broken to the world's judge (quality 1 of 10)."""

from __future__ import annotations

import io

import pytest
from PIL import Image

from refine import settings
from refine.harness.results import Results
from refine.harness.tasks.editor_loops.plan import EditorLoopPlan
from refine.harness.tasks.editor_loops.summary import loop_lines
from refine.harness.tasks.editor_loops.task import run_editor_loops
from refine.present.report.editor_loops import BELOW, write_editor_loops_page
from tests.e2e.test_cli_run import cli
from tests.e2e.test_loop import ACT, refiner
from tests.fakes.gemini_world import AMBER, BLUE, GREEN, OLIVE, RED, STEPWISE, png_bytes

A, B = "gemini:gemini-nano-banana-2.1", "gemini:gemini-3-pro-image"  # the profile's editor first
B_EDITS = {RED: (AMBER, AMBER), AMBER: (BLUE, BLUE), BLUE: (AMBER, AMBER)}
SCENARIO = {A: [RED, AMBER, OLIVE, GREEN], B: [RED, AMBER, BLUE, AMBER]}
PROMPTS = [(ACT, "Iran"), (ACT, "India")]


def centre(path) -> tuple[int, int, int]:
    with Image.open(path) as im:
        return im.convert("RGB").getpixel((im.width // 2, im.height // 2))


@pytest.mark.slow
def test_each_editor_edits_three_times_in_a_row_and_every_loop_follows_the_scenario(
    world, backends, options, tmp_path, monkeypatch
):
    monkeypatch.setenv("REFINE_CACHE_DIR", str(tmp_path / "cache"))
    world.edits = dict(STEPWISE)
    world.edits_by_model = {"gemini-3-pro-image": B_EDITS}
    world.degrade_after = 3
    base = refiner(backends, options)
    plan = EditorLoopPlan([A, B], PROMPTS, loops=3)
    results = run_editor_loops(plan, tmp_path / "bench", instances=base)
    cells = results.cells
    assert [(c["editor"], c["country"]) for c in cells] == [
        (e, c) for _, c in PROMPTS for e in (A, B)
    ]
    # one source image a prompt, drawn once, edited by both
    assert world.log.count("generate") == 2
    assert world.log.count("edit") == 2 * 2 * 3
    # each edit's input is the loop before's image: a chain, every edit kept
    inputs = [centre(io.BytesIO(images[0])) for images in world.edit_images]
    expected_inputs = [c for _, _ in PROMPTS for e in (A, B) for c in SCENARIO[e][:3]]
    assert inputs == expected_inputs
    for c in cells:
        rows = c["images"]
        assert [r["loop"] for r in rows] == [0, 1, 2, 3]
        colours = [centre(tmp_path / "bench" / r["image"]) for r in rows]
        assert colours == SCENARIO[c["editor"]]
        # each loop's FAITH is what the world's picture of that colour scores, assessed
        # apart from any run
        spec, refs = settings.load({"activity": ACT, "country": c["country"]})
        assessor = base.assessor(spec)
        for r, colour in zip(rows, colours, strict=True):
            alone = assessor.assess(Image.open(io.BytesIO(png_bytes(colour, world.size))), refs,
                                    c["tau"])  # fmt: skip
            assert r["faith"] == pytest.approx(alone.scores.faith, abs=1e-9)
        # drift: from the image before; loop 1's is also its drift from the source
        assert rows[0]["drift"] is None and rows[1]["drift"] > 0
        assert rows[1]["drift_from_source"] == pytest.approx(rows[1]["drift"], abs=1e-6)
        # the third edit looks broken: quality 1 of 10, below the guard from loop 3
        assert rows[3]["quality"] < c["guard"] <= rows[2]["quality"]
        assert c["guard"] == pytest.approx(rows[0]["quality"] - 0.2)
        assert c["guard_loop"] == 3
    a = next(c for c in cells if c["editor"] == A and c["country"] == "Iran")
    b = next(c for c in cells if c["editor"] == B and c["country"] == "Iran")
    fa, fb = [r["faith"] for r in a["images"]], [r["faith"] for r in b["images"]]
    assert fa == sorted(fa) and fa[3] > fa[2] > fa[1] > fa[0]
    assert fb[2] < fb[1] and fb[3] == pytest.approx(fb[1])  # B's erosion, and back
    # the summary: per editor and loop, the means over the two prompts
    summary = results.summary
    for e in (A, B):
        s = summary["editors"][e]
        assert s["first_below_guard"] == 3 and [r["loop"] for r in s["loops"]] == [0, 1, 2, 3]
        mine = [c for c in cells if c["editor"] == e]
        for k in range(4):
            mean = sum(c["images"][k]["faith"] for c in mine) / 2
            assert s["loops"][k]["faith"]["mean"] == pytest.approx(mean, abs=1e-12)
        assert s["loops"][3]["below_guard"] == 1.0 and s["loops"][2]["below_guard"] == 0.0
        assert set(summary["countries"][e]) == {"Iran", "India"}
    # forgetting along each chain: A's steps keep what they fix; B's BLUE loses what its
    # AMBER fixed, and the next AMBER brings back the restaurant it had removed
    fa, fb = summary["editors"][A]["forgetting"], summary["editors"][B]["forgetting"]
    assert fa["forgotten"] == 0 and fa["fixed"] > 0
    assert fb["forgotten"] > 0 and fb["came_back"] > 0
    assert fb["forgotten"] == sum(c["forgetting"]["forgotten"] for c in cells if c["editor"] == B)
    assert fb["dimensions"]["setting"]["came_back"] == 2  # the restaurant, in each country
    assert any(x.startswith("  forgetting: 0 of") for x in loop_lines(results))
    assert Results.read(tmp_path / "bench", "editor-loops").summary == summary
    page = write_editor_loops_page(tmp_path / "bench").read_text()
    assert page.count(BELOW) == 2 * 3  # each editor, overall and per country
    assert f'data-name="{B}" data-forgotten="{fb["forgotten"]}"' in page
    assert "FAITH over the loops" in page and "<h2>India</h2>" in page
    # a second run keeps every cell
    world.log.clear()
    run_editor_loops(plan, tmp_path / "bench", instances=base)
    assert world.log == []


@pytest.mark.slow
def test_localized_loops_measure_drift_outside_the_boxes(
    world, backends, options, tmp_path, monkeypatch
):
    monkeypatch.setenv("REFINE_CACHE_DIR", str(tmp_path / "cache"))
    world.edits = dict(STEPWISE)
    plan = EditorLoopPlan([A], PROMPTS[:1], loops=2, localize=True)
    results = run_editor_loops(plan, tmp_path / "bench", instances=refiner(backends, options))
    rows = results.cells[0]["images"]
    assert len(world.grounded) == 2 and rows[0]["drift_outside"] is None
    # the Gemini editor's edits pasted back beyond a feathered band: nothing drifts outside
    # (1 - SSIM of identical windows: 0 up to float64 rounding), while the image did change
    assert all(0 <= r["drift_outside"] < 1e-9 and r["drift"] > 0 for r in rows[1:]), [
        (r["drift_outside"], r["drift"]) for r in rows
    ]
    page = write_editor_loops_page(tmp_path / "bench").read_text()
    assert "drift outside boxes" in page


@pytest.mark.slow
def test_the_command_line_compares_editors_and_refuses_what_cannot_be(
    world, siglip_path, tmp_path, monkeypatch
):
    monkeypatch.setenv("REFINE_CACHE_DIR", str(tmp_path / "cache"))
    world.edits = dict(STEPWISE)
    world.edits_by_model = {"gemini-3-pro-image": B_EDITS}
    out = tmp_path / "e"
    args = ["editor-loops", "--countries", "Iran", "--activity", ACT, "--out", out]
    args += ["--backend", f"image_embedder=siglip:{siglip_path}"]
    # an editor that cannot load is named before any cell is made (it was named only once
    # the editors before it had made theirs), nothing asked of the models
    broken = f"diffusers:{tmp_path / 'no-such-model'}"
    done = cli(*args, "--editor", A, "--editor", B, "--editor", broken, "--loops", "2")
    assert done.returncode == 1, done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("error: ") and broken in done.stderr
    assert "editor" in done.stderr.strip().splitlines()[-1] and not world.log
    assert not (out / "editor_loops.csv").exists()
    done = cli(*args, "--editor", A, "--editor", B, "--loops", "2")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"{A} (1 prompt(s); quality guard ")
    assert f"\n{B} (1 prompt(s); quality guard " in done.stdout
    assert (out / "editor_loops.html").is_file() and (out / "editor_loops.csv").is_file()
    assert f"{A}: {ACT} (Iran): FAITH" in done.stderr
    old = cli("bench", *args[1:], "--editor", A, "--loops", "2")  # the old form, said
    assert old.returncode == 0, old.stderr
    assert old.stderr.startswith("refine bench --editor/--loops is now refine editor-loops")
    assert "0 of 1 cell(s) to do" in old.stderr
    for wrong, said in (
        (["--loops", "2"], "--editor: Field required"),
        (["--localize"], "--editor: Field required"),
        (["--editor", A, "--target", "0.9"], "No such option: --target"),
        (["--editor", A, "--editor", A], "named twice"),
        (["--editor", A, "--loops", "0"], "--loops"),
        (["--editor", A, "--strategies", "edit"], "No such option: --strategies"),
        (["--editor", A, "--backend", f"editor={B}"], "name the editors with --editor"),
        (["--editor", "nonsense"], "--editor: 'nonsense': unknown editor backend"),
    ):
        bad = cli(*args, *wrong)
        assert bad.returncode == 2 and said in bad.stderr, (wrong, bad.stderr)


@pytest.mark.slow
def test_a_chain_an_edit_failure_ends_keeps_its_loops_and_is_made_again_next_time(
    world, backends, options, tmp_path, monkeypatch
):
    monkeypatch.setenv("REFINE_CACHE_DIR", str(tmp_path / "cache"))
    world.edits = dict(STEPWISE)
    world.fail_edit_of = OLIVE  # the third edit answers HTTP 500
    plan = EditorLoopPlan([A], PROMPTS[:1], loops=3)
    base = refiner(backends, options)
    results = run_editor_loops(plan, tmp_path / "bench", instances=base)
    (c,) = results.cells
    assert [r["loop"] for r in c["images"]] == [0, 1, 2]
    assert c["errors"][0] == "2 of 3 edits made" and "500" in c["failed"]
    loops = results.summary["editors"][A]["loops"]
    assert [r["prompts"] for r in loops] == [1, 1, 1, 0] and loops[3]["faith"]["mean"] is None
    assert loops[3]["below_guard"] is None
    page = write_editor_loops_page(tmp_path / "bench").read_text()
    assert "– (0 of 1 prompts)" in page
    # the next run makes the failed chain again, from the same source
    world.fail_edit_of = None
    world.log.clear()
    (again,) = run_editor_loops(plan, tmp_path / "bench", instances=base).cells
    assert [r["loop"] for r in again["images"]] == [0, 1, 2, 3] and again["failed"] is None
    assert "generate" not in world.log
