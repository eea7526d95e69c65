"""A rating study on a folder of images: profile and qualification before any rating,
balanced assignment, attention checks and repeated items, flags, and refine agree reading
the study's answers (and leaving flagged raters out)."""

from __future__ import annotations

import json

import pytest
from PIL import Image

from refine.human.agree import agreement, load_ratings
from refine.human.study import Study, culture_options

JAPAN = {
    "born": "Japan",
    "raised": "Japan",
    "residence": "Japan",
    "nationality": "Japan",
    "languages": "Japanese",
    "age_band": "25-34",
    "consent": True,
}
PROTOCOL = """
name = "mine"
title = "A small study"
raters_per_image = 1

[qualify]
country = [["raised"]]
text = "Raters raised in the country shown."

[attention]
every = 2
text = "Select 1."
answers = { score = "1" }

[repeats]
count = 1
tolerance = 1

[flag]
failed_checks = 0
inconsistent = 0

[[questions]]
id = "score"
text = "How well does it show {activity}?"
options = [{ value = "1", score = 1 }, { value = "3", score = 3 }, { value = "5", score = 5 }]
"""


def bench_like(folder, countries=("Japan", "Japan", "Japan", "Japan", "Iran")):
    """A folder whose cells.jsonl names each image's activity and country."""
    folder.mkdir()
    lines = []
    for k, country in enumerate(countries):
        name = f"im{k}.png"
        Image.new("RGB", (16, 16), (40 * k, 100, 200)).save(folder / name)
        lines.append(
            json.dumps(
                {
                    "prompt": f"A photo of tea in {country}",
                    "activity": "drinking tea",
                    "country": country,
                    "images": [{"file": name}],
                }
            )
        )
    (folder / "cells.jsonl").write_text("\n".join(lines) + "\n")
    return folder


def answer(study, rater, value):
    slot, _, _ = study.next_for(rater)
    return slot, study.record(rater, slot.item.image, slot.kind, {"score": value})


def test_a_study_from_profile_to_flags_and_agreement(tmp_path):
    folder = bench_like(tmp_path / "set")
    proto = tmp_path / "mine.toml"
    proto.write_text(PROTOCOL)
    study = Study.open(folder, proto, seed=3)
    with pytest.raises(ValueError, match="give your profile and consent first"):
        study.next_for("ana")
    study.give_profile("ana", JAPAN)
    study.give_profile("ben", JAPAN)
    study.give_profile("cem", {**JAPAN, "raised": "Turkey"})
    assert study.qualification("cem") == (
        False,
        "you do not qualify for this set: Raters raised in the country shown.",
    )
    with pytest.raises(ValueError, match="you do not qualify"):
        study.next_for("cem")
    assert study.qualification("ana") == (True, "you qualify for the images of Japan")
    with pytest.raises(ValueError, match="gave a profile for this set already"):
        study.give_profile("ana", {**JAPAN, "age_band": "65+"})
    # ana: two images, then the check (failed), then the next image
    seen = []
    for _ in range(2):
        slot, row = answer(study, "ana", "5")
        assert slot.kind == "rate" and slot.item.country == "Japan"
        seen.append(slot.item.image)
    slot, row = answer(study, "ana", "5")
    assert slot.kind == "attention" and row["passed"] is False
    assert slot.item.image == ".attention/mine.png" and (folder / slot.item.image).is_file()
    # ben meanwhile gets the Japanese images nobody has rated (one rater an image)
    slot, _ = answer(study, "ben", "3")
    assert slot.kind == "rate" and slot.item.image not in seen
    rest = {f"im{k}.png" for k in range(4)} - set(seen) - {slot.item.image}
    slot, _ = answer(study, "ana", "1")
    assert slot.item.image in rest  # the last one left
    # every image has its rater: ana's repeat comes (one of her images), answered
    # differently by more than the tolerance
    slot, _, _ = study.next_for("ana")
    assert slot.kind == "repeat" and slot.item.image in [*seen, *rest]
    first = next(
        r["answers"]["score"]
        for r in study.rows()
        if r["rater"] == "ana" and r["image"] == slot.item.image and r["kind"] == "rate"
    )
    study.record("ana", slot.item.image, "repeat", {"score": "1" if first == "5" else "5"})
    assert study.next_for("ana")[0] is None
    with pytest.raises(ValueError, match="is not the image you are shown now"):
        slot, _, _ = study.next_for("ben")
        study.record("ben", "im4.png", "rate", {"score": "3"})  # Iran: not ben's
    flags = study.flags()
    assert flags["ana"] == {
        "checks": 1,
        "failed_checks": 1,
        "repeats": 1,
        "inconsistent": 1,
        "flagged": True,
    }
    assert flags["ben"]["flagged"] is False
    # agree reads the scored answers; checks and repeats are not ratings
    rated = load_ratings(folder / "ratings.jsonl")
    assert sorted((r.rater, r.answers["score"]) for r in rated) == [
        ("ana", 1.0),
        ("ana", 5.0),
        ("ana", 5.0),
        ("ben", 3.0),
    ]
    excluded = []
    kept = load_ratings(folder / "ratings.jsonl", exclude_flagged=True, excluded=excluded)
    assert excluded == ["ana"] and {r.rater for r in kept} == {"ben"}
    result = agreement(kept, _no_metrics(), ["faith"])
    result.excluded = excluded
    assert any("flagged" in n and "ana" in n for n in result.notes())
    # the set stays under its protocol
    with pytest.raises(ValueError, match="rated under the mine protocol"):
        Study.open(folder, "ahead")
    assert Study.open(folder).protocol.name == "mine"


