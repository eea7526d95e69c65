"""`refine data fetch ahead` against a stand-in of the authors' repository: the files land
in the data directory with their sha256, the pack joins every activity to its descriptors
by category and subactivity, the reference source then finds the fetched countries, a
second fetch downloads nothing, and what cannot be fetched is named."""

from __future__ import annotations

import csv
import hashlib
import json

import pytest

from refine.cli import main
from refine.evaluate import paper_data
from refine.evaluate.paper_data import (
    COMMIT,
    COUNTRY_CANDIDATES,
    DESCRIPTORS,
    PHOTO_MANIFEST,
    SUBACTIVITY_CANDIDATES,
    FetchError,
    fetch_ahead,
)
from refine.evaluate.reference_source import ReferenceSource
from refine.evaluate.references import load_pack
from tests.fakes.file_server import FileServer


def upstream(root, countries=("Brazil", "Iran")):
    """The repository's data folder for ``countries``, in its own layout and format."""
    pack = load_pack()
    for name in countries:
        refs: dict = {}
        for act in pack.countries[name]["activities"].values():
            cat, sub = act["category"], act["subactivity"]
            real = act.get("descriptors")
            if real:
                # a bundled country's real descriptors (the bundled pack was built from the
                # authors' files, ../shared/anchors/ahead), back in the upstream records
                refs.setdefault(cat, {})[sub] = {
                    **{
                        dim: [
                            {"token": t, "style": "traditional", "necessity": "essential"}
                            for t in real.get(dim, [])
                        ]
                        for dim in paper_data.DIMENSIONS
                    },
                    "people": [{"token": "a family", "style": "neutral", "necessity": "optional"}],
                }
                continue
            refs.setdefault(cat, {})[sub] = {
                dim: [{"token": f"{name} {sub} {dim} {i}", "style": "neutral"} for i in range(2)]
                for dim in (*paper_data.DIMENSIONS, "people")
            }
        path = root / DESCRIPTORS.format(slug=name.lower())
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(refs))
    keys = {n: n.upper().replace(" ", "_") for n in countries}
    (root / COUNTRY_CANDIDATES).parent.mkdir(parents=True, exist_ok=True)
    (root / COUNTRY_CANDIDATES).write_text(
        json.dumps({k: [f"{n} stereotype {i}" for i in range(3)] for n, k in keys.items()})
    )
    (root / SUBACTIVITY_CANDIDATES).write_text(json.dumps({}))
    (root / PHOTO_MANIFEST).parent.mkdir(parents=True, exist_ok=True)
    with (root / PHOTO_MANIFEST).open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["file_path", "image_url", "country", "activity", "sub_activity"])
        writer.writerow(["a.jpg", "http://example.invalid/a.jpg", "BRAZIL", "eating", "eating"])


def test_fetch_writes_the_data_and_a_pack_the_references_come_from(tmp_path, capsys):
    upstream(tmp_path / "repo")
    data = tmp_path / "data"
    with FileServer(tmp_path / "repo") as server:
        with pytest.raises(SystemExit) as done:
            main(["data", "fetch", "ahead", "--countries", "Brazil,Iran", "--from", server.url,
                  "--data-dir", str(data), "--json"])  # fmt: skip
        assert done.value.code in (0, None)
        doc = json.loads(capsys.readouterr().out)
        assert doc["countries"] == ["Brazil", "Iran"] and doc["failed"] == {}
        assert len(doc["downloaded"]) == 5 and len(server.requests) == 5
        # every file's sha256 beside them, with the commit
        folder = data / "ahead" / COMMIT
        source = json.loads((folder / "source.json").read_text())
        assert source["commit"] == COMMIT and len(source["sha256"]) == 5
        for rel, digest in source["sha256"].items():
            assert hashlib.sha256((folder / rel).read_bytes()).hexdigest() == digest
        # Brazil's references now come from the fetched pack, five dimensions, tokens only
        found = ReferenceSource(data=data, bundled="cultivate").find("people eating food", "Brazil")
        assert found.origin == "data" and found.where.endswith("packs/ahead.json")
        refs = found.pack.descriptors
        assert refs["setting"] == ["Brazil eating setting 0", "Brazil eating setting 1"]
        assert "people" not in refs  # the paper's five dimensions only
        pack = json.loads((data / "packs" / "ahead.json").read_text())
        assert set(pack["countries"]) == {"Brazil", "Iran"}
        # Iran, fetched in the authors' format, gives back the bundled descriptors exactly
        bundled = load_pack().countries["Iran"]["activities"]
        fetched = pack["countries"]["Iran"]["activities"]
        assert {k: a["descriptors"] for k, a in fetched.items() if a.get("descriptors")} == {
            k: a["descriptors"] for k, a in bundled.items() if a.get("descriptors")
        }
        assert pack["countries"]["Brazil"]["stereotypes"] == [
            f"Brazil stereotype {i}" for i in range(3)
        ]
        # a second fetch downloads nothing
        fetch_ahead(data, ["Brazil", "Iran"], server.url)
        assert len(server.requests) == 5


