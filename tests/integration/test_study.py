"""A rating study on a folder of images: profile and qualification before any rating,
balanced assignment, attention checks and repeated items, flags, and refine agree reading
the study's answers (and leaving flagged raters out)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image

from refine.human.agree import agreement
from refine.human.ratings import load_ratings
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
    from ui.views.rate import show_next

    said = show_next(study, "cem", "Thank you.")[0]  # the Rate view's line: a new sentence
    assert "Thank you. You do not qualify for this set" in str(said)
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
    from refine.human.stored import StoredMetrics

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


def test_pack_and_merge_round_trip_with_a_conflict_reported(tmp_path, capsys):
    from refine.human.study import Study
    from tests.integration.test_caire_kb import run

    folder = bench_like(tmp_path / "set", countries=("Japan",) * 4)
    out = tmp_path / "packed"
    code, stdout, err = run(capsys, "rate", "pack", folder, "--raters", "4", "--out", out,
                            "--protocol", "cube", "--seed", "7")  # fmt: skip
    assert code == 0, err
    doc = json.loads((out / "assignment.json").read_text())
    # CUBE: 3 raters an image, balanced over 4 raters: 3 images each
    assert doc["raters_per_image"] == 3
    assert sorted(len(v) for v in doc["raters"].values()) == [3, 3, 3, 3]
    counts = {}
    for images in doc["raters"].values():
        for im in images:
            counts[im] = counts.get(im, 0) + 1
    assert counts == {f"im{k}.png": 3 for k in range(4)}
    # two raters rate in their own copies
    for n, who in ((1, "aiko"), (2, "kenji")):
        mine = Study.open(out / f"rater-0{n}")
        assert mine.protocol.name == "cube" and mine.seed == 7
        assert {it.country for it in mine.set.items} == {"Japan"}
        mine.give_profile(who, JAPAN)
        while (slot := mine.next_for(who)[0]) is not None:
            mine.record(
                who,
                slot.item.image,
                slot.kind,
                {"relevance": "yes", "faithfulness": "4", "realism": "5"},
            )
    code, stdout, err = run(
        capsys, "rate", "merge", out / "rater-01", out / "rater-02", "--into", folder
    )
    assert code == 0, err + stdout
    assert "6 answers added, 0 already in the set, 2 profiles added, 0 conflicts" in stdout
    assert set(Study.open(folder).profiles()) == {"aiko", "kenji"}
    # merged again: nothing doubled; an answer changed since is a conflict, the set's kept
    lines = (out / "rater-01" / "ratings.jsonl").read_text().splitlines()
    changed = json.loads(lines[0])
    changed["answers"]["realism"] = "1"
    lines[0] = json.dumps(changed)
    (out / "rater-01" / "ratings.jsonl").write_text("\n".join(lines) + "\n")
    code, stdout, _ = run(
        capsys, "rate", "merge", out / "rater-01", out / "rater-02", "--into", folder
    )
    assert code == 1
    assert "0 answers added, 5 already in the set, 0 profiles added, 1 conflicts" in stdout
    assert f"aiko on {changed['image']} (rate)" in stdout and "(kept)" in stdout
    kept = [json.loads(x) for x in (folder / "ratings.jsonl").read_text().splitlines()]
    assert len(kept) == 6 and all(r["answers"]["realism"] == "5" for r in kept)
    assert {r["image"] for r in kept} <= {f"im{k}.png" for k in range(4)}
    code, _, err = run(capsys, "rate", "pack", folder, "--raters", "2", "--out", out)
    assert code == 2 and "not empty" in err


def test_sos_answers_give_fleiss_kappa_majorities_and_tendencies(tmp_path):
    from statsmodels.stats.inter_rater import aggregate_raters, fleiss_kappa

    from refine.human.agree import agreement
    from refine.human.groups import extend
    from refine.human.stored import StoredMetrics

    folder = tmp_path / "bank"
    cells = {}
    for culture in ("Nigerian", "Mexican", "Thai"):
        name = f"images/{culture.lower()}/fr/p0_s0.png"
        (folder / name).parent.mkdir(parents=True)
        Image.new("RGB", (8, 8), (len(culture) * 20, 0, 0)).save(folder / name)
        cells[f"{culture}|fr"] = {"culture": culture, "language": "fr", "done": True,
                                  "prompts": [f"A {culture} person"], "images": [name]}  # fmt: skip
    (folder / "bank.json").write_text(json.dumps({"cells": cells}))
    study = Study.open(folder, "sos")
    picks = {  # per rater, per culture: the prompt's (semantic), French (surface), another
        "r1": {"Nigerian": "Nigerian", "Mexican": "French", "Thai": "other"},
        "r2": {"Nigerian": "Nigerian", "Mexican": "French", "Thai": "French"},
        "r3": {"Nigerian": "French", "Mexican": "French", "Thai": "Thai"},
    }
    chosen = {}
    for rater, mine in picks.items():
        study.give_profile(rater, JAPAN)
        while (slot := study.next_for(rater)[0]) is not None:
            shown = slot.options["culture"]
            want = mine[slot.item.country]
            if want == "other":
                want = next(c for c in shown if c not in (slot.item.country, "French"))
            chosen.setdefault(slot.item.image, []).append(want)
            study.record(rater, slot.item.image, "rate", {"culture": want})
    rated = load_ratings(folder / "ratings.jsonl")
    result = extend(agreement(rated, StoredMetrics(), ["faith"]), rated)
    got = result.fleiss["culture"]
    units = [chosen[k] for k in sorted(chosen)]
    table, _ = aggregate_raters(np.array(units, dtype=object))
    assert got["images"] == 3
    assert got["kappa"] == pytest.approx(fleiss_kappa(table, method="fleiss"), abs=1e-12)
    # Nigerian: 2 of 3 the prompt's culture; Mexican: all French; Thai: three answers
    assert got["tendency"] == {"semantic": 1, "surface": 1, "none": 1}
    assert got["majority"] == {
        "nigerian/fr/p0_s0.png": "Nigerian",
        "mexican/fr/p0_s0.png": "French",
        "thai/fr/p0_s0.png": None,
    }


def test_merge_keeps_every_check_and_stays_in_the_set(tmp_path):
    """A rater's second attention check is an answer of its own (a failed one still flags
    them after the merge); a row naming a path out of the set is refused, nothing copied."""
    from refine.human.packs import merge, pack

    folder = bench_like(tmp_path / "set", countries=("Japan",) * 4)
    proto = tmp_path / "mine.toml"
    proto.write_text(PROTOCOL.replace("raters_per_image = 1", "raters_per_image = 2"))
    study = Study.open(folder, proto)
    pack(study, 1, tmp_path / "packed")
    mine = Study.open(tmp_path / "packed" / "rater-01")
    mine.give_profile("ana", JAPAN)
    checks = 0
    while (slot := mine.next_for("ana")[0]) is not None:
        value = "5" if slot.kind == "attention" and checks == 1 else "1"  # the 2nd fails
        checks += slot.kind == "attention"
        mine.record("ana", slot.item.image, slot.kind, {"score": value})
    assert checks == 2 and mine.flags()["ana"]["failed_checks"] == 1
    rows = (tmp_path / "packed" / "rater-01" / "ratings.jsonl").read_text().splitlines()
    evil = json.loads(rows[0])
    evil.update(image=".attention/../../outside.png", kind="attention")
    (tmp_path / "packed" / "rater-01" / ".attention" / ".." / ".." / "outside.png").write_bytes(
        b"x"
    )
    rows.append(json.dumps(evil))
    (tmp_path / "packed" / "rater-01" / "ratings.jsonl").write_text("\n".join(rows) + "\n")
    packed = tmp_path / "packed" / "rater-01"
    (packed / ".attention").rename(packed / "checks")  # a linked attention folder: refused
    (packed / ".attention").symlink_to(packed / "checks")
    with pytest.raises(ValueError, match="nothing merged: .*is a link"):
        merge([packed], folder)
    assert not (folder / "ratings.jsonl").exists() and not (folder / ".attention").exists()
    (packed / ".attention").unlink()
    (packed / "checks").rename(packed / ".attention")
    done = merge([tmp_path / "packed" / "rater-01"], folder)
    assert done.added == len(rows) - 1 and not done.conflicts
    assert len(done.unknown) == 1 and "outside.png" in done.unknown[0]
    assert not (tmp_path / "outside.png").exists()
    assert Study.open(folder).flags()["ana"]["failed_checks"] == 1  # the flag survives
    again = merge([tmp_path / "packed" / "rater-01"], folder)
    assert again.added == 0 and again.already == len(rows) - 1


def test_one_answer_per_slot_under_concurrent_clicks(tmp_path):
    import threading

    folder = bench_like(tmp_path / "set", countries=("Japan",) * 3)
    study = Study.open(folder, "ahead")
    study.give_profile("ana", JAPAN)
    slot, _, _ = study.next_for("ana")
    answers = {"gt_faith": "3", "gt_exag": "3", "gt_hal": "3", "realism": "3", "rationale": "x"}
    errors = []

    def click():
        try:
            study.record("ana", slot.item.image, "rate", answers)
        except ValueError as err:
            errors.append(str(err))

    threads = [threading.Thread(target=click) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    rows = (folder / "ratings.jsonl").read_text().splitlines()
    assert len(rows) == 1 and len(errors) == 7
    assert all("not the image you are shown now" in e for e in errors)


def test_images_without_a_country_may_be_rated_under_a_country_rule(tmp_path):
    folder = tmp_path / "plain"
    folder.mkdir()
    Image.new("RGB", (8, 8)).save(folder / "a.png")
    study = Study.open(folder, "culturalframes")
    study.give_profile("ana", JAPAN)
    assert study.qualification("ana") == (
        True,
        "the set's images name no country: you may rate every one",
    )
    assert study.next_for("ana")[0].item.image == "a.png"
    assert Study.recorded(folder).name == "culturalframes"
    assert Study.recorded(tmp_path) is None and not (tmp_path / ".study.json").exists()


def test_merge_checks_every_row_first_and_writes_all_or_nothing(tmp_path, capsys):
    """An impossible answer, another protocol's, a bad rater name, an image the pack gave another
    folder, a folder never rated or missing: each refused in one line naming it, and the
    set is as it was (answers and profiles); the good folders alone then merge."""
    from refine.human.packs import pack
    from tests.integration.test_caire_kb import run

    folder = bench_like(tmp_path / "set", countries=("Japan",) * 4)
    out = tmp_path / "packed"
    given = pack(Study.open(folder, "cube", 7), 4, out)  # 3 of the 4 images each
    for n, who in ((1, "aiko"), (2, "kenji")):
        mine = Study.open(out / f"rater-0{n}")
        mine.give_profile(who, JAPAN)
        while (slot := mine.next_for(who)[0]) is not None:
            answers = {"relevance": "yes", "faithfulness": "4", "realism": "5"}
            mine.record(who, slot.item.image, slot.kind, answers)
    (tmp_path / "unrated").mkdir()

    def unchanged() -> None:
        assert not (folder / "ratings.jsonl").exists()
        assert Study.open(folder).profiles() == {}

    good = [out / "rater-01", out / "rater-02"]
    for extra, said in (
        ([tmp_path / "unrated"], "unrated: no ratings.jsonl"),
        ([tmp_path / "missing"], "missing: no such rater folder"),
    ):
        code, _, err = run(capsys, "rate", "merge", *good, *extra, "--into", folder)
        assert code == 2 and said in err and "Traceback" not in err, err
        unchanged()
    ratings = out / "rater-02" / "ratings.jsonl"
    rows = [json.loads(x) for x in ratings.read_text().splitlines()]
    (theirs,) = set(given["rater-01"]) - set(given["rater-02"])
    for change, said in (
        ({"answers": {"relevance": "yes", "faithfulness": "999", "realism": "5"}}, "'999'"),
        ({"protocol": "quick"}, "not the set's cube protocol"),
        ({"rater": "a\x00b"}, "rater name"),
    ):
        ratings.write_text(json.dumps({**rows[0], **change}) + "\n")
        code, _, err = run(capsys, "rate", "merge", *good, "--into", folder)
        assert code == 2 and "nothing merged" in err and said in err, err
        unchanged()
    # an image the pack gave rater-01, not rater-02, answered in rater-02's folder
    stray = {**rows[0], "image": theirs}
    stray["image_sha256"] = next(
        json.loads(x)["image_sha256"]
        for x in (out / "rater-01" / "ratings.jsonl").read_text().splitlines()
        if json.loads(x)["image"] == theirs
    )
    ratings.write_text(json.dumps(stray) + "\n")
    code, _, err = run(capsys, "rate", "merge", *good, "--into", folder)
    assert code == 2 and "was not given to rater-02" in err, err
    unchanged()
    ratings.write_text("".join(json.dumps(r) + "\n" for r in rows))
    code, _, err = run(capsys, "rate", "pack", tmp_path / "none", "--raters", "2", "--out", out)
    assert code == 2 and "none: no such folder of images to rate" in err, err
    code, stdout, err = run(capsys, "rate", "merge", *good, "--into", folder)
    assert code == 0, err
    first = (out / "rater-01" / "ratings.jsonl").read_text().splitlines()
    assert len((folder / "ratings.jsonl").read_text().splitlines()) == len(first) + len(rows)
    assert set(Study.open(folder).profiles()) == {"aiko", "kenji"}


def test_messages_name_a_questions_placeholders_in_words():
    """A refusal quotes the question without its placeholders (it showed "{activity}")."""
    from refine.human.protocols import load_protocol

    ahead = load_protocol("ahead")
    with pytest.raises(ValueError) as err:
        ahead.check({})
    assert "{" not in str(err.value) and "show the activity in your country" in str(err.value)
