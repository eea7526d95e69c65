"""Raw settings -> a validated RunSpec, without any model."""

from __future__ import annotations

import inspect
import json

import pytest
from PIL import Image

from refine import settings
from refine.records import RunSpec
from refine.settings import SettingsError

ACT = "people eating food at home"


def spec(**raw):
    return settings.run_spec({"activity": ACT, "country": "Iran", **raw})


def test_none_takes_the_default_and_text_lists_are_split():
    s = spec(rounds=None, caire_labels="Turkey, India", prompt_languages="fr,ja")
    assert s.rounds == RunSpec.model_fields["rounds"].default == settings.default("rounds") == 5
    assert s.caire_labels == ["Turkey", "India"] and s.prompt_languages == ["fr", "ja"]
    # a CSV line's text values become typed ones
    s = spec(rounds="3", target="0.8", language_scores="true", prompt_languages="fr")
    assert (s.rounds, s.target, s.language_scores) == (3, 0.8, True)
    assert spec(instructions='{"1": "add tea"}').instructions == {1: "add tea"}


@pytest.mark.parametrize(
    ("raw", "field", "text"),
    [
        ({"rounds": -1}, "rounds", "greater than or equal to 0"),
        ({"edit_from": "middle"}, "edit_from", "'best', 'original' or 'last'"),
        ({"caire_kb": "kb"}, "caire_kb", "needs culture labels"),
        ({"caire_labels": "Turkey, turkey"}, "caire_labels", "labels given twice"),
        ({"prompt_languages": "fr,xx"}, "prompt_languages", "unknown language 'xx'"),
        ({"prompt_languages": "en"}, "prompt_languages", "'en' is the run's own"),
        ({"language_scores": True}, "language_scores", "need prompt languages"),
        ({"sos_bank": "nowhere"}, "sos_bank", "nowhere"),
        ({"instructions": "{1:"}, "instructions", "must be JSON"),
        ({"country": " "}, "country", "give the country"),
    ],
)
def test_each_bad_setting_names_its_field(raw, field, text):
    with pytest.raises(SettingsError, match=text) as err:
        spec(**raw)
    assert err.value.field == field
    if field == "caire_kb":  # the fix is in another field: each front end names it
        assert err.value.related == "caire_labels"


def test_paths_are_read_against_the_base_folder(tmp_path):
    Image.new("RGB", (8, 8), (1, 2, 3)).save(tmp_path / "mine.png")
    s = settings.run_spec({"activity": ACT, "country": "Iran", "image": "mine.png"}, tmp_path)
    assert s.input_image == str((tmp_path / "mine.png").resolve())
    with pytest.raises(SettingsError, match="no such image file") as err:
        settings.run_spec({"activity": ACT, "country": "Iran", "image": "gone.png"}, tmp_path)
    assert err.value.field == "image"
    (tmp_path / "fake.png").write_text("not a picture")
    with pytest.raises(SettingsError, match="fake.png: not an image"):
        settings.run_spec({"activity": ACT, "country": "Iran", "image": "fake.png"}, tmp_path)
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(SettingsError, match="use a .png"):
        settings.run_spec({"activity": ACT, "country": "Iran", "image": "notes.txt"}, tmp_path)
    with pytest.raises(SettingsError, match="generated round 0"):
        settings.run_spec(
            {"activity": ACT, "country": "Iran", "image": "mine.png", "prompt_languages": "fr"},
            tmp_path,
        )


def test_references_from_a_file_the_pack_or_a_clear_error(tmp_path):
    (tmp_path / "refs.json").write_text(json.dumps({"setting": ["a clay oven"]}))
    s, refs = settings.load({"activity": ACT, "country": "Iran", "refs": "refs.json"}, tmp_path)
    assert refs.descriptors["setting"] == ["a clay oven"] and s.country == "Iran"
    _, pack = settings.load({"activity": ACT, "country": "Iran"})
    assert pack.country == "Iran" and pack.descriptors["objects"] and pack.stereotypes
    with pytest.raises(SettingsError) as err:
        settings.load({"activity": "people eating fod at home", "country": "Iran"})
    assert err.value.field == "refs" and "did you mean" in err.value.message


