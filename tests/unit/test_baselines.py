"""The judge baselines' arithmetic and names, by hand."""

from __future__ import annotations

import math

import pytest

from metrics.baselines import (
    CLIPSCORE100_W,
    JudgeRating,
    TifaAnswer,
    clipscore,
    clipscore_of,
    judge_align_of,
    judge_hal_of,
    rating_to_unit,
    soft_tifa_of,
    tifa,
    tifa_of,
    vie_overall,
    vie_overall_of,
    vie_sc_of,
)
from metrics.judge import Reading
from refine.evaluate.baselines import BASELINES, parse_baselines


def test_a_rating_maps_to_the_unit_scale():
    assert rating_to_unit(1.0) == (0.0, None) and rating_to_unit(5.0) == (1.0, None)
    assert rating_to_unit(3.4, 0.2) == (pytest.approx(0.6), pytest.approx(0.05))
    with pytest.raises(ValueError, match=r"must lie in \[1, 5\], got 0.5"):
        rating_to_unit(0.5)


def test_each_baseline_reads_its_own_rating():
    rows = [
        {"judge_align": JudgeRating(4.2), "judge_hal": JudgeRating(1.8, 0.4, "sampled k=8")},
        None,
    ]
    align, none = judge_align_of(rows)
    hal, _ = judge_hal_of(rows)
    assert align.value == pytest.approx(0.8) and align.reading == Reading()
    assert hal.value == pytest.approx(0.2) and hal.reading == Reading("sampled", 8, 0.1)
    assert none.value is None and none.note == "not asked for (--baselines)"


def test_baselines_are_named_or_refused():
    assert parse_baselines("none") == () and parse_baselines("") == ()
    assert parse_baselines("all") == BASELINES
    assert BASELINES[:5] == ("clipscore", "pickscore", "hpsv2", "cure", "caire_probe")
    assert BASELINES[5:9] == ("imagereward", "vqascore", "judge_align", "judge_hal")
    assert BASELINES[9:13] == ("vie_sc", "vie_overall", "tifa", "soft_tifa")
    assert parse_baselines(" judge_hal, vqascore ,judge_hal") == ("judge_hal", "vqascore")
    with pytest.raises(ValueError, match="no baseline 'tifa2'; baselines: clipscore, pickscore"):
        parse_baselines("vqascore,tifa2")


def test_viescore_sc_and_overall_by_hand():
    (sc,) = vie_sc_of([{"vie_sc": JudgeRating(7.5, 0.5, "sampled k=4")}])
    assert sc.value == pytest.approx(0.75) and sc.reading == Reading("sampled", 4, 0.05)
    # O = sqrt(SC x PQ): VIEScore's sqrt(7.5 x 6) / 10 on its 0-10 scale
    assert vie_overall(0.75, 0.6) == pytest.approx(math.sqrt(7.5 * 6) / 10)
    got = vie_overall_of([{"vie_sc": 0.75, "quality": 0.6}, {"quality": 0.6}, {"vie_sc": 0.5}])
    assert got[0].value == pytest.approx(math.sqrt(0.45))
    assert got[1].note == "needs vie_sc (--baselines vie_sc)"
    assert got[2].note.startswith("needs the quality reading")
    with pytest.raises(ValueError, match="SC must lie in"):
        vie_overall(1.5, 0.2)


def test_the_assessor_scores_the_baselines_asked_for(fixed_embedder):
    """VIEScore's SC from the judge's 0-10 rating of assets/prompts/vie_sc.txt, its
    overall score with the quality reading, the judge ALIGN and HAL from the ratings
    answered as "score is N"; nothing asked, nothing computed."""
    from PIL import Image

    from refine.evaluate.assess import Assessor
    from tests.unit.test_assess import ClipEmbedder, QualityJudge, assessor, refs

    class Judge(QualityJudge):
        def rate_scale(self, images, prompts, low, high):
            if "follows the prompt" in prompts[0]:
                self.scaled += [("vie", low, high)] * len(images)
                dist = [0.0] * 11
                dist[8], dist[9], dist[10] = 0.25, 0.5, 0.25  # E = 9
                return [
                    type(r)(tuple(dist), low=low)
                    for r in super().rate_scale(images, prompts, low, high)
                ]
            return super().rate_scale(images, prompts, low, high)

    a, judge = assessor(fixed_embedder, Judge(), ClipEmbedder())
    asked = Assessor(a.backends, compare=("vie_overall", "judge_hal"))
    image = Image.new("RGB", (8, 8), (200, 0, 0))
    scores = asked.assess(image, refs()).scores
    assert scores.value("vie_sc") == pytest.approx(0.9)  # asked through vie_overall
    assert scores.value("quality") == pytest.approx(0.6)  # min(8, 6) / 10
    assert scores.value("vie_overall") == pytest.approx(math.sqrt(0.9 * 0.6))
    assert scores.value("judge_hal") == pytest.approx(0.5)  # the stand-in rates 3: (3 - 1) / 4
    assert scores.value("judge_align") is None and scores.value("vqascore") is None
    plain = a.assess(image, refs()).scores
    assert plain.value("vie_sc") is None and plain.value("vie_overall") is None
    with pytest.raises(ValueError, match="no baseline"):
        Assessor(a.backends, compare=("tifa3",))


