"""The loop's moves in the stand-in world: regenerate (a second text-to-image request from
a rewritten prompt, no input image), auto (the move its rule picks, and why), and
AHEaD's Tab. 32 writer (its instruction sent to the editor, no model call)."""

from __future__ import annotations

import pytest

from refine.io.store import RunStore
from refine.loop import policy
from refine.loop.prompts import base_prompt, template_prompt
from refine.present import views
from refine.present.report.run import render_run
from tests.e2e.test_loop import ACT, COUNTRY, colour, refiner
from tests.fakes.gemini_world import GREEN, RED
from tests.runs import begin


@pytest.mark.slow
def test_regenerate_draws_new_images_from_a_rewritten_prompt(
    world, backends, options, tmp_path, monkeypatch
):
    monkeypatch.setenv("REFINE_CACHE_DIR", str(tmp_path / "cache"))
    world.generate_for = {"Rewritten scene": GREEN}  # the new prompt draws the right scene
    run = begin(
        refiner(backends, options), ACT, COUNTRY, out=tmp_path, rounds=1, candidates=2,
        target=0.99, strategy="regenerate",
    )  # fmt: skip
    r0, r1 = run.rounds
    store = RunStore(tmp_path / run.id)
    # two text-to-image requests, the second from the rewritten prompt; no edit at all
    assert world.log.count("generate") == 3 and "edit" not in world.log
    assert world.generated[0].startswith(r0.text) and r0.kind == "generate"
    assert r1.kind == "regenerate" and r1.text.startswith("Rewritten scene: ")
    assert all(g.startswith(r1.text) for g in world.generated[1:]) and r1.text != r0.text
    # the rewriter was asked with the last prompt and the round's planned changes
    (asked,) = world.rewritten
    assert r0.text in asked
    for c in r1.changes:
        assert c.item in asked
    assert r1.instruction_source == "language model"
    assert r1.instruction_model == "gemini:gemini-3.8-flash"
    # the new images: a new picture, accepted on FAITH, its drift measured but not limited
    assert colour(store, r0.best.image) == RED and colour(store, r1.best.image) == GREEN
    assert r1.decision == "accepted" and r1.best.drift is not None
    assert [c.seed for c in r1.candidates] == [1042, 1043]
    assert views.decision_text(r1) == "accepted · regenerate"
    assert "new prompt (language model" in render_run(tmp_path / run.id)
    # the template writes it when asked to: the last prompt, what to show, keep, leave out
    world.rewritten.clear()
    again = begin(
        refiner(backends, options), ACT, COUNTRY, out=tmp_path, rounds=1, candidates=1,
        target=0.99, strategy="regenerate", writer="template",
    )  # fmt: skip
    t1 = again.rounds[1]
    assert world.rewritten == [] and t1.instruction_source == "template"
    show = [c.reference or c.item for c in t1.changes if c.kind in ("add", "replace")]
    avoid = [c.item for c in t1.changes if c.kind != "add"]
    keep = [m.phrase for m in again.rounds[0].best.feedback.aligned][:5]
    assert t1.text == template_prompt(again.rounds[0].text, show, keep, avoid)
    assert t1.text.startswith(again.rounds[0].text.rstrip(" .") + ". Show ")
    assert base_prompt(again, 1) == t1.text  # a later round starts from this one's prompt


def test_auto_picks_the_move_by_its_rule_and_records_why(world, backends, options, tmp_path):
    world.generate_for = {"Rewritten scene": GREEN}
    run = begin(
        refiner(backends, options), ACT, COUNTRY, out=tmp_path, rounds=2, candidates=1,
        target=0.99, strategy="auto", regenerate_below=0.5, writer="template", max_drift=2.0,
    )  # fmt: skip
    assert len(run.rounds) >= 2
    for r in run.rounds[1:]:
        parent = run.rounds[r.parent]
        how, why = policy.move(run.spec, parent)
        assert (r.kind, r.move_reason) == (how, why)
        assert views.reason_text(r).startswith(f"{how}: {why}; ")
    # RED's ALIGN is below 0.5: the first move regenerates, and says so
    r0, r1 = run.rounds[:2]
    assert r0.best.scores.align < 0.5 and r1.kind == "regenerate"
    assert r1.move_reason.startswith(f"ALIGN {r0.best.scores.align:.3f} < 0.5")
    assert world.log.count("generate") >= 2


def test_the_ahead_writer_sends_tab_32_to_the_editor(world, backends, options, tmp_path):
    run = begin(
        refiner(backends, options), ACT, COUNTRY, out=tmp_path, rounds=1, candidates=1,
        target=0.99, writer="ahead", max_drift=2.0,
    )  # fmt: skip
    r0, r1 = run.rounds
    assert r1.kind == "edit" and r1.instruction_source == "ahead template"
    assert world.written == [] and world.rewritten == []  # no language model call
    assert world.edited and r1.text in world.edited[0]
    fb = r0.best.feedback
    assert r1.text.startswith(f"Task: Edit the image to correctly show {ACT} in {COUNTRY}")
    assert "HAL DESCRIPTORS: " + "; ".join(h.phrase for h in fb.hallucinated) in r1.text
    assert "ALIGN DESCRIPTORS: " + "; ".join(m.phrase for m in fb.aligned) in r1.text
    # RED's hallucinations and stereotypes point at its setting (and the dimensions of
    # the references closest to its stereotypes): those additions are there, no other
    dims = {h.dimension for h in fb.hallucinated}
    dims |= {e.replacement_dimension for e in fb.exaggerated}
    assert "setting" in dims and "interaction" not in dims
    assert "- ADD 1 correct background from REF DESC: " in r1.text
    assert "Add correct interaction" not in r1.text
    assert ("- ADD 1-3 different types of attire" in r1.text) == ("attire" in dims)
    assert {c.kind for c in r1.changes} == {"remove", "add"}
