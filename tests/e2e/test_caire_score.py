"""CAIRE scoring: through the CLI with the real Gemini judge backend on the fake server
(with a KB and KB-free), and the 1-5 path on a tiny random Qwen2.5-VL."""

from __future__ import annotations

import json

import pytest

from metrics.caire import diversity
from refine.backends import create
from refine.evaluate.caire.kb import KnowledgeBase
from refine.evaluate.caire.scorer import CaireScorer
from tests.fakes.gemini_world import CULTURE, rating_distribution
from tests.integration.test_caire_kb import BLUE, GREEN, RED, TEA_TEXT, draw, run

LABELS = ["Iran", "Turkey", "India"]


def images(tmp_path):
    paths = []
    for name, colour in (("red.png", RED), ("green.png", GREEN)):
        draw(colour, 6).save(tmp_path / name)
        paths.append(tmp_path / name)
    return paths


def test_score_with_a_kb_through_the_cli(capsys, world, kb_dir, tmp_path):
    red, green = images(tmp_path)
    scores = tmp_path / "scores.json"
    code, out, err = run(
        capsys,
        "caire",
        "score",
        red,
        green,
        "--labels",
        "Iran, Turkey,India",
        "--kb",
        kb_dir,
        "--top-k",
        "3",
        "--ranking",
        "frequency",
        "--text-chars",
        "120",
        "--out",
        scores,
        "--json",
    )
    assert code == 0, err
    doc = json.loads(out)
    assert doc["labels"] == LABELS and doc["mode"] == "kb"
    # the world's judge peaks at CULTURE[colour][label]; the score is that argmax
    assert doc["scores"] == [[CULTURE[RED][x] for x in LABELS], [CULTURE[GREEN][x] for x in LABELS]]
    first = doc["images"][0]
    assert first["entity"]["name"] == "tea" and first["entity"]["hits"] == 3
    assert first["mode"] == "kb" and first["ranking"] == "frequency"
    turkey = first["labels"][1]
    assert turkey["probabilities"] == pytest.approx(rating_distribution(4), abs=1e-6)
    expected = sum((k + 1) * p for k, p in enumerate(rating_distribution(4)))
    assert turkey["expected"] == pytest.approx(expected, abs=1e-6)
    # the judge saw the linked entity's text, cut to 120 characters, with each label
    red_prompts = world.prompts[:3]
    assert all("What the image shows may be tea" in p for p in red_prompts)
    assert TEA_TEXT[:40] in red_prompts[0] and TEA_TEXT[:400] not in red_prompts[0]
    assert first["knowledge"].startswith("a drink. Tea in Iran") and len(first["knowledge"]) < 140
    # (the labels of one image are judged at once: in any order)
    asked = [p.split("reflect the culture of ")[1].split("?")[0] for p in red_prompts]
    assert sorted(asked) == sorted(LABELS)
    # the green image links to no green entity (none in this KB): still a nearest entity
    assert doc["images"][1]["entity"]["name"] in ("tea", "rice")
    hand = diversity(LABELS, doc["scores"])
    assert doc["diversity"]["js_mean"] == pytest.approx(hand["js_mean"])
    assert doc["diversity"]["covered_labels"] == hand["covered_labels"]
    assert json.loads(scores.read_text())["scores"] == doc["scores"]
    code, out, _ = run(capsys, "metrics", "caire-diversity", "--scores", scores, "--json")
    summary = json.loads(out)
    assert summary["coverage"] == pytest.approx(2 / 3)  # Turkey (red) and Iran (green)
    assert summary["mean_per_label"] == pytest.approx({"Iran": 3.5, "Turkey": 3.0, "India": 1.0})
    assert summary["js_mean"] == pytest.approx(diversity(LABELS, doc["scores"])["js_mean"])
    code, out, _ = run(capsys, "metrics", "caire-diversity", "--scores", scores)
    assert "coverage (labels some image rates 4+): 0.67 (Iran, Turkey)" in out


def test_kb_free_mode_is_named_and_sends_no_knowledge(capsys, world, tmp_path):
    red, green = images(tmp_path)
    code, out, err = run(capsys, "caire", "score", red, green, "--labels", "Iran,Turkey")
    assert code == 0, err
    assert "mode: kb-free" in out and "kb-free (no knowledge base)" in err
    assert "Iran    2  ##" in out and "Turkey  4  ####" in out
    assert world.prompts and not any("What the image shows" in p for p in world.prompts)
    code, out, _ = run(capsys, "caire", "score", red, "--labels", "Iran", "--json")
    assert json.loads(out)["images"][0]["mode"] == "kb-free"


def test_bad_inputs_name_what_to_fix(capsys, world, kb_dir, tmp_path):
    red, _ = images(tmp_path)
    code, _, err = run(capsys, "caire", "score", red, "--labels", " , ")
    assert code == 2 and "--labels: no culture labels" in err
    code, _, err = run(capsys, "caire", "score", red, "--labels", "Iran,iran")
    assert code == 2 and "labels given twice" in err
    code, _, err = run(
        capsys,
        "caire",
        "score",
        red,
        "--labels",
        "Iran",
        "--kb",
        kb_dir,
        "--embedder",
        "clip:ViT-B-32/openai",
    )
    assert code == 2 and "was built with the image embedder" in err
    code, _, err = run(capsys, "caire", "score", tmp_path / "no.png", "--labels", "Iran")
    assert code == 2 and "no.png: image not found" in err
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"labels": ["a", "b"], "scores": [[1, 2], [3, 9]]}))
    code, _, err = run(capsys, "metrics", "caire-diversity", "--scores", bad)
    assert code == 2 and "scores[1] holds 9; scores lie in 1..5" in err


def test_the_1_to_5_path_on_a_tiny_vlm(tmp_path, siglip_path, kb_dir):
    from tests.fakes.tiny_models import build_tiny_qwen_vl
    from tests.integration.test_hf_models import manual_answer_probs

    vl = build_tiny_qwen_vl(tmp_path)
    judge = create("judge", f"hf:{vl}", shared=False, device="cpu", batch_size=1)
    embedder = create("image_embedder", f"siglip:{siglip_path}", shared=False, device="cpu")
    scorer = CaireScorer(judge, KnowledgeBase.load(kb_dir), embedder, top_k=3, text_chars=80)
    image = draw(BLUE, 6)
    (result,) = scorer.score([image], ["Iran", "Turkey"])
    assert result.entity["name"] == "rice" and result.mode == "kb"
    for s in result.labels:
        prompt = scorer.prompt(s.label, "rice", result.knowledge)
        assert "may be rice" in prompt and f"culture of {s.label}?" in prompt
        direct = manual_answer_probs(vl, image, prompt, list("12345"))
        assert s.probabilities == pytest.approx(direct, abs=1e-5)
        assert s.score == 1 + max(range(5), key=lambda k: direct[k])
        assert s.expected == pytest.approx(sum((k + 1) * p for k, p in enumerate(direct)))


def test_no_api_key_is_one_line_not_a_traceback(tmp_path):
    import os
    import subprocess

    from tests.e2e.test_cli_run import refine_cmd

    red, _ = images(tmp_path)
    env = {k: v for k, v in os.environ.items() if k not in ("GEMINI_API_KEY", "GOOGLE_API_KEY")}
    done = subprocess.run(
        refine_cmd("caire", "score", str(red), "--labels", "Iran,Turkey"),
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1
    assert "error: GeminiError: no Gemini API key: set GEMINI_API_KEY" in done.stderr
    assert "Traceback" not in done.stderr