def test_tifa_and_soft_tifa_by_hand():
    answers = [
        TifaAnswer("Are there people?", 0.9),
        TifaAnswer("Are they eating?", 0.5),  # not above one half: answered no
        TifaAnswer("Is it a home?", 0.2),
        TifaAnswer("Is there food?", 0.6),
    ]
    assert [a.yes for a in answers] == [True, False, False, True]
    (t,), (soft,) = tifa_of([answers]), soft_tifa_of([answers])
    assert t.value == 0.5 and soft.value == pytest.approx((0.9 + 0.5 + 0.2 + 0.6) / 4)
    assert t.reading == Reading()
    (none,) = tifa_of([None])
    assert none.value is None and none.note == "not asked for (--baselines)"
    sampled = [TifaAnswer("Q?", 0.75, mode="sampled k=4")]
    assert soft_tifa_of([sampled])[0].reading == Reading("sampled", 4)
    with pytest.raises(ValueError, match="at least one question"):
        tifa([])


def test_tifa_questions_are_cleaned_and_kept_per_prompt(tmp_path):
    """Blank and repeated questions dropped, each ending in "?", at most TIFA_QUESTIONS;
    the model asked once per prompt (a second assessor reads the kept answer)."""
    from refine.evaluate.baselines import TIFA_QUESTIONS, tifa_questions
    from refine.evaluate.refs_build import LLMCache

    class Model:
        id = "stand-in"

        def __init__(self, questions):
            self.asked, self.questions = [], questions

        def complete_json(self, prompt, schema):
            self.asked.append(prompt)
            return schema.model_validate({"questions": self.questions})

    many = [{"question": f"Is there object {k}"} for k in range(TIFA_QUESTIONS + 3)]
    model = Model([{"question": "  "}, {"question": "Is there food?", "element": " food "},
                   {"question": "is there  FOOD?"}, *many])  # fmt: skip
    cache = LLMCache(tmp_path)
    got = tifa_questions(model, "A photo of food.", cache)
    assert got[0].question == "Is there food?" and got[0].element == "food"
    assert got[1].question == "Is there object 0?"
    assert len(got) == TIFA_QUESTIONS
    assert 'Text: "A photo of food."' in model.asked[0]
    assert tifa_questions(model, "A photo of food.", LLMCache(tmp_path)) == got
    assert len(model.asked) == 1
    tifa_questions(model, "A photo of rice.", cache)
    assert len(model.asked) == 2
    with pytest.raises(ValueError, match="wrote no TIFA questions about 'A photo.'"):
        tifa_questions(Model([]), "A photo.", cache)


def test_clipscore_clamps_and_scales_by_hand():
    assert clipscore(0.4) == pytest.approx(1.0)  # Hessel: 2.5 x 0.4
    assert clipscore(-0.3) == 0.0  # clamped at zero
    assert clipscore(0.4, CLIPSCORE100_W) == pytest.approx(40.0)  # torchmetrics' scale
    got = clipscore_of([[1.0, 0.0], [0.0, 1.0]], [[0.6, 0.8], [0.6, -0.8]])
    assert got == pytest.approx([1.5, 0.0])
    with pytest.raises(ValueError, match="lies in"):
        clipscore(1.5)


def test_the_assessor_scores_clipscore_on_a_clip_only(fixed_embedder):
    """CLIPScore of the generation prompt from the image embedder's own embeddings; an
    embedder that is no CLIP gives none, and says so."""
    from PIL import Image

    from refine.evaluate.assess import Assessor
    from tests.unit.test_assess import ClipEmbedder, ImageEmbedder, assessor, refs

    class PromptClip(ClipEmbedder):
        def encode_texts(self, texts):
            import torch

            self.asked = getattr(self, "asked", []) + list(texts)
            return torch.tensor([[0.6, 0.8]] * len(texts))

    a, _ = assessor(fixed_embedder, image_embedder=PromptClip())
    asked = Assessor(a.backends, compare=("clipscore",))
    red, dark = Image.new("RGB", (8, 8), (200, 0, 0)), Image.new("RGB", (8, 8), (10, 0, 0))
    out = asked.assess_many([red, dark], refs())
    # red (1, 0) . (0.6, 0.8) = 0.6; dark (0.6, 0.8) . (0.6, 0.8) = 1
    assert [x.scores.value("clipscore") for x in out] == pytest.approx([1.5, 2.5])
    clip = a.backends.get("image_embedder")
    prompt = "A photorealistic photo of people eating food at home in Iran."
    assert prompt in clip.asked and clip.asked.count(prompt) == 1  # once for the batch
    assert a.assess(red, refs()).scores.notes["clipscore"] == "not asked for (--baselines)"
    b, _ = assessor(fixed_embedder, image_embedder=ImageEmbedder())
    scores = Assessor(b.backends, compare=("clipscore",)).assess(red, refs()).scores
    assert scores.value("clipscore") is None
    assert scores.notes["clipscore"].startswith("CLIPScore needs a CLIP image embedder")
