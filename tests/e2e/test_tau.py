"""tau per observer (profiles, --tau, refine calibrate-tau) and the paper's EXAG from the
command line (--reference-images, reference_images in a references file), through the
fake Gemini world."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest
from PIL import Image

from metrics.ahead import best_match_similarities
from refine.evaluate.references import find_references
from refine.io.store import RunStore
from refine.profiles import load_profile
from tests.e2e.test_cli_run import cli, run_args, scored
from tests.fakes.gemini_world import GREEN, RED, SEEN, YES_LOGPROB

ACT, COUNTRY = "people eating food at home", "Iran"


def photos(folder, *colours):
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for k, c in enumerate(colours):
        paths.append(folder / f"photo{k}.png")
        Image.new("RGB", (64, 48), c).save(paths[-1])
    return paths


def by_hand(refs: dict, observed: list[dict], minilm, q: float = 0.75) -> float:
    """The 75th percentile of best-match similarities, with plain loops, each phrase
    encoded alone and once (encoded again for every pair, the test's three calls made 460
    passes of MiniLM for 53 phrases: 3.7 of the module's 11 CPU-s)."""
    vectors: dict[str, np.ndarray] = {}

    def vector(phrase: str) -> np.ndarray:
        if phrase not in vectors:
            vectors[phrase] = minilm.encode([phrase])[0].numpy()
        return vectors[phrase]

    sims = []
    for seen in observed:
        for dim, phrases in refs.items():
            got = seen.get(dim, [])
            if not got or not phrases:
                continue
            for ref in phrases:
                a = vector(ref)
                best = max(float(a @ vector(g)) for g in got)
                sims.append(best)
    return float(np.quantile(np.asarray(sims), q))


@pytest.mark.slow
def test_calibrate_tau_prints_the_percentile_and_writes_a_profile(
    world, minilm, siglip_path, tmp_path
):
    real = photos(tmp_path / "real", RED, GREEN)
    profile = tmp_path / "calibrated.toml"
    done = cli(
        "calibrate-tau",
        *map(str, real),
        "--activity",
        ACT,
        "--country",
        COUNTRY,
        "--write",
        str(profile),
        "--json",
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    refs = find_references(ACT, COUNTRY).descriptors
    expected = by_hand(refs, [SEEN[RED], SEEN[GREEN]], minilm)
    assert doc["tau"] == pytest.approx(expected, abs=1e-5)
    assert doc["observer"] == "gemini:gemini-3.8-flash" and doc["q"] == 0.75
    # the profile written runs with it, and names where it came from
    p = load_profile(str(profile))
    assert p.tau == pytest.approx(expected, abs=1e-4)
    assert p.tau_source.startswith("refine calibrate-tau: q=0.75 of ")
    assert "2 real photos of people eating food at home in Iran" in p.tau_source
    assert p.roles == load_profile("gemini").roles
    args = [*run_args(tmp_path / "runs", 0, siglip_path), "--profile", str(profile), "--json"]
    ran = cli(*args)
    assert ran.returncode == 0, ran.stderr
    run = json.loads(ran.stdout)
    assert run["spec"]["tau"] == p.tau
    assert run["tau_source"].startswith("profile calibrated: refine calibrate-tau")
    assert run["rounds"][0]["candidates"][0]["scores"]["tau"] == p.tau
    # a folder stands for its photos; an activity the pack lacks names the options
    folder = cli("calibrate-tau", str(tmp_path / "real"), "--activity", ACT, "--country", "Iran")
    assert folder.stdout.startswith(f"tau = {doc['tau']:.4f} ")
    lost = cli("calibrate-tau", str(real[0]), "--activity", "x y z", "--country", COUNTRY)
    assert lost.returncode == 2 and lost.stderr.startswith("error: --activity/--country: ")
    # the text output: the value and a histogram of the similarities
    page = tmp_path / "tau.html"
    text = cli(
        "calibrate-tau", str(real[0]), "--activity", ACT, "--country", COUNTRY, "--html", str(page)
    )
    assert text.returncode == 0, text.stderr
    # the page: the same tau, and bins that count every similarity in the right place
    html = page.read_text()
    assert float(re.search(r'data-tau="([0-9.]+)"', html).group(1)) == pytest.approx(
        by_hand(refs, [SEEN[RED]], minilm), abs=1e-5
    )
    sims = best_match_similarities(refs, [SEEN[RED]], minilm)
    bins = [
        int(n)
        for n in re.findall(
            r'id="w-bin-\d+" class="bin" data-bin="[0-9.]+" data-count="(\d+)"', html
        )
    ]
    assert len(bins) == 20 and sum(bins) == len(sims)
    assert bins[min(19, int(max(sims) * 20))] >= 1 and "<script" not in html
    first = text.stdout.splitlines()[0]
    alone = by_hand(refs, [SEEN[RED]], minilm)
    assert f"distribution: {page}" in text.stdout
    assert first.startswith(f"tau = {alone:.4f} (q=0.75 of ")
    assert sum(int(line.split()[-1]) for line in text.stdout.splitlines()[1:-1]) == int(
        first.split(" of ")[1].split()[0]
    )


def test_the_profile_tau_unless_given(world, siglip_path, tmp_path):
    ran = cli(*run_args(tmp_path / "a", 0, siglip_path), "--json")
    run = json.loads(ran.stdout)
    assert run["spec"]["tau"] == 0.52 and run["tau_source"].startswith("profile gemini: ")
    given = cli(*run_args(tmp_path / "b", 0, siglip_path), "--tau", "0.6", "--json")
    run = json.loads(given.stdout)
    assert run["spec"]["tau"] == 0.6 and run["tau_source"] == "given"
    assert run["rounds"][0]["candidates"][0]["scores"]["tau"] == 0.6
    # a different observer than the profile's: the AHEaD default, said so
    other = cli(
        *run_args(tmp_path / "c", 0, siglip_path),
        "--backend",
        "observer=gemini:gemini-3.1-pro-preview",
        "--json",
    )
    run = json.loads(other.stdout)
    assert (
        run["spec"]["tau"] == 0.52 and "no value calibrated for the observer" in run["tau_source"]
    )
    assert load_profile("local-gpu").tau == 0.52
    assert "0.67 for Qwen2.5-VL" in load_profile("local-gpu").tau_source


@pytest.mark.slow
def test_reference_images_give_the_papers_exag(world, tmp_path):
    """EXAG = mean over images of the largest excess, over the stereotype candidates, of
    P(yes) on the image over its mean on the real photos (the judge's probabilities are
    set per colour in the fake world)."""
    image = photos(tmp_path / "gen", RED)[0]
    real = tmp_path / "real"
    photos(real, GREEN, GREEN)
    done = cli(
        "score",
        str(image),
        "--activity",
        ACT,
        "--country",
        COUNTRY,
        "--reference-images",
        str(real),
        "--json",
        "--out",
        tmp_path / "score",
    )
    assert done.returncode == 0, done.stderr
    scores = scored(done.stdout)[0]["scores"]
    excess = math.exp(YES_LOGPROB[RED]) - math.exp(YES_LOGPROB[GREEN])  # 0.9 - 0.3
    assert scores["values"]["exag"] == pytest.approx(excess, abs=1e-6)
    assert scores["variants"]["exag"] == "exag:ita"
    # the same from a references file naming the photos relative to itself
    pack = find_references(ACT, COUNTRY)
    refs_file = real / "refs.json"
    refs_file.write_text(
        json.dumps(
            {
                "descriptors": pack.descriptors,
                "stereotypes": pack.stereotypes,
                "reference_images": ["photo0.png", "photo1.png"],
            }
        )
    )
    again = cli(
        "score",
        str(image),
        "--activity",
        ACT,
        "--country",
        COUNTRY,
        "--refs",
        str(refs_file),
        "--json",
        "--out",
        tmp_path / "score",
    )
    assert again.returncode == 0, again.stderr
    again_scores = scored(again.stdout)[0]["scores"]
    assert again_scores["values"]["exag"] == pytest.approx(excess, abs=1e-6)
    # a folder without photos, a missing photo: errors naming them
    (tmp_path / "empty").mkdir()
    bad = cli(
        "score",
        str(image),
        "--activity",
        ACT,
        "--country",
        COUNTRY,
        "--reference-images",
        str(tmp_path / "empty"),
    )
    assert bad.returncode == 2 and "--reference-images: " in bad.stderr
    assert "no .png, .jpg, .jpeg, .webp images in it" in bad.stderr
    refs_file.write_text(
        json.dumps({"descriptors": pack.descriptors, "reference_images": ["x.png"]})
    )
    bad = cli(
        "score", str(image), "--activity", ACT, "--country", COUNTRY, "--refs", str(refs_file)
    )
    assert bad.returncode == 2 and "x.png does not exist" in bad.stderr


def test_a_run_records_the_reference_images(world, siglip_path, tmp_path):
    real = tmp_path / "real"
    photos(real, GREEN)
    ran = cli(*run_args(tmp_path / "runs", 0, siglip_path), "--reference-images", str(real))
    assert ran.returncode == 0, ran.stderr
    (run_dir,) = [p for p in (tmp_path / "runs").iterdir() if p.is_dir()]
    run = RunStore(run_dir).load()
    assert run.references.reference_images == [str((real / "photo0.png").resolve())]
    assert run.rounds[0].best.scores.variants["exag"] == "exag:ita"
