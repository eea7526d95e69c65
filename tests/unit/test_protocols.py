"""Study protocols as data: the bundled ones load, and any protocol's answers are checked
by its own conditions, required reasons and options; who qualifies."""

from __future__ import annotations

import pytest

from refine.human.protocols import BUNDLED, RaterProfile, load_protocol, prompt_words

PROFILE = {
    "born": "Japan",
    "raised": "Japan",
    "residence": "Japan",
    "nationality": "Japanese",
    "languages": "Japanese, English",
    "age_band": "25-34",
    "consent": True,
}


def test_every_bundled_protocol_loads_with_the_papers_questions():
    got = {n: load_protocol(n) for n in BUNDLED}
    assert [q.id for q in got["ahead"].questions] == [
        "gt_faith",
        "gt_exag",
        "gt_hal",
        "realism",
        "rationale",
    ]
    assert (
        got["ahead"].questions[0].text
        == "How well does this image show {activity} in your country?"
    )
    assert got["ahead"].raters_per_image == 2
    assert got["culturalframes"].raters_per_image == 3
    assert [o.score for o in got["culturalframes"].question("alignment").options] == [0, 0.5, 1]
    assert got["caire"].every_country and "Highly Relevant" in got["caire"].questions[0].rubric
    assert got["sos"].questions[0].options_from == "cultures"
    assert got["quick"].raters_per_image is None  # every rater rates every image


def test_culturalframes_follow_ups_hold_only_below_one():
    cf = load_protocol("culturalframes")
    prompt = "people offering flowers to a Saraswati statue"
    base = {"stereotype": "no", "quality": "1", "overall": "4"}
    # a full match: the follow-ups are not shown, and answers to them are dropped
    kept, _ = cf.check({"alignment": "1", "missing": ["explicit"], **base}, prompt=prompt)
    assert kept == {"alignment": "1", **base}
    with pytest.raises(ValueError, match="Please select what was missing"):
        cf.check({"alignment": "0.5", **base}, prompt=prompt)
    # explicit elements missing: the words must be marked, and explained
    with pytest.raises(ValueError, match="Select words from the prompt"):
        cf.check({"alignment": "0.5", "missing": ["explicit"], **base}, prompt=prompt)
    with pytest.raises(ValueError, match="'goddess' is not among the choices"):
        cf.check(
            {"alignment": "0", "missing": ["explicit"], "missing_words": ["goddess"], **base},
            prompt=prompt,
        )
    with pytest.raises(ValueError, match="Please explain what aspects"):
        cf.check({"alignment": "0", "missing": ["implicit"], **base}, prompt=prompt)
    kept, _ = cf.check(
        {"alignment": "0", "missing": ["implicit"], "missing_reason": "no marigolds", **base},
        prompt=prompt,
    )
    assert kept["missing"] == ["implicit"] and "missing_words" not in kept
    # a stereotype needs its description
    with pytest.raises(
        ValueError, match="Describe what aspect of the image is stereotypical .needed"
    ):
        cf.check({"alignment": "1", **base, "stereotype": "yes"}, prompt=prompt)
    kept, why = cf.check(
        {"alignment": "1", **base, "stereotype": "yes"},
        {"stereotype": "  everyone in saris  "},
        prompt=prompt,
    )
    assert why == {"stereotype": "everyone in saris"}
    assert cf.scores(kept) == {"alignment": 1.0, "stereotype": 1.0, "quality": 1.0, "overall": 4.0}
    with pytest.raises(ValueError, match="'2' is not one of 0, 0.5, 1"):
        cf.check({"alignment": "2", **base}, prompt=prompt)
    with pytest.raises(ValueError, match="'mood' is not a question"):
        cf.check({"alignment": "1", "mood": "5", **base}, prompt=prompt)


def test_cube_reasons_and_comments():
    cube = load_protocol("cube")
    with pytest.raises(ValueError, match="justification is required"):
        cube.check({"relevance": "no"})
    kept, why = cube.check(
        {"relevance": "no", "faithfulness": "5", "realism": "2"},
        {"relevance": "a Turkish lamp", "realism": "waxy skin"},
    )
    assert kept == {"relevance": "no"}  # faithfulness and realism only when relevant
    assert why == {"relevance": "a Turkish lamp"}
    kept, why = cube.check(
        {"relevance": "yes", "faithfulness": "5", "realism": "2"}, {"realism": "waxy skin"}
    )
    assert kept["realism"] == "2" and why == {"realism": "waxy skin"}
    kept, why = cube.check(
        {"relevance": "maybe", "faithfulness": "4", "realism": "5"}, {"realism": "x"}
    )
    assert kept["faithfulness"] == "4" and why == {}  # a comment only at 3 or below
    with pytest.raises(ValueError, match="How well does the image match"):
        cube.check({"relevance": "yes", "realism": "5"})


