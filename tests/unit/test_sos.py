"""Surface-over-Semantics on hand-built embeddings."""

from __future__ import annotations

import math

import numpy as np
import pytest

from metrics.sos import SosBank, mean_by_pair, sos_scores


def test_image_at_semantic_centroid_orthogonal_to_surface_scores_one():
    bank = SosBank(["iran"], ["fa"], np.array([[1.0, 0.0]]), np.array([[0.0, 1.0]]))
    assert bank.score(np.array([[2.0, 0.0]]), ["iran"], ["fa"]) == pytest.approx([1.0])
    # and at the surface centroid, orthogonal to the semantic one: -1
    assert bank.score(np.array([[0.0, 3.0]]), ["iran"], ["fa"]) == pytest.approx([-1.0])


def test_hand_computed_two_cultures_two_languages():
    # culture A images point along x, culture B along y; language "zz" adds a z tilt
    e = np.array(
        [
            [1.0, 0.0, 0.0],  # A, en
            [1.0, 0.0, 1.0],  # A, zz
            [0.0, 1.0, 0.0],  # B, en
            [0.0, 1.0, 1.0],  # B, zz
        ]
    )
    cultures = ["A", "A", "B", "B"]
    languages = ["en", "zz", "en", "zz"]
    per_image, pairs, bank = sos_scores(e, cultures, languages)
    en = e / np.linalg.norm(e, axis=1, keepdims=True)
    sem = {"A": en[:2].mean(0), "B": en[2:].mean(0)}
    surf = {"en": en[[0, 2]].mean(0), "zz": en[[1, 3]].mean(0)}

    def cos(a, b):
        return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))

    expected = [
        cos(sem[c], x) - cos(surf[lang], x)
        for x, c, lang in zip(en, cultures, languages, strict=True)
    ]
    assert per_image == pytest.approx(expected)
    # a concrete value: image 0 (A, en) = cos(sem_A, e0) - cos(surf_en, e0)
    s_a = np.array([1 + 1 / math.sqrt(2), 0, 1 / math.sqrt(2)]) / 2
    s_en = np.array([0.5, 0.5, 0.0])
    assert per_image[0] == pytest.approx(cos(s_a, en[0]) - cos(s_en, en[0]))
    assert pairs == {
        (c, lang): pytest.approx(v)
        for c, lang, v in zip(cultures, languages, expected, strict=True)
    }
    assert bank.cultures == ["A", "B"] and bank.languages == ["en", "zz"]


def test_mean_by_pair():
    assert mean_by_pair([1.0, 3.0, 5.0], ["a", "a", "b"], ["x", "x", "x"]) == {
        ("a", "x"): 2.0,
        ("b", "x"): 5.0,
    }


def test_bank_round_trip_and_reuse(tmp_path):
    rng = np.random.default_rng(3)
    e = rng.normal(size=(12, 5))
    cultures = ["c1", "c2", "c3"] * 4
    languages = ["en"] * 6 + ["ja"] * 6
    per_image, _, bank = sos_scores(e, cultures, languages)
    path = tmp_path / "bank.npz"
    bank.save(path)
    loaded = SosBank.load(path)
    assert loaded.cultures == bank.cultures and loaded.languages == bank.languages
    new = rng.normal(size=(3, 5))
    np.testing.assert_allclose(
        loaded.score(new, ["c1", "c2", "c3"], ["ja", "en", "ja"]),
        bank.score(new, ["c1", "c2", "c3"], ["ja", "en", "ja"]),
    )
    # scoring the bank's own images with the loaded bank reproduces the scores
    np.testing.assert_allclose(loaded.score(e, cultures, languages), per_image)


def test_bank_rejects_unknown_labels_and_dimension_mismatch():
    bank = SosBank(["iran"], ["fa"], np.array([[1.0, 0.0]]), np.array([[0.0, 1.0]]))
    with pytest.raises(ValueError, match="culture 'peru' is not in the bank"):
        bank.score(np.array([[1.0, 0.0]]), ["peru"], ["fa"])
    with pytest.raises(ValueError, match="language 'de'"):
        bank.score(np.array([[1.0, 0.0]]), ["iran"], ["de"])
    with pytest.raises(ValueError, match="dimensions"):
        bank.score(np.array([[1.0, 0.0, 0.0]]), ["iran"], ["fa"])
    with pytest.raises(ValueError, match="label rows"):
        SosBank.build(np.eye(2), ["a"], ["x"])


def test_caption_classifier_labels_and_their_agreement_by_hand():
    """SoS Sec. 4.2: the caption with the higher CLIPScore (2.5 x max(cos, 0)) names the
    tendency; both cosines at or below 0 clamp to a tie (no label). SoS's own label is its
    sign. Agreement and precision as Tab. 2 reports them."""
    from metrics.sos import caption_label, label_agreement, sos_label

    assert caption_label(0.31, 0.29) == "semantic"  # 0.775 against 0.725
    assert caption_label(0.10, 0.12) == "surface"
    assert caption_label(-0.2, -0.1) is None  # both clamp to 0
    assert caption_label(0.0, -0.3) is None
    assert caption_label(0.01, -0.3) == "semantic"
    assert [sos_label(v) for v in (0.02, -0.01, 0.0)] == ["semantic", "surface", None]
    got = label_agreement(
        ["surface", "surface", "semantic", None, "semantic", "surface"],
        ["surface", "semantic", "semantic", "surface", None, "surface"],
    )
    # counted where both label: pairs 1, 2, 3 and 6; equal on 1, 3 and 6
    assert got == {
        "n": 4,
        "accuracy": 3 / 4,
        "precision_surface": 2 / 3,
        "precision_semantic": 1.0,
    }
    assert label_agreement([None], ["surface"])["accuracy"] is None
    with pytest.raises(ValueError, match="2 labels against 1"):
        label_agreement(["surface", None], ["surface"])


def test_caption_pairs_and_the_surface_cultures_file(tmp_path):
    from refine.evaluate.sos_captions import captions, parse_classifiers, surface_cultures

    table = surface_cultures()
    assert captions("person", "Nigerian", "fr", table) == (
        "A photo of a Nigerian person",
        "A photo of a French person",
    )
    assert captions("person", "Japanese", "ja", table) is None  # its own language
    assert captions("people eating food at home", "Iran", "en", table) == (
        "A photo of people eating food at home in Iran",
        "A photo of people eating food at home in USA",
    )
    assert captions("person", "Nigerian", "xx", table) is None
    assert parse_classifiers("all") == ("clipscore", "mclip")
    with pytest.raises(ValueError, match="no caption classifier 'clip'"):
        parse_classifiers("clip")
    mine = tmp_path / "s.json"
    mine.write_text('{"languages": {"en": {"identity": "British", "country": "UK"}}}')
    assert captions("person", "Nigerian", "en", surface_cultures(mine))[1] == (
        "A photo of a British person"
    )
    mine.write_text('{"en": "British"}')
    with pytest.raises(ValueError, match="not a surface-cultures file"):
        surface_cultures(mine)
