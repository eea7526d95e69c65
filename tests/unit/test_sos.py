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
