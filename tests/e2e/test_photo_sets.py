"""Real photos for any activity: ``refine photos search`` against a stand-in of Wikimedia
Commons (queries in English and the country's language, the top 5 by CLIPScore on a tiny
CLIP, each photo's licence and author kept), and one photo set per activity and country
that run, score and calibrate-tau pick up with no file list."""

from __future__ import annotations

import io
import json
import math
import types

import numpy as np
import pytest
from PIL import Image

from refine.backends import create
from refine.evaluate import commons
from refine.evaluate.commons import SearchError, Translation, search_photos
from refine.evaluate.photo_sets import find_photo_set, set_folder, with_photo_set
from refine.evaluate.reference_source import ReferenceSource
from refine.evaluate.references import find_references
from tests.e2e.test_cli_run import cli, scored
from tests.fakes.commons_server import CommonsFile, CommonsServer
from tests.fakes.tiny_models import build_tiny_open_clip

ACT, COUNTRY = "people eating food at home", "Iran"
ENGLISH = f"{ACT} {COUNTRY}"
PERSIAN = "خوردن غذا در خانه ایران"


@pytest.fixture(scope="module")
def tiny_clip(tmp_path_factory):
    return build_tiny_open_clip(tmp_path_factory.mktemp("tiny-clip"))


def jpeg(seed: int) -> bytes:
    """A small photo-like picture, different for every seed."""
    rng = np.random.default_rng(seed)
    pixels = rng.integers(0, 255, (24, 32, 3), dtype=np.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, format="JPEG")
    return out.getvalue()


def solid(colour) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (64, 48), colour).save(out, format="PNG")
    return out.getvalue()


class Translator:
    """The profile's language model, as the search asks it: one JSON answer."""

    def __init__(self) -> None:
        self.prompts: list[str] = []

    def complete_json(self, prompt, schema):
        assert schema is Translation
        self.prompts.append(prompt)
        return Translation(translation=PERSIAN)


def commons_files() -> list[CommonsFile]:
    files = [CommonsFile(f"english{i}.jpg", jpeg(i), (ENGLISH,)) for i in range(7)]
    files += [
        CommonsFile(f"persian{i}.jpg", jpeg(100 + i), (PERSIAN,), licence="CC0") for i in range(3)
    ]
    # found by both queries: kept once
    files.append(CommonsFile("both.jpg", jpeg(50), (ENGLISH, PERSIAN)))
    # not photos: a drawing Commons labels as SVG, and a file that does not decode
    files.append(CommonsFile("map.svg", b"<svg/>", (ENGLISH,), mime="image/svg+xml"))
    files.append(CommonsFile("broken.jpg", b"not a picture", (PERSIAN,)))
    return files


