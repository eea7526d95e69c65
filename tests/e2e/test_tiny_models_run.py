"""One refinement run end to end on local models: a tiny Stable Diffusion generates, a
tiny InstructPix2Pix edits, a tiny Qwen2.5-VL observes (taught one answer) and judges,
MiniLM scores and a tiny SigLIP measures drift. Every call goes through the real
backends; the assertions recompute the recorded numbers from the saved images."""

from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image

from metrics.ahead import score_images
from metrics.descriptors import DIMENSIONS
from refine.assets import prompt_template
from refine.backends.structured import observation_prompt
from refine.io.store import RunStore
from refine.loop.refiner import Refiner
from tests.fakes.tiny_models import build_tiny_qwen_vl, build_tiny_sd, teach
from tests.runs import begin

ACT, COUNTRY = "people eating food at home", "Iran"
SEEN = {
    "setting": ["Persian rug on floor", "modern restaurant with neon lights"],
    "objects": ["Large rice platter", "hamburgers"],
    "attire": ["Casual modern attire"],
    "interaction": ["Sharing communal dishes"],
    "spatial": [],
}


@pytest.fixture(scope="module")
def local_refiner(tmp_path_factory, siglip_path):
    root = tmp_path_factory.mktemp("tiny-local")
    sd, ip2p, vl = build_tiny_sd(root, 4), build_tiny_sd(root, 8), build_tiny_qwen_vl(root)
    names = {
        "generator": f"diffusers:{sd}",
        "editor": f"diffusers:{ip2p}",
        "observer": f"hf:{vl}",
        "judge": f"hf:{vl}",
        "text_embedder": "st:all-MiniLM-L6-v2",
        "image_embedder": f"siglip:{siglip_path}",
    }
    cpu = {"device": "cpu"}
    options = {
        "generator": {**cpu, "steps": 2, "width": 64, "height": 64},
        "editor": {**cpu, "steps": 2},
        "observer": {**cpu, "max_new_tokens": 400},
        "judge": cpu,
        "text_embedder": cpu,
        "image_embedder": cpu,
    }
    refiner = Refiner("local-gpu", backends=names, backend_options=options)
    # teach the observer one answer on images of the kind the tiny pipelines make
    gen, edit = refiner.backends.get("generator"), refiner.backends.get("editor")
    prompt = prompt_template("generate").strip().format(activity=ACT, country=COUNTRY)
    made = gen.generate(prompt, [42, 7, 8])
    made += edit.edit(made[0], "Remove the hamburgers", [1042, 1043, 9])
    made += edit.edit(made[3], "Add a sofreh", [2042, 2043])
    rng = np.random.default_rng(0)
    made += [Image.fromarray((rng.random((64, 64, 3)) * 255).astype("uint8")) for _ in range(2)]
    prompt = observation_prompt(list(DIMENSIONS), 10)
    # teach raises unless greedy generation writes SEEN for each of the images
    teach(
        refiner.backends.get("observer"), prompt, json.dumps(SEEN), images=made, keep="tiny-local"
    )
    return refiner


