"""The docs' AHEaD guide (docs/ahead-guide.md), step by step as a researcher runs it,
against the stand-ins: the authors' repository (a file server holding its layout and the
photos its manifest names), Wikimedia Commons, and the fake Gemini world for the models."""

from __future__ import annotations

import csv
import io
import json
import math

import pytest
from PIL import Image

from refine.evaluate.paper_data import PHOTO_MANIFEST
from refine.evaluate.references import load_pack
from tests.e2e.test_cli_run import cli
from tests.e2e.test_paper_data import upstream
from tests.fakes.commons_server import CommonsFile, CommonsServer
from tests.fakes.file_server import FileServer
from tests.fakes.gemini_world import GREEN, RED, YES_LOGPROB
from tests.fakes.tiny_models import build_tiny_open_clip

ACT = "people eating food at home"


def png(colour) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (64, 48), colour).save(out, format="PNG")
    return out.getvalue()


@pytest.mark.slow
def test_the_guide_from_fetch_to_bench(world, siglip_path, tmp_path, monkeypatch):
    monkeypatch.setenv("REFINE_DATA_DIR", str(tmp_path / "data"))
    repo = tmp_path / "repo"
    upstream(repo, countries=("Brazil",))
    (repo / "web").mkdir()
    for k in range(3):
        (repo / "web" / f"real{k}.png").write_bytes(png(GREEN))
    entry = load_pack().countries["Brazil"]["activities"][ACT]
    world.generate_by_model = {"gemini-3.1-flash-image": RED}
    with FileServer(repo) as server:
        with (repo / PHOTO_MANIFEST).open("w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["file_path", "image_url", "country", "activity", "sub_activity"])
            for k in range(3):
                url = f"{server.url}/web/real{k}.png"
                w.writerow([f"real{k}.png", url, "BRAZIL", entry["category"], entry["subactivity"]])
            w.writerow(["gone.png", f"{server.url}/web/gone.png", "BRAZIL", "eating", "eating"])
        # 2. fetch the paper's data, photos included
        fetched = cli(
            "data", "fetch", "ahead", "--countries", "Brazil", "--photos", "--from", server.url
        )
    assert fetched.returncode == 3, fetched.stderr  # a photo's link is dead: said, and coded
    assert "photos: 3 downloaded, 0 already there, 1 dead link(s)" in fetched.stdout
    listed = cli("refs", "list", "--country", "Brazil")
    assert listed.stdout.startswith("Brazil (descriptors from ahead.json):")
    # 3. the activity's photos, and a search for another activity's
    shown = cli("photos", "show", ACT, "--country", "Brazil")
    assert shown.returncode == 0 and "3 from the AHEaD paper's photos" in shown.stdout
    other = "people dancing at a party"
    clip = build_tiny_open_clip(tmp_path / "clip")
    queries = (f"{other} Brazil", f"[Portuguese] {other} Brazil")
    files = [CommonsFile(f"dance{k}.png", png(GREEN), queries, mime="image/png") for k in range(2)]
    with CommonsServer(files) as commons:
        searched = cli(
            "photos", "search", other, "--country", "Brazil", "--from", commons.api,
            "--backend", f"image_embedder={clip}",
        )  # fmt: skip
        assert commons.searches == list(queries)  # English, then translated
    assert searched.returncode == 0, searched.stderr
    assert "photos: 2 searched on Wikimedia Commons" in searched.stdout
    # 4. calibrate tau on the photo set, and keep it in a profile
    profile = tmp_path / "my-profile.toml"
    tau = cli("calibrate-tau", "--activity", ACT, "--country", "Brazil", "--write", str(profile))
    assert tau.returncode == 0, tau.stderr
    assert "3 from the AHEaD paper's photos" in tau.stderr
    # 5. the bench: EXAG is the paper's, against the 3 photos, with the calibrated tau
    out = tmp_path / "bench-ahead"
    bench = cli(
        "bench", "--generator", "gemini:gemini-3.1-flash-image", "--countries", "Brazil",
        "--activity", ACT, "--images-per-prompt", "2", "--profile", str(profile),
        "--backend", f"image_embedder=siglip:{siglip_path}", "--out", str(out),
    )  # fmt: skip
    assert bench.returncode == 0, bench.stderr
    assert "EXAG: exag:ita (" in bench.stdout
    doc = json.loads((out / "results.json").read_text())
    (cell,) = doc["cells"]
    from refine.profiles import load_profile

    assert cell["photos"] == 3 and doc["config"]["tau"] == load_profile(str(profile)).tau
    said = doc["config"]["tau_source"]
    assert said.startswith("profile my-profile: refine calibrate-tau: q=0.75 of ")
    assert f"3 real photos of {ACT} in Brazil (photos: 3 from the AHEaD paper's photos" in said
    stat = doc["summary"]["generators"]["gemini:gemini-3.1-flash-image"]["exag"]
    assert stat["variant"] == "exag:ita"
    # red images against green photos: the world's yes-probabilities 0.9 and 0.3
    excess = math.exp(YES_LOGPROB[RED]) - math.exp(YES_LOGPROB[GREEN])
    assert stat["mean"] == pytest.approx(excess, abs=1e-6)