@pytest.mark.slow
def test_search_keeps_the_top_five_by_clipscore_with_their_attribution(tiny_clip, tmp_path):
    embedder = create("image_embedder", tiny_clip, shared=False, device="cpu")
    llm = Translator()
    data = tmp_path / "data"
    with CommonsServer(commons_files()) as server:
        found = search_photos(ACT, COUNTRY, llm, embedder, api=server.api, data=data)
        assert server.searches == [ENGLISH, PERSIAN]
    # the translation asked for the country's language
    (asked,) = llm.prompts
    assert "into Persian." in asked and f"Prompt: {ENGLISH}" in asked
    # every photo that decodes is scored against the paper's English prompt; the top 5
    # by CLIPScore (2.5 x max(cos, 0)) are kept, best first
    candidates = [f for f in commons_files() if f.name.endswith(".jpg") and f.name != "broken.jpg"]
    images = [Image.open(io.BytesIO(f.data)).convert("RGB") for f in candidates]
    prompt = f"A photorealistic photo of {ACT} in {COUNTRY}."
    cos = (embedder.encode_images(images) @ embedder.encode_texts([prompt]).T)[:, 0].numpy()
    order = sorted(range(len(candidates)), key=lambda k: -cos[k])[:5]
    doc = json.loads((set_folder(ACT, COUNTRY, data) / "set.json").read_text())
    assert [p["title"] for p in doc["photos"]] == [f"File:{candidates[k].name}" for k in order]
    # fp32 dot products of 16-wide embeddings: 1e-5 is their rounding
    np.testing.assert_allclose(
        [p["clipscore"] for p in doc["photos"]],
        [2.5 * max(float(cos[k]), 0.0) for k in order],
        atol=1e-5,
    )
    assert doc["considered"] == 11 and doc["prompt"] == prompt
    assert [d["url"].rsplit("/", 1)[1] for d in doc["dead"]] == ["broken.jpg"]
    assert "not an image" in doc["dead"][0]["reason"]
    assert doc["queries"] == [
        {"language": "English", "text": ENGLISH},
        {"language": "Persian", "text": PERSIAN},
    ]
    # attribution: the licence, the author as text, the page, and which query found it
    for p in doc["photos"]:
        name = p["title"].removeprefix("File:")
        assert p["page"].endswith(f"/wiki/File:{name}")
        assert p["author"] == "Ana & Co"
        assert p["licence"] == ("CC0" if name.startswith("persian") else "CC BY-SA 4.0")
        assert p["query_language"] == ("Persian" if name.startswith("persian") else "English")
    # the set on disk: the kept files only, and every command's lookup finds it
    folder = set_folder(ACT, COUNTRY, data)
    assert sorted(x.name for x in folder.iterdir()) == sorted(
        [p["file"] for p in doc["photos"]] + ["set.json"]
    )
    assert found.origin == "searched" and len(found.files) == 5
    assert find_photo_set(ACT, COUNTRY, data).files == found.files
    assert found.describe().startswith("photos: 5 searched on Wikimedia Commons (")
    # searched again with fewer kept: the set is replaced, nothing of the first is left
    with CommonsServer(commons_files()) as server:
        again = search_photos(
            ACT, COUNTRY, llm, embedder, api=server.api, data=data, language="English", keep=2
        )
        assert server.searches == [ENGLISH]  # English: one query, no translation
    assert len(again.files) == 2 and len(list(folder.iterdir())) == 3


@pytest.mark.slow  # the module's tiny CLIP, built for the first test that asks (1.6-2.4 s)
def test_the_ahead_manifests_translated_query_is_searched_as_the_paper_did(tiny_clip, tmp_path):
    """After `refine data fetch ahead`, the manifest's ``prompt_language`` says "english" or
    "translated" (no language) and ``prompt_text`` holds the paper's query: the translated
    one is searched as it is (no translation asked for), and neither word is ever taken
    for a language."""
    import csv

    from refine.evaluate.paper_data import COMMIT, PHOTO_MANIFEST

    data = tmp_path / "data"
    manifest = data / "ahead" / COMMIT / PHOTO_MANIFEST
    manifest.parent.mkdir(parents=True)
    theirs = "غذا خوردن در خانه در ایران"
    with manifest.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["file_path", "image_url", "country", "activity", "sub_activity",
                    "prompt_language", "prompt_text"])  # fmt: skip
        for k, (lang, text) in enumerate((("english", ENGLISH), ("translated", theirs))):
            w.writerow([f"x/{k}.jpg", f"https://x/{k}.jpg", "IRAN", "eating", "home", lang, text])
        w.writerow(["x/b.jpg", "https://x/b.jpg", "BRAZIL", "eating", "home", "translated", "x"])
    assert commons.manifest_query(ACT, COUNTRY, data) == theirs
    assert commons.language_of("Brazil", data) == "Portuguese"  # never "translated"
    assert commons.language_of("Iran", data) == "Persian"
    files = [CommonsFile(f"e{i}.jpg", jpeg(i), (ENGLISH,)) for i in range(3)]
    files += [CommonsFile(f"t{i}.jpg", jpeg(10 + i), (theirs,)) for i in range(3)]
    llm = Translator()
    embedder = create("image_embedder", tiny_clip, shared=False, device="cpu")
    with CommonsServer(files) as server:
        search_photos(ACT, COUNTRY, llm, embedder, api=server.api, data=data)
        assert server.searches == [ENGLISH, theirs]
    assert llm.prompts == []  # the paper's words: nothing to translate
    doc = json.loads((set_folder(ACT, COUNTRY, data) / "set.json").read_text())
    assert doc["queries"][1] == {"language": "Persian", "text": theirs}