@pytest.mark.slow
def test_run_on_tiny_local_models(local_refiner, tmp_path):
    from refine.events import StepDone
    from refine.progress import RunProgress

    refiner = local_refiner
    events, tracker, seen = [], RunProgress(), []

    def watch(event):
        events.append(event)
        tracker.see(event)
        seen.append(tracker.fraction())

    refiner.on_event = watch
    try:
        run = begin(
            refiner,
            ACT,
            COUNTRY,
            out=tmp_path,
            rounds=2,
            candidates=2,
            target=1.0,
            patience=3,
            max_drift=2.0,
        )
    finally:
        refiner.on_event = lambda e: None
    store = RunStore(tmp_path / run.id)
    assert run.status == "finished", run.error
    # the pipelines' step callbacks reach the loop's events: 2 steps to generate and 2 to
    # edit both candidates (one batched call each); the progress only ever moves forward
    steps = [(e.round, e.stage, e.step, e.total) for e in events if isinstance(e, StepDone)]
    edits = [(k, "edit", s, 2) for k in (1, 2) for s in (1, 2)]
    assert steps == [(0, "generate", 1, 2), (0, "generate", 2, 2), *edits]
    assert seen == sorted(seen) and seen[-1] == 1.0
    assert run.stop_reason == "max rounds: 2 editing round(s) done" and len(run.rounds) == 3
    assert run.backend_ids["generator"].startswith("diffusers:")
    assert run.backend_ids["observer"].startswith("hf:")
    assert run.backend_ids["judge"].startswith("hf:")
    # each backend's own account of itself: pipeline, dtype, device
    info = run.backend_info
    assert info["generator"]["pipeline"] == type(refiner.backends.get("generator").pipe).__name__
    assert info["observer"]["device"] == "cpu" and info["observer"]["dtype"] == "float32"
    assert info["text_embedder"]["id"] == "st:all-MiniLM-L6-v2"
    refs = run.references
    expected = score_images(refs.descriptors, [SEEN], refiner.backends.get("text_embedder"))[0]
    judge = refiner.backends.get("judge")
    generation = prompt_template("generate").format(activity=refs.activity, country=refs.country)
    rubric = prompt_template("exag_mllm").format(prompt=generation.strip(), country=refs.country)
    for r in run.rounds:
        for c in r.candidates:
            image = store.load_image(c.image)
            assert image.size == (64, 64)
            # the taught observer saw what it was taught, through real generation
            assert c.observed == SEEN
            assert c.scores.align == pytest.approx(expected.align, abs=1e-6)
            assert c.scores.hal == pytest.approx(expected.hal, abs=1e-6)
            # EXAG (exag:mllm) is the judge's expected rating of the saved image at the
            # digit after "score is", rescaled
            assert c.scores.variants["exag"] == "exag:mllm"
            rating = judge.rate_prefixed([image], [rubric], "score is ")[0]
            assert c.scores.exag == pytest.approx((rating.expectation - 1) / 4, abs=1e-4)
            # quality: the lower of the judge's expected 0-10 ratings of the saved image
            nat, art = (
                judge.rate_scale([image], [prompt_template(q)], 0, 10)[0].expectation
                for q in ("quality_naturalness", "quality_artifacts")
            )
            assert c.scores.quality == pytest.approx(min(nat, art) / 10, abs=1e-4)
            assert c.scores.quality_reading.method == "logprobs"
            assert c.scores.value("clip_iqa") is None  # the image embedder is SigLIP, not CLIP
            assert c.scores.faith == pytest.approx(
                (c.scores.align + 1 - c.scores.hal + 1 - c.scores.exag) / 3
            )
    for r in run.rounds[1:]:
        parent = run.rounds[r.parent]
        before = np.asarray(store.load_image(parent.best.image), dtype=np.int16)
        for c in r.candidates:
            after = np.asarray(store.load_image(c.image), dtype=np.int16)
            assert np.abs(after - before).mean() > 1.0  # the editor changed the image
            assert -1.0 <= c.drift.ssim <= 1.0 and c.drift.embedder.startswith("siglip:")
        gain = r.best.scores.faith - parent.best.scores.faith
        assert (r.decision == "accepted") == (gain >= run.spec.margin)
        # the most faithful; among candidates within the margin of it (the same FAITH as
        # far as the loop can tell), the better looking
        faiths = [c.scores.faith for c in r.candidates]
        tied = [j for j, f in enumerate(faiths) if f >= max(faiths) - run.spec.margin]
        assert r.chosen in tied
        assert r.candidates[r.chosen].scores.quality == max(
            r.candidates[j].scores.quality for j in tied
        )
        assert [c.seed for c in r.candidates] == [42 + 1000 * r.index, 43 + 1000 * r.index]
        assert {"edit", "observe", "score", "judge", "drift"} <= set(r.timings)
    best = max(
        (r for r in run.rounds if r.decision != "rejected"), key=lambda r: r.best.scores.faith
    )
    assert run.best_round == best.index