def test_instruction_and_backend_items():
    assert settings.parse_instructions(["1=add tea", "3= keep it "]) == {1: "add tea", 3: "keep it"}
    for bad in ("0=x", "one=x", "2=", "x"):
        with pytest.raises(SettingsError, match="ROUND=TEXT"):
            settings.parse_instructions([bad])
    assert settings.parse_backends(["judge=gemini:gemini-2.5-pro"]) == {
        "judge": "gemini:gemini-2.5-pro"
    }
    with pytest.raises(SettingsError, match="ROLE one of"):
        settings.parse_backends(["painter=gemini:x"])
    with pytest.raises(SettingsError, match="unknown judge backend"):
        settings.parse_backends(["judge=nonsense:x"])


def test_the_command_line_shows_the_specs_defaults():
    """refine run has one option per setting it shows, named after its field, with the
    spec's default and flag."""
    from refine.cli.run_cmd import run_cmd

    params = inspect.signature(run_cmd).parameters
    shown = settings.shown_on("run")
    own = {"activity", "country", "profile", "backend", "refs_file", "reference_images"}
    own |= {"out", "resume", "as_json", "build_refs"}
    assert set(params) == own | {s.name for s in shown}
    for setting in shown:
        option = params[setting.name].default
        assert option.param_decls == (setting.flag,), setting.name
        if setting.given == "value":
            assert option.default == settings.default(setting.name), setting.name
    assert params["initial_candidates"].default.param_decls == ("--initial",)


def test_a_decompression_bomb_and_bad_output_folders_are_refused(tmp_path, monkeypatch):
    Image.new("RGB", (64, 64)).save(tmp_path / "big.png")
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 1000)  # 4096 px > 2 x the limit
    with pytest.raises(SettingsError, match="big.png: too many pixels to open safely") as err:
        settings.run_spec({"activity": ACT, "country": "Iran", "image": "big.png"}, tmp_path)
    assert err.value.field == "image" and "limit 1,000 pixels" in str(err.value)
    (tmp_path / "file").write_text("x")
    with pytest.raises(SettingsError, match="is a file, not a folder"):
        settings.output_folder(tmp_path / "file")
    with pytest.raises(SettingsError, match="file is a file, not a folder"):
        settings.output_folder(tmp_path / "file" / "runs")
    new = settings.output_folder(tmp_path / "new" / "runs")
    assert new == tmp_path / "new" / "runs" and not new.exists()  # checked, not created


def test_the_settings_open_no_knowledge_base_or_bank(tmp_path, monkeypatch):
    """A knowledge base or an SoS bank is checked to be one by its manifest, never opened
    (the run's steps open them when it starts); with a root, each must lie inside it."""
    from refine.evaluate.caire.kb import KnowledgeBase

    kb, bank = tmp_path / "kb", tmp_path / "bank"
    kb.mkdir()
    bank.mkdir()
    (kb / "kb.json").write_text("{}")  # no index beside it: opening it would fail
    (bank / "bank.json").write_text("not JSON")  # reading it would fail
    monkeypatch.setattr(KnowledgeBase, "load", lambda *a, **k: pytest.fail("opened the KB"))
    raw = {"activity": ACT, "country": "Iran", "caire_labels": "Turkey", "caire_kb": str(kb)}
    raw |= {"prompt_languages": "fr", "sos_bank": str(bank)}
    spec = settings.run_spec(raw)
    assert (spec.caire_kb, spec.sos_bank) == (str(kb.resolve()), str(bank.resolve()))
    assert settings.run_spec(raw, root=tmp_path).caire_kb == str(kb)
    with pytest.raises(SettingsError, match="is not a CAIRE knowledge base inside") as err:
        settings.run_spec(raw, root=tmp_path / "elsewhere")
    assert err.value.field == "caire_kb"
    (kb / "kb.json").unlink()
    with pytest.raises(SettingsError, match="not a knowledge base \\(no kb.json\\)") as err:
        settings.run_spec(raw)
    assert err.value.field == "caire_kb"
