"""One order for where a run's references come from, each answer naming its place."""

from __future__ import annotations

import json

import pytest

from refine.evaluate.reference_source import ORDER, ReferenceSource
from refine.evaluate.references import ReferenceNotFound
from refine.evaluate.refs_build import built_path
from refine.records import ReferencePack

BUNDLED = ("people eating food at home", "Iran")  # the bundled pack has its descriptors
ELSEWHERE = ("people repairing a bicycle", "Peru")  # the bundled pack has none


def pack(activity, country, word):
    return ReferencePack(
        activity=activity, country=country, descriptors={"objects": [word]}, source=word
    )


def keep(folder, activity, country, word):
    path = built_path(activity, country, folder)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(pack(activity, country, word).model_dump_json())


def data_pack(folder, activity, country, word):
    (folder / "packs").mkdir(parents=True, exist_ok=True)
    entry = {"descriptors": {"objects": [word]}, "stereotypes": ["a stereotype"]}
    doc = {"name": "paper", "source": "the data", "countries": {country: {"activities": {}}}}
    doc["countries"][country]["activities"][activity] = entry
    (folder / "packs" / "paper.json").write_text(json.dumps(doc))


@pytest.fixture
def places(tmp_path):
    return {name: tmp_path / name for name in ("visitor", "shared", "data", "built")}


# (which places hold references for the prompt, the prompt, the place that answers)
CASES = [
    (("visitor", "shared", "data", "built"), BUNDLED, "visitor"),
    (("shared", "data", "built"), BUNDLED, "shared"),
    (("data", "built"), BUNDLED, "data"),
    (("built",), BUNDLED, "bundled"),
    ((), BUNDLED, "bundled"),
    (("built",), ELSEWHERE, "built"),
    ((), ELSEWHERE, "new"),
]


@pytest.mark.parametrize(("holding", "prompt", "answer"), CASES)
def test_the_first_place_in_the_order_answers_and_says_so(places, holding, prompt, answer):
    activity, country = prompt
    for name in holding:
        if name == "data":
            data_pack(places["data"], activity, country, "from data")
        else:
            keep(places[name], activity, country, f"from {name}")
    source = ReferenceSource(
        visitor=places["visitor"],
        shared=places["shared"],
        data=places["data"],
        built=places["built"],
        build=lambda a, c: pack(a, c, "from new"),
    )
    found = source.find(activity, country)
    assert found.origin == answer
    want = {"bundled": None, "data": "from data"}.get(answer, f"from {answer}")
    if want is not None:
        assert found.pack.descriptors["objects"] == [want]
    else:
        assert found.pack.source.startswith("cultivate pack")
    assert found.describe().startswith("references: ")
    # the first in the order of those that hold some (the bundled pack for its prompts,
    # a build for any)
    holders = {*holding, "new", *(["bundled"] if prompt == BUNDLED else [])}
    assert answer == min(holders, key=ORDER.index)


def test_nothing_found_says_what_and_how_to_build(places):
    source = ReferenceSource(shared=places["shared"], data=places["data"], built=places["built"])
    with pytest.raises(ReferenceNotFound) as err:
        source.find(*ELSEWHERE)
    said = str(err.value)
    assert "the cultivate pack has no country 'Peru'" in said
    assert said.endswith('`refine refs build "people repairing a bicycle" --country Peru`')


def test_the_data_directory_comes_from_the_environment(tmp_path, monkeypatch):
    from refine.evaluate.reference_source import data_dir

    monkeypatch.setenv("REFINE_DATA_DIR", str(tmp_path / "d"))
    assert data_dir() == tmp_path / "d"
    monkeypatch.delenv("REFINE_DATA_DIR")
    monkeypatch.setenv("REFINE_CACHE_DIR", str(tmp_path / "c"))
    assert data_dir() == tmp_path / "c" / "data"
    default = ReferenceSource.default(shared=tmp_path / "s")
    assert (default.data, default.built) == (tmp_path / "c" / "data", tmp_path / "c" / "refs")
    data_pack(tmp_path / "c" / "data", *ELSEWHERE, "from data")
    assert default.find(*ELSEWHERE).origin == "data"
