"""A bench's dry run counts EXAG(ITA)'s sampled answers as the readings take them: a
candidate's on an image k to ITA_STAGES x k, a photo's PHOTO_STAGES x k, where other
readings take agree to k."""

from __future__ import annotations

from types import SimpleNamespace

from refine.evaluate.assess import ITA_STAGES, PHOTO_STAGES
from refine.harness.estimate import bench_estimate
from refine.harness.tasks.bench.plan import BenchPlan, plan_prompts
from refine.profiles import load_profile


def test_exag_ita_answers_are_counted_at_their_stages(monkeypatch):
    pack = SimpleNamespace(reference_images=["a.jpg"] * 5, stereotypes=["camel", "turban", "tent"])
    source = SimpleNamespace(find=lambda act, country: SimpleNamespace(pack=pack))
    monkeypatch.setattr("refine.evaluate.reference_source.ReferenceSource.default", lambda: source)
    plan = BenchPlan(
        generators=["gemini:gemini-3.1-flash-lite-image"],
        prompts=plan_prompts(["Iran"], ["people eating food at home"]),
        images_per_prompt=2,
        profile="gemini",
    )
    est = bench_estimate(plan, load_profile("gemini"))
    k, agree = est.samples, est.agree
    assert (k, agree) == (8, 2)
    # per image 2 quality answers and the baselines' one each (the rest of the judge's
    # readings), 3 candidates; 5 photos x 3 candidates once
    ita_images, ita_photos = 2 * 3, 5 * 3
    other = est.calls["judge"] - ita_images - ita_photos
    assert other > 0
    most = other * k + (ita_images * ITA_STAGES + ita_photos * PHOTO_STAGES) * k
    least = other * agree + (ita_images + ita_photos * PHOTO_STAGES) * k
    assert est.sampled["judge"] == most and est.least("judge") == least
    (batch,) = [line for line in est.lines() if "as batch jobs" in line]
    assert f"an EXAG(ITA) candidate's up to {ITA_STAGES * k}" in batch
