"""The refinement loop end to end through the real Gemini backends and the fake server."""

from __future__ import annotations

import json

import pytest
from PIL import Image

from refine.events import RoundDecided
from refine.io.store import RunStore
from refine.loop.refiner import Refiner
from refine.records import Run
from tests.fakes.gemini_world import BLUE, GREEN, GREY, RED, expected_exag
from tests.runs import begin

ACT, COUNTRY = "people eating food at home", "Iran"


def refiner(backends, options, **kw):
    return Refiner("gemini", backends=backends, backend_options=options, **kw)


def colour(store: RunStore, name: str):
    im = store.load_image(name)
    return im.getpixel((im.width // 2, im.height // 2))


def test_run_accepts_improvement_then_stops_on_patience(world, backends, options, tmp_path):
    events = []
    run = begin(
        refiner(backends, options, on_event=events.append),
        ACT,
        COUNTRY,
        out=tmp_path,
        rounds=5,
        candidates=2,
        target=0.99,
        max_drift=2.0,
        writer="template",  # the template's lines are checked here; the writer below
    )
    store = RunStore(tmp_path / run.id)
    assert [r.decision for r in run.rounds] == ["initial", "accepted", "rejected", "rejected"]
    assert run.stop_reason.startswith("patience: 2 round(s)")
    assert run.status == "finished" and run.best_round == 1
    r0, r1 = run.rounds[0], run.rounds[1]
    assert colour(store, r0.best.image) == RED and colour(store, r1.best.image) == GREEN
    # round 1: seed 1042 (even) gave GREEN, 1043 gave BLUE; the better one was chosen
    assert [c.seed for c in r1.candidates] == [1042, 1043] and r1.chosen == 0
    assert r1.best.scores.faith > r0.best.scores.faith + 0.2
    assert r1.best.scores.align > r0.best.scores.align and r1.best.scores.hal < 0.5
    assert r0.best.scores.exag == pytest.approx(expected_exag(RED), abs=1e-4)
    assert r1.best.scores.exag == pytest.approx(expected_exag(GREEN), abs=1e-4)
    assert r0.best.scores.variants["exag"] == "exag:mllm"
    # FAITH is the mean of ALIGN, 1 - HAL and 1 - EXAG
    s = r0.best.scores
    assert s.faith == pytest.approx((s.align + 1 - s.hal + 1 - s.exag) / 3)
    # the instruction removes what was hallucinated and adds what was missing
    lines = [x[2:].rstrip(".") for x in r1.text.splitlines() if x.startswith("- ")]
    assert len(lines) == 5  # max_changes
    # a hallucinated item close to a missing reference is replaced by it, not removed
    fb = {h.phrase: h for h in r0.best.feedback.hallucinated}
    assert fb["hamburgers"].best_match == "Basket of flatbreads"
    assert fb["hamburgers"].similarity >= 0.3
    assert "Replace the hamburgers with a basket of flatbreads" in lines
    assert not any("oversized hookah " in x or x.endswith("oversized hookah") for x in lines)
    assert "Tone down the oversized hookahs" in lines  # named once, as a stereotype
    assert any(x.startswith(("Add ", "Show ", "Arrange them ", "Dress them ")) for x in lines)
    assert r1.instruction_source == "template" and r1.parent == 0
    seen = [e.candidate for e in r0.best.feedback.exaggerated]
    assert "oversized hookahs" in seen
    # rounds 2 and 3 edit the best image (round 1) and gain nothing
    assert run.rounds[2].parent == 1 and "needs at least +0.01" in run.rounds[2].reason
    # the record on disk is the record returned; every image exists
    assert Run.model_validate(json.loads((store.dir / "run.json").read_text())) == run
    for r in run.rounds:
        for c in r.candidates:
            assert (store.dir / c.image).is_file()
        assert r.timings and all(v >= 0 for v in r.timings.values())
    assert r1.best.drift is not None and -1.0 <= r1.best.drift.embedding_cosine <= 1.0
    assert run.backend_ids["observer"] == "gemini:gemini-3.8-flash"
    # beside the model asked for: the model version that answered, that the model fixes
    # its own sampling (no temperature sent), and that no request asked to be stored
    assert run.backend_info["observer"] == {
        "id": "gemini:gemini-3.8-flash",
        "device": "api",
        "dtype": "n/a",
        "model_version": "gemini-3.8-flash",
        "sampling": "the model's own: it ignores temperature, top_p and top_k, so none is sent",
        "store": "false",
    }
    assert [e.round for e in events if isinstance(e, RoundDecided)] == [0, 1, 2, 3]
    # API token usage per round and run, from each answer's usage metadata (the fake server
    # bills 20 in / 1290 out per image, 11 in / 7 out and 12 thought tokens per text answer:
    # the thoughts are billed output, so a text answer's output is 19)
    drawn = run.usage["gemini:gemini-3.1-flash-lite-image"]  # the profile's generator
    images = run.usage["gemini:gemini-nano-banana-2.1"]  # and its editor
    assert drawn["calls"] == world.log.count("generate") == 1
    assert images["calls"] == world.log.count("edit") == 6
    assert (images["prompt_tokens"], images["output_tokens"]) == (20 * 6, 1290 * 6)
    assert (drawn["prompt_tokens"], drawn["output_tokens"]) == (20, 1290)
    texts = run.usage["gemini:gemini-3.8-flash"]
    assert texts["calls"] == world.log.count("observe") + world.log.count("judge")
    assert texts["total_tokens"] == 30 * texts["calls"]
    assert texts["output_tokens"] == (7 + 12) * texts["calls"]
    assert sum(r.usage["gemini:gemini-3.8-flash"]["calls"] for r in run.rounds) == texts["calls"]
    assert r1.usage["gemini:gemini-nano-banana-2.1"]["calls"] == 2  # two edit candidates
    assert run.packages["cultural-refine"] == "0.1.0" and "torch" in run.packages
    assert world.log.count("generate") == 1 and world.log.count("edit") == 6


@pytest.mark.slow
def test_target_and_max_rounds_and_budget(world, backends, options, tmp_path):
    r = refiner(backends, options)
    first = begin(r, ACT, COUNTRY, out=tmp_path, rounds=3, target=0.0)
    assert len(first.rounds) == 1 and first.stop_reason.startswith("target: FAITH")
    red = first.rounds[0].best.scores.faith
    run = begin(r, ACT, COUNTRY, out=tmp_path, rounds=3, target=red + 0.1, max_drift=2.0)
    assert [x.decision for x in run.rounds] == ["initial", "accepted"]
    assert run.stop_reason.startswith("target")
    capped = begin(r, ACT, COUNTRY, out=tmp_path, rounds=1, target=1.0, max_drift=2.0)
    assert capped.stop_reason == "max rounds: 1 editing round(s) done"
    budget = begin(r, ACT, COUNTRY, out=tmp_path, rounds=5, target=1.0, budget_calls=5)
    # round 0 costs 5 calls (generate, observe, judge EXAG, judge naturalness and artifacts)
    assert len(budget.rounds) == 1 and budget.stop_reason.startswith("budget: 5 model calls")


def test_drift_bound_rejects_and_user_instruction(world, backends, options, tmp_path):
    run = begin(
        refiner(backends, options),
        ACT,
        COUNTRY,
        out=tmp_path,
        rounds=1,
        target=1.0,
        max_drift=0.0,
        instructions={1: "Replace the hamburgers with a sofreh."},
    )
    r1 = run.rounds[1]
    assert r1.text == "Replace the hamburgers with a sofreh." and r1.instruction_source == "user"
    assert r1.decision == "rejected" and "drifted too far" in r1.reason
    assert run.best_round == 0


def test_backend_failure_keeps_completed_rounds_and_resumes(world, backends, options, tmp_path):
    world.fail_on = "edit"
    with pytest.raises(Exception, match="injected|500"):
        begin(
            refiner(backends, options),
            ACT,
            COUNTRY,
            out=tmp_path,
            rounds=2,
            target=1.0,
            max_drift=2.0,
        )
    (run_dir,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    saved = RunStore(run_dir).load()
    assert saved.status == "failed" and "GeminiError" in saved.error
    assert len(saved.rounds) == 1  # round 0 survived
    world.fail_on = None
    done = refiner(backends, options).resume(run_dir)
    assert done.status == "finished" and done.rounds[0] == saved.rounds[0]
    assert [r.decision for r in done.rounds] == ["initial", "accepted", "rejected"]


def test_input_image_and_edit_from_original(world, backends, options, tmp_path):
    src = tmp_path / "mine.png"
    Image.new("RGB", (64, 48), RED).save(src)
    run = begin(
        refiner(backends, options),
        ACT,
        COUNTRY,
        out=tmp_path / "runs",
        input_image=str(src),
        rounds=2,
        target=1.0,
        max_drift=2.0,
        edit_from="original",
        patience=5,
    )
    assert world.log.count("generate") == 0
    assert run.rounds[0].text == "input image mine.png"
    assert [r.parent for r in run.rounds[1:]] == [0, 0]


def test_python_api_and_store_safety(world, backends, options, tmp_path):
    from refine import Refiner as Exported

    assert Exported is Refiner
    with pytest.raises(ValueError, match="not safe for a file name"):
        RunStore.create(tmp_path, "../escape")
    store = RunStore.create(tmp_path, "a-run")
    with pytest.raises(ValueError, match="outside the run directory"):
        store.save_image("../x.png", Image.new("RGB", (2, 2)))
    assert RunStore.create(tmp_path, "a-run").dir.name == "a-run-2"  # never overwrites


@pytest.mark.slow
def test_reference_images_exag_variant(world, backends, options, tmp_path):
    from refine.evaluate.references import find_references

    ref = tmp_path / "real.png"
    Image.new("RGB", (64, 48), GREY).save(ref)  # the judge says Yes with p = 0.4 on it
    refs = find_references(ACT, COUNTRY).model_copy(update={"reference_images": [str(ref)]})
    run = begin(
        refiner(backends, options),
        ACT,
        COUNTRY,
        out=tmp_path / "runs",
        references=refs,
        rounds=1,
        target=1.0,
        max_drift=2.0,
    )
    r0, r1 = run.rounds[0].best, run.rounds[1].best
    assert r0.scores.variants["exag"] == "exag:ita"
    assert r0.scores.exag == pytest.approx(0.9 - 0.4, abs=1e-6)  # RED: 0.9 vs baseline 0.4
    assert r1.scores.exag == pytest.approx(0.0, abs=1e-6)  # GREEN: 0.3 is below the baseline
    n = len(refs.stereotypes)
    # the baseline is judged once per run; every image is then judged once per candidate,
    # and its quality twice (naturalness, artifacts)
    images_judged = 1 + len(run.rounds[1].candidates)
    assert world.log.count("judge") == n + n * images_judged + 2 * images_judged


def test_review_rewrites_or_stops_and_request_stop(world, backends, options, tmp_path):
    seen = []

    def review(k, instruction, run):
        seen.append((k, instruction, len(run.rounds)))
        if k == 1:
            return "  Replace the hamburgers with a rice platter.  "
        if k == 2:
            return instruction  # unchanged: still the template's
        return None  # round 3: stop here

    r = refiner(backends, options, review=review)
    run = begin(r, ACT, COUNTRY, out=tmp_path, rounds=5, target=1.0, patience=5, max_drift=2.0)
    assert [k for k, _, _ in seen] == [1, 2, 3]
    assert seen[0][2] == 1 and seen[0][1].startswith("Edit this photo")  # the writer's
    r1, r2 = run.rounds[1], run.rounds[2]
    assert (r1.text, r1.instruction_source) == (
        "Replace the hamburgers with a rice platter.",
        "person",  # rewritten in review
    )
    assert (r2.text, r2.instruction_source) == (seen[1][1], "language model")  # as written
    assert len(run.rounds) == 3 and run.stop_reason == "stopped by the user"
    assert run.status == "finished"

    stopper = refiner(backends, options)

    def on_event(event):
        if isinstance(event, RoundDecided) and event.round == 0:
            stopper.request_stop()

    stopper.on_event = on_event
    run = begin(stopper, ACT, COUNTRY, out=tmp_path, rounds=5, target=1.0)
    assert len(run.rounds) == 1 and run.stop_reason == "stopped by the user"
    assert RunStore(tmp_path / run.id).load().stop_reason == "stopped by the user"
    # the next run on the same refiner is not stopped by the old request
    stopper.on_event = lambda event: None
    again = begin(stopper, ACT, COUNTRY, out=tmp_path, rounds=1, target=1.0, max_drift=2.0)
    assert again.stop_reason.startswith("max rounds")


def test_branch_from_an_earlier_round_and_decide_by_hand(world, backends, options, tmp_path):
    r = refiner(backends, options)
    # one candidate per round, seed 43: round 1 edits with seed 1043 (odd): RED -> BLUE
    first = begin(r, ACT, COUNTRY, out=tmp_path, rounds=1, candidates=1, seed=43, max_drift=2.0)
    assert [x.decision for x in first.rounds] == ["initial", "rejected"]
    store = RunStore(tmp_path / first.id)
    assert colour(store, first.rounds[1].best.image) == BLUE and first.best_round == 0
    # accept the rejected blue candidate by hand: it becomes the best image
    decided = Refiner.choose(store.dir, 1, 0)
    assert decided.best_round == 1 and decided.rounds[1].by_hand
    assert decided.rounds[1].reason == "accepted by hand (candidate 0)"
    assert RunStore(store.dir).load() == decided
    undone = Refiner.choose(store.dir, 1, 0, accept=False)
    assert undone.best_round == 0 and undone.rounds[1].decision == "rejected"
    with pytest.raises(ValueError, match="only the last editing round"):
        Refiner.choose(store.dir, 0, 0)
    # roll back to round 0 and continue with two candidates: a new run, the old one intact
    from refine.present.views import parent_text

    before = (store.dir / "run.json").read_text()
    branch = r.branch(store.dir, 0, rounds=1, candidates=2, seed=42, target=1.0)
    assert (store.dir / "run.json").read_text() == before
    # the record keeps what the roll back did: its further rounds and the settings it
    # changed, each beside the run's own
    changes = {"candidates": [2, 1], "seed": [42, 43], "target": [1.0, 0.7]}
    assert branch.id != first.id and branch.branched_from == {
        "run": str(store.dir), "round": 0, "further": 1, "changes": changes
    }  # fmt: skip
    assert parent_text(branch) == (
        f"a new run from round 0 of {store.dir.name}: 1 further round(s), with these changes: "
        "candidates 2 (the run had 1); seed 42 (the run had 43); target 1.0 (the run had 0.7)"
    )
    # a record written before (or a hostile one) says only where it came from
    assert parent_text(branch.model_copy(update={"branched_from": {"run": "x", "round": 0,
                       "further": "9; rm -rf /"}})) == "a new run from round 0 of x"  # fmt: skip
    assert branch.rounds[0] == first.rounds[0] and len(branch.rounds) == 2
    assert branch.rounds[1].decision == "accepted" and branch.rounds[1].parent == 0
    assert colour(RunStore(tmp_path / branch.id), branch.rounds[1].best.image) == GREEN
    assert branch.spec.rounds == 1 and branch.stop_reason.startswith("max rounds")
    with pytest.raises(ValueError, match="round 7 does not exist"):
        r.branch(store.dir, 7)


@pytest.mark.slow
def test_the_language_model_writes_the_instruction_by_default(
    world, backends, options, tmp_path, monkeypatch
):
    """The profile's language model words the planned changes: its request carries every
    change and the keep list, the round records it (source, model, changes); a refused
    call falls back to the template and the round says why; an answer is asked once."""
    monkeypatch.setenv("REFINE_CACHE_DIR", str(tmp_path / "cache"))  # nothing asked before
    options = {**options, "llm": {"max_retries": 0}}  # a refusal is final at once
    run = begin(
        refiner(backends, options),
        ACT,
        COUNTRY,
        out=tmp_path,
        rounds=1,
        candidates=1,
        target=1.0,
        max_drift=2.0,
    )
    r1 = run.rounds[1]
    assert r1.instruction_source == "language model"
    assert r1.instruction_model == "gemini:gemini-3.8-flash" and r1.instruction_note is None
    (asked,) = world.written
    assert [c.item for c in r1.changes][:2] == [
        "oversized hookahs",
        "modern restaurant with neon lights",
    ]
    for c in r1.changes:  # every planned change is in the request, with its kind
        assert f"- {c.kind}; " in asked and c.item in asked
    assert "Keep these, which are right: Large rice platter" in asked
    assert r1.text.startswith("Edit this photo: tone down oversized hookahs, replace modern")
    assert r1.text.endswith("replace hamburgers (with Basket of flatbreads).")
    assert "Replace the hamburgers" not in r1.text  # the model's words, not the template's
    # refused: the template writes it, and the round says why
    world.refuse_writer = 503
    monkeypatch.setenv("REFINE_CACHE_DIR", str(tmp_path / "cache-2"))
    again = begin(
        refiner(backends, options),
        ACT,
        COUNTRY,
        out=tmp_path,
        rounds=1,
        candidates=1,
        target=1.0,
        max_drift=2.0,
        seed=7,
    )
    r1 = again.rounds[1]
    assert r1.instruction_source == "template" and r1.instruction_model is None
    assert r1.instruction_note.startswith("the template wrote it: the language model failed")
    assert "503" in r1.instruction_note and "Replace the hamburgers with" in r1.text
    assert r1.changes  # the changes are recorded either way
    # the first run's answer is kept: the same changes are not asked again
    world.refuse_writer = None
    monkeypatch.setenv("REFINE_CACHE_DIR", str(tmp_path / "cache"))
    begin(
        refiner(backends, options),
        ACT,
        COUNTRY,
        out=tmp_path,
        rounds=1,
        candidates=1,
        target=1.0,
        max_drift=2.0,
    )
    assert len(world.written) == 2
    from refine.present.report.run import render_run

    html = render_run(tmp_path / run.id)
    assert "instruction (language model, gemini:gemini-3.8-flash)" in html
    assert 'class="changes"' in html and "built from" in html


def test_baselines_are_recorded_beside_faith_and_decide_nothing(world, backends, options, tmp_path):
    """--baselines vqascore: every candidate of every round carries VQAScore for the
    generation prompt (the stand-in judge's yes for its colour), and the rounds are decided
    as without it."""
    import math

    from refine.records import RunSpec
    from tests.fakes.gemini_world import YES_LOGPROB

    r = refiner(backends, options)
    plain = begin(r, ACT, COUNTRY, out=tmp_path, rounds=2, target=1.0, max_drift=2.0)
    run = begin(r, ACT, COUNTRY, out=tmp_path, rounds=2, target=1.0, max_drift=2.0,
                baselines=["vqascore"])  # fmt: skip
    assert run.spec.baselines == ["vqascore"]
    assert [x.decision for x in run.rounds] == [x.decision for x in plain.rounds]
    store = RunStore(tmp_path / run.id)
    seen = set()
    for rnd in run.rounds:
        for c in rnd.candidates:
            shown = colour(store, c.image)
            seen.add(shown)
            want = math.exp(YES_LOGPROB[shown])
            assert c.scores.value("vqascore") == pytest.approx(want, abs=1e-9)
    assert RED in seen and len(seen) >= 2  # the first image and its edits
    assert all(c.scores.value("vqascore") is None for x in plain.rounds for c in x.candidates)
    with pytest.raises(ValueError, match="no baseline 'clipscore9'"):
        RunSpec(activity=ACT, country=COUNTRY, baselines=["clipscore9"])