@pytest.mark.slow
def test_what_cannot_be_searched_is_named(tiny_clip, tmp_path, monkeypatch):
    embedder = create("image_embedder", tiny_clip, shared=False, device="cpu")
    with CommonsServer([]) as server:
        with pytest.raises(SearchError, match="has no photos for 'people eating food at home"):
            search_photos(ACT, COUNTRY, Translator(), embedder, api=server.api, data=tmp_path)
    with pytest.raises(SearchError, match="no language known for 'Atlantis'.*--language"):
        commons.language_of("Atlantis", tmp_path)
    # a misspelled country is named with the nearest known, not asked for a language
    with pytest.raises(SearchError, match="no country 'Brazl' known here; did you mean 'Brazil'"):
        commons.language_of("Brazl", tmp_path)
    waits = []  # the waits between tries, kept rather than slept (3 s of this test's 3.5)
    monkeypatch.setattr(commons, "time", types.SimpleNamespace(sleep=waits.append))
    with pytest.raises(SearchError, match="cannot reach http://127.0.0.1:9/w/api.php"):
        commons.query("x", "http://127.0.0.1:9/w/api.php", 5, "English")
    assert waits == [1, 2]  # three tries, 1 s then 2 s apart


@pytest.mark.slow
def test_commands_take_the_photo_set_with_no_file_list(world, tiny_clip, tmp_path, monkeypatch):
    """score, a references file and calibrate-tau use the searched set of their activity
    and country; the fake world's judge says yes with 0.9 to red and 0.3 to green, so a red
    image against a set of green photos has EXAG 0.9 - 0.3."""
    from tests.e2e.test_tau import photos
    from tests.fakes.gemini_world import GREEN, RED, YES_LOGPROB

    data = tmp_path / "data"
    monkeypatch.setenv("REFINE_DATA_DIR", str(data))
    files = [
        CommonsFile(f"green{i}.png", solid(GREEN), (ENGLISH,), mime="image/png") for i in range(2)
    ]
    with CommonsServer(files) as server:
        searched = cli(
            "photos", "search", ACT, "--country", COUNTRY, "--from", server.api,
            "--language", "English", "--backend", f"image_embedder={tiny_clip}", "--json",
        )  # fmt: skip
    assert searched.returncode == 0, searched.stderr
    doc = json.loads(searched.stdout)
    assert doc["origin"] == "searched" and len(doc["photos"]) == 2
    # the reference source gives the references their set, and says so
    found = ReferenceSource.default().find(ACT, COUNTRY)
    assert found.pack.reference_images == [p["path"] for p in doc["photos"]]
    assert "photos: 2 searched on Wikimedia Commons" in found.describe()
    # score: the paper's EXAG against the set, with no --reference-images
    image = photos(tmp_path / "gen", RED)[0]
    done = cli("score", str(image), "--activity", ACT, "--country", COUNTRY, "--json",
               "--out", tmp_path / "score")  # fmt: skip
    assert done.returncode == 0, done.stderr
    scores = scored(done.stdout)[0]["scores"]
    excess = math.exp(YES_LOGPROB[RED]) - math.exp(YES_LOGPROB[GREEN])
    assert scores["variants"]["exag"] == "exag:ita" and scores["photos"] == 2
    assert scores["values"]["exag"] == pytest.approx(excess, abs=1e-6)
    assert scores["values"]["vqascore"] is None  # not asked for
    # --baselines vqascore: the judge's P("Yes") for the generation prompt (the world's judge
    # says yes to a red image with 0.9, over the whole distribution)
    asked = cli(
        "score",
        str(image),
        "--activity",
        ACT,
        "--country",
        COUNTRY,
        "--baselines",
        "vqascore",
        "--json",
        "--out",
        tmp_path / "score",
    )
    values = scored(asked.stdout)[0]["scores"]["values"]
    assert values["vqascore"] == pytest.approx(math.exp(YES_LOGPROB[RED]), abs=1e-9)
    # a references file that lists no photos gets the set too
    pack = find_references(ACT, COUNTRY)
    refs_file = tmp_path / "refs.json"
    refs_file.write_text(
        json.dumps({"descriptors": pack.descriptors, "stereotypes": pack.stereotypes})
    )
    again = cli(
        "score", str(image), "--activity", ACT, "--country", COUNTRY, "--refs", str(refs_file),
        "--json", "--out", tmp_path / "score",
    )  # fmt: skip
    assert scored(again.stdout)[0]["scores"]["values"]["exag"] == pytest.approx(excess, abs=1e-6)
    # calibrate-tau with no photos named observes the set's
    tau = cli("calibrate-tau", "--activity", ACT, "--country", COUNTRY, "--json")
    assert tau.returncode == 0, tau.stderr
    got = json.loads(tau.stdout)
    assert got["images"] == [p["path"] for p in doc["photos"]]
    assert got["photo_set"].startswith("photos: 2 searched on Wikimedia Commons")
    # photos show lists the set with its attribution
    shown = cli("photos", "show", ACT, "--country", COUNTRY)
    assert shown.returncode == 0 and "CC BY-SA 4.0, Ana & Co" in shown.stdout
    # no set: each command says how to get one
    none = cli("calibrate-tau", "--activity", "people dancing", "--country", "Iran")
    assert none.returncode == 2
    assert "no photo set of 'people dancing' in Iran: `refine photos search" in none.stderr
    missing = cli("photos", "show", "people dancing", "--country", "Iran")
    assert missing.returncode == 2 and "refine data fetch ahead --photos" in missing.stderr