def test_who_qualifies():
    me = RaterProfile.parse(PROFILE)
    assert me.languages == ["Japanese", "English"]
    cf = load_protocol("culturalframes")
    # nationality "Japanese", the country's demonym (refine.human.countries), or "japan"
    assert cf.qualifies(me, "Japan") == (True, "")
    me = RaterProfile.parse({**PROFILE, "nationality": "japan"})
    assert cf.qualifies(me, "Japan") == (True, "")
    other = RaterProfile.parse({**PROFILE, "nationality": "Korean"})
    ok, why = cf.qualifies(other, "Japan")
    assert not ok and "nationals of Japan" in why
    moved = RaterProfile.parse({**PROFILE, "nationality": "Japan", "residence": "Germany"})
    ok, why = cf.qualifies(moved, "Japan")
    assert not ok and "living in Japan" in why
    # AHEaD Sec. 4.2: raters of the country's nationality; ahead-origin, the broader rule:
    # born or raised there is enough
    ahead, origin = load_protocol("ahead"), load_protocol("ahead-origin")
    assert ahead.qualifies(moved, "Japan")[0]  # nationality Japan
    born = RaterProfile.parse({**PROFILE, "nationality": "Germany", "residence": "Germany"})
    assert not ahead.qualifies(born, "Japan")[0] and origin.qualifies(born, "Japan")[0]
    us = {"born": "USA", "raised": "the United States", "nationality": "American"}
    us = RaterProfile.parse({**PROFILE, **us})
    assert origin.qualifies(us, "United States")[0] and not origin.qualifies(us, "Japan")[0]
    # one table of names: official names, native spellings, demonyms, codes; a name it
    # does not hold is compared as written
    from refine.human.countries import COUNTRIES, country_of, same_country

    for written, country in (
        ("American", "USA"),
        ("Brasil", "Brazil"),
        ("U.S.A.", "USA"),
        ("Russian Federation", "Russia"),
        ("méxico", "Mexico"),
        ("Türkiye", "Turkey"),
        ("the UK", "UK"),
        ("Persian", "Iran"),
    ):
        assert country_of(written) == country and same_country(written, country), written
    assert country_of("Atlantis") is None and same_country("atlantis", "Atlantis")
    assert not same_country("Brazilian", "Mexico") and not same_country("", "USA")
    assert {"USA", "Brazil", "Russia", "Egypt"} <= set(COUNTRIES)  # CAIRE Tab. 2's among them
    assert ahead.rater_country == "nationality" and origin.rater_country == "raised"
    # the rest of ahead-origin is ahead's (its base)
    assert [q.id for q in origin.questions] == [q.id for q in ahead.questions]
    assert origin.attention == ahead.attention and origin.repeats == ahead.repeats
    with pytest.raises(ValueError, match="consent"):
        RaterProfile.parse({**PROFILE, "consent": False})
    with pytest.raises(ValueError, match="age_band"):
        RaterProfile.parse({**PROFILE, "age_band": "30"})


def test_a_protocol_file_is_checked(tmp_path):
    bad = tmp_path / "p.toml"
    bad.write_text('base = "nope"\nname = "mine"\n')
    with pytest.raises(ValueError, match="base: 'nope' is not one of quick, ahead"):
        load_protocol(bad)
    bad.write_text('base = "ahead-origin"\nname = "mine"\n')
    with pytest.raises(ValueError, match="'ahead-origin' is itself based on another"):
        load_protocol(bad)
    bad.write_text('base = "cube"\nname = "mine"\nraters_per_image = 3\n')
    mine = load_protocol(bad)
    assert mine.name == "mine" and mine.raters_per_image == 3
    assert [q.id for q in mine.questions] == [q.id for q in load_protocol("cube").questions]
    bad.write_text(
        'name = "mine"\ntitle = "t"\n[[questions]]\nid = "b"\ntext = "B"\n'
        'options = [{value = "1"}]\nshow_if = {question = "a", one_of = ["1"]}\n'
        '[[questions]]\nid = "a"\ntext = "A"\noptions = [{value = "1"}]\n'
    )
    with pytest.raises(ValueError, match="'a', which is not a question before it"):
        load_protocol(bad)
    bad.write_text('name = "mine"\ntitle = "t"\nquestions = [')
    with pytest.raises(ValueError, match="not TOML"):
        load_protocol(bad)
    with pytest.raises(ValueError, match="unknown protocol 'cultural'"):
        load_protocol("cultural")
    assert prompt_words("A photo of a Japanese person's tea") == [
        "A",
        "photo",
        "of",
        "a",
        "Japanese",
        "person's",
        "tea",
    ]