def test_what_cannot_be_fetched_is_named_and_retries_wait(tmp_path, monkeypatch):
    upstream(tmp_path / "repo", countries=("Brazil",))
    waits: list[float] = []
    monkeypatch.setattr(paper_data.time, "sleep", waits.append)
    brazil = DESCRIPTORS.format(slug="brazil")
    with FileServer(tmp_path / "repo", busy={brazil: 2}) as server:
        done = fetch_ahead(tmp_path / "d", ["Brazil", "Spain"], server.url)
        assert server.requests.count(brazil) == 3 and waits == [1, 2]  # busy twice, then got
        assert done.countries == ["Brazil"]
        ((url, why),) = done.failed.items()
        assert url.endswith(DESCRIPTORS.format(slug="spain")) and "HTTP 404" in why
        with pytest.raises(FetchError, match="no reference descriptors could be fetched"):
            fetch_ahead(tmp_path / "e", ["Spain"], server.url)
    with pytest.raises(FetchError, match="no CULTIVate country 'Brasil'; did you mean 'Brazil'"):
        fetch_ahead(tmp_path / "f", ["Brasil"], "http://127.0.0.1:9")


def test_every_command_finds_the_fetched_countries(tmp_path, monkeypatch, capsys):
    from refine.evaluate.reference_source import catalog
    from refine.harness.tasks.bench.plan import plan_prompts
    from ui.views.references import ready_activities

    upstream(tmp_path / "repo", countries=("Brazil",))
    data = tmp_path / "data"
    monkeypatch.setenv("REFINE_DATA_DIR", str(data))
    # before: Brazil has no descriptors anywhere
    assert plan_prompts(["Iran"]) and not catalog()[1].get("Brazil")
    assert plan_prompts(["Brazil"]) == []
    with FileServer(tmp_path / "repo") as server:
        fetch_ahead(data, ["Brazil"], server.url)
    pack, origin = catalog()
    assert origin["Brazil"] == "ahead.json" and origin["Iran"] == "bundled"
    brazil = pack.countries["Brazil"]["activities"]
    assert all(a["descriptors"] for a in brazil.values())
    # the bundled pack itself (cached, shared) is as it was: the fetched descriptors are
    # the catalog's own copy of Brazil's entry
    from refine.evaluate.references import load_pack

    bundled = load_pack().countries["Brazil"]["activities"]
    assert not any(a.get("descriptors") for a in bundled.values()) and bundled is not brazil
    assert pack.countries["Iran"] is load_pack().countries["Iran"]
    # a bench plans Brazil's prompts, the app lists its activities as ready
    assert set(plan_prompts(["Brazil"])) == {(a, "Brazil") for a in brazil}
    assert ready_activities("Brazil") == sorted(brazil)
    # refs list says where each country's descriptors come from
    with pytest.raises(SystemExit):
        main(["refs", "list"])
    out = capsys.readouterr().out
    assert "Brazil (descriptors from ahead.json):" in out
    assert "Iran (descriptors from the bundled pack):" in out
    assert "Spain (no descriptors: `refine data fetch ahead` or `refine refs build`):" in out


def png(colour) -> bytes:
    import io

    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (8, 8), colour).save(buf, format="PNG")
    return buf.getvalue()