def test_a_given_folder_wins_over_the_set(tmp_path):
    """Photos the references carry already (given by hand) are kept; otherwise the set."""
    from refine.evaluate.photo_sets import SET_FILE

    folder = set_folder(ACT, COUNTRY, tmp_path)
    folder.mkdir(parents=True)
    (folder / "a.png").write_bytes(solid((1, 2, 3)))
    (folder / SET_FILE).write_text(
        json.dumps({"photos": [{"file": "a.png"}, {"file": "gone.png"}]})
    )
    refs = find_references(ACT, COUNTRY)
    got = with_photo_set(refs, tmp_path)
    assert got.reference_images == [str((folder / "a.png").resolve())]  # the gone file left out
    given = refs.model_copy(update={"reference_images": ["/x/mine.png"]})
    assert with_photo_set(given, tmp_path).reference_images == ["/x/mine.png"]
    assert with_photo_set(refs, tmp_path / "elsewhere") is refs
    (folder / SET_FILE).write_text("{not json")
    assert find_photo_set(ACT, COUNTRY, tmp_path) is None  # a damaged record is no set


def test_your_own_photos_become_the_set(tmp_path, monkeypatch):
    """refine photos add: a folder of photos checked, copied into the data directory and
    found by activity and country; a folder without photos is refused by name."""
    monkeypatch.setenv("REFINE_DATA_DIR", str(tmp_path / "data"))
    mine = tmp_path / "mine"
    mine.mkdir()
    for k, c in enumerate(((1, 2, 3), (4, 5, 6))):
        (mine / f"p{k}.png").write_bytes(solid(c))
    added = cli("photos", "add", ACT, str(mine), "--country", COUNTRY, "--json")
    assert added.returncode == 0, added.stderr
    doc = json.loads(added.stdout)
    assert doc["origin"] == "given" and len(doc["photos"]) == 2
    found = find_photo_set(ACT, COUNTRY)
    assert found.origin == "given" and found.describe().startswith("photos: 2 given with refine")
    assert sorted(open(f, "rb").read() for f in found.files) == sorted(
        (mine / f"p{k}.png").read_bytes() for k in range(2)
    )
    assert ReferenceSource.default().find(ACT, COUNTRY).pack.reference_images == list(found.files)
    (tmp_path / "empty").mkdir()
    bad = cli("photos", "add", ACT, str(tmp_path / "empty"), "--country", COUNTRY)
    assert bad.returncode == 2 and "FOLDER: " in bad.stderr and "no .png" in bad.stderr
    # another activity whose name folds to the same folder name is another set
    assert find_photo_set(ACT + " ", COUNTRY) is not None  # the same name, spaced
    assert find_photo_set(ACT + "!", COUNTRY) is None