def _no_metrics():
    from refine.human.agree import StoredMetrics

    return StoredMetrics()


def test_every_country_fills_per_rater_country(tmp_path):
    folder = bench_like(tmp_path / "set", countries=("Japan", "Iran"))
    study = Study.open(folder, "caire")
    for who, where in (("a", "Japan"), ("b", "Japan"), ("c", "Iran")):
        study.give_profile(who, {**JAPAN, "nationality": where})
    # CAIRE: every image to raters of every country; no qualification by the image's
    for who in ("a", "c"):
        for _ in range(2):
            slot, _, _ = study.next_for(who)
            study.record(who, slot.item.image, "rate", {"relevance": "4"})
        assert study.next_for(who)[0] is None
    assert study.next_for("b")[1:] == (0, 2)  # 20 raters a country: b still rates both


def test_sos_choices_are_five_cultures_the_same_for_every_rater(tmp_path):
    folder = tmp_path / "bank"
    cells = {}
    for culture, lang in (("Nigerian", "fr"), ("Japanese", "ja")):
        name = f"images/{culture.lower()}/{lang}/p0_s0.png"  # as a bank lays them out
        (folder / name).parent.mkdir(parents=True)
        Image.new("RGB", (8, 8)).save(folder / name)
        cells[f"{culture}|{lang}"] = {
            "culture": culture,
            "language": lang,
            "done": True,
            "prompts": [f"A {culture} person ({lang})"],
            "images": [name],
        }
    (folder / "bank.json").write_text(json.dumps({"cells": cells}))
    study = Study.open(folder, "sos")
    item = next(it for it in study.set.items if it.country == "Nigerian")
    assert item.language == "fr" and item.prompt == "A Nigerian person (fr)"
    shown = culture_options(item)
    assert len(shown) == 5 and {"Nigerian", "French"} <= set(shown)
    assert culture_options(item) == shown  # the same for every rater
    own = next(it for it in study.set.items if it.country == "Japanese")
    assert len(culture_options(own)) == 4  # its language's culture is its own
    study.give_profile("r", {**JAPAN})
    slot, _, _ = study.next_for("r")
    with pytest.raises(ValueError, match="is not one of"):
        study.record("r", slot.item.image, "rate", {"culture": "Martian"})
    row = study.record("r", slot.item.image, "rate", {"culture": slot.options["culture"][0]})
    assert row["options"]["culture"] == culture_options(slot.item)