def test_photos_kept_only_when_images_with_dead_links_reported(tmp_path, monkeypatch):
    from refine.evaluate import paper_photos

    monkeypatch.setattr(paper_photos.time, "sleep", lambda s: None)
    repo = tmp_path / "repo"
    upstream(repo, countries=("Brazil",))
    web = repo / "web"
    web.mkdir()
    for name, colour in (("a.png", (200, 0, 0)), ("b.png", (0, 200, 0)), ("c.png", (0, 0, 200))):
        (web / name).write_bytes(png(colour))
    (web / "page.png").write_text("<html>gone</html>")
    moved = {"web/old-b.png": "web/b.png"}  # a link that moved: followed
    with FileServer(repo, busy={"web/c.png": 2}, moved=moved) as server:
        rows = [
            ("web/a.png", "BRAZIL", "eating", "eating"),
            ("web/old-b.png", "BRAZIL", "eating", "eating"),
            ("web/c.png", "BRAZIL", "eating", "eating"),  # busy twice, then there
            ("web/missing.png", "BRAZIL", "eating", "eating"),  # 404
            ("web/page.png", "BRAZIL", "eating", "eating"),  # not an image
            ("web/a.png", "BRAZIL", "knitting", "knitting"),  # joins no activity
            ("web/a.png", "IRAN", "eating", "eating"),  # a country not asked
        ]
        with (repo / PHOTO_MANIFEST).open("w", newline="") as fh:
            writer = csv.writer(fh)
            writer.writerow(["file_path", "image_url", "country", "activity", "sub_activity"])
            for path, country, act, sub in rows:
                writer.writerow([path, f"{server.url}/{path}", country, act, sub])
        said = []
        done = fetch_ahead(tmp_path / "d", ["Brazil"], server.url, photos=True, emit=said.append)
        done = done.photos
        assert (done.downloaded, done.kept) == (3, 0)
        assert "[####################] 5/5 photos, 2 dead" in said  # the bar, full at the end
        assert sorted(d["reason"] for d in done.dead) == [
            "HTTP 404 Not Found",
            "not an image (UnidentifiedImageError)",
        ]
        assert [r["activity"] for r in done.unjoined] == ["knitting"]
        phrase = next(
            p
            for p, a in load_pack().countries["Brazil"]["activities"].items()
            if (a["category"], a["subactivity"]) == ("eating", "eating")
        )
        assert done.found == {"Brazil": {phrase: 3}}
        kept = json.loads((done.folder / "photos.json").read_text())
        assert kept["commit"] == COMMIT and len(kept["files"]) == 3
        for rel, entry in kept["files"].items():
            data = (done.folder / rel).read_bytes()
            assert hashlib.sha256(data).hexdigest() == entry["sha256"]
            name = entry["url"].rsplit("/", 1)[1].removeprefix("old-")
            assert data == (web / name).read_bytes()
        report = json.loads((done.folder / "report.json").read_text())
        assert report["found"] == {"Brazil": {phrase: 3}} and len(report["dead"]) == 2
        # a second fetch asks only for what is missing
        before = list(server.requests)
        again = fetch_ahead(tmp_path / "d", ["Brazil"], server.url, photos=True).photos
        asked = server.requests[len(before) :]
        assert sorted(asked) == ["web/missing.png", "web/page.png"]
        assert (again.downloaded, again.kept) == (0, 3)
        # a later fetch of another country (the manifest's Iran row) keeps Brazil's photos
        upstream(repo, countries=("Iran",))
        (repo / DESCRIPTORS.format(slug="brazil")).unlink()  # upstream() wrote Iran's only
        fetch_ahead(tmp_path / "d", ["Iran"], server.url, photos=True)
    # the activity's photo set: the paper's photos that were kept, found by activity and
    # country alone
    from refine.evaluate.photo_sets import find_photo_set

    found = find_photo_set(phrase, "Brazil", tmp_path / "d")
    assert found.origin == "fetched" and len(found.files) == 3
    assert sorted(found.files) == sorted(str((done.folder / r).resolve()) for r in kept["files"])
    assert len(find_photo_set(phrase, "Iran", tmp_path / "d").files) == 1  # fetched later
    assert find_photo_set(phrase, "Spain", tmp_path / "d") is None
    kept_now = json.loads((done.folder / "photos.json").read_text())["files"]
    assert {m["country"] for m in kept_now.values()} == {"Brazil", "Iran"}
    # and its report keeps Brazil's counts and dead links beside Iran's
    report = json.loads((done.folder / "report.json").read_text())
    assert report["found"] == {"Brazil": {phrase: 3}, "Iran": {phrase: 1}}
    assert sorted(d["country"] for d in report["dead"]) == ["Brazil", "Brazil"]
    assert len(find_photo_set(phrase, "Brazil", tmp_path / "d").files) == 3


def test_a_run_for_a_country_outside_the_bundled_six_uses_the_fetched_references(
    world, siglip_path, tmp_path, monkeypatch
):
    from tests.e2e.test_cli_run import cli

    upstream(tmp_path / "repo", countries=("Brazil",))
    data = tmp_path / "data"
    monkeypatch.setenv("REFINE_DATA_DIR", str(data))
    act = "people eating food at home"
    args = ["run", act, "--country", "Brazil", "--out", str(tmp_path / "runs"), "--rounds", "0"]
    args += ["--backend", f"image_embedder=siglip:{siglip_path}", "--json"]
    before = cli(*args)
    assert before.returncode == 2 and "refine refs build" in before.stderr
    with FileServer(tmp_path / "repo") as server:
        fetch_ahead(data, ["Brazil"], server.url)
    done = cli(*args)
    assert done.returncode == 0, done.stderr
    record = json.loads(done.stdout)
    assert record["references"]["country"] == "Brazil"
    setting = record["references"]["descriptors"]["setting"]
    entry = load_pack().countries["Brazil"]["activities"][act]
    assert setting == [f"Brazil {entry['subactivity']} setting {i}" for i in range(2)]
    assert record["references"]["source"].startswith("ahead pack (ahead.json): fetched: ")
    assert record["rounds"][0]["candidates"][0]["scores"]["values"]["faith"] is not None