@pytest.mark.parametrize(
    "activity, country",
    [
        ("../../../etc/passwd", "Iran"),
        ("people eating", "../../x"),
        ("x" * 5000, "Iran"),
        ("خوردن غذا", "ایران"),
        ("a\x00b", "Iran"),
    ],
    ids=["dots-activity", "dots-country", "long", "other-script", "nul"],
)
def test_names_from_a_client_stay_in_the_photos_folder(tmp_path, activity, country):
    """The app passes a visitor's activity and country to the lookup: whatever they are,
    the set's folder lies under DATA/photos, nothing is found, and nothing is made."""
    folder = set_folder(activity, country, tmp_path)
    root = (tmp_path / "photos").resolve()
    assert root in folder.resolve().parents and len(folder.name) <= 89
    assert find_photo_set(activity, country, tmp_path) is None
    assert not (tmp_path / "photos").exists()


@pytest.mark.slow  # the module's tiny CLIP, built for the first test that asks (1.6-2.4 s)
def test_a_hostile_commons_gets_one_line_and_its_huge_images_are_not_decoded(tiny_clip, tmp_path):
    """Five kinds of bad API answer each end in one SearchError; images declaring
    12000 x 12000 pixels are refused from their header (nothing decoded), the others kept;
    a licence spelling a tag in entities is stored as text without it."""
    from tests.e2e.test_hostile_mirror import bomb_png

    embedder = create("image_embedder", tiny_clip, shared=False, device="cpu")
    bad_answers = {
        b"<html>maintenance</html>": "not JSON",
        b"[1, 2]": "a list, not an object",
        b'{"query": {"pages": 7}}': "lists no pages",
        b'{"error": "nope"}': "refused the search: nope",
        b"\xff\xfe": "not JSON",
    }
    with CommonsServer([]) as server:
        for raw, said in bad_answers.items():
            server.raw = raw
            with pytest.raises(SearchError, match=said):
                commons.query("x", server.api, 5, "English")
    # pages of the wrong shape are skipped, not a traceback
    with CommonsServer([]) as server:
        server.raw = json.dumps(
            {"query": {"pages": [1, {"imageinfo": "x"}, {"imageinfo": [None]}, {"index": "a"}]}}
        ).encode()
        assert commons.query("x", server.api, 5, "English") == []
    files = [
        CommonsFile(f"bomb{k}.png", bomb_png(12000, 12000), (ENGLISH,), mime="image/png")
        for k in range(6)
    ]
    files += [
        CommonsFile(
            f"fine{k}.jpg", jpeg(k), (ENGLISH,), licence="&lt;script&gt;alert(1)&lt;/script&gt;"
        )
        for k in range(2)
    ]
    with CommonsServer(files) as server:
        found = search_photos(
            ACT, COUNTRY, Translator(), embedder, api=server.api, data=tmp_path,
            language="English",
        )  # fmt: skip
    doc = json.loads((set_folder(ACT, COUNTRY, tmp_path) / "set.json").read_text())
    assert len(found.files) == 2 and len(doc["dead"]) == 6
    # refused from the header (the reason names the declared size), never decoded: six
    # 12000 x 12000 images would be 2.6 GB decoded
    assert all("12000 x 12000" in d["reason"] for d in doc["dead"])
    for p in doc["photos"]:
        assert "<" not in p["licence"] and ">" not in p["licence"]
        assert p["licence"] == "alert(1)"  # the tag read from its entities, then removed
